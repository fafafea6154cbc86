/* Routes and modules from the configuration file (master/ only): `[route /path]` and
 * `[module name]` sections are collected while the file is read (with the line of every key),
 * then turned into the registry (kinds/registry.h) once the whole file, the environment and the
 * flags are in: modules opened and checked first, then each route resolved against the kinds,
 * then the default routes for every path the file does not declare. Every error names the
 * file, the line and the key. docs/MODULES.md describes the sections. */
#ifndef LG_MASTER_SITE_H
#define LG_MASTER_SITE_H

#include <stddef.h>

#include "common/config.h"

struct lg_site_src;

/* A new empty collection for file (copied). NULL when out of memory. */
struct lg_site_src *lg_site_new(const char *file);

/* The sections collected from now on are in file (copied; a conf.d file, master/confd.h), so
 * their errors name it. Returns 0, or -1 when out of memory. */
int lg_site_file(struct lg_site_src *s, const char *file);

/* Takes key = value of section at line if the section is a [route ...] or [module ...] one.
 * Returns 1 (taken), 0 (not such a section: the caller handles it), or -1 with a reason in why
 * (a malformed section name). */
int lg_site_collect(struct lg_site_src *s, const char *section, const char *key,
    const char *value, int line, char *why, size_t cap);

/* Frees s and every string it collected (NULL is ignored). */
void lg_site_free(struct lg_site_src *s);

/* Builds cfg->reg from s (which may be NULL: no file) and cfg's settings; the registry takes
 * s over (its configuration strings live there) and frees it with itself. On failure both are
 * freed and cfg->reg is NULL. Returns 0, or -1 with
 * one line in err: "FILE:LINE: key 'kind' = 'x': reason" or "FILE:LINE: module m: reason". */
int lg_site_build(struct lg_site_src *s, struct lg_config *cfg, char *err, size_t cap);

#endif
