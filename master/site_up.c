#include "master/site_up.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/value.h"
#include "master/app.h"

static int
fail(char *err, size_t cap, const char *file, const struct lg_kv *kv, const char *why)
{
	snprintf(err, cap, "%s:%d: key '%s' = '%.*s%s': %s", file, kv->line, kv->key,
	    LG_CLIP(kv->value), why);
	return -1;
}

/* unix:/path, ADDR:PORT, [v6]:PORT or NAME:PORT (resolved now, the first address taken) into
 * s. Returns 0, or -1 with why (cap bytes). */
static int
parse_server(const char *v, struct lg_upstream_server *s, char *why, size_t cap)
{
	char host[LG_PATH_MAX];
	const char *colon;
	struct addrinfo hints, *res = NULL;

	memset(s, 0, sizeof(*s));
	if (strlen(v) >= sizeof(s->addr))
		return snprintf(why, cap, "an address under %d bytes", LG_PATH_MAX), -1;
	snprintf(s->addr, sizeof(s->addr), "%s", v);
	if (strncmp(v, "unix:", 5) == 0) {
		struct sockaddr_un *un = (struct sockaddr_un *)&s->sa;

		if (v[5] != '/' || strlen(v + 5) >= sizeof(un->sun_path))
			return snprintf(why, cap, "expected unix:/absolute/path (under %zu bytes)",
			    sizeof(un->sun_path)), -1;
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, v + 5, strlen(v + 5) + 1);
		s->salen = (socklen_t)sizeof(*un);
		return 0;
	}
	colon = strrchr(v, ':');
	if (colon == NULL || colon == v || colon[1] == '\0' || strspn(colon + 1, "0123456789") !=
	    strlen(colon + 1) || atoi(colon + 1) < 1 || atoi(colon + 1) > 65535)
		return snprintf(why, cap, "expected unix:/path, ADDR:PORT or [v6]:PORT (port 1 to "
		    "65535)"), -1;
	size_t n = (size_t)(colon - v);
	if (v[0] == '[' && v[n - 1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)(n - 2), v + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)n, v);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || res == NULL)
		return snprintf(why, cap, "cannot resolve '%.200s'", host), -1;
	memcpy(&s->sa, res->ai_addr, res->ai_addrlen);
	s->salen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* A key of outlier ejection or the retry budget (shm/upeject.h; Envoy's outlier detection and
 * retry budget) into u. Returns 0 (taken), 1 (none of them), or -1 with why. */
static int
resilience_key(struct lg_upstream_def *u, const struct lg_kv *kv, char *why, size_t cap)
{
	static const struct {
		const char *key;
		uint64_t max;
		size_t off;
	} keys[] = {
		{ "eject_after", 1000, offsetof(struct lg_upstream_def, eject_after) },
		{ "eject_max_percent", 100, offsetof(struct lg_upstream_def, eject_max_percent) },
		{ "retry_budget_percent", 100, offsetof(struct lg_upstream_def, retry_budget_percent) },
		{ "retry_budget_min", 1000, offsetof(struct lg_upstream_def, retry_budget_min) },
	};
	uint64_t x;

	if (strcmp(kv->key, "eject_ms") == 0)
		return lg_value_duration_ms(kv->value, 1, 86400000, &u->eject_ms, why, cap);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(kv->key, keys[i].key) != 0)
			continue;
		if (lg_value_uint(kv->value, 0, keys[i].max, &x, why, cap) == -1)
			return -1;
		*(uint32_t *)(void *)((char *)u + keys[i].off) = (uint32_t)x;
		return 0;
	}
	return 1;
}

