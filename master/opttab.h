#ifndef LG_OPTTAB_H
#define LG_OPTTAB_H

/* The option tables: every setting's flag, file key, environment name, default and --help
 * line (lg_opts), and the keys of a [pool NAME] section (lg_pool_opts). Data only, read by
 * master/options.c (flags, environment, file, --help, the example file); master-private. */

#include <stddef.h>

#include "master/optset.h"

/* A key of a [pool NAME] section. `global` names the server-wide setting a key of
 * [pool default] stands for (so flags and environment still override it), or the value an
 * unset key of any pool takes; NULL: the key exists per pool only. */
struct lg_pool_opt {
	struct lg_opt o;
	const char *global;
};

/* Row counts, constants so that getopt_long's table can be sized at compile time (each is
 * checked against its table by a _Static_assert in master/opttab.c). */
#define LG_NOPTS 73
#define LG_NPOOL_OPTS 14

extern const struct lg_opt lg_opts[];
extern const struct lg_pool_opt lg_pool_opts[];

#endif
