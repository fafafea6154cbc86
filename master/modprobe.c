#include "master/modprobe.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "shm/stats.h"

#define RETRY_MIN_NS (1000 * LG_NS_PER_MS)
#define RETRY_MAX_NS (60000 * LG_NS_PER_MS)
#define PROBE_TIMEOUT_NS (60000 * LG_NS_PER_MS)
#define INIT_FAILED 120 /* a probe's exit status when init returned -1 */

/* The cause word of a wait status (struct lg_module_health.cause). */
static int32_t
cause_of(int status)
{
	if (WIFSIGNALED(status))
		return WTERMSIG(status);
	if (WIFEXITED(status) && WEXITSTATUS(status) != INIT_FAILED)
		return -WEXITSTATUS(status) - 1;
	return 0;
}

/* In a freshly forked probe: die with the master, default signals, run the init, exit. */
static void
probe_main(struct lg_registry *r, uint32_t mod, pid_t parent, const int *fds, int nfds)
{
	sigset_t none;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	lg_log_set_role("probe", (int)mod);
	prctl(PR_SET_NAME, "lagless-probe");
	_exit(lg_registry_init_one(r, mod) == 0 ? 0 : INIT_FAILED);
}

static pid_t
probe_fork(struct lg_registry *r, uint32_t mod, const int *fds, int nfds)
{
	pid_t parent = getpid(), pid = fork();

	if (pid == 0)
		probe_main(r, mod, parent, fds, nfds);
	return pid;
}

/* Waits for pid until timeout_ns; SIGKILLs it past that. Returns its wait status, or -1 when
 * it was killed for the time (or could not be waited for). */
static int
wait_bounded(pid_t pid, uint64_t timeout_ns)
{
	uint64_t end = lg_now_ns() + timeout_ns;
	int status;

	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			return status;
		if (w == -1 && errno != EINTR)
			return -1;
		if (lg_now_ns() >= end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		poll(NULL, 0, 10);
	}
}

int
lg_modprobe_check(struct lg_registry *r, uint64_t timeout_ms, char *err, size_t cap)
{
	for (uint32_t i = 0; i < r->nmodules; i++) {
		char why[96];
		pid_t pid;
		int status;

		if (r->modules[i].desc.init == NULL)
			continue;
		fflush(NULL); /* the child must not write our buffered output again */
		if ((pid = probe_fork(r, i, NULL, 0)) == -1) {
			snprintf(err, cap, "module %s: cannot fork to run its init: %s",
			    r->modules[i].name, strerror(errno));
			return -1;
		}
		status = wait_bounded(pid, timeout_ms * LG_NS_PER_MS);
		if (status == 0)
			continue;
		if (status == -1)
			snprintf(why, sizeof(why), "did not return within %llu ms",
			    (unsigned long long)timeout_ms);
		else
			lg_stats_init_cause(cause_of(status), why, sizeof(why));
		snprintf(err, cap, "module %s: init %s (run once in a child by -t; at start-up its "
		    "routes would answer 503)", r->modules[i].name, why);
		return -1;
	}
	return 0;
}

/* Marks module mod failed with cause; the caller that turns it from working to failed logs. */
static int
mark_failed(struct lg_module_health *h, int32_t cause)
{
	uint32_t ok = 0;

	atomic_store(&h->cause, cause);
	atomic_fetch_add(&h->failures, 1);
	return atomic_compare_exchange_strong(&h->failed, &ok, 1);
}

int
lg_modprobe_child_died(const struct lg_registry *r, struct lg_master_page *mp,
    struct lg_proc_page *page, int status, const char *who)
{
	uint32_t in = atomic_exchange(&page->in_init, 0);
	char why[96];

	if (in == 0 || in > r->nmodules || in > LG_MODULE_HEALTH)
		return 0;
	lg_stats_init_cause(cause_of(status), why, sizeof(why));
	if (mark_failed(&mp->modules[in - 1], cause_of(status)))
		log_error("module %s: init %s in %s; its routes answer 503 until a retry of its "
		    "init succeeds (the server goes on)", r->modules[in - 1].name, why, who);
	return 1;
}

void
lg_modprobe_tick(struct lg_modprobe *p, struct lg_registry *r, struct lg_master_page *mp,
    uint64_t now, uint64_t *next, const int *fds, int nfds)
{
	for (uint32_t i = 0; i < r->nmodules && i < LG_MODULE_HEALTH; i++) {
		struct lg_module_health *h = &mp->modules[i];
		uint64_t at = atomic_load(&h->retry_ns);

		if (p->pid[i] > 0) {
			if (now >= p->deadline_ns[i])
				kill(p->pid[i], SIGKILL); /* the reaper counts it as a failure */
			continue;
		}
		if (!atomic_load(&h->failed))
			continue;
		if (at == 0) { /* newly failed: the first retry after the back-off, which keeps
				* growing if it fails again after a retry had succeeded */
			h->backoff_ns = h->backoff_ns == 0 ? RETRY_MIN_NS :
			    h->backoff_ns * 2 > RETRY_MAX_NS ? RETRY_MAX_NS : h->backoff_ns * 2;
			atomic_store(&h->retry_ns, at = now + h->backoff_ns);
		}
		if (now < at) {
			*next = at < *next ? at : *next;
			continue;
		}
		if ((p->pid[i] = probe_fork(r, i, fds, nfds)) == -1) {
			p->pid[i] = 0;
			atomic_store(&h->retry_ns, now + RETRY_MIN_NS);
			continue;
		}
		p->deadline_ns[i] = now + PROBE_TIMEOUT_NS;
		log_debug("module %s: retrying its init in probe pid=%d", r->modules[i].name,
		    (int)p->pid[i]);
	}
}

int
lg_modprobe_reaped(struct lg_modprobe *p, struct lg_registry *r, struct lg_master_page *mp,
    pid_t pid, int status)
{
	for (uint32_t i = 0; i < LG_MODULE_HEALTH && i < r->nmodules; i++) {
		struct lg_module_health *h = &mp->modules[i];
		char why[96];

		if (p->pid[i] != pid)
			continue;
		p->pid[i] = 0;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			atomic_store(&h->retry_ns, 0);
			atomic_store(&h->failed, 0);
			log_info("module %s: its init succeeded in a retry; its routes are served "
			    "again", r->modules[i].name);
			return 1;
		}
		lg_stats_init_cause(cause_of(status), why, sizeof(why));
		atomic_store(&h->cause, cause_of(status));
		atomic_fetch_add(&h->failures, 1);
		h->backoff_ns = h->backoff_ns * 2 > RETRY_MAX_NS ? RETRY_MAX_NS :
		    h->backoff_ns ? h->backoff_ns * 2 : RETRY_MIN_NS;
		atomic_store(&h->retry_ns, lg_now_ns() + h->backoff_ns);
		log_debug("module %s: init %s again in a retry; next in %llu ms", r->modules[i].name,
		    why, (unsigned long long)(h->backoff_ns / LG_NS_PER_MS));
		return 1;
	}
	return 0;
}