/* One key of an [upstream] section into u. Returns 0, or -1 with why. */
static int
up_key(struct lg_upstream_def *u, const struct lg_kv *kv, char *why, size_t cap)
{
	const char *k = kv->key, *v = kv->value;
	uint64_t x;
	int r;

	if (strcmp(k, "server") == 0) {
		if (u->nservers == LG_UP_SERVERS)
			return snprintf(why, cap, "at most %d servers", LG_UP_SERVERS), -1;
		return parse_server(v, &u->servers[u->nservers++], why, cap);
	}
	if (strcmp(k, "max_conns") == 0 || strcmp(k, "queue") == 0 || strcmp(k, "keepalive") == 0) {
		uint64_t lo = strcmp(k, "max_conns") == 0 ? 1 : 0;

		if (lg_value_uint(v, lo, 65535, &x, why, cap) == -1)
			return -1;
		*(k[0] == 'm' ? &u->max_conns : k[0] == 'q' ? &u->queue : &u->keepalive) =
		    (uint32_t)x;
		return 0;
	}
	if (strcmp(k, "connect_timeout_ms") == 0)
		return lg_value_duration_ms(v, 1, 86400000, &u->connect_timeout_ms, why, cap);
	if (strcmp(k, "first_byte_timeout_ms") == 0)
		return lg_value_duration_ms(v, 1, 86400000, &u->first_byte_timeout_ms, why, cap);
	if (strcmp(k, "idle_timeout_ms") == 0)
		return lg_value_duration_ms(v, 1, 86400000, &u->idle_timeout_ms, why, cap);
	if (strcmp(k, "tunnel_idle_timeout_ms") == 0)
		return lg_value_duration_ms(v, 1, 86400000, &u->tunnel_idle_timeout_ms, why, cap);
	if (strcmp(k, "max_requests") == 0)
		return lg_value_uint(v, 1, UINT32_MAX, &u->max_requests, why, cap);
	if ((r = resilience_key(u, kv, why, cap)) != 1)
		return r;
	if (strcmp(k, "queue_wait_target_ms") == 0)
		return lg_value_duration_ms(v, 0, 86400000, &u->queue_wait_target_ms, why, cap);
	if (strcmp(k, "queue_wait_interval_ms") == 0)
		return lg_value_duration_ms(v, 1, 86400000, &u->queue_wait_interval_ms, why, cap);
	if (strcmp(k, "client_share") == 0) {
		if (lg_value_uint(v, 0, 100, &x, why, cap) == -1)
			return -1;
		u->client_share = (uint32_t)x;
		return 0;
	}
	if (strcmp(k, "client_limit_status") == 0) {
		if (strcmp(v, "503") != 0 && strcmp(v, "429") != 0)
			return snprintf(why, cap, "expected 503 or 429"), -1;
		u->client_limit_status = (uint32_t)atoi(v);
		return 0;
	}
	if (strcmp(k, "app") == 0) {
		if (*v == '\0' || strlen(v) > LG_APP_NAME_LEN || v[strspn(v, LG_UP_NAME_CHARS)] != '\0')
			return snprintf(why, cap, "an app name is 1 to %d of a-z, 0-9, _ and -",
			    LG_APP_NAME_LEN), -1;
		snprintf(u->app, sizeof(u->app), "%s", v);
		return 0;
	}
	if (strcmp(k, "host") == 0) {
		if (*v == '\0' || strlen(v) >= sizeof(u->host) || v[strcspn(v, " \t\r\n,")] != '\0')
			return snprintf(why, cap, "expected a host[:port] without spaces"), -1;
		snprintf(u->host, sizeof(u->host), "%s", v);
		return 0;
	}
	snprintf(why, cap, "unknown key for an upstream (server, app, max_conns, queue, keepalive, "
	    "connect_timeout_ms, first_byte_timeout_ms, idle_timeout_ms, tunnel_idle_timeout_ms, "
	    "max_requests, host, queue_wait_target_ms, queue_wait_interval_ms, client_share, "
	    "client_limit_status, eject_after, eject_ms, eject_max_percent, retry_budget_percent, "
	    "retry_budget_min)");
	return -1;
}

/* The app of apps (NULL: none) named name (by_upstream 0), or serving the upstream name (its
 * `upstream =`, else its own name: by_upstream 1); NULL when none. */
