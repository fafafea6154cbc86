#include "master/memwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "master/gen.h"
#include "master/shape.h"

#define READ_PERIOD_NS (1000 * LG_NS_PER_MS)

static void
follow(struct lg_gen *g, const char *events)
{
	snprintf(g->mw.events, sizeof(g->mw.events), "%s", events);
	g->mw.seen = lg_memsize_oom_kills(g->mw.events);
}

void
lg_memwatch_start(struct lg_gen *g)
{
	follow(g, g->sz.mem.events);
	g->mw.next_read = lg_now_ns() + READ_PERIOD_NS;
}

/* "256 MiB" or "none" for a log line. */
static void
mib(char *out, size_t cap, uint64_t v)
{
	if (v == LG_MEM_NONE)
		snprintf(out, cap, "none");
	else
		snprintf(out, cap, "%" PRIu64 " MiB", v >> 20);
}

void
lg_memwatch_tick(struct lg_gen *g, uint64_t now, uint64_t *next)
{
	struct lg_master_page *mp = g->arena.master;
	struct lg_sizing s = g->sz;
	char lim[32], bud[32];

	if (now >= g->mw.next_read) {
		g->mw.next_read = now + READ_PERIOD_NS;
		lg_sizing_reread(getenv("LAGLESS_SYSROOT"), &s);
		/* the counts in force (a live resize moves them), the memory inputs just read */
		struct lg_memsize mem = s.mem;

		s = g->sz;
		s.mem = mem;
		lg_gen_decide_memory(&g->cfg, &s);
		if (strcmp(s.mem.events, g->mw.events) != 0)
			follow(g, s.mem.events);
		if (s.mem.limit != g->sz.mem.limit || s.mem.budget != g->sz.mem.budget) {
			mib(lim, sizeof(lim), s.mem.limit);
			mib(bud, sizeof(bud), s.mem.budget);
			log_info("memory limit now %s%s%s: shared-memory budget %s", lim,
			    s.mem.source[0] ? " from " : "", s.mem.source, bud);
			g->sz.mem = s.mem;
			atomic_store(&mp->mem_limit, s.mem.limit);
			atomic_store(&mp->shm_budget, s.mem.budget);
		}
	}
	if (g->mw.next_read < *next)
		*next = g->mw.next_read;
}

int
lg_memwatch_oom_killed(struct lg_gen *g)
{
	struct lg_sizing *s = malloc(sizeof(*s));
	long long n;

	/* The server may have been moved into another cgroup since the last reading: the counter
	 * that counts is the one of the cgroup it is in now. A new one's count so far is taken
	 * as this death's (a fresh cgroup's counter starts at 0). */
	if (s != NULL) {
		lg_sizing_reread(getenv("LAGLESS_SYSROOT"), s);
		if (strcmp(s->mem.events, g->mw.events) != 0) {
			follow(g, s->mem.events);
			if (g->mw.seen > 0)
				g->mw.seen--;
		}
		free(s);
	}
	if ((n = lg_memsize_oom_kills(g->mw.events)) < 0)
		return 0;
	if (g->mw.seen < 0 || n < g->mw.seen) {
		g->mw.seen = n; /* first readable value, or another counter: a new baseline */
		return 0;
	}
	if (n == g->mw.seen)
		return 0;
	g->mw.seen++;
	return 1;
}

int
lg_memwatch_score(int adj)
{
	char text[16];
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC), n = -1, saved;

	if (fd >= 0) {
		snprintf(text, sizeof(text), "%d", adj);
		n = (int)write(fd, text, strlen(text));
		saved = errno;
		close(fd);
		errno = saved;
	}
	if (n < 0)
		log_debug("cannot set oom_score_adj to %d: %s", adj, strerror(errno));
	return n < 0 ? -1 : 0;
}
