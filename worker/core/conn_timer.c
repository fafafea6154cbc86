/* The connection's limits in time (worker/core/conn_timer.h, docs/HTTP.md): when each is due,
 * and the one timer that enforces them. A leaf: what the core does when a limit is reached is
 * conn.c's (conn_timer), so the calls between the two go one way. */
#include "worker/core/conn_timer.h"

#include <sys/ioctl.h>
#include <linux/sockios.h>

#include "worker/core/conn_int.h"

void
lg_conn_arm_timer(struct lg_conn *c, double seconds)
{
	struct ev_loop *ev = c->w->ev;

	c->tmo.due = ev_now(ev) + seconds;
	if (ev_is_active(&c->timer) && ev_timer_remaining(ev, &c->timer) <= seconds)
		return; /* fires no later: lg_conn_timer_early arms it for the rest then */
	ev_timer_stop(ev, &c->timer);
	ev_timer_set(&c->timer, seconds, 0.);
	ev_timer_start(ev, &c->timer);
}

double
lg_conn_timer_left(const struct lg_conn *c)
{
	if (c->state == LG_CONN_JOB || !ev_is_active(&c->timer))
		return ev_timer_remaining(c->w->ev, (ev_timer *)&c->timer);
	return c->tmo.due - ev_now(c->w->ev);
}

void
lg_conn_wait_job(struct lg_conn *c, uint64_t deadline_ms)
{
	c->state = LG_CONN_JOB;
	ev_timer_stop(c->w->ev, &c->timer);
	ev_timer_set(&c->timer, deadline_ms / 1000., 0.);
	ev_timer_start(c->w->ev, &c->timer);
}

void
lg_conn_stop_timer(struct lg_conn *c)
{
	ev_timer_stop(c->w->ev, &c->timer);
}

int
lg_conn_timer_early(struct lg_conn *c)
{
	double left = c->tmo.due - ev_now(c->w->ev);

	/* Not yet due only when clearly in the future: a limit within the slack is taken as
	 * reached here and by conn_timer's classification alike (lg_conn_past). */
	if (c->state == LG_CONN_JOB || left <= LG_CONN_TIMER_SLACK)
		return 0;
	ev_timer_set(&c->timer, left, 0.);
	ev_timer_start(c->w->ev, &c->timer);
	return 1;
}

int
lg_conn_past(const struct lg_conn *c, ev_tstamp at)
{
	return at > 0 && ev_now(c->w->ev) + LG_CONN_TIMER_SLACK >= at;
}

/* A body is being received: into a slot (BODY), or through the parser (chunked, or any body
 * of an inline route). */
int
lg_conn_in_body(const struct lg_conn *c)
{
	return c->state == LG_CONN_BODY || (c->state == LG_CONN_HEAD && c->http.head_seen &&
	    !c->http.complete && !c->http.rejected && !c->http.status);
}

/* Bytes of the current request body received so far. */
uint64_t
lg_conn_body_bytes(const struct lg_conn *c)
{
	return c->state == LG_CONN_BODY ? c->w->ops->body_got(c) : c->http.body_seen;
}

/* When a body holding a transit buffer falls below --min-upload-rate: body-timeout-ms after it
 * began, plus 1/rate s per byte received (Apache mod_reqtimeout's MinRate); 0 when off. */
ev_tstamp
lg_conn_upload_due(const struct lg_conn *c)
{
	const struct lg_config *cfg = c->w->env->cfg;

	if (!(c->held & LG_CONN_HELD_BUFFER) || cfg->http.min_upload_rate == 0)
		return 0;
	return c->tmo.body_at + cfg->http.body_timeout_ms / 1e3 +
	    (double)lg_conn_body_bytes(c) / (double)cfg->http.min_upload_rate;
}

/* The same for the response: write-timeout-ms after it began plus 1/rate s per byte the client
 * took (--min-download-rate); 0 when off. */
ev_tstamp
lg_conn_download_due(const struct lg_conn *c)
{
	const struct lg_config *cfg = c->w->env->cfg;

	if (cfg->conn.min_download_rate == 0)
		return 0;
	return c->tmo.write_at + cfg->conn.write_timeout_ms / 1e3 +
	    (double)c->tmo.wdelivered / (double)cfg->conn.min_download_rate;
}

static ev_tstamp
earliest(ev_tstamp at, ev_tstamp due)
{
	return due > 0 && due < at ? due : at;
}

/* When the whole request (head, body, trailers) must be in: --request-deadline-ms after its
 * first byte (accept, for the first request of a connection), on every path; by default the
 * head timeout plus the body deadline, so it cuts nothing those allow. 0 between requests. */
ev_tstamp
lg_conn_request_due(const struct lg_conn *c)
{
	const struct lg_config *cfg = c->w->env->cfg;
	uint64_t ms = cfg->http.request_deadline_ms ? cfg->http.request_deadline_ms :
	    cfg->http.head_timeout_ms + cfg->http.body_deadline_ms;

	return c->tmo.req_at > 0 ? c->tmo.req_at + ms / 1e3 : 0;
}

/* Arms the connection's timer for the limit of its state (docs/HTTP.md): write stall (from the
 * client's last progress) and minimum download rate, body silence and (holding a transit
 * buffer) body deadline and minimum upload rate, head deadline from the request's first byte,
 * or keep-alive idle. A job's deadline is armed by lg_conn_wait_job. */
void
lg_conn_rearm(struct lg_conn *c)
{
	const struct lg_config *cfg = c->w->env->cfg;
	ev_tstamp now = ev_now(c->w->ev), at;

	if (c->state == LG_CONN_JOB || c->state == LG_CONN_PROXY)
		return;
	if (c->state == LG_CONN_LINGER) {
		at = earliest(c->tmo.linger_until, c->tmo.linger_seen + cfg->conn.lingering_timeout_ms / 1e3);
	} else if (c->state == LG_CONN_WRITE) {
		at = earliest(c->tmo.wprogress_at + cfg->conn.write_timeout_ms / 1e3, lg_conn_download_due(c));
	} else if (lg_conn_in_body(c)) {
		if (c->tmo.body_at == 0)
			c->tmo.body_at = now;
		at = now + cfg->http.body_timeout_ms / 1e3;
		if ((c->held & LG_CONN_HELD_BUFFER) && c->tmo.body_at + cfg->http.body_deadline_ms / 1e3 < at)
			at = c->tmo.body_at + cfg->http.body_deadline_ms / 1e3;
		at = earliest(earliest(at, lg_conn_upload_due(c)), lg_conn_request_due(c));
	} else if (c->tmo.req_at > 0) {
		at = earliest(c->tmo.req_at + cfg->http.head_timeout_ms / 1e3, lg_conn_request_due(c));
	} else {
		at = now + cfg->conn.keepalive_timeout_ms / 1e3;
	}
	lg_conn_arm_timer(c, at > now ? at - now : 1e-3);
}

/* Records how many response bytes the client has taken (written minus still unsent) and, when
 * that grew, the time of that progress. */
void
lg_conn_note_delivered(struct lg_conn *c)
{
	int unsent = 0;
	uint64_t got = c->out.woff;

	if (ioctl(c->fd, SIOCOUTQ, &unsent) == 0 && unsent > 0)
		got = (uint64_t)unsent < got ? got - (uint64_t)unsent : 0;
	if (got > c->tmo.wdelivered) {
		c->tmo.wdelivered = got;
		c->tmo.wprogress_at = ev_now(c->w->ev);
	}
}
