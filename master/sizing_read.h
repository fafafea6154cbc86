/* The inputs of the CPU budget (master/ only, master/sizing_read.c): the machine's CPUs, the
 * affinity mask, the cpusets and CPU quotas of the process's cgroups (master/sizing.h says
 * which files and why). master/sizing.h includes this header. */
#ifndef LG_MASTER_SIZING_READ_H
#define LG_MASTER_SIZING_READ_H

/* Highest CPU id a cpulist may name (CONFIG_NR_CPUS tops out at 8192 on x86-64 with MAXSMP;
 * twice that leaves room). Also caps --cpus so int arithmetic cannot overflow. */
#define LG_SIZING_MAX_CPUS 16384

struct lg_sizing;

/* Reads every input under sysroot (NULL or "" means the real root) into *s, the memory limit
 * too (s->mem: MemTotal and the memory cgroup path, master/memsize.h), and clears the
 * decision fields. Never fails: a missing, unreadable or corrupt file (a zero or negative period,
 * garbage text) is logged once as a warning, counted in s->warnings, and that input skipped. */
void lg_sizing_read(const char *sysroot, struct lg_sizing *s);

/* lg_sizing_read without the log lines (warnings are still counted): for the master's
 * re-reading once a second, which would otherwise repeat a warning each time. */
void lg_sizing_reread(const char *sysroot, struct lg_sizing *s);

/* Parses a Linux CPU list ("0-3,8-11", "5", "") as in cpuset(7) "List format".
 * Returns the CPU count (0 for an empty list), or -1 with errno EINVAL on malformed input. */
int lg_sizing_parse_cpulist(const char *text);

#endif
