/* The request methods the server knows (RFC 9110 section 9 and the registrations http-parser
 * 2.9.4 knows, WebDAV, subversion, UPnP, CalDAV, RFC 5789 PATCH...): any other well-formed
 * method is answered 501. The numbers are those of http-parser's enum http_method, so logs,
 * statistics rows and tests read them as before; the names too (HTTP_GET, http_method_str),
 * which is why no file may include both this header and <http_parser.h>: the request path does
 * not use http-parser at all, only the test oracle (tests/oracle/) does, apart from this. */
#ifndef LG_HTTP_METHOD_H
#define LG_HTTP_METHOD_H

#include <stddef.h>
#include <stdint.h>

#ifdef http_parser_h
#error "http/method.h and <http_parser.h> define the same names: include one of them"
#endif

/* XX(number, enumerator suffix, method token) */
#define LG_HTTP_METHOD_MAP(XX)                                                    \
	XX(0, DELETE, DELETE) XX(1, GET, GET) XX(2, HEAD, HEAD) XX(3, POST, POST)   \
	XX(4, PUT, PUT) XX(5, CONNECT, CONNECT) XX(6, OPTIONS, OPTIONS)             \
	XX(7, TRACE, TRACE) XX(8, COPY, COPY) XX(9, LOCK, LOCK) XX(10, MKCOL, MKCOL) \
	XX(11, MOVE, MOVE) XX(12, PROPFIND, PROPFIND) XX(13, PROPPATCH, PROPPATCH)  \
	XX(14, SEARCH, SEARCH) XX(15, UNLOCK, UNLOCK) XX(16, BIND, BIND)            \
	XX(17, REBIND, REBIND) XX(18, UNBIND, UNBIND) XX(19, ACL, ACL)              \
	XX(20, REPORT, REPORT) XX(21, MKACTIVITY, MKACTIVITY)                       \
	XX(22, CHECKOUT, CHECKOUT) XX(23, MERGE, MERGE) XX(24, MSEARCH, M-SEARCH)   \
	XX(25, NOTIFY, NOTIFY) XX(26, SUBSCRIBE, SUBSCRIBE)                         \
	XX(27, UNSUBSCRIBE, UNSUBSCRIBE) XX(28, PATCH, PATCH) XX(29, PURGE, PURGE)  \
	XX(30, MKCALENDAR, MKCALENDAR) XX(31, LINK, LINK) XX(32, UNLINK, UNLINK)    \
	XX(33, SOURCE, SOURCE)

enum lg_http_method {
#define LG_METHOD_ENUM(num, name, string) HTTP_##name = num,
	LG_HTTP_METHOD_MAP(LG_METHOD_ENUM)
#undef LG_METHOD_ENUM
};

#define LG_METHOD_COUNT(num, name, string) +1
/* How many methods the list has: their numbers are 0 .. LG_HTTP_NMETHODS - 1. */
enum { LG_HTTP_NMETHODS = 0 LG_HTTP_METHOD_MAP(LG_METHOD_COUNT) };
#undef LG_METHOD_COUNT
_Static_assert(LG_HTTP_NMETHODS <= 64, "a set of methods has a bit per method");

/* A set of methods (what a route serves, an Allow list) is a uint64_t with bit m set for
 * method m (enum lg_http_method). */
#define LG_HTTP_METHOD_BIT(m) ((uint64_t)1 << (m))

/* The method whose token is m[0..len) (case-sensitive, RFC 9110 section 9.1), or -1. */
int lg_http_method_find(const char *m, size_t len);

/* The token of method m (static text), "<unknown>" for a number outside the list. */
const char *lg_http_method_str(unsigned m);

/* The set of the method tokens of list ("GET, POST": separated by ',', ' ' or '\t';
 * case-sensitive, RFC 9110 section 9.1). Returns 0 when a token is not a method of the list
 * above, or the list has none. */
uint64_t lg_http_methods_parse(const char *list);

/* The methods of set as a list ("GET, HEAD, POST": an Allow field value, RFC 9110 section
 * 10.2.1) into buf[0..cap), NUL-terminated: GET, HEAD, POST, PUT, DELETE, PATCH first, in
 * that order (RFC 9110 section 9.3's, then RFC 5789's: the order lagless has always printed),
 * then the others in the list's order. Only whole names: when the next one does not fit, the
 * list ends before it. Returns the length written. */
size_t lg_http_methods_str(uint64_t set, char *buf, size_t cap);

/* The name worker/ has always called it by. */
#define http_method_str(m) lg_http_method_str(m)

#endif
