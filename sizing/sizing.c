/* CPU budget and process counts decided from the inputs sizing/sizing_read.c reads, and their
 * JSON for `lagless -t`; see sizing/sizing.h for the rules. */
#include "sizing/sizing.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"

/* Whole CPUs from a fractional count: floor or ceil, never below 1, never above
 * LG_SIZING_MAX_CPUS. Done by hand on the capped value, not with floor(3)/ceil(3), so the module
 * needs no libm. */
static int
round_cpus(double cpus, enum lg_cpu_rounding r)
{
	int whole;

	if (!(cpus > 1))	/* also NaN */
		return 1;
	if (cpus >= LG_SIZING_MAX_CPUS)
		return LG_SIZING_MAX_CPUS;
	whole = (int)cpus;	/* truncation is floor for a positive value */
	return r == LG_ROUND_CEIL && whole < cpus ? whole + 1 : whole;
}

static int
min_known(int a, int b)
{
	if (b <= 0)
		return a;
	return a <= 0 || b < a ? b : a;
}

int
lg_sizing_resizable(const struct lg_sizing_cfg *sc)
{
	return sc != NULL && sc->live_resize && !(sc->cpus > 0);
}

static void
counts(int count, double share, int queue_given, int budget, int *compute, int *queue)
{
	int c;

	if (count > 0)
		c = count;
	else if (share > 0)
		c = share * budget >= LG_SIZING_MAX_CPUS ? LG_SIZING_MAX_CPUS :
		    (int)(share * budget + 1e-9); /* 1e-9: 0.3 x 10 is 3, not 2 */
	else
		c = budget - 1;
	*compute = c >= 1 ? c : 1;
	if (queue_given >= 0)
		*queue = queue_given;
	else
		*queue = *compute > INT_MAX / 2 ? INT_MAX : 2 * *compute;
}

void
lg_sizing_counts(const struct lg_job_cfg *jc, int budget, int *compute, int *queue)
{
	if (jc == NULL)
		counts(0, 0, -1, budget, compute, queue);
	else
		counts(jc->compute_workers, jc->compute_share, jc->queue_capacity, budget, compute,
		    queue);
}

void
lg_sizing_pool_counts(const struct lg_pool_cfg *p, int budget, int *compute, int *queue)
{
	counts(p->compute, p->share, p->queue, budget, compute, queue);
}

int
lg_sizing_check_pools(const struct lg_sizing *s, const struct lg_job_cfg *jc, char *err,
    size_t cap)
{
	int used = 0, n = 0;

	if (jc == NULL || jc->npools <= 1)
		return 0; /* one pool: sized as it always was */
	for (int i = 0; i < s->npools; i++)
		if (!jc->pools[i].oversubscribe)
			used += s->pool_compute[i];
	if (used <= s->budget)
		return 0;
	n = snprintf(err, cap, "the pools need %d compute processes for a CPU budget of %d (", used,
	    s->budget);
	for (int i = 0; i < s->npools && n > 0 && (size_t)n < cap; i++)
		n += snprintf(err + n, cap - (size_t)n, "%s%s %d", i ? ", " : "", jc->pools[i].name,
		    s->pool_compute[i]);
	if (n > 0 && (size_t)n < cap)
		snprintf(err + n, cap - (size_t)n, "); lower them or set oversubscribe = yes on a pool");
	return -1;
}

