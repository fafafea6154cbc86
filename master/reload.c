/* SIGHUP (master/ only): the configuration read again and a new generation started beside the
 * running one, deferred while MAX_GENS are alive, and the outcome reported to `lagless -s
 * reload` and to systemd. */
#include "master/reload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/log.h"
#include "master/app.h"
#include "master/appconf.h"
#include "master/site_up.h"
#include "kinds/registry.h"
#include "master/gen.h"
#include "master/notify.h"
#include "master/options.h"
#include "master/pidfile.h"
#include "master/precheck.h"
#include "master/respawn.h"
#include "master/state.h"

static void reload_done(struct master *m, int notified);

/* A reload whose changed apps are starting (master/app.h lg_app_stage): what it read, kept
 * until they are ready (the generation starts) or one fails (the reload is refused). */
struct lg_app_wait {
	struct lg_config cfg;  /* its registry is freed with a refusal, else the generation's */
	struct lg_sizing sz;
	char kept[360];        /* sizeof(m->gen_kept) */
	int notified;
	pid_t from;            /* the SIGHUP it answers */
	uint64_t asked_ns;
};

/* The answer to the SIGHUP that `from` sent and the master read at asked_ns: PATH.reload for
 * `lagless -s reload`, and a refusal also in every STATUS= line to systemd until a reload
 * succeeds. */
void
lg_reload_outcome(struct master *m, pid_t from, uint64_t asked_ns, int ok, const char *text)
{
	struct lg_reload_outcome o = { .seq = ++m->reload_seq, .from = from, .asked_ns = asked_ns,
	    .ok = ok };

	snprintf(o.text, sizeof(o.text), "%s", text);
	snprintf(m->reload_error, sizeof(m->reload_error), "%s", ok ? "" : text);
	if (m->pid_file[0] && lg_pidfile_put_outcome(m->pid_file, &o) == -1)
		log_error("cannot write %s.reload: %s", m->pid_file, strerror(errno));
	if (!ok && !m->stopping && lg_master_serving(m)->ready)
		lg_master_send_status(m, 0);
}

static void
refuse_reload(struct master *m, int notified, const char *why)
{
	log_error("reload refused, keeping the running configuration: %s", why);
	lg_reload_outcome(m, m->reload_from, m->reload_asked_ns, 0, why);
	reload_done(m, notified);
}

static int
same_listen(const struct lg_master_cfg *a, const struct lg_master_cfg *b)
{
	return strcmp(a->listen_addr, b->listen_addr) == 0 && a->port == b->port &&
	    memcmp(a->listen_more, b->listen_more, sizeof(a->listen_more)) == 0 &&
	    a->listen_proxy == b->listen_proxy && strcmp(a->admin_listen, b->admin_listen) == 0 &&
	    strcmp(a->agent_listen, b->agent_listen) == 0;
}

static int
count_gens(const struct master *m)
{
	int n = 0;

	for (const struct lg_gen *g = m->gens; g != NULL; g = g->next)
		n++;
	return n;
}

/* A reload that will not start a generation after RELOADING=1 was sent (a deferred one): READY=1
 * with the status line, so systemd leaves the reloading state. */
static void
reload_done(struct master *m, int notified)
{
	if (notified && lg_master_serving(m)->ready)
		lg_master_send_status(m, 1);
}

/* Appends to items (cap bytes), after ", " when it is not empty, what a moved listener stays
 * as: "NAME VALUE", or "no NAME" when value is "" (none). */
static void
kept_item(char *items, size_t cap, const char *name, const char *value)
{
	size_t n = strlen(items);

	if (value[0])
		snprintf(items + n, cap - n, "%s%s %s", n ? ", " : "", name, value);
	else
		snprintf(items + n, cap - n, "%sno %s", n ? ", " : "", name);
}

/* The listeners change only with a restart: a new configuration to that moves them keeps
 * those of the running one (run; both the master's settings), logged and said in kept (cap bytes; "" when none moved),
 * which the reload's outcome carries to -s reload: each moved one by its running value
 * ("listen 127.0.0.1:8080" for listen and port, "and the others of listen" after it with
 * more than one, "admin_listen ADDR:PORT" or "no admin_listen", the same for agent_listen). */
