/* A kind's declared parameters (module ABI 1.1, include/lagless/module.h struct lagless_param):
 * the query arguments its run reads and the route keys it takes, as data. One table walk for
 * every kind, built-in or loaded, with the one grammar of common/value.h: the registry checks
 * the declarations when it adds a kind, parses a route's keys into the kind's route struct once
 * (start-up, lagless -t, reload), and the loop worker parses a request's query once, before the
 * job takes a queue slot (worker/job/args.c): its refusal is worded, and its values travel in
 * the job's slot to the kind. Depends on common/ only. */
#ifndef LG_KINDS_PARAMS_H
#define LG_KINDS_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include <lagless/module.h>

#include "kinds/host.h"

/* Checks n declarations: each name [a-z0-9_-]+ and unique, a known type, min <= max (max 0 is
 * no bound), an ENUM with at least one choice, a default the parameter itself accepts, and for
 * route keys (route_size > 0 or route set) the value's bytes inside route_size at its offset.
 * Returns 0, or -1 with a reason naming the parameter in err (cap bytes). */
int lg_params_valid(const struct lagless_param *p, uint32_t n, int route, uint32_t route_size,
    char *err, size_t cap);

/* Parses the route keys conf against n declarations into dst (size bytes, zeroed here): each
 * declared key from its value or its default, every undeclared key refused. Returns 0, or -1
 * with a reason naming the key in err and that key's configuration line in *line (0 when the
 * reason is not one key's). STRING values point into conf, which must outlive dst. */
int lg_params_parse_route(const struct lagless_param *p, uint32_t n,
    const struct lagless_conf *conf, void *dst, size_t size, int *line, char *err, size_t cap);

/* Parses the declared query arguments of raw query q (qlen bytes, not decoded) into dst (size
 * bytes, zeroed here), each at its offset (checked by lg_params_valid against size): a present
 * one percent-decoded (RFC 3986 section 2.1) into strs (strcap bytes; qlen + n is always
 * enough) and read with the one grammar, an absent one from its default, else zero. STRING
 * values point into strs. With dst NULL it only checks the arguments present (what a kind
 * with no query struct is given: ABI 1.1), a STRING of no maximum not even decoded. A decoded
 * argument over 255 bytes (a STRING of no maximum excepted) is refused. Returns 0, or -1 with
 * *fault naming the argument and what is wrong with it (lg_params_query_why words it). The one
 * parse of a request's query: the loop's (worker/job/args.c) or --run-kind's. No allocation. */
int lg_params_parse_query(const struct lagless_param *p, uint32_t n, const char *q,
    size_t qlen, void *dst, size_t size, char *strs, size_t strcap, uint32_t *fault);

/* lg_params_parse_query's fault: (the argument's index << 2) | one of these. */
#define LG_QFAULT_DECODE 1u /* not percent-decodable, or too long */
#define LG_QFAULT_NUL    2u /* decodes to a NUL byte */
#define LG_QFAULT_RULE   3u /* its value breaks the declaration's rule (type, range, choices) */

/* The short reason of fault (from lg_params_parse_query over the same n declarations) into err
 * (cap bytes): "iterations: expected a whole number from 0 to 1000000000000". Worded from the
 * declaration alone (the grammar's wording does not depend on the value), so a refusal
 * answered later needs no second parse. */
void lg_params_query_why(const struct lagless_param *p, uint32_t n, uint32_t fault, char *err,
    size_t cap);

/* Parsed arguments args (a query struct from lg_params_parse_query, its STRING values pointing
 * into strs, len bytes) made movable, pack 1: every STRING value becomes its offset in strs
 * plus 1 (0 for none), so the struct and strs copied anywhere (the slot's input region, which
 * another process maps elsewhere) mean the same. pack 0, after the copy: every offset back to a
 * pointer into strs. Returns 0, or -1 (pack 0) when an offset lies outside strs or its string
 * has no NUL there (that value is NULL then). */
int lg_params_query_pack(const struct lagless_param *p, uint32_t n, void *args, const char *strs,
    size_t len, int pack);

/* The names of n declarations as a comma list into buf (cap bytes): "codec,level", "" for
 * none. Returns 0, or -1 when it does not fit. */
int lg_params_names(const struct lagless_param *p, uint32_t n, char *buf, size_t cap);

/* 1 when s is a name of a kind, a module or a parameter: 1 to max - 1 of a-z, 0-9, '_' and
 * '-' (a name appears in routes, metrics labels and query strings unquoted); else 0. */
int lg_params_name_ok(const char *s, size_t max);

#endif
