/* [upstream NAME] sections (master/ only): an app lagless proxies to, read by master/site.c
 * into the registry's upstream table (kinds/registry.h struct lg_upstream_def). Keys: server
 * (repeatable: unix:/path, ADDR:PORT, [v6]:PORT or NAME:PORT resolved now), max_conns, queue,
 * keepalive, connect_timeout_ms, first_byte_timeout_ms, idle_timeout_ms, max_requests, host;
 * values in the one grammar of common/value.h. */
#ifndef LG_MASTER_SITE_UP_H
#define LG_MASTER_SITE_UP_H

#include <stddef.h>

#include "kinds/registry.h"

#define LG_UP_NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_-"

/* Adds the upstream of section [upstream name] (declared at file:line, its nkv keys kv) to r.
 * Returns 0, or -1 with "FILE:LINE: key 'k' = 'v': reason" in err (cap bytes). */
int lg_site_upstream(struct lg_registry *r, const char *file, const char *name, int line,
    const struct lg_kv *kv, unsigned nkv, char *err, size_t cap);

#endif
