#ifndef LG_OPTSET_H
#define LG_OPTSET_H

/* The option rows of master/opttab.c and their setters, one per kind of value (nginx's
 * ngx_conf_set_*_slot): master-private. */

#include <stddef.h>
#include <stdint.h>

enum lg_opt_kind {
	K_LISTEN,   /* listeners: the first TCP one into listen_addr + port, others listen_more */
	K_INT,      /* int field, decimal in [min, max] */
	K_U64,      /* uint64_t field, decimal in [min, max] */
	K_MS,       /* uint64_t milliseconds, decimal in [min, max] */
	K_SIZE,     /* uint64_t bytes, K/M/G binary suffixes */
	K_CPUS,     /* double CPUs, 0 = measure */
	K_ROUNDING, /* floor | ceil */
	K_LOGLEVEL, /* error | warn | info | debug */
	K_PATH,     /* char[max] file path; "" = none */
	K_BOOL,     /* int 0/1: yes|no|true|false|on|off|1|0; a bare --flag means yes */
	K_GONE,     /* finish | kill */
	K_SCHED,    /* int scheduling policy: idle | batch | normal (sched(7)) */
	K_COMPUTE,  /* compute_workers "N", or compute_share "P%" of the CPU budget */
	K_POOL_COMPUTE, /* the same for a struct lg_pool_cfg: compute, share */
	K_RULES,    /* char[max] coalesce rules, checked by lg_policy_parse (common/policy.h) */
	K_CIDRS,    /* char[max] address ranges, checked by lg_cidr_parse (common/cidr.h) */
	K_ADDR,     /* char[max] one TCP listener, normalized to ADDR:PORT ("" none) */
	K_REDIS,    /* char[max] unix:/path, or ADDR:PORT resolved here to a numeric address */
};

struct lg_opt {
	const char *name;   /* flag; file key and environment name are derived from it */
	enum lg_opt_kind kind;
	size_t off;         /* offsetof(struct lg_config, field) */
	uint64_t min, max;
	const char *def;    /* default, parsed like any other value */
	const char *arg;    /* placeholder in --help */
	const char *help;
};

/* Applies value v (NUL-terminated) of option o to obj: the struct lg_config, or a struct
 * lg_pool_cfg for a [pool] key, at o->off. Numbers, sizes, durations and booleans are the one
 * grammar of common/value.h, checked against [o->min, o->max]. Returns 0, or -1 with *why
 * saying what was expected (a constant, or a static buffer valid until the next call: the
 * master reads its configuration on one thread). */
int lg_optset_apply(const struct lg_opt *o, const char *v, void *obj, const char **why);

#endif
