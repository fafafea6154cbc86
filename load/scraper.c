/* The server's /metrics, from the target or from every replica, summed (load/scraper.h). */
#include "load/scraper.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "load/err.h"
#include "load/routespec.h"

/* One source from "http://HOST[:PORT][/PATH]": resolved, its GET built. */
static int
source_url(struct ll_scraper *s, struct ll_msource *m, const char *url, char *err,
           size_t errlen)
{
	char host[256], port[16], hosthdr[300];
	const char *path = strchr(url + (strncmp(url, "http://", 7) == 0 ? 7 : 0), '/');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	size_t len;
	int rc;

	if (ll_routespec_url(url, host, sizeof(host), port, sizeof(port), hosthdr,
	                     sizeof(hosthdr)) == -1 || strpbrk(url, "?# ") != NULL)
		return ll_fail(err, errlen, "--metrics %s: not http://HOST[:PORT][/PATH] (a replica's "
		               "/metrics, e.g. http://10.0.0.1:8080/metrics)", url);
	if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0)
		return ll_fail(err, errlen, "--metrics %s: %s: %s", url, host, gai_strerror(rc));
	memcpy(&m->addr, ai->ai_addr, ai->ai_addrlen);
	m->addrlen = ai->ai_addrlen;
	freeaddrinfo(ai);
	m->head = ll_engine_get_head(s->e, path != NULL ? path : "/metrics", hosthdr, &len);
	if (m->head == NULL)
		return ll_fail(err, errlen, "out of memory");
	return 0;
}

int
ll_scraper_init(struct ll_scraper *s, struct ll_engine *e, const char *urls, char *err,
                size_t errlen)
{
	char *copy, *tok, *save = NULL;
	size_t len;
	unsigned i;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	s->e = e;
	s->given = urls != NULL;
	if (urls == NULL) {
		memcpy(&s->src[0].addr, &e->addr, e->addrlen);
		s->src[0].addrlen = e->addrlen;
		s->src[0].head = ll_engine_get_head(e, "/metrics", NULL, &len);
		s->n = 1;
		rc = s->src[0].head == NULL ? ll_fail(err, errlen, "out of memory") : 0;
	} else if ((copy = strdup(urls)) == NULL) {
		return ll_fail(err, errlen, "out of memory");
	} else {
		for (tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save))
			rc = s->n == LL_SCRAPE_SERVERS ?
			     ll_fail(err, errlen, "--metrics: at most %d URLs", LL_SCRAPE_SERVERS) :
			     source_url(s, &s->src[s->n++], tok, err, errlen);
		free(copy);
		if (rc == 0 && s->n == 0)
			rc = ll_fail(err, errlen, "--metrics: no URL (http://HOST:PORT/metrics,...)");
	}
	for (i = 0; i < s->n && rc == 0; i++) {
		s->src[i].owner = s;
		if ((s->src[i].buf = malloc(LL_SCRAPER_BODY)) == NULL)
			rc = ll_fail(err, errlen, "out of memory");
	}
	return rc;
}

void
ll_scraper_free(struct ll_scraper *s)
{
	unsigned i;

	ll_scraper_stop(s);
	for (i = 0; i < LL_SCRAPE_SERVERS; i++) {
		free(s->src[i].head);
		free(s->src[i].buf);
	}
	memset(s, 0, sizeof(*s));
}

/* ---- one request to a source */

static void
send_req(struct ll_msource *m)
{
	memset(&m->req, 0, sizeof(m->req));
	m->req.status = LL_LERR_IO;
	m->req.iov[0].iov_base = m->head;
	m->req.iov[0].iov_len = strlen(m->head);
	m->req.body = m->buf;
	m->req.body_cap = LL_SCRAPER_BODY;
	ll_lconn_send(&m->conn, &m->req);
}