static void
keep_listeners(struct lg_master_cfg *to, const struct lg_master_cfg *run, char *kept, size_t cap)
{
	/* at most "listen " + main, then ", admin_listen " and ", agent_listen " with their
	 * 79-byte values: 291 bytes, and with the 50-byte lead-in below it fits in gen_kept (360) */
	char items[300] = "", main[96];

	kept[0] = '\0';
	if (same_listen(to, run))
		return;
	if (strcmp(to->listen_addr, run->listen_addr) != 0 || to->port != run->port ||
	    memcmp(to->listen_more, run->listen_more, sizeof(to->listen_more)) != 0 ||
	    to->listen_proxy != run->listen_proxy) {
		snprintf(main, sizeof(main), "%s:%d%s", run->listen_addr, run->port,
		    run->listen_more[0][0] ? " and the others of listen" : "");
		kept_item(items, sizeof(items), "listen", main);
	}
	if (strcmp(to->admin_listen, run->admin_listen) != 0)
		kept_item(items, sizeof(items), "admin_listen", run->admin_listen);
	if (strcmp(to->agent_listen, run->agent_listen) != 0)
		kept_item(items, sizeof(items), "agent_listen", run->agent_listen);
	log_warn("reload: the listeners change only with a restart; keeping %s", items);
	snprintf(kept, cap, "; the listeners change only with a restart: kept %s", items);
	memcpy(to->listen_addr, run->listen_addr, sizeof(to->listen_addr));
	memcpy(to->listen_more, run->listen_more, sizeof(to->listen_more));
	to->listen_proxy = run->listen_proxy;
	memcpy(to->admin_listen, run->admin_listen, sizeof(to->admin_listen));
	memcpy(to->agent_listen, run->agent_listen, sizeof(to->agent_listen));
	to->port = run->port;
}

/* The reload's check, bounded as a whole: a hook that never returns costs that reload, never
 * the master (the Python module bounds each import by its check_timeout_ms, up to 600 s). */
#define CHECK_MAX_MS (15 * 60 * 1000)

/* A reload's new generation from cfg and sz (its registry taken over) beside the running one
 * (the retirement of the old one waits until the new one accepts, so no connection is refused);
 * the apps' new runs, if any, become the running set, and the runs they replace stop once the
 * older generations are gone. kept: what keep_listeners kept (for the outcome). */
static void
start_generation(struct master *m, struct lg_config *cfg, struct lg_sizing *sz,
    const char *kept, int notified)
{
	struct lg_gen *g;
	char err[160];

	if (strcmp(cfg->master.error_log, m->gens->cfg.master.error_log) != 0 && lg_log_open(cfg->master.error_log) == -1)
		log_error("reload: cannot open the error log %s: %s", cfg->master.error_log, strerror(errno));
	lg_log_level = cfg->master.log_level;
	if (lg_site_up_take_apps(cfg->reg, m->apps, err, sizeof(err)) == -1) {
		lg_app_unstage(m->apps);
		refuse_reload(m, notified, err);
		return;
	}
	if ((g = lg_gen_create(m->next_id, cfg, sz, m->pid, m->gens)) == NULL) {
		snprintf(err, sizeof(err), "cannot create generation %u: %s", m->next_id,
		    strerror(errno));
		lg_app_unstage(m->apps);
		refuse_reload(m, notified, err);
		return;
	}
	lg_app_commit(m->apps, g->id);
	m->reload_gen = m->next_id++;
	m->gen_from = m->reload_from;
	m->gen_asked_ns = m->reload_asked_ns;
	snprintf(m->gen_kept, sizeof(m->gen_kept), "%s", kept);
	if (!notified)
		lg_notify_reloading(); /* READY=1 follows from check_ready once the new one accepts */
	g->next = m->gens;
	m->gens = g;
	log_info("starting generation %u (budget %d: %d loop, %d compute, queue %d)",
	    g->id, sz->budget, sz->loop_workers, sz->compute_workers, sz->queue_capacity);
	lg_respawn_spawn_all(m, g);
}

/* The checked configuration applied: read again without the hooks (they passed in the check
 * process), refused when it is not what was checked, then a new generation beside the running
 * one (the retirement of the old one waits until the new one accepts, so no connection is
 * refused). */
