/* The upstream families of /metrics (stats/upstream_metrics.h). */
#include "stats/upstream_metrics.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "shm/codel.h"
#include "shm/stats.h"
#include "shm/upeject.h"

size_t
lg_up_metrics_bound(uint32_t n)
{
	return 4096 + (size_t)n * (24 + LG_UPR_COUNT + LG_UPRT_COUNT + 2 * LG_UPADM_SERVERS +
	    4 * (LG_STATS_BOUNDS + 3)) * 160;
}

static void
family(struct lg_buf *b, const char *name, const char *type, const char *help)
{
	lg_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A per-loop gauge of record a summed over nloops loops. */
static uint64_t
sum_loops(const _Atomic uint32_t *v, uint32_t nloops)
{
	uint64_t s = 0;

	for (uint32_t i = 0; i < nloops && i < LG_UPADM_LOOPS; i++)
		s += atomic_load(&v[i]);
	return s;
}

static void
gauges(struct lg_buf *b, const struct lg_upshm *u, const char *const *names)
{
	family(b, "lagless_upstream_in_flight", "gauge",
	    "Requests in flight to the upstream, the whole server (at most max_conns).");
	for (uint32_t i = 0; i < u->nups; i++) {
		uint32_t in, q;

		lg_upadm_counts(&u->adm[i], &in, &q);
		lg_buf_printf(b, "lagless_upstream_in_flight{upstream=\"%s\"} %u\n", names[i], in);
	}
	family(b, "lagless_upstream_queue_depth", "gauge",
	    "Requests waiting for a place of the upstream, the whole server (at most queue).");
	for (uint32_t i = 0; i < u->nups; i++) {
		uint32_t in, q;

		lg_upadm_counts(&u->adm[i], &in, &q);
		lg_buf_printf(b, "lagless_upstream_queue_depth{upstream=\"%s\"} %u\n", names[i], q);
	}
	family(b, "lagless_upstream_load", "gauge",
	    "(in flight + queued) / max_conns: 1 = every place taken, nobody waiting, at least 2 "
	    "while CoDel sheds (the agent weight counts it as a pool's offered load).");
	for (uint32_t i = 0; i < u->nups; i++) {
		struct lg_upshm one = { .adm = &u->adm[i], .n = 1, .nups = 1 };

		lg_buf_printf(b, "lagless_upstream_load{upstream=\"%s\"} %.3f\n", names[i],
		    lg_upshm_load(&one));
	}
	family(b, "lagless_upstream_max_conns", "gauge", "The upstream's max_conns.");
	for (uint32_t i = 0; i < u->nups; i++)
		lg_buf_printf(b, "lagless_upstream_max_conns{upstream=\"%s\"} %u\n", names[i],
		    u->adm[i].max_conns);
	family(b, "lagless_upstream_queue_capacity", "gauge", "The upstream's queue.");
	for (uint32_t i = 0; i < u->nups; i++)
		lg_buf_printf(b, "lagless_upstream_queue_capacity{upstream=\"%s\"} %u\n", names[i],
		    u->adm[i].queue);
	family(b, "lagless_upstream_overloaded", "gauge",
	    "1 while CoDel judges the upstream's queue standing (new requests refused, queued ones "
	    "shed: queue_wait_target_ms), else 0.");
	for (uint32_t i = 0; i < u->nups; i++)
		lg_buf_printf(b, "lagless_upstream_overloaded{upstream=\"%s\"} %d\n", names[i],
		    lg_codel_overloaded(&u->adm[i].codel));
}

/* The route bulkheads' families: records nups..n-1, labelled route="names[i]". */
static void
bulkheads(struct lg_buf *b, const struct lg_upshm *u, const char *const *names)
{
	static const char *const what[3] = { "in_flight", "queue_depth", "full_total" };
	static const char *const help[3] = {
		("Requests of the route in flight to its upstream, the whole server (at most the "
		"route's max_conns)."),
		"Requests of the route waiting for a place of its bulkhead, the whole server.",
		"Requests of the route answered 503 because its bulkhead and queue were full." };

	for (int k = 0; k < 3 && u->n > u->nups; k++) {
		char name[64];

		snprintf(name, sizeof(name), "lagless_route_bulkhead_%s", what[k]);
		family(b, name, k == 2 ? "counter" : "gauge", help[k]);
		for (uint32_t i = u->nups; i < u->n; i++) {
			uint32_t in, q;

			lg_upadm_counts(&u->adm[i], &in, &q);
			lg_buf_printf(b, "%s{route=\"%s\"} %" PRIu64 "\n", name, names[i],
			    k == 0 ? (uint64_t)in : k == 1 ? (uint64_t)q :
			    atomic_load(&u->adm[i].errors[LG_UPR_FULL]));
		}
	}
}

/* The time histograms (seconds, Prometheus convention) of every upstream. */
static void
histograms(struct lg_buf *b, const struct lg_upshm *u, const char *const *names)
{
	static const struct {
		size_t off;
		const char *name, *help;
	} hs[] = {
		{ offsetof(struct lg_upadm, queue_wait), "lagless_upstream_queue_wait_seconds",
		  "Time from a proxied request's arrival to its in-flight place (0 when at once)." },
		{ offsetof(struct lg_upadm, connect), "lagless_upstream_connect_seconds",
		  "Time to connect to the upstream's server, new connections." },
		{ offsetof(struct lg_upadm, first_byte), "lagless_upstream_first_byte_seconds",
		  "Time from the in-flight place to the answer's first byte." },
		{ offsetof(struct lg_upadm, total), "lagless_upstream_request_seconds",
		  "Time from a proxied request's arrival to its answer's end." },
	};

	for (size_t k = 0; k < sizeof(hs) / sizeof(hs[0]); k++) {
		family(b, hs[k].name, "histogram", hs[k].help);
		for (uint32_t i = 0; i < u->nups; i++) {
			const struct lg_hist *h = (const struct lg_hist *)((const char *)&u->adm[i] +
			    hs[k].off);
			uint64_t cum = 0;

			for (unsigned j = 0; j <= LG_STATS_BOUNDS; j++) {
				cum += atomic_load(&((struct lg_hist *)h)->bucket[j]);
				if (j < LG_STATS_BOUNDS)
					lg_buf_printf(b, "%s_bucket{upstream=\"%s\",le=\"%g\"} %" PRIu64
					    "\n", hs[k].name, names[i], (double)lg_stats_time_bounds[j] / 1e9,
					    cum);
				else
					lg_buf_printf(b, "%s_bucket{upstream=\"%s\",le=\"+Inf\"} %" PRIu64
					    "\n", hs[k].name, names[i], cum);
			}
			lg_buf_printf(b, "%s_sum{upstream=\"%s\"} %.9f\n%s_count{upstream=\"%s\"} %"
			    PRIu64 "\n", hs[k].name, names[i],
			    (double)atomic_load(&((struct lg_hist *)h)->sum_ns) / 1e9, hs[k].name,
			    names[i], cum);
		}
	}
}

/* The tunnels' families (an upgrade relayed after a 101: worker/upstream/up_tunnel.c). */
static void
tunnel_metrics(struct lg_buf *b, const struct lg_upshm *u, const char *const *names,
    uint32_t nloops)
{
	static const char *const dir[2] = { "to_app", "to_client" };

	family(b, "lagless_upstream_tunnels", "gauge",
	    "Tunnels open (upgrades the app accepted with 101), each holding an in-flight place.");
	for (uint32_t i = 0; i < u->nups; i++)
		lg_buf_printf(b, "lagless_upstream_tunnels{upstream=\"%s\"} %" PRIu64 "\n", names[i],
		    sum_loops(u->adm[i].tunnels, nloops));
	family(b, "lagless_upstream_tunnels_opened_total", "counter",
	    "Tunnels opened (upgrades the app accepted with 101).");
	for (uint32_t i = 0; i < u->nups; i++)
		lg_buf_printf(b, "lagless_upstream_tunnels_opened_total{upstream=\"%s\"} %" PRIu64
		    "\n", names[i], atomic_load(&u->adm[i].tunnels_opened));
	family(b, "lagless_upstream_tunnel_bytes_total", "counter",
	    "Bytes relayed through tunnels, by direction.");
	for (uint32_t i = 0; i < u->nups; i++)
		for (int d = 0; d < 2; d++)
			lg_buf_printf(b, "lagless_upstream_tunnel_bytes_total{upstream=\"%s\","
			    "direction=\"%s\"} %" PRIu64 "\n", names[i], dir[d],
			    atomic_load(&u->adm[i].tunnel_bytes[d]));
}

/* Outlier ejection and retries (shm/upeject.h). */
static void
resilience(struct lg_buf *b, const struct lg_upshm *u, const char *const *names)
{
	static const char *const why[LG_UPRT_COUNT] = { "kept_connection", "connect", "502",
	    "503" };

	family(b, "lagless_upstream_retries_by_reason_total", "counter",
	    "Requests sent again: after a kept connection failed (kept_connection), or to another "
	    "server after a connect failure or a 502 or 503 answer (the route's retry_on).");
	for (uint32_t i = 0; i < u->nups; i++)
		for (int k = 0; k < LG_UPRT_COUNT; k++)
			lg_buf_printf(b, "lagless_upstream_retries_by_reason_total{upstream=\"%s\","
			    "reason=\"%s\"} %" PRIu64 "\n", names[i], why[k],
			    atomic_load(&u->adm[i].retried[k]));
	family(b, "lagless_upstream_retry_budget_exhausted_total", "counter",
	    "Retries to another server the retry budget refused (retry_budget_percent).");
	for (uint32_t i = 0; i < u->nups; i++)
		lg_buf_printf(b, "lagless_upstream_retry_budget_exhausted_total{upstream=\"%s\"} %"
		    PRIu64 "\n", names[i], atomic_load(&u->adm[i].retry_refused));
	family(b, "lagless_upstream_ejected_servers", "gauge",
	    "Servers of the upstream ejected now (outlier ejection: eject_after failures in a row).");
	for (uint32_t i = 0; i < u->nups; i++)
		lg_buf_printf(b, "lagless_upstream_ejected_servers{upstream=\"%s\"} %d\n", names[i],
		    __builtin_popcount(lg_upadm_ejected(&u->adm[i])));
	family(b, "lagless_upstream_ejections_total", "counter",
	    "Times a server of the upstream was ejected.");
	for (uint32_t i = 0; i < u->nups; i++)
		for (uint32_t s = 0; s < u->adm[i].nservers; s++)
			lg_buf_printf(b, "lagless_upstream_ejections_total{upstream=\"%s\",server=\"%s\"} "
			    "%" PRIu64 "\n", names[i], u->adm[i].srv[s].addr,
			    atomic_load(&u->adm[i].srv[s].ejections));
}

int
lg_up_render_metrics(struct lg_buf *b, const struct lg_upshm *u, const char *const *names,
    uint32_t nloops)
{
	static const char *const cls[6] = { "other", "1xx", "2xx", "3xx", "4xx", "5xx" };

	if (u == NULL || u->n == 0)
		return 0;
	gauges(b, u, names);
	bulkheads(b, u, names);
	family(b, "lagless_upstream_requests_total", "counter",
	    "Proxied requests answered, by status class (the app's answers and lagless's own).");
	for (uint32_t i = 0; i < u->nups; i++)
		for (int k = 1; k < 6; k++)
			lg_buf_printf(b, "lagless_upstream_requests_total{upstream=\"%s\",code=\"%s\"} "
			    "%" PRIu64 "\n", names[i], cls[k], atomic_load(&u->adm[i].requests[k]));
	family(b, "lagless_upstream_errors_total", "counter",
	    "Answers lagless wrote itself instead of the app's (503 full, 504 deadline, 502 "
	    "refused, reset or invalid), and answers cut short, by reason.");
	for (uint32_t i = 0; i < u->nups; i++)
		for (int r = 0; r < LG_UPR_COUNT; r++)
			lg_buf_printf(b, "lagless_upstream_errors_total{upstream=\"%s\",reason=\"%s\"} "
			    "%" PRIu64 "\n", names[i], lg_up_reason_str((enum lg_up_reason)r),
			    atomic_load(&u->adm[i].errors[r]));
	family(b, "lagless_upstream_retries_total", "counter",
	    "Requests sent again on a new connection after a kept one failed before any answer.");
	for (uint32_t i = 0; i < u->nups; i++)
		lg_buf_printf(b, "lagless_upstream_retries_total{upstream=\"%s\"} %" PRIu64 "\n",
		    names[i], atomic_load(&u->adm[i].retries));
	resilience(b, u, names);
	family(b, "lagless_upstream_connections", "gauge",
	    "Connections to the upstream's servers, by state: idle (kept) or busy.");
	for (uint32_t i = 0; i < u->nups; i++) {
		lg_buf_printf(b, "lagless_upstream_connections{upstream=\"%s\",state=\"idle\"} %"
		    PRIu64 "\n", names[i], sum_loops(u->adm[i].idle, nloops));
		lg_buf_printf(b, "lagless_upstream_connections{upstream=\"%s\",state=\"busy\"} %"
		    PRIu64 "\n", names[i], sum_loops(u->adm[i].busy, nloops));
	}
	histograms(b, u, names);
	family(b, "lagless_upstream_connections_opened_total", "counter",
	    "Connections opened to the upstream's servers.");
	for (uint32_t i = 0; i < u->nups; i++)
		lg_buf_printf(b, "lagless_upstream_connections_opened_total{upstream=\"%s\"} %" PRIu64
		    "\n", names[i], atomic_load(&u->adm[i].conns_opened));
	tunnel_metrics(b, u, names, nloops);
	return b->overflow ? -1 : 0;
}

int
lg_up_render_status(struct lg_buf *b, const struct lg_upshm *u, const char *const *names,
    uint32_t nloops)
{
	lg_buf_printf(b, "\"upstreams\":[");
	for (uint32_t i = 0; u != NULL && i < u->nups; i++) {
		uint32_t in, q, out = lg_upadm_ejected(&u->adm[i]);

		lg_upadm_counts(&u->adm[i], &in, &q);
		lg_buf_printf(b, "%s{\"name\":\"%s\",\"in_flight\":%u,\"queued\":%u,\"max_conns\":%u,"
		    "\"queue\":%u,\"connections_idle\":%" PRIu64 ",\"connections_busy\":%" PRIu64
		    ",\"overloaded\":%s,\"tunnels\":%" PRIu64 ",\"servers\":[", i ? "," : "",
		    names[i], in, q, u->adm[i].max_conns, u->adm[i].queue,
		    sum_loops(u->adm[i].idle, nloops), sum_loops(u->adm[i].busy, nloops),
		    lg_codel_overloaded(&u->adm[i].codel) ? "true" : "false",
		    sum_loops(u->adm[i].tunnels, nloops));
		for (uint32_t s = 0; s < u->adm[i].nservers; s++)
			lg_buf_printf(b, "%s{\"address\":\"%s\",\"state\":\"%s\",\"ejections\":%"
			    PRIu64 "}", s ? "," : "", u->adm[i].srv[s].addr, out & (1u << s) ?
			    "ejected" : "in", atomic_load(&u->adm[i].srv[s].ejections));
		lg_buf_printf(b, "]}");
	}
	lg_buf_printf(b, "],\"bulkheads\":[");
	for (uint32_t i = u != NULL ? u->nups : 0; u != NULL && i < u->n; i++) {
		uint32_t in, q;

		lg_upadm_counts(&u->adm[i], &in, &q);
		lg_buf_printf(b, "%s{\"route\":\"%s\",\"in_flight\":%u,\"queued\":%u,"
		    "\"max_conns\":%u,\"queue\":%u}", i > u->nups ? "," : "", names[i], in, q,
		    u->adm[i].max_conns, u->adm[i].queue);
	}
	lg_buf_printf(b, "]");
	return b->overflow ? -1 : 0;
}