/* Parses the answer r of source m into m->m; m->ok says whether it is usable. */
static void
take(struct ll_msource *m, const struct ll_lconn *c, const struct ll_lreq *r)
{
	size_t len = c->resp.body_len < LL_SCRAPER_BODY ? c->resp.body_len : LL_SCRAPER_BODY - 1;

	m->ok = r->status == 200 && !c->resp.body_cut && ll_scrape_parse(&m->m, m->buf, len) == 0;
}

static void
probe_done(struct ll_lconn *c, struct ll_lreq *r)
{
	take(c->ctx, c, r);
	ev_break(c->loop, EVBREAK_ONE);
}

static void
probe_closed(struct ll_lconn *c)
{
}

int
ll_scraper_probe(struct ll_scraper *s, struct ll_scrape *out)
{
	static const struct ll_lconn_ops ops = { probe_done, probe_closed };
	int lagless = 1;
	unsigned i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < s->n; i++) {
		struct ll_msource *m = &s->src[i];

		m->ok = 0;
		if (ll_lconn_open(&m->conn, s->e->loop, (struct sockaddr *)&m->addr, m->addrlen,
		                  s->e->timeout_s, &ops, m) == -1)
			return -1;
		send_req(m);
		ev_run(s->e->loop, 0);
		ll_lconn_close(&m->conn);
		if (m->req.status == LL_LERR_CONNECT || m->req.status == LL_LERR_TIMEOUT)
			return -1;
		if (!m->ok) {
			lagless = 0;
			continue;
		}
		lagless = lagless && m->m.lagless;
		ll_scrape_add(out, &m->m);
	}
	return lagless;
}

/* ---- the run phase's periodic scrapes */

static void
scrape_done(struct ll_lconn *c, struct ll_lreq *r)
{
	struct ll_msource *m = c->ctx;
	struct ll_scraper *s = m->owner;
	unsigned i;

	take(m, c, r);
	if (r->end_ns > s->end_ns)
		s->end_ns = r->end_ns;
	if (s->waiting == 0 || --s->waiting > 0)
		return;
	/* every answer is in: one point of their sum, when each was whole */
	memset(&s->sum, 0, sizeof(s->sum));
	for (i = 0; i < s->n; i++) {
		if (!s->src[i].ok)
			return;
		ll_scrape_add(&s->sum, &s->src[i].m);
	}
	ll_engine_add_point(s->e, &s->sum, s->sent_ns, s->end_ns);
}

static void
scrape_closed(struct ll_lconn *c)
{
	struct ll_msource *m = c->ctx;

	m->open = 0;
}

static void
on_scrape(struct ev_loop *loop, ev_timer *w, int revents)
{
	static const struct ll_lconn_ops ops = { scrape_done, scrape_closed };
	struct ll_scraper *s = w->data;
	unsigned i;

	if (s->waiting > 0)
		return;
	for (i = 0; i < s->n; i++) {
		struct ll_msource *m = &s->src[i];

		if (!m->open) {
			if (ll_lconn_open(&m->conn, loop, (struct sockaddr *)&m->addr, m->addrlen,
			                  s->e->timeout_s, &ops, m) == -1)
				return;
			m->open = 1;
		} else if (m->conn.state != LL_LC_IDLE) {
			return;
		}
	}
	s->sent_ns = lg_now_ns();
	s->end_ns = 0;
	s->waiting = s->n;
	for (i = 0; i < s->n; i++)
		send_req(&s->src[i]);
}

void
ll_scraper_start(struct ll_scraper *s, double period_s)
{
	ev_timer_init(&s->timer, on_scrape, 0, period_s);
	s->timer.data = s;
	ev_timer_start(s->e->loop, &s->timer);
	s->running = 1;
}

void
ll_scraper_stop(struct ll_scraper *s)
{
	unsigned i;

	if (!s->running)
		return;
	ev_timer_stop(s->e->loop, &s->timer);
	for (i = 0; i < s->n; i++)
		if (s->src[i].open)
			ll_lconn_close(&s->src[i].conn);
	s->waiting = 0;
	s->running = 0;
}
