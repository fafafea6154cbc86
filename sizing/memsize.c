/* Memory budget; see sizing/memsize.h for the rules and the kernel documents. */
#include "sizing/memsize.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ull << 20)
#define RESERVE_BASE    (32 * MIB) /* the master, page tables, kernel memory of sockets */
#define RESERVE_LOOP    (8 * MIB)  /* one loop worker: measured 2-5 MiB resident */
#define RESERVE_COMPUTE (24 * MIB) /* one compute process and the working memory of a kind */
/* v1 prints PAGE_COUNTER_MAX * PAGE_SIZE (2^63 - 4096 on x86-64) for no limit; anything this
 * large is no limit on any machine. */
#define V1_UNLIMITED (1ull << 62)

void
lg_memsize_init(struct lg_memsize *m)
{
	memset(m, 0, sizeof(*m));
	m->total = m->cgroup_limit = m->limit = m->budget = LG_MEM_NONE;
}

int
lg_memsize_read_meminfo(const char *sysroot, struct lg_memsize *m)
{
	char path[PATH_MAX], line[256];
	unsigned long long kib;
	FILE *f;
	int rc = -1;

	if (snprintf(path, sizeof(path), "%s/proc/meminfo", sysroot) >= (int)sizeof(path))
		return errno = ENAMETOOLONG, -1;
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "MemTotal: %llu kB", &kib) == 1 && kib > 0 &&
		    kib < UINT64_MAX / 1024) {
			m->total = (uint64_t)kib * 1024;
			rc = 0;
			break;
		}
	fclose(f);
	if (rc == -1)
		errno = ENODATA;
	return rc;
}

/* One limit file: 1 with *out set, 0 when it says "no limit" or is absent, -1 after a warning
 * when it holds anything else. */
static int
read_limit(const char *path, int v2, uint64_t *out,
    void (*warn)(void *, const char *, const char *), void *ctx)
{
	char buf[64], *end;
	unsigned long long v;
	FILE *f;
	size_t n;

	if ((f = fopen(path, "re")) == NULL) {
		if (errno != ENOENT)
			warn(ctx, path, strerror(errno));
		return 0;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (v2 && strcmp(buf, "max") == 0)
		return 0;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (buf[0] < '0' || buf[0] > '9' || *end != '\0' || errno != 0) {
		warn(ctx, path, v2 ? "neither \"max\" nor a byte count" : "not a byte count");
		return -1;
	}
	if (v >= V1_UNLIMITED)
		return 0;
	*out = v;
	return 1;
}

static void
offer(struct lg_memsize *m, const char *path, size_t rootlen, uint64_t v)
{
	if (v >= m->cgroup_limit)
		return;
	m->cgroup_limit = v;
	m->source[0] = '\0';
	if (strlen(path + rootlen) < sizeof(m->source))
		strcpy(m->source, path + rootlen);
}

void
lg_memsize_walk(struct lg_memsize *m, const char *leaf, const char *top, size_t rootlen,
    int v2, void (*warn)(void *ctx, const char *path, const char *why), void *ctx)
{
	static const char *const v2files[] = { "/memory.max", "/memory.high" };
	static const char *const v1files[] = { "/memory.limit_in_bytes" };
	const char *const *files = v2 ? v2files : v1files;
	size_t nfiles = v2 ? 2 : 1, toplen = strlen(top);
	char dir[PATH_MAX], path[PATH_MAX + 32], *slash;
	uint64_t v;

	if (snprintf(dir, sizeof(dir), "%s", leaf) >= (int)sizeof(dir))
		return;
	if (m->events[0] == '\0' && strlen(dir) + 20 < sizeof(m->events)) {
		memcpy(m->events, dir, strlen(dir));
		strcpy(m->events + strlen(dir), v2 ? "/memory.events" : "/memory.oom_control");
	}
	for (;;) {
		for (size_t i = 0; i < nfiles; i++) {
			snprintf(path, sizeof(path), "%s%s", dir, files[i]);
			if (read_limit(path, v2, &v, warn, ctx) == 1)
				offer(m, path, rootlen, v);
		}
		if (strlen(dir) <= toplen || (slash = strrchr(dir, '/')) == NULL)
			break;
		*slash = '\0';
	}
}

static uint64_t
sub_floor(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

void
lg_memsize_decide(struct lg_memsize *m, const struct lg_config *cfg, int loops, int cmax,
    uint64_t fixed, int caching, uint64_t proxy)
{
	uint64_t per_compute = cfg->jobs.compute_memory > RESERVE_COMPUTE ? cfg->jobs.compute_memory :
	    RESERVE_COMPUTE;

	m->limit_override = cfg->sizing.memory_limit > 0;
	if (m->limit_override)
		m->limit = cfg->sizing.memory_limit;
	else
		m->limit = m->cgroup_limit < m->total ? m->cgroup_limit : m->total;
	m->reserve = cfg->sizing.memory_reserve > 0 ? cfg->sizing.memory_reserve : RESERVE_BASE +
	    RESERVE_LOOP * (uint64_t)(loops > 0 ? loops : 1) +
	    per_compute * (uint64_t)(cmax > 0 ? cmax : 1);
	m->fixed = fixed;
	m->cache = caching ? cfg->flights.cache_bytes : 0;
	m->proxy = proxy;
	m->budget_override = cfg->sizing.shm_budget > 0;
	if (m->budget_override)
		m->budget = cfg->sizing.shm_budget;
	else if (m->limit == LG_MEM_NONE)
		m->budget = LG_MEM_NONE;
	else
		m->budget = sub_floor(sub_floor(sub_floor(sub_floor(m->limit, m->reserve), m->fixed),
		    m->cache), m->proxy);
}

/* ",\"key\":N" or ",\"key\":null" for LG_MEM_NONE. */
static int
put_bytes(char *buf, size_t cap, const char *key, uint64_t v)
{
	if (v == LG_MEM_NONE)
		return snprintf(buf, cap, ",\"%s\":null", key);
	return snprintf(buf, cap, ",\"%s\":%" PRIu64, key, v);
}

int
lg_memsize_json(const struct lg_memsize *m, char *buf, size_t cap)
{
	const struct { const char *key; uint64_t v; } rows[] = {
		{ "memory_total", m->total }, { "memory_cgroup_limit", m->cgroup_limit },
		{ "memory_limit", m->limit }, { "memory_reserve", m->reserve },
		{ "shm_fixed", m->fixed }, { "shm_cache", m->cache }, { "memory_proxy", m->proxy },
		{ "shm_budget", m->budget },
	};
	size_t n = 0;
	int k;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		k = put_bytes(buf + n, cap - n, rows[i].key, rows[i].v);
		if (k < 0 || (size_t)k >= cap - n)
			goto full;
		n += (size_t)k;
	}
	/* a path of the sysroot: no quote, backslash or control byte in the kernel's names */
	k = m->source[0] && !strpbrk(m->source, "\"\\") ?
	    snprintf(buf + n, cap - n, ",\"memory_limit_source\":\"%s\"", m->source) :
	    snprintf(buf + n, cap - n, ",\"memory_limit_source\":null");
	if (k < 0 || (size_t)k >= cap - n)
		goto full;
	return (int)(n + (size_t)k);
full:
	errno = ENOSPC;
	return -1;
}

long long
lg_memsize_oom_kills(const char *file)
{
	char line[128];
	long long n = -1;
	FILE *f;

	if (file[0] == '\0' || (f = fopen(file, "re")) == NULL)
		return errno = ENOENT, -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "oom_kill %lld", &n) == 1)
			break;
	fclose(f);
	if (n < 0)
		errno = ENODATA;
	return n;
}
