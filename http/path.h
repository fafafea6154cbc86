/* The normalized request path: the one form of a path that routing, the job kinds, the cache
 * key and the access log see, so that two spellings of one resource cannot take two routes
 * (an exact route's methods, `off = yes`, deadline or body limit bypassed by "/p/%65xact",
 * "/p/../exact" or "/p//exact" reaching a prefix route). The rules are RFC 3986 section 6.2.2,
 * as nginx applies them before it matches a location (ngx_http_parse_complex_uri). */
#ifndef LG_HTTP_PATH_H
#define LG_HTTP_PATH_H

#include <stddef.h>

/* Normalizes the absolute path p[0..*len) (p[0] == '/'; its pct-encodings are checked well
 * formed by the request-line rules, http/reqline.c, and refused here too) in place, in one pass:
 *  1. percent-encoding (RFC 3986 section 6.2.2.2): an encoded unreserved character (ALPHA,
 *     DIGIT, '-', '.', '_', '~') is decoded; every other pct-encoding stays encoded, its hex
 *     digits made upper case (section 6.2.2.1);
 *  2. dot segments (section 6.2.2.3, the remove_dot_segments of section 5.2.4), after step 1
 *     so "%2e%2e" is "..": "." segments go, ".." takes the segment before it away;
 *  3. unless keep_slashes, a run of '/' is one '/' (nginx's merge_slashes, on by default).
 * The result is never longer than the input; *len is set to its length. Returns 0, or -1 with
 * *why set (static text) for a path that has no normal form this server will route: an
 * encoded '/' ("%2F", which would make one segment two, or two one, depending on who decodes)
 * or an encoded NUL, and a ".." that climbs above the root (nginx answers both 400); a '%' not
 * followed by two hex digits. */
int lg_path_normalize(char *p, size_t *len, int keep_slashes, const char **why);

#endif
