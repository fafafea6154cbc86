#include "stats/procstat.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/clock.h"

#define LG_PROCSTAT_MAX 256 /* processes listed per scrape; past it they are left out */

struct pstat {
	double cpu_s;        /* utime + stime */
	double start_s;      /* Unix seconds */
	uint64_t vsize, rss; /* bytes */
	int64_t fds, max_fds;
	uint64_t threads;
};

static int
read_text(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (f == NULL)
		return -1;
	n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = '\0';
	return (int)n;
}

/* Boot time in Unix seconds: btime of /proc/stat, once per process. */
static double
boot_time(void)
{
	static double bt = -1;
	char buf[8192], *p;

	if (bt < 0 && read_text("/proc/stat", buf, sizeof(buf)) > 0 &&
	    (p = strstr(buf, "\nbtime ")) != NULL)
		bt = (double)strtoull(p + 7, NULL, 10);
	return bt < 0 ? 0 : bt;
}

static int64_t
count_fds(pid_t pid)
{
	char path[64];
	DIR *d;
	struct dirent *e;
	int64_t n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if ((d = opendir(path)) == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static int64_t
max_fds(pid_t pid)
{
	char path[64], buf[4096], *p;
	unsigned long long soft;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	if (read_text(path, buf, sizeof(buf)) <= 0 || (p = strstr(buf, "Max open files")) == NULL)
		return -1;
	return sscanf(p + 14, " %llu", &soft) == 1 ? (int64_t)soft : -1;
}

/* Fields 14, 15 (utime, stime), 20 (threads), 22 (starttime, clock ticks since boot), 23
 * (vsize) and 24 (rss, pages) of /proc/PID/stat, proc(5); the name may hold blanks, so the
 * fields are counted after its closing parenthesis. */
static int
read_pstat(pid_t pid, struct pstat *ps)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st, thr, start, vsize;
	long long rss;
	double hz = (double)sysconf(_SC_CLK_TCK);

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_text(path, buf, sizeof(buf)) <= 0 || (p = strrchr(buf, ')')) == NULL)
		return -1;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
	    "%llu %*d %llu %llu %lld", &ut, &st, &thr, &start, &vsize, &rss) != 6)
		return -1;
	ps->cpu_s = (double)(ut + st) / hz;
	ps->threads = thr;
	ps->start_s = boot_time() + (double)start / hz;
	ps->vsize = vsize;
	ps->rss = rss > 0 ? (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
	ps->fds = count_fds(pid);
	ps->max_fds = max_fds(pid);
	return 0;
}

size_t
lg_procstat_bound(uint32_t nprocs)
{
	/* 7 families of HELP/TYPE (~1 KiB) and 7 samples of ~80 bytes per process */
	return 2048 + (size_t)(nprocs + 1) * 7 * 96;
}

static const struct {
	const char *name, *type, *help;
} fams[] = {
	{ "process_cpu_seconds_total", "counter", "User and system CPU time spent, seconds." },
	{ "process_resident_memory_bytes", "gauge", "Resident memory size, bytes (shared "
	  "arena pages the process touched included)." },
	{ "process_virtual_memory_bytes", "gauge", "Virtual memory size, bytes." },
	{ "process_open_fds", "gauge", "Open file descriptors." },
	{ "process_max_fds", "gauge", "The soft limit of open file descriptors." },
	{ "process_start_time_seconds", "gauge", "Start time since the Unix epoch, seconds." },
	{ "process_threads", "gauge", "Threads of the process." },
};

static void
sample(struct lg_buf *b, int fam, const char *labels, const struct pstat *ps)
{
	const char *n = fams[fam].name;

	switch (fam) {
	case 0: lg_buf_printf(b, "%s{%s} %.2f\n", n, labels, ps->cpu_s); break;
	case 1: lg_buf_printf(b, "%s{%s} %" PRIu64 "\n", n, labels, ps->rss); break;
	case 2: lg_buf_printf(b, "%s{%s} %" PRIu64 "\n", n, labels, ps->vsize); break;
	case 3: if (ps->fds >= 0) lg_buf_printf(b, "%s{%s} %" PRId64 "\n", n, labels, ps->fds); break;
	case 4: if (ps->max_fds >= 0)
			lg_buf_printf(b, "%s{%s} %" PRId64 "\n", n, labels, ps->max_fds);
		break;
	case 5: lg_buf_printf(b, "%s{%s} %.2f\n", n, labels, ps->start_s); break;
	case 6: lg_buf_printf(b, "%s{%s} %" PRIu64 "\n", n, labels, ps->threads); break;
	}
}

int
lg_procstat_render(struct lg_buf *b, const struct lg_arena *a, uint32_t nloops)
{
	struct pstat ps[1 + LG_PROCSTAT_MAX];
	char labels[1 + LG_PROCSTAT_MAX][48];
	int n = 0;
	pid_t mpid = (pid_t)atomic_load(&a->master->pid);

	if (mpid > 0 && read_pstat(mpid, &ps[n]) == 0)
		snprintf(labels[n++], sizeof(labels[0]), "role=\"master\",index=\"0\"");
	for (uint32_t k = 0; k < a->nprocs && n < 1 + LG_PROCSTAT_MAX; k++) {
		pid_t pid = (pid_t)atomic_load_explicit(&a->procs[k].pid, memory_order_relaxed);

		if (pid > 0 && read_pstat(pid, &ps[n]) == 0)
			snprintf(labels[n++], sizeof(labels[0]), "role=\"%s\",index=\"%u\"",
			    k < nloops ? "loop" : "compute", k < nloops ? k : k - nloops);
	}
	for (int f = 0; f < (int)(sizeof(fams) / sizeof(fams[0])); f++) {
		lg_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", fams[f].name, fams[f].help,
		    fams[f].name, fams[f].type);
		for (int i = 0; i < n; i++)
			sample(b, f, labels[i], &ps[i]);
	}
	return b->overflow ? -1 : 0;
}
