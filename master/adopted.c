#include "master/adopted.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

#define RESCAN_NS  (100 * LG_NS_PER_MS)

int
lg_adopted_list(pid_t *out, int max)
{
	char path[320]; /* /proc/self/task/ + a d_name (256) + /children */
	struct dirent *e;
	DIR *d = opendir("/proc/self/task");
	int n = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		FILE *f;
		int pid;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		while (fscanf(f, "%d", &pid) == 1) {
			if (n < max)
				out[n] = (pid_t)pid;
			n++;
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

/* "pid pid ..." of the first n of pids into out (cap bytes), "..." when cut. */
static void
pid_list(const pid_t *pids, int n, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (int i = 0; i < n && len < cap; i++) {
		int w = snprintf(out + len, cap - len, "%s%d", i ? " " : "", (int)pids[i]);

		if (w < 0 || (size_t)w >= cap - len) {
			snprintf(out + (cap > 4 ? cap - 4 : 0), cap > 4 ? 4 : cap, "...");
			break;
		}
		len += (size_t)w;
	}
}

static int
termed(const struct lg_adopted *a, pid_t pid)
{
	for (int i = 0; i < a->ntermed; i++)
		if (a->termed[i] == pid)
			return 1;
	return 0;
}

int
lg_adopted_step(struct lg_adopted *a, int (*ours)(const void *arg, pid_t pid),
    const void *arg, int immediate, uint64_t grace_ms, uint64_t now, uint64_t *next)
{
	pid_t pids[LG_ADOPTED_MAX];
	char list[160];
	int found = lg_adopted_list(pids, LG_ADOPTED_MAX), n = 0, stored = 0;

	for (int i = 0; i < found; i++) {
		if (i < LG_ADOPTED_MAX && ours(arg, pids[i]))
			continue;
		n++;
		if (i < LG_ADOPTED_MAX)
			pids[stored++] = pids[i];
	}
	if (n == 0)
		return 0;
	pid_list(pids, stored, list, sizeof(list));
	if (!a->killing && (immediate || (a->kill_at != 0 && now >= a->kill_at))) {
		if (a->kill_at != 0 && now >= a->kill_at)
			log_warn("%d process(es) the apps left behind still running %llu ms after "
			    "SIGTERM; SIGKILL: %s", n, (unsigned long long)a->grace_ms, list);
		else if (a->kill_at != 0) /* an immediate stop (SIGQUIT) within the grace */
			log_info("%d process(es) the apps left behind: immediate stop, SIGKILL: %s", n,
			    list);
		else
			log_info("%d process(es) the apps left behind (reparented to the master): "
			    "SIGKILL: %s", n, list);
		a->killing = 1;
	}
	if (a->killing) {
		for (int i = 0; i < stored; i++)
			kill(pids[i], SIGKILL);
	} else {
		if (a->kill_at == 0) {
			log_info("%d process(es) the apps left behind (reparented to the master): "
			    "SIGTERM, SIGKILL after %llu ms: %s", n, (unsigned long long)grace_ms,
			    list);
			a->kill_at = now + grace_ms * LG_NS_PER_MS;
			a->grace_ms = grace_ms;
		}
		for (int i = 0; i < stored; i++) /* those adopted since: orphans of one that ended */
			if (!termed(a, pids[i])) {
				kill(pids[i], SIGTERM);
				if (a->ntermed < LG_ADOPTED_MAX)
					a->termed[a->ntermed++] = pids[i];
			}
		if (a->kill_at < *next)
			*next = a->kill_at;
	}
	if (now + RESCAN_NS < *next)
		*next = now + RESCAN_NS;
	return n;
}