void
lg_sizing_decide(struct lg_sizing *s, const struct lg_config *cfg)
{
	int budget, top;

	s->rounding = cfg != NULL ? cfg->sizing.rounding : LG_ROUND_FLOOR;
	s->cpus_override = 0;
	if (cfg != NULL && cfg->sizing.cpus > 0 && isfinite(cfg->sizing.cpus)) {
		s->cpus_override = cfg->sizing.cpus;
		budget = round_cpus(cfg->sizing.cpus, s->rounding);
	} else {
		budget = min_known(min_known(s->online, s->affinity), s->cpuset);
		if (s->quota > 0)
			budget = min_known(budget, round_cpus(s->quota, s->rounding));
		if (budget <= 0)
			budget = 1;
	}
	s->budget = budget;
	s->loop_workers = cfg != NULL && cfg->sizing.loop_workers > 0 ? cfg->sizing.loop_workers : budget;
	lg_sizing_counts(cfg != NULL ? &cfg->jobs : NULL, budget, &s->compute_workers,
	    &s->queue_capacity);
	s->app_processes = cfg == NULL ? 0 : cfg->master.app_fixed +
	    (cfg->master.app_auto ? cfg->master.app_auto * lg_sizing_app_share(budget, cfg->master.app_auto) : 0);
	if (s->app_processes > 0 && cfg->jobs.compute_workers <= 0 && !(cfg->jobs.compute_share > 0)) {
		/* the app's processes run on the same CPUs: the default pool yields them */
		s->compute_workers = budget - 1 - s->app_processes;
		s->compute_workers = s->compute_workers < 1 ? 1 : s->compute_workers;
		if (cfg->jobs.queue_capacity < 0)
			s->queue_capacity = 2 * s->compute_workers;
	}
	s->npools = cfg != NULL && cfg->jobs.npools > 1 ? cfg->jobs.npools : 1;
	s->pool_compute[0] = s->compute_workers;
	s->pool_queue[0] = s->queue_capacity;
	for (int i = 0; i < s->npools; i++) {
		snprintf(s->pool_name[i], sizeof(s->pool_name[i]), "%s", cfg != NULL ?
		    cfg->jobs.pools[i].name : "default");
		s->pool_over[i] = cfg != NULL && cfg->jobs.pools[i].oversubscribe;
		if (i > 0)
			lg_sizing_pool_counts(&cfg->jobs.pools[i], budget, &s->pool_compute[i],
			    &s->pool_queue[i]);
	}
	/* Room for the largest budget a live resize can reach: every online CPU (a quota or
	 * cpuset can be loosened at run time, the CPUs themselves are the bound). */
	s->live_resize = lg_sizing_resizable(cfg != NULL ? &cfg->sizing : NULL);
	top = s->online > budget ? s->online : budget;
	if (s->live_resize)
		lg_sizing_counts(cfg != NULL ? &cfg->jobs : NULL, top, &s->compute_max, &s->queue_max);
	else
		s->compute_max = s->compute_workers, s->queue_max = s->queue_capacity;
	s->pool_compute_max[0] = s->compute_max;
	s->pool_queue_max[0] = s->queue_max;
	for (int i = 1; i < s->npools; i++) {
		if (s->live_resize)
			lg_sizing_pool_counts(&cfg->jobs.pools[i], top, &s->pool_compute_max[i],
			    &s->pool_queue_max[i]);
		else
			s->pool_compute_max[i] = s->pool_compute[i], s->pool_queue_max[i] = s->pool_queue[i];
	}
}

int
lg_sizing_app_share(int budget, int nauto)
{
	int n = budget / 2 / (nauto > 0 ? nauto : 1);

	return n < 1 ? 1 : n > 32 ? 32 : n;
}

int
lg_sizing_note(const struct lg_sizing *s, char *buf, size_t cap)
{
	double cpus = s->cpus_override > 0 ? s->cpus_override : s->quota;

	if (s->mem.proxy > 0 && s->mem.budget == 0 && !s->mem.budget_override) {
		/* docs/OPERATIONS.md "Memory": the upstreams' part alone leaves nothing for bodies */
		snprintf(buf, cap, "memory_proxy (%llu MiB: the upstreams' max_conns, queue, "
		    "keepalive) leaves no shared-memory budget: every body for a kind or a "
		    "request_buffering route is a 503; lower them or raise --memory-limit",
		    (unsigned long long)(s->mem.proxy >> 20));
		return 1;
	}
	if (!(cpus > 0 && cpus < 1) || s->budget != 1)
		return 0;
	snprintf(buf, cap, "the %s is %.3g CPU, under one: the budget is raised to 1, so one loop "
	    "worker and one compute process share %.3g CPU (a running job slows every request, "
	    "seen as loop lag); give the server at least one CPU",
	    s->cpus_override > 0 ? "--cpus setting" : "CPU quota", cpus, cpus);
	return 1;
}