static void
apply_checked(struct master *m, int notified, uint64_t digest)
{
	struct lg_config cfg;
	struct lg_command cmd;
	struct lg_sizing sz;
	char err[512], kept[sizeof(m->gen_kept)];
	int rc, staged;

	lg_registry_skip_hooks = 1;
	rc = lg_options_load(m->argc, m->argv, &cfg, &cmd, err, sizeof(err));
	lg_registry_skip_hooks = 0;
	if (rc == 0 && lg_precheck_digest(cfg.reg) != digest) {
		lg_registry_free(cfg.reg);
		lg_appconf_free(cfg.master.apps);
		snprintf(err, sizeof(err), "the configuration or a module file changed while it was "
		    "checked; reload again");
		rc = -1;
	}
	if (rc == -1) {
		refuse_reload(m, notified, err);
		return;
	}
	keep_listeners(&cfg.master, &m->gens->cfg.master, kept, sizeof(kept));
	lg_sizing_read(getenv("LAGLESS_SYSROOT"), &sz);
	lg_sizing_decide(&sz, &cfg);
	lg_gen_decide_memory(&cfg, &sz);
	if (lg_sizing_check_pools(&sz, &cfg.jobs, err, sizeof(err)) == -1 ||
	    lg_gen_check_arena(&cfg, &sz, err, sizeof(err)) == -1) {
		lg_appconf_free(cfg.master.apps);
		refuse_reload(m, notified, err);
		return;
	}
	staged = lg_app_stage(m->apps, cfg.master.apps, sz.budget, err, sizeof(err));
	cfg.master.apps = NULL; /* the supervisor's now */
	if (staged == -1) {
		lg_registry_free(cfg.reg);
		refuse_reload(m, notified, err);
		return;
	}
	if (staged > 0) { /* the generation starts once the new app processes are ready */
		if ((m->app_wait = calloc(1, sizeof(*m->app_wait))) == NULL) {
			lg_app_unstage(m->apps);
			lg_registry_free(cfg.reg);
			refuse_reload(m, notified, "out of memory");
			return;
		}
		*m->app_wait = (struct lg_app_wait){ .cfg = cfg, .sz = sz, .notified = notified,
		    .from = m->reload_from, .asked_ns = m->reload_asked_ns };
		memcpy(m->app_wait->kept, kept, sizeof(kept));
		log_info("reload: %d app(s) changed; their new processes start, the new "
		    "generation once they are ready", staged);
		return;
	}
	start_generation(m, &cfg, &sz, kept, notified);
}

/* SIGHUP: the configuration is checked in a check process (lg_reload_check_step goes on when
 * it is done); an invalid one changes nothing. While MAX_GENS generations are alive (older
 * ones still draining) the request is remembered, not lost: run_timers applies it once one has
 * gone, reading the configuration then, so repeated requests coalesce into the latest
 * configuration (issue 10 item 4); one that comes while a check runs is checked again after
 * it. notified: RELOADING=1 was already sent for this request. */
void
lg_reload(struct master *m, int notified)
{
	int ngens = count_gens(m);
	int closes[2] = { m->listen_fd, m->sigfd }; /* the rest: lg_gen_forget_all */

	if (m->stopping || m->drain_at) {
		log_warn("SIGHUP ignored: stopping");
		lg_reload_outcome(m, m->reload_from, m->reload_asked_ns, 0,
		    "the server is stopping");
		return;
	}
	if (m->check.pid > 0 || m->app_wait != NULL) {
		log_info("reload: a check or new app processes are running; the configuration is "
		    "checked again once they are done");
		m->check.again = 1;
		m->check.again_notified |= notified;
		return;
	}
	if (ngens >= MAX_GENS) {
		if (!m->reload_pending)
			lg_notify_reloading();
		log_warn("reload deferred: %d generations alive (limit %d, older ones still "
		    "draining); it takes effect with the configuration read once one has gone%s",
		    ngens, MAX_GENS, m->reload_pending ? " (coalesced with the pending one)" : "");
		m->reload_pending = 1;
		return;
	}
	if (lg_precheck_start(&m->check, m->gens, m->argc, m->argv, closes, 2, CHECK_MAX_MS) ==
	    -1) {
		char err[128];

		snprintf(err, sizeof(err), "cannot start the check process: %s", strerror(errno));
		refuse_reload(m, notified, err);
		return;
	}
	if (!notified)
		lg_notify_reloading(); /* READY=1 follows when it takes effect or is refused */
	m->check.notified = 1;
	m->check.from = m->reload_from;
	m->check.asked_ns = m->reload_asked_ns;
	log_info("reload: checking the configuration in pid %d", (int)m->check.pid);
}

