/* A reload's checks off the master's loop (master/ only, master/precheck.c). Reading a
 * configuration runs the modules' check hooks, and a Python route's hook imports the callable
 * in a child and waits for it (seconds, up to its check_timeout_ms): in the master that stopped
 * the poll loop, so the HAProxy agent, deadline kills, respawns and signals waited behind it
 * (issue 33). A SIGHUP now forks a check process that reads the configuration with every hook
 * and reports; its report pipe is one more descriptor of the master's poll, and the reload goes
 * on when it has reported and exited: the master reads the configuration again without the
 * hooks (lg_registry_skip_hooks) and starts the generation only when what it read is what was
 * checked (lg_precheck_digest). */
#ifndef LG_MASTER_PRECHECK_H
#define LG_MASTER_PRECHECK_H

#include <stdint.h>
#include <sys/types.h>

struct lg_gen;
struct lg_registry;

/* The check process's one message, written with one write(2) (under PIPE_BUF: whole or not at
 * all) just before it exits. */
struct lg_precheck_report {
	uint32_t magic;  /* LG_PRECHECK_MAGIC */
	int32_t ok;      /* 1: the configuration passed every check; 0: err says why */
	uint64_t digest; /* lg_precheck_digest of the registry it built, when ok */
	char err[512];
};

#define LG_PRECHECK_MAGIC 0x6c676b63u

/* One running check (none while pid is 0). */
struct lg_precheck {
	pid_t pid;            /* the check process; it leads its own process group */
	int fd;               /* the read end of its report pipe, -1 none */
	uint64_t deadline_ns; /* CLOCK_MONOTONIC past which its group is SIGKILLed */
	int notified;         /* RELOADING=1 was already sent for the reload it checks */
	pid_t from;           /* the SIGHUP it answers: its sender and when it was read */
	uint64_t asked_ns;
	int again;            /* a SIGHUP came while it ran: check again once it is done */
	int again_notified;   /* RELOADING=1 was already sent for that one */
	int exited;           /* the reaper saw it exit, with status (waitpid(2)) */
	int status;
	size_t got;           /* bytes of rep read so far */
	struct lg_precheck_report rep;
};

/* What a check and the master's second reading must agree on: the modules (name, file path,
 * the XXH3 hash of the file's bytes, their keys) and the routes (path, prefix, methods,
 * handler, kind, their keys, file and line) of r. Two readings of the same files give the
 * same value; a file edited between them almost surely another. What the hooks never see (a
 * route's deadline_ms, the other settings) is not in it: the master applies its own reading. */
uint64_t lg_precheck_digest(const struct lg_registry *r);

/* Forks the check process for a reload: it drops the master's descriptors (closes[0..n-1],
 * -1 ignored, and what lg_gen_forget_all closes), leads a process group, dies with the master,
 * reads the configuration from argc/argv with every hook (lg_options_load) and writes its
 * report. Fills c (pid, fd, deadline: now + timeout_ms). Returns 0, or -1 with errno (pipe,
 * fork). */
int lg_precheck_start(struct lg_precheck *c, struct lg_gen *all, int argc, char **argv,
    const int *closes, int n, uint64_t timeout_ms);

/* Reads what the check has written so far (non-blocking). Returns 1 once the whole report is
 * in c->rep (a malformed one reads as a refusal), else 0. */
int lg_precheck_read(struct lg_precheck *c);

/* Ends c: SIGKILLs its process group when it has not exited (the reaper reaps it later), closes
 * the pipe, and clears it except `again`. */
void lg_precheck_end(struct lg_precheck *c);

#endif
