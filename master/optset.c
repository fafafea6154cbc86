#include "master/optset.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cidr.h"
#include "common/config.h"
#include "common/log.h"
#include "common/policy.h"
#include "common/value.h"
#include "master/master.h"

/* "N" (a count in [min, max]; clears the share) or "P%" (a share of the CPU budget, 0 < P <=
 * 10000 percent, up to two decimals; clears the count). Returns 0, or -1 with a reason. */
static int
parse_count(const struct lg_opt *o, const char *v, int *count, double *share, const char **why)
{
	static char range[128];
	size_t n = strlen(v);
	uint64_t u;

	snprintf(range, sizeof(range), "expected a whole number from %llu to %llu, or a share of "
	    "the CPU budget such as 50%% or 150%%", (unsigned long long)o->min,
	    (unsigned long long)o->max);
	*why = range;
	if (n > 1 && v[n - 1] == '%') {
		char num[32], *end;
		double d;

		if (n - 1 >= sizeof(num) || v[strspn(v, "0123456789.")] != '%')
			return -1;
		memcpy(num, v, n - 1);
		num[n - 1] = '\0';
		errno = 0;
		d = strtod(num, &end);
		if (errno || *end || end == num || !(d > 0 && d <= 10000))
			return -1;
		*share = d / 100.0;
		*count = 0;
		return 0;
	}
	if (lg_value_uint(v, o->min, o->max, &u, NULL, 0) == -1)
		return -1;
	*count = (int)u;
	*share = 0;
	return 0;
}

/* The setters, one per kind (nginx's ngx_conf_set_*_slot): each applies value v of option o
 * to the struct at base (a struct lg_config, or a struct lg_pool_cfg for a [pool] key) and
 * returns 0, or -1 with *why saying what was expected. Numbers, sizes, durations and booleans
 * are the one grammar of common/value.h; *why may point at the static msg (the master parses
 * its configuration on one thread). */
static char msg[200];

static int
set_listen(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	*why = "expected listeners separated by blanks, each [ADDR:]PORT (an IPv4 address, a "
	    "bracketed IPv6 one or a host name that resolves, and a port 0..65535) or "
	    "unix:/path[,mode=0660][,owner=USER[:GROUP]] (existing user and group), at most 8";
	return lg_listen_parse(v, (struct lg_config *)base, 0);
}

static int
set_int(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	uint64_t u;

	*why = msg;
	if (lg_value_uint(v, o->min, o->max, &u, msg, sizeof(msg)) == -1)
		return -1;
	*(int *)(base + o->off) = (int)u;
	return 0;
}

static int
set_u64(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	*why = msg;
	return lg_value_uint(v, o->min, o->max, (uint64_t *)(base + o->off), msg, sizeof(msg));
}

static int
set_ms(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	*why = msg;
	return lg_value_duration_ms(v, o->min, o->max, (uint64_t *)(base + o->off), msg,
	    sizeof(msg));
}

static int
set_size(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	*why = msg;
	return lg_value_size(v, o->min, o->max, (uint64_t *)(base + o->off), msg, sizeof(msg));
}

static int
set_bool(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	*why = msg;
	return lg_value_bool(v, (int *)(base + o->off), msg, sizeof(msg));
}

static int
set_compute(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	struct lg_config *cfg = (struct lg_config *)base;

	return parse_count(o, v, &cfg->jobs.compute_workers, &cfg->jobs.compute_share, why);
}

static int
set_pool_compute(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	struct lg_pool_cfg *p = (struct lg_pool_cfg *)base;

	return parse_count(o, v, &p->compute, &p->share, why);
}

/* A decimal number of CPUs in [0, max]; strtod alone would take hex, inf and nan. */
static int
set_cpus(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	char *end;
	double d;

	*why = "expected a decimal number of CPUs up to 1024, or 0 to measure";
	if (v[strspn(v, "0123456789.")] != '\0')
		return -1;
	errno = 0;
	d = strtod(v, &end);
	if (errno || *end || end == v || !(d >= 0 && d <= (double)o->max))
		return -1;
	*(double *)(base + o->off) = d;
	return 0;
}

/* One of a list of words, each stored as its int value (enums included). */
struct word { const char *name; int value; };

