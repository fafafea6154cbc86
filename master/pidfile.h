/* The pid file (--pid-file PATH) and, next to it, the outcome of the last reload
 * (PATH.reload), which `lagless -s reload` waits for: a SIGHUP alone says nothing back, so a
 * configuration typo looked like a successful reload. Both files are replaced whole
 * (a temporary file renamed over the old one, rename(2)), so a reader never sees half a line. */
#ifndef LG_MASTER_PIDFILE_H
#define LG_MASTER_PIDFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The outcome of one reload, as PATH.reload holds it on one line:
 * "SEQ FROM ASKED ok generation N" or "SEQ FROM ASKED refused REASON" (an older master's
 * line has no ASKED, and is still read). */
struct lg_reload_outcome {
	uint64_t seq;       /* the master's count of SIGHUPs it answered, from 1 */
	pid_t from;         /* the pid that sent the SIGHUP (signalfd's ssi_pid); 0 unknown */
	uint64_t asked_ns;  /* when the master read that SIGHUP (CLOCK_MONOTONIC ns, system-wide:
	                     * every request signalled before it is answered too); 0 unknown */
	int ok;             /* 1: the new generation accepts; 0: refused */
	char text[400];     /* "generation N", or the reason it was refused */
};

/* Writes pid and a newline to path (replacing it) and removes a stale path.reload. Returns 0,
 * or -1 with errno (path longer than PATH_MAX - 16, open, write, rename). */
int lg_pidfile_write(const char *path, pid_t pid);

/* Removes path and path.reload if path still names pid (a successor's file is left alone). */
void lg_pidfile_remove(const char *path, pid_t pid);

/* Reads the pid of path into *pid. Returns 0, or -1 with errno (ENOENT, or EINVAL for a file
 * that does not hold a positive decimal pid). */
int lg_pidfile_read(const char *path, pid_t *pid);

/* Is pid a running lagless master? The master names itself "lagless" (prctl PR_SET_NAME, at
 * start-up) and its children take other names, so /proc/PID/comm (proc(5)) tells it from an
 * unrelated process that got a stale pid file's pid. Returns 1 or 0 (no such process, or
 * another program). */
int lg_pidfile_is_master(pid_t pid);

#define LG_MASTER_COMM "lagless" /* the master's process name (/proc/PID/comm) */

/* Replaces path.reload with *o. Returns 0, or -1 with errno. */
int lg_pidfile_put_outcome(const char *path, const struct lg_reload_outcome *o);

/* Reads path.reload into *o. Returns 0, or -1 with errno (ENOENT before any reload, EINVAL for
 * a malformed line). */
int lg_pidfile_get_outcome(const char *path, struct lg_reload_outcome *o);

#endif
