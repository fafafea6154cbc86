/* The inputs of the CPU budget: online CPUs, affinity, cpusets and CPU quotas read from /proc,
 * /sys and the cgroup files; see sizing/sizing.h for the rules and the kernel documents.
 *
 * Reading goes: /proc/self/cgroup names the process's cgroup in each hierarchy, relative to the
 * hierarchy root; /proc/self/mountinfo says where each hierarchy is mounted and which part of it
 * (the "root" field, proc(5)). The directory of the process's cgroup is mount point + (path -
 * root); from there we walk up to the mount point, because a parent's CPU limit caps every child
 * (cgroup-v2.rst "Resource Distribution Models: Limits", sched-bwc.rst "Hierarchical
 * considerations"). Everything above the mount point is invisible to us, which inside a container
 * is the host's business. */
#include "sizing/sizing.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

/* One cgroup hierarchy as seen by this process. */
struct hier {
	int found;              /* a /proc/self/cgroup line named it */
	int mounted;            /* a mountinfo line matched it */
	char path[PATH_MAX];    /* process's cgroup, relative to the hierarchy root */
	char root[PATH_MAX];    /* part of the hierarchy the mount shows (mountinfo field 4) */
	char mnt[PATH_MAX];     /* mount point (mountinfo field 5) */
	int usable;             /* leaf and top below are set */
	char leaf[PATH_MAX];    /* the process's cgroup directory, sysroot included */
	char top[PATH_MAX];     /* the mount point, sysroot included: where walks stop */
};

/* The hierarchies that can hold a CPU limit or a cpuset. In hybrid mode a controller is bound to
 * exactly one hierarchy, so the files of an unbound one are simply absent and reading all three
 * is safe. */
struct hiers {
	struct hier v1cpu, v1cpuset, v1mem, v2;
	int v1_lines, v2_lines;  /* /proc/self/cgroup named a v1 / the v2 hierarchy */
};

static void
warn_file(struct lg_sizing *s, const char *path, const char *why)
{
	if (!s->quiet)
		log_warn("%s: %s; input skipped", path, why);
	s->warnings++;
}

/* First line of a small kernel file, newline stripped, malloc'd (caller frees); NULL + errno. */
static char *
read_line(const char *path)
{
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int saved;

	if ((f = fopen(path, "re")) == NULL)
		return NULL;
	errno = 0;
	n = getline(&line, &cap, f);
	saved = errno;
	fclose(f);
	if (n < 0) {
		free(line);
		errno = saved != 0 ? saved : ENODATA;	/* an empty file */
		return NULL;
	}
	if (n > 0 && line[n - 1] == '\n')
		line[n - 1] = '\0';
	return line;
}

static int
path_join(char *out, size_t cap, const char *a, const char *b)
{
	int n = snprintf(out, cap, "%s%s", a, b);

	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* Is name one element of a comma-separated list ("rw,cpu,cpuacct")? "cpu" must not match
 * "cpuset" or "cpuacct". */
static int
has_element(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; p != NULL; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0'))
			return 1;
	}
	return 0;
}

static void
copy_str(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src);
}

/* One line of /proc/self/cgroup: "hierarchy-ID:controller-list:cgroup-path" (cgroups(7)).
 * Returns 0, or -1 when the line is malformed. */
static int
parse_cgroup_line(char *line, struct hiers *h)
{
	char *ctl, *path;

	if ((ctl = strchr(line, ':')) == NULL || (path = strchr(ctl + 1, ':')) == NULL)
		return -1;
	*ctl++ = '\0';
	*path++ = '\0';
	if (path[0] != '/')
		return -1;
	if (strcmp(line, "0") == 0 && ctl[0] == '\0') {
		h->v2_lines = 1;
		h->v2.found = 1;
		copy_str(h->v2.path, sizeof(h->v2.path), path);
		return 0;
	}
	h->v1_lines = 1;
	if (has_element(ctl, "cpu")) {
		h->v1cpu.found = 1;
		copy_str(h->v1cpu.path, sizeof(h->v1cpu.path), path);
	}
	if (has_element(ctl, "cpuset")) {
		h->v1cpuset.found = 1;
		copy_str(h->v1cpuset.path, sizeof(h->v1cpuset.path), path);
	}
	if (has_element(ctl, "memory")) {
		h->v1mem.found = 1;
		copy_str(h->v1mem.path, sizeof(h->v1mem.path), path);
	}
	return 0;
}

