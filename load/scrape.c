/* Prometheus text parsing for lagless's /metrics (load/scrape.h). */
#include "load/scrape.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[LL_SF_COUNT] = {
	[LL_SF_QUEUE_DEPTH] = "lagless_queue_depth",
	[LL_SF_QUEUE_CAPACITY] = "lagless_queue_capacity",
	[LL_SF_INFLIGHT] = "lagless_inflight_requests",
	[LL_SF_BUSY] = "lagless_compute_busy",
	[LL_SF_COMPUTE] = "lagless_compute_processes",
	[LL_SF_CONNS] = "lagless_connections_open",
	[LL_SF_REJECTED] = "lagless_jobs_rejected_total",
	[LL_SF_TIMED_OUT] = "lagless_jobs_timed_out_total",
	[LL_SF_FAILED] = "lagless_jobs_failed_total",
	[LL_SF_RESTARTS] = "lagless_process_restarts_total",
	[LL_SF_RUN_SUM] = "lagless_job_run_seconds_sum",
	[LL_SF_RUN_COUNT] = "lagless_job_run_seconds_count",
	[LL_SF_SLOTS] = "lagless_job_slots",
	[LL_SF_WAIT_SUM] = "lagless_job_queue_wait_seconds_sum",
	[LL_SF_WAIT_COUNT] = "lagless_job_queue_wait_seconds_count",
};

static const char *const pool_names[LL_PF_COUNT] = {
	[LL_PF_ACTIVE] = NULL,   /* lagless_pool_processes{state="active"}, below */
	[LL_PF_PROCS] = "lagless_pool_processes",
	[LL_PF_DEPTH] = "lagless_pool_queue_depth",
	[LL_PF_QCAP] = "lagless_pool_queue_capacity",
	[LL_PF_FULL] = "lagless_pool_full_total",
};

#define LAG "lagless_loop_lag_seconds"
#define START "lagless_start_time_seconds"   /* stats/metrics.c: the server's identity */

/* The value of label key in labels [l, e), parsed as a number; 0 when found. */
static int
label_number(const char *l, const char *e, const char *key, double *out)
{
	size_t kl = strlen(key);
	const char *p;
	char tmp[64];
	size_t n;

	for (p = l; p + kl + 2 <= e; p++) {
		if ((p == l || p[-1] == ',' || p[-1] == '{') && memcmp(p, key, kl) == 0 &&
		    p[kl] == '=' && p[kl + 1] == '"') {
			const char *v = p + kl + 2, *q = memchr(v, '"', (size_t)(e - v));

			if (q == NULL || (n = (size_t)(q - v)) >= sizeof(tmp))
				return -1;
			memcpy(tmp, v, n);
			tmp[n] = '\0';
			*out = strcmp(tmp, "+Inf") == 0 ? INFINITY : strtod(tmp, NULL);
			return 0;
		}
	}
	return -1;
}

/* The string value of label key in labels [l, e) into out; 0 when found. */
static int
label_string(const char *l, const char *e, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key), n;
	const char *p;

	for (p = l; p + kl + 2 <= e; p++)
		if ((p == l || p[-1] == ',' || p[-1] == '{') && memcmp(p, key, kl) == 0 &&
		    p[kl] == '=' && p[kl + 1] == '"') {
			const char *v = p + kl + 2, *q = memchr(v, '"', (size_t)(e - v));

			if (q == NULL || (n = (size_t)(q - v)) >= cap)
				return -1;
			memcpy(out, v, n);
			out[n] = '\0';
			return 0;
		}
	return -1;
}

