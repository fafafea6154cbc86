#include "master/ctl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "master/pidfile.h"

#define POLL_NS (20 * LG_NS_PER_MS)

/* The outcome of our SIGHUP: a line newer than `before` that names us as its sender, or whose
 * SIGHUP the master read after we sent ours (sent_ns): standard signals coalesce, and a reload
 * begun then reads the configuration as we left it, so its outcome is ours too (two
 * `-s reload` at once both get an answer; the line holds only the last outcome). */
static int
answered(const char *path, uint64_t before, uint64_t sent_ns, struct lg_reload_outcome *o)
{
	return lg_pidfile_get_outcome(path, o) == 0 && o->seq > before &&
	    (o->from == getpid() || (o->asked_ns > 0 && o->asked_ns >= sent_ns));
}

int
lg_ctl_reload(const struct lg_master_cfg *mc)
{
	struct lg_reload_outcome o;
	struct timespec pause = { 0, POLL_NS };
	uint64_t before = 0, end, sent_ns;
	pid_t pid;

	if (mc->pid_file[0] == '\0') {
		fprintf(stderr, "lagless: -s reload needs the server's --pid-file (pid_file = PATH)\n");
		return 2;
	}
	if (lg_pidfile_read(mc->pid_file, &pid) == -1) {
		fprintf(stderr, "lagless: cannot read the pid file %s: %s (is lagless running?)\n",
		    mc->pid_file, strerror(errno));
		return 2;
	}
	if (!lg_pidfile_is_master(pid)) {
		fprintf(stderr, "lagless: the pid file %s names pid %d, which is not a running lagless "
		    "master (a stale file?)\n", mc->pid_file, (int)pid);
		return 2;
	}
	if (lg_pidfile_get_outcome(mc->pid_file, &o) == 0)
		before = o.seq;
	sent_ns = lg_now_ns(); /* before the signal: the master reads it later */
	if (kill(pid, SIGHUP) == -1) {
		fprintf(stderr, "lagless: cannot signal pid %d of %s: %s\n", (int)pid,
		    mc->pid_file, strerror(errno));
		return 2;
	}
	end = lg_now_ns() + (mc->drain_timeout_ms + 30000) * LG_NS_PER_MS;
	while (!answered(mc->pid_file, before, sent_ns, &o)) {
		if (kill(pid, 0) == -1 && errno == ESRCH) {
			fprintf(stderr, "lagless: reload failed: the master (pid %d) exited\n", (int)pid);
			return 1;
		}
		if (lg_now_ns() >= end) {
			fprintf(stderr, "lagless: reload: no outcome from pid %d within %llu ms\n",
			    (int)pid, (unsigned long long)(mc->drain_timeout_ms + 30000));
			return 1;
		}
		nanosleep(&pause, NULL);
	}
	if (!o.ok) {
		fprintf(stderr, "lagless: reload refused, the running configuration stays: %s\n",
		    o.text);
		return 1;
	}
	/* "generation N" then, after a ';', what the reload kept of the running configuration */
	size_t n = strcspn(o.text, ";");

	fprintf(stderr, "lagless: reloaded: %.*s accepts%s\n", (int)n, o.text, o.text + n);
	return 0;
}
