/* The kinds shipped with lagless (/heavy, /compress, /decompress, /hash, /verify), described
 * through the same ABI a user module uses (include/lagless/module.h): one module descriptor,
 * named "lagless", that the kind registry reads like any loaded module. */
#ifndef LG_KINDS_BUILTIN_H
#define LG_KINDS_BUILTIN_H

#include "include/lagless/module.h"

extern const struct lagless_module lg_builtin_module;

/* The query parameters a built-in kind's run reads, by kind name: a comma list, "" for none.
 * The kind registry puts them in the kind's row, and a coalescing rule's key takes them
 * (docs/CACHE.md): a parameter left out of the key would give one request the answer to
 * another. The module ABI has no field for them yet. Tables end with a NULL kind. */
struct lg_kind_query {
	const char *kind;
	const char *query;
};
extern const struct lg_kind_query lg_builtin_query[];

/* Commented [route] sections of the example configuration (lagless --print-example-config):
 * the default routes of these kinds with every key they take and its default. */
extern const char lg_builtin_example[];

#endif