static int
set_word(const struct lg_opt *o, const char *v, char *base, const struct word *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v, w[i].name) == 0) {
			*(int *)(base + o->off) = w[i].value;
			return 0;
		}
	return -1;
}

static int
set_rounding(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	static const struct word w[] = { { "floor", LG_ROUND_FLOOR }, { "ceil", LG_ROUND_CEIL } };

	_Static_assert(sizeof(enum lg_cpu_rounding) == sizeof(int), "stored as an int");
	*why = "expected floor or ceil";
	return set_word(o, v, base, w, 2);
}

static int
set_gone(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	static const struct word w[] = { { "finish", LG_GONE_FINISH }, { "kill", LG_GONE_KILL } };

	_Static_assert(sizeof(enum lg_client_gone) == sizeof(int), "stored as an int");
	*why = "expected finish or kill";
	return set_word(o, v, base, w, 2);
}

/* sched(7) policies. */
static int
set_sched(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	static const struct word w[] = { { "idle", SCHED_IDLE }, { "batch", SCHED_BATCH },
	    { "normal", SCHED_OTHER } };

	*why = "expected idle, batch or normal";
	return set_word(o, v, base, w, 3);
}

static int
set_loglevel(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	int lvl = lg_log_parse_level(v);

	*why = "expected error, warn, info or debug";
	if (lvl == -1)
		return -1;
	*(int *)(base + o->off) = lvl;
	return 0;
}

static int
set_path(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	*why = "path too long";
	if (strlen(v) >= o->max)
		return -1;
	memcpy(base + o->off, v, strlen(v) + 1);
	return 0;
}

static int
set_rules(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	struct lg_policies ps;

	*why = "rules too long";
	if (strlen(v) >= o->max)
		return -1;
	if (lg_policy_parse(v, &ps, msg, sizeof(msg)) == -1) {
		*why = msg;
		return -1;
	}
	memcpy(base + o->off, v, strlen(v) + 1);
	return 0;
}

/* The list as given, once lg_cidr_parse accepts it. */
static int
set_cidrs(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	struct lg_cidr ranges[LG_CIDR_MAX];

	*why = "expected up to 16 addresses or ADDR/BITS ranges, IPv4 or IPv6";
	if (strlen(v) >= o->max || lg_cidr_parse(v, ranges) == -1)
		return -1;
	memcpy(base + o->off, v, strlen(v) + 1);
	return 0;
}

static int
set_addr(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	*why = "expected ADDR:PORT (an IPv4 address, a bracketed IPv6 one or a host name)";
	return lg_listen_parse_addr(v, base + o->off, o->max);
}

/* A Redis address: unix:/path (absolute), or HOST:PORT resolved now (in the master, at
 * start-up), so a loop worker connects to a numeric address without a blocking resolver. */
static int
set_redis(const struct lg_opt *o, const char *v, char *base, const char **why)
{
	*why = "expected unix:/absolute/path or ADDR:PORT (an IPv4 address, a bracketed IPv6 one "
	    "or a host name), or \"\" for none";
	if (strncmp(v, "unix:", 5) == 0) {
		if (v[5] != '/' || strlen(v) >= o->max)
			return -1;
		memcpy(base + o->off, v, strlen(v) + 1);
		return 0;
	}
	return lg_listen_parse_addr(v, base + o->off, o->max);
}

static int (*const setters[])(const struct lg_opt *, const char *, char *, const char **) = {
	[K_LISTEN] = set_listen, [K_INT] = set_int, [K_U64] = set_u64, [K_MS] = set_ms,
	[K_SIZE] = set_size, [K_CPUS] = set_cpus, [K_ROUNDING] = set_rounding,
	[K_LOGLEVEL] = set_loglevel, [K_PATH] = set_path, [K_BOOL] = set_bool,
	[K_GONE] = set_gone, [K_SCHED] = set_sched, [K_COMPUTE] = set_compute,
	[K_POOL_COMPUTE] = set_pool_compute, [K_RULES] = set_rules, [K_CIDRS] = set_cidrs,
	[K_ADDR] = set_addr, [K_REDIS] = set_redis,
};

int
lg_optset_apply(const struct lg_opt *o, const char *v, void *obj, const char **why)
{
	return setters[o->kind](o, v, obj, why);
}