/* v as a JSON number, or null when not positive. %.15g keeps 1.999 as "1.999"; the master
 * never calls setlocale(3), so the decimal point is '.'. */
static void
json_number(char *out, size_t cap, double v)
{
	if (v > 0 && isfinite(v))
		snprintf(out, cap, "%.15g", v);
	else
		snprintf(out, cap, "null");
}

/* v as a JSON string (RFC 8259 section 7, common/buf.h lg_buf_json_chars), or null when
 * empty, into out (cap bytes; 6 per input byte plus 3 always fit). */
static void
json_string(char *out, size_t cap, const char *v)
{
	struct lg_buf b;

	if (v[0] == '\0') {
		snprintf(out, cap, "null");
		return;
	}
	lg_buf_init(&b, out, cap);
	lg_buf_printf(&b, "\"");
	lg_buf_json_chars(&b, v, strlen(v));
	lg_buf_printf(&b, "\"");
}

int
lg_sizing_json(const struct lg_sizing *s, char *buf, size_t cap)
{
	char quota[32], over[32], src[sizeof(s->quota_source) * 6 + 3], ver[sizeof(s->cgroup_version)];
	int n;

	json_number(quota, sizeof(quota), s->quota);
	json_number(over, sizeof(over), s->cpus_override);
	/* Bounded in case the caller filled the struct itself. */
	snprintf(ver, sizeof(ver), "%s", s->cgroup_version[0] != '\0' ? s->cgroup_version : "none");
	json_string(src, sizeof(src), s->quota_source);
	n = snprintf(buf, cap, "{\"online\":%d,\"affinity\":%d,\"cpuset\":%d,\"quota\":%s,"
	    "\"quota_source\":%s,\"cgroup\":\"%s\",\"rounding\":\"%s\",\"cpus_override\":%s,"
	    "\"budget\":%d,\"loop_workers\":%d,\"compute_workers\":%d,\"queue_capacity\":%d,"
	    "\"live_resize\":%s,\"compute_max\":%d,\"queue_max\":%d,\"warnings\":%d",
	    s->online, s->affinity, s->cpuset, quota, src, ver,
	    s->rounding == LG_ROUND_CEIL ? "ceil" : "floor", over, s->budget, s->loop_workers,
	    s->compute_workers, s->queue_capacity, s->live_resize ? "true" : "false",
	    s->compute_max, s->queue_max, s->warnings);
	if (s->app_processes > 0 && n >= 0 && (size_t)n < cap)
		n += snprintf(buf + n, cap - (size_t)n, ",\"app_processes\":%d", s->app_processes);
	/* How the budget is split, when pools are declared (names are a-z0-9_- only). */
	for (int i = 0; s->npools > 1 && i < s->npools && n >= 0 && (size_t)n < cap; i++)
		n += snprintf(buf + n, cap - (size_t)n, "%s{\"name\":\"%s\",\"compute\":%d,"
		    "\"queue\":%d,\"oversubscribe\":%s}%s", i ? "," : ",\"pools\":[",
		    s->pool_name[i], s->pool_compute[i], s->pool_queue[i],
		    s->pool_over[i] ? "true" : "false", i == s->npools - 1 ? "]" : "");
	if (n >= 0 && (size_t)n < cap) {
		int k = lg_memsize_json(&s->mem, buf + n, cap - (size_t)n);

		n = k < 0 ? -1 : n + k;
	}
	char note[256];
	if (n >= 0 && (size_t)n < cap && lg_sizing_note(s, note, sizeof(note)))
		n += snprintf(buf + n, cap - (size_t)n, ",\"note\":\"%s\"", note);
	if (n >= 0 && (size_t)n < cap)
		n += snprintf(buf + n, cap - (size_t)n, "}");
	if (n < 0 || (size_t)n >= cap) {
		if (cap > 0)
			buf[0] = '\0';
		errno = ENOSPC;
		return -1;
	}
	return n;
}
