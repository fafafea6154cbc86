/* What the registry's files share (kinds/registry.c: the kinds table; kinds/routetab.c: the
 * routes): nothing outside kinds/registry*.c and kinds/routetab.c includes this. */
#ifndef LG_KINDS_REGISTRY_INT_H
#define LG_KINDS_REGISTRY_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kinds/registry.h"

/* Grows the heap array *arr of n elements of elem bytes by one zeroed element. Returns 0, or
 * -1 (ENOMEM; *arr unchanged). */
int lg_registry_grow(void **arr, uint32_t n, size_t elem);

/* A check hook's refusal why, formatted into err (cap bytes) after prefix: when why begins with
 * one of conf's keys ("check_timeout_ms: ...", "callable = ..."), that key's line is named as
 * the declared keys' errors name it ("line 3: key check_timeout_ms: ..."). */
void lg_registry_refused(const struct lagless_conf *conf, const char *prefix, const char *why,
    char *err, size_t cap);

#endif