/* lagless_pool_* series of one pool (stats/poolview.c), kept per pool */
static void
pool_sample(struct ll_scrape *s, const char *name, size_t nl, const char *l, const char *le,
            double v)
{
	char pool[LL_SCRAPE_POOL_NAME], state[16];
	unsigned i, f;

	if (l == NULL || label_string(l, le, "pool", pool, sizeof(pool)) == -1)
		return;
	for (f = 0; f < LL_PF_COUNT; f++)
		if (pool_names[f] && strlen(pool_names[f]) == nl && memcmp(pool_names[f], name, nl) == 0)
			break;
	if (f == LL_PF_COUNT)
		return;
	for (i = 0; i < s->npools; i++)
		if (strcmp(s->pools[i].name, pool) == 0)
			break;
	if (i == s->npools) {
		if (i == LL_SCRAPE_POOLS)
			return;
		memset(&s->pools[i], 0, sizeof(s->pools[i]));
		strcpy(s->pools[i].name, pool);
		s->npools++;
	}
	s->pools[i].v[f] += v;
	if (f == LL_PF_PROCS && label_string(l, le, "state", state, sizeof(state)) == 0 &&
	    strcmp(state, "active") == 0)
		s->pools[i].v[LL_PF_ACTIVE] += v;
}

const struct ll_scrape_pool *
ll_scrape_pool(const struct ll_scrape *s, const char *name)
{
	unsigned i;

	for (i = 0; i < s->npools; i++)
		if (strcmp(s->pools[i].name, name) == 0)
			return &s->pools[i];
	return NULL;
}

static void
lag_bucket(struct ll_scrape *s, double le, double v)
{
	unsigned i;

	for (i = 0; i < s->nlag; i++)
		if (s->lag_le[i] == le) {
			s->lag_cum[i] += v;
			return;
		}
	if (s->nlag == LL_SCRAPE_LAG_BOUNDS)
		return;
	/* bounds arrive in ascending order from every worker, so appending keeps them sorted */
	s->lag_le[s->nlag] = le;
	s->lag_cum[s->nlag++] = v;
}

static void
sample(struct ll_scrape *s, const char *name, size_t nl, const char *l, const char *le, double v)
{
	unsigned i;
	double bound;

	if (nl == strlen("lagless_build_info") && memcmp(name, "lagless_build_info", nl) == 0)
		s->lagless = 1;
	if (nl == strlen(START) && memcmp(name, START, nl) == 0)
		s->start_s[0] = v;
	if (nl == strlen(LAG "_bucket") && memcmp(name, LAG "_bucket", nl) == 0) {
		if (l != NULL && label_number(l, le, "le", &bound) == 0)
			lag_bucket(s, bound, v);
		return;
	}
	if (nl > 13 && memcmp(name, "lagless_pool_", 13) == 0) {
		pool_sample(s, name, nl, l, le, v);
		return;
	}
	if (nl == strlen(LAG "_sum") && memcmp(name, LAG "_sum", nl) == 0)
		s->lag_sum += v;
	if (nl == strlen(LAG "_count") && memcmp(name, LAG "_count", nl) == 0)
		s->lag_count += v;
	for (i = 0; i < LL_SF_COUNT; i++)
		if (strlen(names[i]) == nl && memcmp(names[i], name, nl) == 0) {
			s->v[i] += v;
			s->seen[i] = 1;
		}
}

int
ll_scrape_parse(struct ll_scrape *s, const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	int any = 0;

	memset(s, 0, sizeof(*s));
	s->nservers = 1;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *name = p, *ne, *l = NULL, *le = NULL, *val;
		char num[64], *vend;
		size_t n;
		double v;

		if (eol == NULL)
			eol = end;
		if (*p == '#' || eol == p)
			goto next;
		/* a metric name is [a-zA-Z_:][a-zA-Z0-9_:]* (Prometheus text format 0.0.4) */
		for (ne = p; ne < eol && (isalpha((unsigned char)*ne) || *ne == '_' || *ne == ':' ||
		                          (ne > p && isdigit((unsigned char)*ne))); ne++)
			;
		if (ne == p || ne == eol || (*ne != '{' && *ne != ' '))
			goto next;
		val = ne;
		if (ne < eol && *ne == '{') {
			l = ne;
			le = memchr(ne, '}', (size_t)(eol - ne));
			if (le == NULL)
				goto next;
			val = le + 1;
		}
		while (val < eol && *val == ' ')
			val++;
		for (n = 0; val + n < eol && val[n] != ' ' && val[n] != '\r'; n++)
			;   /* a timestamp may follow the value */
		if (n == 0 || n >= sizeof(num))
			goto next;
		memcpy(num, val, n);
		num[n] = '\0';
		v = strtod(num, &vend);
		if (vend == num || *vend != '\0')
			goto next;
		sample(s, name, (size_t)(ne - name), l, le, v);
		any = 1;
next:
		p = eol + 1;
	}
	return any ? 0 : -1;
}