static const struct lg_app_conf *
find_app(const struct lg_apps *apps, const char *name, int by_upstream)
{
	for (int i = 0; apps != NULL && i < apps->n; i++) {
		const struct lg_app_conf *a = &apps->app[i];
		const char *n = by_upstream && a->upstream[0] != '\0' ? a->upstream : a->name;

		if (strcmp(n, name) == 0)
			return a;
	}
	return NULL;
}

/* u's servers against the apps: `app = NAME` names an [app] and excludes server lines; no
 * server line takes the app that serves u. An app that serves u (its `upstream =`, else its
 * name) is u's app: server lines beside it would take its requests (the app's processes run
 * for nothing), and `app =` naming another app would leave it unused. The app taken needs an
 * address ({socket} or {port}) to be a server. Returns 0, or -1 with the reason in err. */
static int
join_app(struct lg_upstream_def *u, const struct lg_apps *apps, char *err, size_t cap)
{
	const struct lg_app_conf *a = NULL, *by = find_app(apps, u->name, 1);

	if (u->app[0] != '\0' && u->nservers > 0) {
		snprintf(err, cap, "%s:%d: upstream %s: app = %s and server lines exclude each other",
		    u->file, u->line, u->name, u->app);
		return -1;
	}
	if (u->app[0] != '\0' && (a = find_app(apps, u->app, 0)) == NULL) {
		snprintf(err, cap, "%s:%d: upstream %s: app = %s names no [app %s] section", u->file,
		    u->line, u->name, u->app, u->app);
		return -1;
	}
	if (by != NULL && u->nservers > 0) {
		snprintf(err, cap, "%s:%d: upstream %s: server lines, and [app %s] (%s:%d) serves "
		    "upstream %s%s: its processes would get no request; drop the server lines, or "
		    "give the app another upstream =", u->file, u->line, u->name, by->name,
		    by->file, by->line, u->name, by->upstream[0] ? "" : " (its name, upstream = "
		    "not given)");
		return -1;
	}
	if (by != NULL && u->app[0] != '\0' && strcmp(by->name, u->app) != 0) {
		snprintf(err, cap, "%s:%d: upstream %s: app = %s, but [app %s] (%s:%d) serves "
		    "upstream %s: one of them would run for nothing; name one app", u->file, u->line,
		    u->name, u->app, by->name, by->file, by->line, u->name);
		return -1;
	}
	if (u->app[0] != '\0' && a->upstream[0] != '\0' && strcmp(a->upstream, u->name) != 0) {
		snprintf(err, cap, "%s:%d: upstream %s: app = %s, but [app %s] (%s:%d) has upstream "
		    "= %s", u->file, u->line, u->name, u->app, a->name, a->file, a->line,
		    a->upstream);
		return -1;
	}
	if (u->app[0] == '\0' && u->nservers == 0) {
		if ((a = by) == NULL) {
			snprintf(err, cap, "%s:%d: upstream %s: no 'server' key (unix:/path or "
			    "ADDR:PORT), no app = NAME and no [app] with upstream = %s", u->file,
			    u->line, u->name, u->name);
			return -1;
		}
		snprintf(u->app, sizeof(u->app), "%s", a->name);
	}
	if (a != NULL && a->addr == LG_APP_ADDR_NONE) {
		snprintf(err, cap, "%s:%d: upstream %s: its servers are [app %s]'s processes, whose "
		    "command (%s:%d) names neither {socket} nor {port}: they would have no address",
		    u->file, u->line, u->name, a->name, a->file, a->key_line[LG_APP_KEY_COMMAND]);
		return -1;
	}
	return 0;
}