/* Calls fn on every line of sysroot + name, newline stripped. Returns the number of lines fn
 * rejected (after one warning if any), or -1 after a warning if the file cannot be opened. */
static int
each_line(const char *sysroot, const char *name, struct lg_sizing *s,
    int (*fn)(char *, struct hiers *), struct hiers *h)
{
	char path[PATH_MAX], *line = NULL;
	size_t cap = 0;
	int bad = 0;
	FILE *f;

	if (path_join(path, sizeof(path), sysroot, name) < 0 || (f = fopen(path, "re")) == NULL) {
		warn_file(s, path, strerror(errno));
		return -1;
	}
	while (getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] != '\0' && fn(line, h) < 0)
			bad++;
	}
	free(line);
	fclose(f);
	if (bad > 0)
		warn_file(s, path, "malformed line");
	return bad;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo octal (proc(5), seq_file's
 * mangle_path); undo it in place. */
static void
unescape_octal(char *s)
{
	char *w = s;

	for (char *r = s; *r != '\0'; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* Does root cover path as a path prefix ("/a" covers "/a" and "/a/b", not "/ab")? */
static int
root_covers(const char *root, const char *path)
{
	size_t n = strlen(root);

	if (strcmp(root, "/") == 0)
		return 1;
	return strncmp(root, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Records a mount of hierarchy h. Among several mounts of one hierarchy, prefer one whose root
 * covers the process's cgroup, and the shortest such root: it lets the walk see more parents. */
static void
offer_mount(struct hier *h, const char *root, const char *mnt)
{
	int covers = root_covers(root, h->path);
	int had = h->mounted && root_covers(h->root, h->path);

	if (!h->found || (h->mounted && !covers) || (had && strlen(root) >= strlen(h->root)))
		return;
	h->mounted = 1;
	copy_str(h->root, sizeof(h->root), root);
	copy_str(h->mnt, sizeof(h->mnt), mnt);
}

/* Fields (proc(5)): id parent major:minor root mount-point options [optional...] - fstype
 * source super-options. */
static int
parse_mount_line(char *line, struct hiers *h)
{
	char *field[6], *sep, *save = NULL, *fstype, *source, *super;
	int i;

	if ((sep = strstr(line, " - ")) == NULL)
		return -1;
	*sep = '\0';
	for (i = 0; i < 6; i++)
		if ((field[i] = strtok_r(i == 0 ? line : NULL, " ", &save)) == NULL)
			return -1;
	fstype = strtok_r(sep + 3, " ", &save);
	source = fstype != NULL ? strtok_r(NULL, " ", &save) : NULL;
	if ((super = source != NULL ? strtok_r(NULL, " ", &save) : NULL) == NULL)
		return -1;
	unescape_octal(field[3]);
	unescape_octal(field[4]);
	if (strcmp(fstype, "cgroup2") == 0) {
		offer_mount(&h->v2, field[3], field[4]);
	} else if (strcmp(fstype, "cgroup") == 0) {
		if (has_element(super, "cpu"))
			offer_mount(&h->v1cpu, field[3], field[4]);
		if (has_element(super, "cpuset"))
			offer_mount(&h->v1cpuset, field[3], field[4]);
		if (has_element(super, "memory"))
			offer_mount(&h->v1mem, field[3], field[4]);
	}
	return 0;
}

/* Sets h->leaf and h->top. When the mount's root does not cover the process's path (a cgroup
 * namespace whose root is the mounted directory, or a path with "/.."), the mount point is the
 * closest directory we can trust, so leaf is the mount point too; likewise, after a warning,
 * when the leaf directory does not exist. */
static void
resolve_dirs(const char *sysroot, struct lg_sizing *s, struct hier *h, int quiet)
{
	const char *rel = "";
	struct stat st;

	if (!h->found || !h->mounted)
		return;
	if (root_covers(h->root, h->path) && strstr(h->path, "/..") == NULL)
		rel = strcmp(h->root, "/") == 0 ? h->path : h->path + strlen(h->root);
	if (strcmp(rel, "/") == 0)
		rel = "";
	if (path_join(h->top, sizeof(h->top), sysroot, h->mnt) < 0 ||
	    path_join(h->leaf, sizeof(h->leaf), h->top, rel) < 0) {
		warn_file(s, h->mnt, "path too long");
		return;
	}
	if (stat(h->leaf, &st) < 0 || !S_ISDIR(st.st_mode)) {
		if (!quiet)
			warn_file(s, h->leaf, "cgroup directory missing");
		copy_str(h->leaf, sizeof(h->leaf), h->top);
	}
	h->usable = 1;
}

/* Parses a decimal integer filling the whole token; -1 on garbage or overflow. */
static int
parse_ll(const char *text, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(text, &end, 10);
	return errno != 0 || end == text || *end != '\0' ? -1 : 0;
}

/* cgroup v2 "cpu.max": "$MAX $PERIOD", MAX being "max" for no limit (cgroup-v2.rst, "CPU
 * Interface Files"). The file exists only on non-root cgroups with the cpu controller enabled,
 * so its absence is normal and not a warning. Returns CPUs, 0 for no limit, -1 if skipped. */
static double
read_cpu_max(const char *dir, struct lg_sizing *s, char *file)
{
	char *line, quota[32], extra;
	long long q, p;
	double cpus = -1;

	if (path_join(file, PATH_MAX, dir, "/cpu.max") < 0)
		return -1;
	if ((line = read_line(file)) == NULL) {
		if (errno != ENOENT)
			warn_file(s, file, strerror(errno));
		return -1;
	}
	if (sscanf(line, "%31s %lld %c", quota, &p, &extra) != 2 || p <= 0)
		warn_file(s, file, "expected \"<quota|max> <period>\" with a positive period");
	else if (strcmp(quota, "max") == 0)
		cpus = 0;
	else if (parse_ll(quota, &q) < 0 || q <= 0)
		warn_file(s, file, "quota is neither \"max\" nor a positive integer");
	else
		cpus = (double)q / (double)p;
	free(line);
	return cpus;
}

/* A file holding one positive integer (or -1 when minus_one is set); -1 after a warning if it
 * is missing or holds anything else. */
static int
read_positive(const char *path, struct lg_sizing *s, long long *v, int minus_one)
{
	char *line;
	int r = -1;

	if ((line = read_line(path)) == NULL) {
		warn_file(s, path, strerror(errno));
		return -1;
	}
	if (parse_ll(line, v) < 0 || (*v <= 0 && !(minus_one && *v == -1)))
		warn_file(s, path, minus_one ? "neither -1 nor a positive integer" :
		    "not a positive integer");
	else
		r = 0;
	free(line);
	return r;
}

/* cgroup v1 "cpu.cfs_quota_us" / "cpu.cfs_period_us", microseconds; a quota of -1 means no
 * limit (Documentation/scheduler/sched-bwc.rst). Both files exist at every level of a mounted
 * cpu hierarchy, so a missing one is a warning. Returns as read_cpu_max. */
static double
read_cfs(const char *dir, struct lg_sizing *s, char *file)
{
	char pfile[PATH_MAX];
	long long q, p;

	if (path_join(file, PATH_MAX, dir, "/cpu.cfs_quota_us") < 0 ||
	    path_join(pfile, sizeof(pfile), dir, "/cpu.cfs_period_us") < 0 ||
	    read_positive(file, s, &q, 1) < 0)
		return -1;
	if (q == -1)
		return 0;
	return read_positive(pfile, s, &p, 0) < 0 ? -1 : (double)q / (double)p;
}

/* Walks from the process's cgroup up to the mount point, keeping the tightest limit in s. */
static void
walk_quota(const char *sysroot, struct lg_sizing *s, const struct hier *h, int v2)
{
	char dir[PATH_MAX], file[PATH_MAX];
	size_t rootlen = strlen(sysroot);
	double cpus;
	char *slash;

	if (!h->usable)
		return;
	copy_str(dir, sizeof(dir), h->leaf);
	for (;;) {
		cpus = v2 ? read_cpu_max(dir, s, file) : read_cfs(dir, s, file);
		if (cpus > 0 && (s->quota < 0 || cpus < s->quota)) {
			s->quota = cpus;
			copy_str(s->quota_source, sizeof(s->quota_source), file + rootlen);
		}
		if (strlen(dir) <= strlen(h->top) || (slash = strrchr(dir, '/')) == NULL)
			break;
		*slash = '\0';
	}
}

static void
warn_cb(void *ctx, const char *path, const char *why)
{
	warn_file(ctx, path, why);
}

/* The memory limit, on the hierarchy the memory controller is bound to (v1 in hybrid mode, else
 * v2: both walks are safe, the files of an unbound one are absent). */
static void
walk_memory(const char *sysroot, struct lg_sizing *s, const struct hiers *h)
{
	if (h->v1mem.usable)
		lg_memsize_walk(&s->mem, h->v1mem.leaf, h->v1mem.top, strlen(sysroot), 0, warn_cb, s);
	if (h->v2.usable)
		lg_memsize_walk(&s->mem, h->v2.leaf, h->v2.top, strlen(sysroot), 1, warn_cb, s);
}

/* Reads one cpulist file; returns the count, or -1 (with a warning unless the file is absent
 * and quiet is set). An empty cpuset is treated as corrupt: a cgroup holding us has CPUs. */
static int
read_cpulist_file(const char *path, struct lg_sizing *s, int quiet)
{
	char *line;
	int n;

	if ((line = read_line(path)) == NULL) {
		if (!(quiet && errno == ENOENT))
			warn_file(s, path, strerror(errno));
		return -1;
	}
	n = lg_sizing_parse_cpulist(line);
	free(line);
	if (n <= 0) {
		warn_file(s, path, n == 0 ? "empty CPU list" : "malformed CPU list");
		return -1;
	}
	return n;
}

/* v2 "cpuset.cpus.effective" exists on cpuset-enabled cgroups only (cgroup-v2.rst "Cpuset
 * Interface Files"); v1 "cpuset.effective_cpus" (cgroup-v1/cpusets.rst), with "cpuset.cpus" as a
 * fallback for kernels that predate it. Effective lists already honour the ancestors. */
static void
read_cpusets(struct lg_sizing *s, const struct hiers *h)
{
	char file[PATH_MAX];
	int n;

	if (h->v2.usable &&
	    path_join(file, sizeof(file), h->v2.leaf, "/cpuset.cpus.effective") == 0 &&
	    (n = read_cpulist_file(file, s, 1)) > 0)
		s->cpuset = n;
	if (!h->v1cpuset.usable ||
	    path_join(file, sizeof(file), h->v1cpuset.leaf, "/cpuset.effective_cpus") < 0)
		return;
	if (access(file, F_OK) < 0 &&
	    path_join(file, sizeof(file), h->v1cpuset.leaf, "/cpuset.cpus") < 0)
		return;
	if ((n = read_cpulist_file(file, s, 0)) > 0 && (s->cpuset < 0 || n < s->cpuset))
		s->cpuset = n;
}

static int
read_affinity(void)
{
	/* The kernel mask may be wider than cpu_set_t's 1024 bits; grow until it fits
	 * (sched_getaffinity(2), "Handling systems with large CPU affinity masks"). */
	for (int ncpu = 1024; ncpu <= LG_SIZING_MAX_CPUS * 4; ncpu *= 2) {
		cpu_set_t *set = CPU_ALLOC(ncpu);
		size_t size = CPU_ALLOC_SIZE(ncpu);
		int n = -1;

		if (set == NULL)
			return -1;
		if (sched_getaffinity(0, size, set) == 0)
			n = CPU_COUNT_S(size, set);
		CPU_FREE(set);
		if (n >= 0 || errno != EINVAL)
			return n;
	}
	return -1;
}

static void
read_online(const char *sysroot, struct lg_sizing *s)
{
	char path[PATH_MAX];

	if (path_join(path, sizeof(path), sysroot, "/sys/devices/system/cpu/online") == 0)
		s->online = read_cpulist_file(path, s, 0);
	if (s->online < 0 && sysroot[0] == '\0') {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		s->online = n > 0 && n <= LG_SIZING_MAX_CPUS ? (int)n : -1;
	}
}

static void
sizing_read(const char *sysroot, struct lg_sizing *s, int quiet)
{
	struct hiers *h;
	int bad;

	if (sysroot == NULL)
		sysroot = "";
	memset(s, 0, sizeof(*s));
	s->quiet = quiet;
	s->online = s->affinity = s->cpuset = -1;
	s->quota = -1;
	s->queue_capacity = -1;
	copy_str(s->cgroup_version, sizeof(s->cgroup_version), "none");
	read_online(sysroot, s);
	lg_memsize_init(&s->mem);
	lg_memsize_read_meminfo(sysroot, &s->mem); /* absent in a fixture: MemTotal unknown */
	/* A fixture tree cannot describe our own affinity mask, so with a sysroot it is left out. */
	if (sysroot[0] == '\0')
		s->affinity = read_affinity();
	/* About 60 KiB of paths: on the heap (the master's live resize reads once a second). */
	if ((h = calloc(1, sizeof(*h))) == NULL) {
		if (!quiet)
			log_warn("out of memory; cgroup limits not read");
		s->warnings++;
		return;
	}
	/* A malformed /proc/self/cgroup is skipped whole: no line of it can be trusted. A malformed
	 * mountinfo line is skipped alone, it only describes one mount. */
	bad = each_line(sysroot, "/proc/self/cgroup", s, parse_cgroup_line, h);
	if (bad == 0 && (h->v1_lines || h->v2_lines)) {
		copy_str(s->cgroup_version, sizeof(s->cgroup_version), h->v1_lines && h->v2_lines ?
		    "hybrid" : h->v1_lines ? "v1" : "v2");
		each_line(sysroot, "/proc/self/mountinfo", s, parse_mount_line, h);
		resolve_dirs(sysroot, s, &h->v2, 0);
		resolve_dirs(sysroot, s, &h->v1cpu, 0);
		resolve_dirs(sysroot, s, &h->v1cpuset, 0);
		resolve_dirs(sysroot, s, &h->v1mem, 1); /* no memory controller there: no limit */
		walk_quota(sysroot, s, &h->v2, 1);
		walk_quota(sysroot, s, &h->v1cpu, 0);
		read_cpusets(s, h);
		walk_memory(sysroot, s, h);
	}
	free(h);
}

void
lg_sizing_read(const char *sysroot, struct lg_sizing *s)
{
	sizing_read(sysroot, s, 0);
}

void
lg_sizing_reread(const char *sysroot, struct lg_sizing *s)
{
	sizing_read(sysroot, s, 1);
}

/* cpuset(7) "List format": comma-separated decimal CPU numbers and inclusive ranges a-b. The
 * kernel prints them ascending and disjoint; we count distinct CPUs anyway, so a hand-written
 * "0-3,2-5" counts 6. Stride syntax ("0-8:2/4", bitmap_parselist) is never printed by the
 * kernel and is rejected. */
int
lg_sizing_parse_cpulist(const char *text)
{
	unsigned char seen[LG_SIZING_MAX_CPUS / 8] = { 0 };
	const char *p = text;
	int count = 0;

	if (p == NULL)
		goto bad;
	while (*p == ' ' || *p == '\t' || *p == '\n')
		p++;
	if (*p == '\0')
		return 0;
	for (;;) {
		long lo, hi;
		char *end;

		if (*p < '0' || *p > '9')
			goto bad;
		errno = 0;
		lo = hi = strtol(p, &end, 10);
		p = end;
		if (*p == '-') {
			if (p[1] < '0' || p[1] > '9')
				goto bad;
			hi = strtol(p + 1, &end, 10);
			p = end;
		}
		if (errno != 0 || lo > hi || hi >= LG_SIZING_MAX_CPUS)
			goto bad;
		for (long c = lo; c <= hi; c++) {
			count += !(seen[c / 8] & (1u << (c % 8)));
			seen[c / 8] |= (unsigned char)(1u << (c % 8));
		}
		if (*p != ',')
			break;
		p++;
	}
	while (*p == ' ' || *p == '\t' || *p == '\n')
		p++;
	if (*p == '\0')
		return count;
bad:
	errno = EINVAL;
	return -1;
}
