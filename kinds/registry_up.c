/* The registry's upstreams ([upstream NAME] sections): a table beside the routes, which name
 * them by index (struct lg_route_def upstream). */
#include "kinds/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One upstream for lagless -t: its settings, servers and the routes that proxy to it. */
static void
print_upstream(const struct lg_registry *r, uint32_t i, FILE *f)
{
	const struct lg_upstream_def *u = &r->upstreams[i];

	fprintf(f, "upstream %s (%s:%d): max_conns %u, queue %u, keepalive %u, connect_timeout_ms "
	    "%llu, first_byte_timeout_ms %llu, idle_timeout_ms %llu, tunnel_idle_timeout_ms %llu, "
	    "max_requests %llu, host %s\n",
	    u->name, u->file, u->line, u->max_conns, u->queue, u->keepalive,
	    (unsigned long long)u->connect_timeout_ms, (unsigned long long)u->first_byte_timeout_ms,
	    (unsigned long long)u->idle_timeout_ms, (unsigned long long)u->tunnel_idle_timeout_ms,
	    (unsigned long long)u->max_requests,
	    u->host[0] ? u->host : "(the client's)");
	if (u->queue_wait_target_ms > 0)
		fprintf(f, "    queue_wait_target_ms %llu, queue_wait_interval_ms %llu\n",
		    (unsigned long long)u->queue_wait_target_ms,
		    (unsigned long long)u->queue_wait_interval_ms);
	if (u->client_share > 0)
		fprintf(f, "    client_share %u%% (%u in flight and queued per client address), then "
		    "%u\n", u->client_share, lg_upstream_client_limit(u), u->client_limit_status);
	fprintf(f, "    eject_after %u, eject_ms %llu, eject_max_percent %u, retry_budget_percent %u, "
	    "retry_budget_min %u\n", u->eject_after, (unsigned long long)u->eject_ms,
	    u->eject_max_percent, u->retry_budget_percent, u->retry_budget_min);
	if (u->app[0] != '\0')
		fprintf(f, "    servers: the ready processes of app %s\n", u->app);
	for (unsigned s = 0; s < u->nservers; s++)
		fprintf(f, "    server %s\n", u->servers[s].addr);
	for (uint32_t k = 0; k < r->nroutes; k++) {
		const struct lg_route_def *rt = &r->routes[k];

		if (rt->upstream != i + 1)
			continue;
		fprintf(f, "    route %s%s (retry_on%s%s%s%s)", rt->path, rt->prefix ? "*" : "",
		    rt->retry_on ? "" : " none", rt->retry_on & LG_RETRY_CONNECT ?
		    " connect-failure" : "", rt->retry_on & LG_RETRY_502 ? " 502" : "",
		    rt->retry_on & LG_RETRY_503 ? " 503" : "");
		if (rt->max_conns > 0)
			fprintf(f, " (bulkhead: max_conns %u, queue %u)", rt->max_conns, rt->queue);
		fputc('\n', f);
	}
}

uint32_t
lg_upstream_client_limit(const struct lg_upstream_def *u)
{
	uint32_t n = (uint32_t)((uint64_t)u->max_conns * u->client_share / 100);

	return u->client_share == 0 ? 0 : n > 0 ? n : 1;
}

uint32_t
lg_registry_bulkheads(struct lg_registry *r)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < r->nroutes; k++)
		r->routes[k].bulkhead = r->routes[k].upstream && r->routes[k].max_conns ? ++n : 0;
	return n;
}

int
lg_registry_add_upstream(struct lg_registry *r, const struct lg_upstream_def *u, char *err,
    size_t cap)
{
	if (lg_registry_find_upstream(r, u->name) >= 0) {
		snprintf(err, cap, "upstream %s is declared twice", u->name);
		return -1;
	}
	struct lg_upstream_def *t = realloc(r->upstreams, (r->nupstreams + 1) * sizeof(*t));

	if (t == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	r->upstreams = t;
	r->upstreams[r->nupstreams++] = *u;
	return 0;
}

int
lg_registry_find_upstream(const struct lg_registry *r, const char *name)
{
	for (uint32_t i = 0; i < r->nupstreams; i++)
		if (strcmp(r->upstreams[i].name, name) == 0)
			return (int)i;
	return -1;
}

void
lg_registry_print_upstreams(const struct lg_registry *r, void *fp)
{
	for (uint32_t i = 0; i < r->nupstreams; i++)
		print_upstream(r, i, fp);
}