int
lg_site_up_check_apps(const struct lg_registry *r, const struct lg_apps *apps, char *err,
    size_t cap)
{
	for (int i = 0; apps != NULL && i < apps->n; i++) {
		const struct lg_app_conf *a = &apps->app[i];

		if (a->upstream[0] == '\0' || lg_registry_find_upstream(r, a->upstream) >= 0)
			continue;
		snprintf(err, cap, "%s:%d: [app %s]: upstream = %s names no [upstream %s] section: "
		    "its processes would get no request (declare it, or drop the key)", a->file,
		    a->key_line[LG_APP_KEY_UPSTREAM], a->name, a->upstream, a->upstream);
		return -1;
	}
	return 0;
}

int
lg_site_up_take_apps(struct lg_registry *r, const struct lg_appsup *s, char *err, size_t cap)
{
	struct lg_app_server out[LG_UP_SERVERS];
	char why[160];

	for (uint32_t i = 0; r != NULL && i < r->nupstreams; i++) {
		struct lg_upstream_def *u = &r->upstreams[i];
		int n = u->app[0] != '\0' ? lg_app_servers(s, u->app, out, LG_UP_SERVERS) : 0;

		if (u->app[0] == '\0')
			continue;
		if (n < 0)
			return snprintf(err, cap, "upstream %s: no app %s", u->name, u->app), -1;
		if (n > LG_UP_SERVERS)
			log_warn("upstream %s: app %s has %d processes; the first %d are its servers",
			    u->name, u->app, n, LG_UP_SERVERS);
		u->nservers = 0;
		for (int k = 0; k < n && k < LG_UP_SERVERS; k++) {
			if (parse_server(out[k].addr, &u->servers[k], why, sizeof(why)) == -1)
				return snprintf(err, cap, "upstream %s: app %s process %d: address '%s': "
				    "%s (its command names neither {socket} nor {port}?)", u->name,
				    u->app, k, out[k].addr, why), -1;
			u->nservers++;
		}
	}
	return 0;
}

int
lg_site_upstream(struct lg_registry *r, const char *file, const char *name, int line,
    const struct lg_kv *kv, unsigned nkv, const struct lg_apps *apps, char *err, size_t cap)
{
	struct lg_upstream_def u;
	char why[512];

	memset(&u, 0, sizeof(u));
	if (strlen(name) >= sizeof(u.name) || name[strspn(name, LG_UP_NAME_CHARS)] != '\0') {
		snprintf(err, cap, "%s:%d: section [upstream %s]: a name is 1 to %d of a-z, 0-9, _ "
		    "and -", file, line, name, LG_NAME_MAX - 1);
		return -1;
	}
	snprintf(u.name, sizeof(u.name), "%s", name);
	snprintf(u.file, sizeof(u.file), "%s", file);
	u.line = line;
	u.max_conns = 32;
	u.queue = 64;
	u.keepalive = 16;
	u.connect_timeout_ms = 1000;
	u.first_byte_timeout_ms = 30000;
	u.idle_timeout_ms = 60000;
	u.tunnel_idle_timeout_ms = 60000; /* nginx's proxy_read_timeout */
	u.max_requests = 1000;
	u.queue_wait_interval_ms = 100;
	u.client_limit_status = 503;
	u.eject_after = 5;          /* Envoy's consecutive_5xx */
	u.eject_ms = 30000;         /* Envoy's base_ejection_time */
	u.eject_max_percent = 50;
	u.retry_budget_percent = 20; /* Envoy's retry budget */
	u.retry_budget_min = 3;      /* Envoy's min_retry_concurrency */
	for (unsigned i = 0; i < nkv; i++)
		if (up_key(&u, &kv[i], why, sizeof(why)) == -1)
			return fail(err, cap, file, &kv[i], why);
	if (u.queue_wait_interval_ms < u.queue_wait_target_ms) /* as the pools' (shm/codel.h) */
		u.queue_wait_interval_ms = u.queue_wait_target_ms;
	if (join_app(&u, apps, err, cap) == -1)
		return -1;
	if (lg_registry_add_upstream(r, &u, why, sizeof(why)) == -1) {
		snprintf(err, cap, "%s:%d: %s", file, line, why);
		return -1;
	}
	return 0;
}
