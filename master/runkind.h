/* lagless --run-kind KIND: one job without a server, for testing a module. */
#ifndef LG_MASTER_RUNKIND_H
#define LG_MASTER_RUNKIND_H

#include "common/config.h"

/* Reads standard input (at most cfg->http.max_body bytes) as the job's body, runs kind (a name of
 * cfg->reg, "heavy" or "module.kind") in this process, with the route config of the first
 * route of that kind (or none) and the query in LAGLESS_RUN_QUERY, after the module's init
 * hook. Writes the answer to standard output and returns 0; on a refusal or error writes the
 * status and message to standard error and returns 1 (2 for an unknown kind). */
int lg_runkind_main(const struct lg_config *cfg, const char *kind);

#endif
