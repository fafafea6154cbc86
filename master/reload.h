/* SIGHUP reload and its outcome (master/ only, master/reload.c). */
#ifndef LG_MASTER_RELOAD_H
#define LG_MASTER_RELOAD_H

#include <stdint.h>
#include <sys/types.h>

struct master;

/* SIGHUP: reads the configuration again from m->argc/m->argv; a valid one starts a new
 * generation beside the running ones (m->gens, newest first), an invalid one changes nothing
 * and is reported (lg_reload_outcome). While MAX_GENS generations are alive the request is
 * deferred (m->reload_pending) for lg_reload_apply_pending. notified: RELOADING=1 was already
 * sent to systemd for this request. */
void lg_reload(struct master *m, int notified);

/* Once per master pass while a reload's check runs (master/precheck.h): once the check
 * process has exited (the reaper set m->check.exited) its report is applied, starting the new
 * generation or refusing the reload with the check's reason; past its deadline it is killed
 * and the reload refused; a stop ends it (refused: "the server is stopping"). A SIGHUP that
 * came meanwhile is then checked. Lowers *next to the deadline. */
void lg_reload_check_step(struct master *m, uint64_t now, uint64_t *next);

/* Once per master pass while a reload waits for its changed apps' new processes (master/app.h
 * lg_app_staged): once every one is ready the new generation starts; when one fails (it died
 * at start, or was not ready within its ready_timeout_ms) the reload is refused with its last
 * output, as a refused configuration is, and the running apps and generation keep serving. */
void lg_reload_app_step(struct master *m);

/* At exit: frees what a reload waiting for its apps holds, without an outcome. */
void lg_reload_forget(struct master *m);

/* A deferred reload, applied once fewer than MAX_GENS generations are alive and the master is
 * not stopping; nothing otherwise. */
void lg_reload_apply_pending(struct master *m);

/* The answer to the SIGHUP that pid `from` sent and the master read at asked_ns (lg_now_ns):
 * ok 1 (text names the generation) or 0 (text says why, kept in m->reload_error for systemd's
 * STATUS= line until a reload succeeds), written to PATH.reload beside --pid-file for
 * `lagless -s reload`, which takes it as its own answer when it names it or was asked after
 * its signal. */
void lg_reload_outcome(struct master *m, pid_t from, uint64_t asked_ns, int ok,
    const char *text);

#endif