/* How a check that ended without a report ended, into why (cap bytes). */
static void
check_died(const struct lg_precheck *c, char *why, size_t cap)
{
	if (WIFSIGNALED(c->status))
		snprintf(why, cap, "the reload's check process was killed by signal %d (%s)",
		    WTERMSIG(c->status), strsignal(WTERMSIG(c->status)));
	else
		snprintf(why, cap, "the reload's check process exited with status %d and no report",
		    WEXITSTATUS(c->status));
}

/* The end of a check: its verdict applied (a generation started, or the reload refused) for
 * the SIGHUP that started it. */
static void
check_done(struct master *m, struct lg_precheck *c, int reported)
{
	char why[sizeof(c->rep.err)];
	uint64_t digest = c->rep.digest;
	int notified = c->notified, ok = reported && c->exited && c->rep.ok;

	if (reported && c->exited)
		snprintf(why, sizeof(why), "%s", c->rep.err);
	else if (c->exited)
		check_died(c, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "the reload's checks did not finish within %d s; "
		    "killed", CHECK_MAX_MS / 1000);
	lg_precheck_end(c);
	if (ok)
		apply_checked(m, notified, digest);
	else
		refuse_reload(m, notified, why);
}

void
lg_reload_check_step(struct master *m, uint64_t now, uint64_t *next)
{
	struct lg_precheck *c = &m->check;
	pid_t latest = m->reload_from;
	uint64_t latest_ns = m->reload_asked_ns;
	int reported;

	if (c->pid <= 0)
		return;
	reported = lg_precheck_read(c);
	if (!m->stopping && !m->drain_at && !c->exited && now < c->deadline_ns) {
		*next = c->deadline_ns < *next ? c->deadline_ns : *next;
		return;
	}
	/* answered for the SIGHUP that started it; a later one is checked again after it */
	m->reload_from = c->from;
	m->reload_asked_ns = c->asked_ns;
	if (m->stopping || m->drain_at) {
		lg_precheck_end(c);
		lg_reload_outcome(m, c->from, c->asked_ns, 0, "the server is stopping");
		c->again = 0;
	} else {
		check_done(m, c, reported);
	}
	m->reload_from = latest;
	m->reload_asked_ns = latest_ns;
	if (c->again) {
		int notified = c->again_notified;

		c->again = c->again_notified = 0;
		lg_reload(m, notified);
	}
}

/* A deferred SIGHUP: applied as soon as fewer than MAX_GENS generations are alive. */
void
lg_reload_apply_pending(struct master *m)
{
	if (!m->reload_pending || m->stopping || m->drain_at || count_gens(m) >= MAX_GENS)
		return;
	m->reload_pending = 0;
	log_info("applying the deferred reload");
	lg_reload(m, 1);
}

void
lg_reload_app_step(struct master *m)
{
	struct lg_app_wait *w = m->app_wait;
	pid_t latest = m->reload_from;
	uint64_t latest_ns = m->reload_asked_ns;
	char err[700], why[760];
	int r;

	if (w == NULL)
		return;
	r = m->stopping || m->drain_at ? -2 : lg_app_staged(m->apps, err, sizeof(err));
	if (r == 0)
		return;
	m->app_wait = NULL;
	m->reload_from = w->from;
	m->reload_asked_ns = w->asked_ns;
	if (r == 1) {
		start_generation(m, &w->cfg, &w->sz, w->kept, w->notified);
	} else {
		if (r == -2)
			lg_app_unstage(m->apps);
		snprintf(why, sizeof(why), "%s", r == -2 ? "the server is stopping" : err);
		lg_registry_free(w->cfg.reg);
		refuse_reload(m, w->notified, why);
	}
	free(w);
	m->reload_from = latest;
	m->reload_asked_ns = latest_ns;
	if (m->check.again && m->check.pid <= 0 && !m->stopping) {
		int notified = m->check.again_notified;

		m->check.again = m->check.again_notified = 0;
		lg_reload(m, notified);
	}
}

void
lg_reload_forget(struct master *m)
{
	if (m->app_wait == NULL)
		return;
	lg_registry_free(m->app_wait->cfg.reg);
	free(m->app_wait);
	m->app_wait = NULL;
}
