/* [upstream NAME] sections (master/ only): an app lagless proxies to, read by master/site.c
 * into the registry's upstream table (kinds/registry.h struct lg_upstream_def). Keys: server
 * (repeatable: unix:/path, ADDR:PORT, [v6]:PORT or NAME:PORT resolved now) or app (an [app]
 * whose processes are its servers), max_conns, queue,
 * keepalive, connect_timeout_ms, first_byte_timeout_ms, idle_timeout_ms,
 * tunnel_idle_timeout_ms (a tunnel after a 101: worker/upstream/up_tunnel.c), max_requests, host,
 * queue_wait_target_ms, queue_wait_interval_ms (CoDel: shm/codel.h), client_share,
 * client_limit_status, eject_after, eject_ms, eject_max_percent, retry_budget_percent,
 * retry_budget_min (outlier ejection and the retry budget: shm/upeject.h); values in the one
 * grammar of common/value.h. */
#ifndef LG_MASTER_SITE_UP_H
#define LG_MASTER_SITE_UP_H

#include <stddef.h>

#include "kinds/registry.h"
#include "master/appconf.h"

struct lg_appsup;

#define LG_UP_NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_-"

/* Adds the upstream of section [upstream name] (declared at file:line, its nkv keys kv) to r.
 * apps (NULL: none) are the configuration's [app] sections: `app = NAME` must name one, and an
 * upstream with neither server nor app takes the app whose `upstream =` (or, without that key,
 * whose name) is name; that app excludes server lines and another `app =`, and the app taken
 * names an address in its command (master/site_up.c join_app). Returns 0, or -1 with "FILE:LINE: key 'k' = 'v': reason" in err (cap
 * bytes). */
int lg_site_upstream(struct lg_registry *r, const char *file, const char *name, int line,
    const struct lg_kv *kv, unsigned nkv, const struct lg_apps *apps, char *err, size_t cap);

/* After every [upstream] section is added to r: each app of apps (NULL: none) with an
 * `upstream = NAME` names an upstream of r (else its processes would run unused). Returns 0,
 * or -1 with "FILE:LINE: [app A]: reason" in err (cap bytes), LINE that key's. */
int lg_site_up_check_apps(const struct lg_registry *r, const struct lg_apps *apps, char *err,
    size_t cap);

/* For each upstream of r that takes an app's processes (u->app), its servers become the
 * addresses lg_app_servers gives for the next generation (master/app.h; at most LG_UP_SERVERS,
 * process k as server k). Call it after the apps started (or a reload staged its runs) and
 * before the generation is created. Returns 0, or -1 with the reason in err (cap bytes): an
 * app unknown to s, or whose command names no address. */
int lg_site_up_take_apps(struct lg_registry *r, const struct lg_appsup *s, char *err,
    size_t cap);

#endif