void
ll_scrape_add(struct ll_scrape *sum, const struct ll_scrape *b)
{
	unsigned i, f, k;

	if (sum->nservers == 0) {
		*sum = *b;
		return;
	}
	sum->lagless = sum->lagless && b->lagless;
	for (i = 0; i < LL_SF_COUNT; i++) {
		sum->v[i] += b->v[i];
		sum->seen[i] |= b->seen[i];
	}
	for (i = 0; i < b->nlag; i++)
		lag_bucket(sum, b->lag_le[i], b->lag_cum[i]);
	sum->lag_sum += b->lag_sum;
	sum->lag_count += b->lag_count;
	for (i = 0; i < b->npools; i++) {
		for (k = 0; k < sum->npools; k++)
			if (strcmp(sum->pools[k].name, b->pools[i].name) == 0)
				break;
		if (k == sum->npools) {
			if (k == LL_SCRAPE_POOLS)
				continue;
			memset(&sum->pools[k], 0, sizeof(sum->pools[k]));
			strcpy(sum->pools[k].name, b->pools[i].name);
			sum->npools++;
		}
		for (f = 0; f < LL_PF_COUNT; f++)
			sum->pools[k].v[f] += b->pools[i].v[f];
	}
	for (i = 0; i < b->nservers && sum->nservers < LL_SCRAPE_SERVERS; i++)
		sum->start_s[sum->nservers++] = b->start_s[i];
}

int
ll_scrape_same(const struct ll_scrape *a, const struct ll_scrape *b)
{
	unsigned i;

	if (a->nservers != b->nservers)
		return 0;
	for (i = 0; i < a->nservers; i++)
		if (a->start_s[i] != b->start_s[i])
			return 0;
	return 1;
}

void
ll_scrape_lag_delta(const struct ll_scrape *a, const struct ll_scrape *b, double *mean_s,
                    double *max_s)
{
	double dc = b->lag_count - a->lag_count, prev_a = 0, prev_b = 0;
	unsigned i;

	*mean_s = dc > 0 ? (b->lag_sum - a->lag_sum) / dc : 0;
	*max_s = 0;
	if (dc <= 0 || a->nlag != b->nlag)
		return;
	for (i = 0; i < b->nlag; i++) {
		/* samples that fell in bucket i during the interval */
		double gained = (b->lag_cum[i] - prev_b) - (a->lag_cum[i] - prev_a);

		prev_a = a->lag_cum[i];
		prev_b = b->lag_cum[i];
		if (gained > 0)
			*max_s = isinf(b->lag_le[i]) && i > 0 ? b->lag_le[i - 1] : b->lag_le[i];
	}
}

double
ll_scrape_lag_quantile(const struct ll_scrape *a, const struct ll_scrape *b, double q)
{
	double dc = b->lag_count - a->lag_count, want, below = 0;
	unsigned i;

	if (dc <= 0 || a->nlag != b->nlag || b->nlag == 0)
		return 0;
	want = q * dc;
	for (i = 0; i < b->nlag; i++) {
		double cum = b->lag_cum[i] - a->lag_cum[i];   /* samples at or below bound i */
		double lo = i > 0 ? b->lag_le[i - 1] : 0, hi = b->lag_le[i];

		if (cum >= want && cum > below) {
			if (isinf(hi))
				return lo;
			return lo + (hi - lo) * (want - below) / (cum - below);
		}
		below = cum;
	}
	return isinf(b->lag_le[b->nlag - 1]) && b->nlag > 1 ? b->lag_le[b->nlag - 2]
	                                                    : b->lag_le[b->nlag - 1];
}

double
ll_counter_increase(double prev, double cur)
{
	return cur >= prev ? cur - prev : cur;
}
