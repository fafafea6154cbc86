/* The kinds shipped with lagless (/heavy, /compress, /decompress, /hash, /verify), described
 * through the same ABI a user module uses (include/lagless/module.h): one module descriptor,
 * named "lagless", that the kind registry reads like any loaded module. */
#ifndef LG_KINDS_BUILTIN_H
#define LG_KINDS_BUILTIN_H

#include "include/lagless/module.h"

extern const struct lagless_module lg_builtin_module;

/* The route structs of the kinds that take route keys (rq->route in their run): the host
 * parses the declared keys into them once per route at start-up, lagless -t and reload
 * (kinds/params.h), with their ranges and defaults; run never reads the configuration. */
struct lg_decompress_route {
	uint64_t max_output;    /* bytes; 0 (key absent): the whole output region */
};
struct lg_argon2_route {
	uint64_t m_kib, t, p;   /* hash: memory_kib, iterations, lanes; verify: the max_ ones */
};

/* The rule between keys of a built-in kind that no one key's range says, on the struct the
 * host just parsed for a route of kind k: hash's memory at least 8 KiB a lane (libargon2).
 * 0 for any other kind (a loaded module's too). Returns 0, or -1 with a reason in err (cap
 * bytes) and the key it blames in *key (static storage), for the host to give its line.
 * Master side, after the declared keys parsed. */
int lg_builtin_route_check(const struct lagless_kind *k, const void *route, const char **key,
    char *err, size_t cap);

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
