#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "master/master.h"

#include "common/log.h"
#include "master/gen.h"

/* A decimal port 0..65535 (digits only), or -1. */
static long
parse_port(const char *s)
{
	char *end;
	long p;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	p = strtol(s, &end, 10);
	return errno || *end || p > 65535 ? -1 : p;
}

/* Replaces host name (cap bytes) with the numeric form of its first address. */
static int
resolve_host(char *host, size_t cap)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	char num[INET6_ADDRSTRLEN];
	void *a;

	/* A host name (RFC 1123 2.1: letters, digits, '-' and '.', not all digits): a malformed
	 * address such as 999.1.1.1 or ::1 without brackets is an error, never a lookup. */
	if (host[strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.")] ||
	    host[strspn(host, "0123456789.")] == '\0' || host[0] == '-' || host[0] == '.')
		return -1;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return -1;
	a = res->ai_family == AF_INET6 ? (void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr :
	    (void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr;
	if (inet_ntop(res->ai_family, a, num, sizeof(num)) == NULL) {
		freeaddrinfo(res);
		return -1;
	}
	freeaddrinfo(res);
	snprintf(host, cap, "%s", num);
	return 0;
}

/* One TCP listener: "[ADDR:]PORT", "[v6addr]:PORT", "HOST:PORT" or "PORT" (n bytes of s) into
 * addr (cap bytes; left alone without ADDR) and *port. A host name is resolved now
 * (getaddrinfo(3), its first address), so -t, start-up and a reload all see the address
 * bind(2) gets; a bare IPv6 address needs its brackets, or its last group reads as the port. */
static int
parse_inet(const char *s, size_t n, char *addr, size_t cap, int *port)
{
	char tok[256], host[256];
	const char *colon;
	unsigned char bin[sizeof(struct in6_addr)];
	long p;

	if (n == 0 || n >= sizeof(tok))
		return -1;
	memcpy(tok, s, n);
	tok[n] = '\0';
	colon = strrchr(tok, ':');
	if ((p = parse_port(colon ? colon + 1 : tok)) < 0)
		return -1;
	if (colon != NULL) {
		size_t alen = (size_t)(colon - tok);
		const char *h = tok;
		int bracketed = alen >= 2 && tok[0] == '[' && tok[alen - 1] == ']';

		if (bracketed)
			h++, alen -= 2;
		if (alen == 0 || alen >= cap || alen >= sizeof(host))
			return -1;
		memcpy(host, h, alen);
		host[alen] = '\0';
		if (bracketed ? inet_pton(AF_INET6, host, bin) != 1 :
		    inet_pton(AF_INET, host, bin) != 1 && resolve_host(host, sizeof(host)) == -1)
			return -1;
		if (strlen(host) >= cap)
			return -1;
		snprintf(addr, cap, "%s", host);
	}
	*port = (int)p;
	return 0;
}

/* "unix:/absolute/path[,mode=OCTAL][,owner=USER[:GROUP]][,proxy]": checked here (path length for
 * sun_path, unix(7); the mode; that the user and group exist), applied by master/listen.c. */
static int
check_unix(const char *s, size_t n)
{
	char tok[160];
	size_t plen;

	if (n >= sizeof(tok) || n < 6 || s[5] != '/')
		return -1;
	memcpy(tok, s, n);
	tok[n] = '\0';
	plen = strcspn(tok + 5, ",");
	if (plen >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -1;
	for (char *o = strchr(tok, ','), *next; o != NULL; o = next) {
		*o++ = '\0';
		if ((next = strchr(o, ',')) != NULL)
			*next = '\0';
		if (strncmp(o, "mode=", 5) == 0) {
			char *end;
			long mode = strtol(o + 5, &end, 8);

			if (end == o + 5 || *end || mode < 0 || mode > 0777)
				return -1;
		} else if (strncmp(o, "owner=", 6) == 0) {
			char *grp = strchr(o + 6, ':');

			if (grp != NULL)
				*grp++ = '\0';
			if (getpwnam(o + 6) == NULL || (grp != NULL && getgrnam(grp) == NULL))
				return -1;
		} else if (strcmp(o, "proxy") != 0) {
			return -1;
		}
		if (next != NULL)
			*next = ',';
	}
	return 0;
}

/* The options after a listener's address (the n bytes of s from its first ','): whether
 * ",proxy" is among them (a unix listener's mode= and owner= are check_unix's). A TCP
 * listener takes no other option. Returns 1, 0, or -1 for an option it does not take. */
static int
proxy_opt(const char *s, size_t n, int is_unix)
{
	int proxy = 0;

	while (n > 0) {
		size_t len;

		s++, n--; /* the ',' */
		len = strcspn(s, ",");
		len = len < n ? len : n;
		if (len == 5 && memcmp(s, "proxy", 5) == 0)
			proxy = 1;
		else if (!is_unix)
			return -1;
		s += len, n -= len;
	}
	return proxy;
}

int
lg_listen_parse(const char *v, struct lg_config *cfg, int append)
{
	int nmore = 0, first = !append;

	if (append)
		while (nmore < LG_LISTEN_MAX && cfg->master.listen_more[nmore][0])
			nmore++;
	else {
		memset(cfg->master.listen_more, 0, sizeof(cfg->master.listen_more));
		cfg->master.listen_proxy = 0;
	}
	for (v += strspn(v, " \t"); *v; v += strspn(v, " \t")) {
		size_t n = strcspn(v, " \t"), alen = strcspn(v, ",");
		char addr[sizeof(cfg->master.listen_addr)] = "0.0.0.0";
		int port, is_unix = strncmp(v, "unix:", 5) == 0, proxy;

		alen = alen < n ? alen : n;
		if ((proxy = proxy_opt(v + alen, n - alen, is_unix)) == -1)
			return -1;
		if (is_unix ? check_unix(v, n) == -1 :
		    parse_inet(v, alen, first ? cfg->master.listen_addr : addr, sizeof(addr),
		    first ? &cfg->master.port : &port) == -1)
			return -1;
		if (first && is_unix)
			cfg->master.listen_addr[0] = '\0'; /* no TCP listener unless another one names it */
		else if (first && cfg->master.listen_addr[0] == '\0')
			snprintf(cfg->master.listen_addr, sizeof(cfg->master.listen_addr), "0.0.0.0"); /* "PORT" */
		/* the listener's number: the first, or the TCP first one and those before it */
		int k = first ? 0 : (cfg->master.listen_addr[0] != '\0') + nmore;
		if (!first || is_unix) {
			/* at most LG_LISTEN_MAX in all, the TCP first listener (listen_addr) included */
			if (nmore + (cfg->master.listen_addr[0] != '\0') >= LG_LISTEN_MAX ||
			    n >= sizeof(cfg->master.listen_more[0]))
				return -1;
			if (is_unix)
				snprintf(cfg->master.listen_more[nmore++], sizeof(cfg->master.listen_more[0]), "%.*s",
				    (int)n, v);
			else
				snprintf(cfg->master.listen_more[nmore++], sizeof(cfg->master.listen_more[0]),
				    strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, port);
		}
		if (proxy)
			cfg->master.listen_proxy |= 1u << k;
		first = 0;
		v += n;
	}
	return first && !append ? -1 : 0; /* an empty value names no listener */
}

int
lg_listen_parse_addr(const char *v, char *out, size_t cap)
{
	char addr[64] = "0.0.0.0";
	int port;

	if (*v == '\0') {
		out[0] = '\0';
		return 0;
	}
	if (parse_inet(v, strlen(v), addr, sizeof(addr), &port) == -1)
		return -1;
	snprintf(out, cap, strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, port);
	return 0;
}

/* One listener's bind address for lg_listen_check_distinct: a unix path, or a TCP address
 * and port, with the address as 16 bytes when numeric (IPv4 as ::ffff:a.b.c.d, as an IPv6
 * socket binds it: ipv6(7)). */
struct bound_as {
	const char *spec, *setting;
	char addr[160];    /* a unix path fits: listen_more's entries are 160 bytes */
	int port;          /* -1 for a unix socket */
	int numeric, v4;   /* bin holds the address; it is an IPv4 one (or v4-mapped) */
	unsigned char bin[16];
};

int
lg_listen_unix_path(const char *spec, char *out, size_t cap)
{
	if (strncmp(spec, "unix:", 5) != 0)
		return 0;
	snprintf(out, cap, "%.*s", (int)strcspn(spec + 5, ","), spec + 5);
	return 1;
}

void
lg_path_dir(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');

	snprintf(out, cap, "%.*s", slash == NULL ? 1 : slash == path ? 1 : (int)(slash - path),
	    slash == NULL ? "." : path);
}

/* The unix socket path p as one file is named once: its directory resolved (realpath(3):
 * "//", "/./", ".." and symbolic links), then its last component; p itself when the directory
 * does not resolve (the start-up's bind fails for both then). Into out (cap bytes). */
static void
unix_canon(const char *p, char *out, size_t cap)
{
	const char *slash = strrchr(p, '/');
	char dir[PATH_MAX], real[PATH_MAX];

	lg_path_dir(p, dir, sizeof(dir));
	int n = realpath(dir, real) == NULL ? -1 : snprintf(out, cap, "%s/%s",
	    strcmp(real, "/") == 0 ? "" : real, slash ? slash + 1 : p);

	if (n < 0 || (size_t)n >= cap) /* unresolved, or too long for a socket path anyway */
		snprintf(out, cap, "%s", p);
}

static void
bound_as(struct bound_as *b, const char *spec, const char *setting)
{
	char path[sizeof(b->addr)];

	b->spec = spec;
	b->setting = setting;
	if (lg_listen_unix_path(spec, path, sizeof(path))) {
		unix_canon(path, b->addr, sizeof(b->addr));
		b->port = -1;
		return;
	}
	const char *colon = strrchr(spec, ':');
	char plain[sizeof(b->addr)];
	static const unsigned char mapped[12] = { [10] = 0xff, [11] = 0xff };

	snprintf(b->addr, sizeof(b->addr), "%.*s", colon ? (int)(colon - spec) : 0, spec);
	b->port = colon ? atoi(colon + 1) : 0;
	snprintf(plain, sizeof(plain), "%.*s", b->addr[0] == '[' ? (int)strlen(b->addr) - 2 :
	    (int)strlen(b->addr), b->addr + (b->addr[0] == '['));
	memset(b->bin, 0, sizeof(b->bin));
	if (inet_pton(AF_INET, plain, b->bin + 12) == 1) {
		memcpy(b->bin, mapped, sizeof(mapped));
		b->numeric = b->v4 = 1;
	} else {
		b->numeric = inet_pton(AF_INET6, plain, b->bin) == 1;
		b->v4 = b->numeric && memcmp(b->bin, mapped, sizeof(mapped)) == 0;
	}
}

/* Whether b is its family's wildcard: 0.0.0.0 (or ::ffff:0.0.0.0), or ::. */
static int
wildcard(const struct bound_as *b)
{
	static const unsigned char any6[16], any4[16] = { [10] = 0xff, [11] = 0xff };

	return b->numeric && memcmp(b->bin, b->v4 ? any4 : any6, 16) == 0;
}

/* Whether an IPv6 wildcard listener also takes IPv4 (net.ipv6.bindv6only is 0, the default:
 * ipv6(7) IPV6_V6ONLY, which lg_master_listen leaves as the sysctl says). No IPv6: no. */
static int
dual_stack(void)
{
	FILE *f = fopen("/proc/sys/net/ipv6/bindv6only", "r");
	int c = f ? fgetc(f) : EOF;

	if (f)
		fclose(f);
	return c == '0';
}

/* Would binding both fail? The same path, or the same port (not 0, which picks one) on the
 * same address (however written: [::1] is [0:0:0:0:0:0:0:1], [::ffff:127.0.0.1] is 127.0.0.1),
 * where one is the wildcard of the other's family (ip(7), ipv6(7)), or where one is [::]
 * taking IPv4 too (dual is dual_stack()'s answer) and the other is IPv4. */
static int
clash(const struct bound_as *a, const struct bound_as *b, int dual)
{
	if (a->port == -1 || b->port == -1)
		return a->port == b->port && strcmp(a->addr, b->addr) == 0;
	if (a->port != b->port || a->port == 0)
		return 0;
	if (!a->numeric || !b->numeric) /* a name: as it is written */
		return strcmp(a->addr, b->addr) == 0;
	if (memcmp(a->bin, b->bin, 16) == 0)
		return 1;
	if (a->v4 != b->v4)
		return dual && ((!a->v4 && wildcard(a)) || (!b->v4 && wildcard(b)));
	return wildcard(a) || wildcard(b);
}

int
lg_listen_check_distinct(const struct lg_config *cfg, char *err, size_t cap)
{
	struct bound_as all[LG_LISTEN_MAX + 3];
	char first[80];
	int n = 0, dual = dual_stack();

	if (cfg->master.listen_addr[0] != '\0') {
		snprintf(first, sizeof(first), strchr(cfg->master.listen_addr, ':') ? "[%s]:%d" : "%s:%d",
		    cfg->master.listen_addr, cfg->master.port);
		bound_as(&all[n++], first, "--listen");
	}
	for (int i = 0; i < LG_LISTEN_MAX && cfg->master.listen_more[i][0] != '\0'; i++)
		bound_as(&all[n++], cfg->master.listen_more[i], "--listen");
	if (cfg->master.admin_listen[0] != '\0')
		bound_as(&all[n++], cfg->master.admin_listen, "--admin-listen");
	if (cfg->master.agent_listen[0] != '\0')
		bound_as(&all[n++], cfg->master.agent_listen, "--agent-listen");
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			if (clash(&all[j], &all[i], dual)) {
				snprintf(err, cap, "%s %s %s %s %s: each listener needs an address "
				    "of its own (bind(2) would fail with EADDRINUSE)", all[i].setting,
				    all[i].spec, strcmp(all[i].spec, all[j].spec) == 0 ? "is taken by" :
				    "overlaps", all[j].setting, all[j].spec);
				return -1;
			}
	return 0;
}

int
lg_listen_check_proxy(const struct lg_config *cfg, char *err, size_t cap)
{
	int first_tcp = cfg->master.listen_addr[0] != '\0';

	if (cfg->conn.trusted_proxies[strspn(cfg->conn.trusted_proxies, " ,\t")] != '\0')
		return 0;
	for (int k = 0; k < LG_LISTEN_MAX + 1; k++) {
		const char *spec = k == 0 && first_tcp ? cfg->master.listen_addr : k - first_tcp <
		    LG_LISTEN_MAX ? cfg->master.listen_more[k - first_tcp] : "";

		if (!(cfg->master.listen_proxy & 1u << k) || strncmp(spec, "unix:", 5) == 0)
			continue;
		snprintf(err, cap, "listen %s,proxy: a PROXY protocol header is taken only from a "
		    "trusted-proxies peer, and that list is empty (every connection would be closed)",
		    spec);
		return -1;
	}
	return 0;
}

/* Closes fd, a socket that failed to be set up, keeping errno (the caller's error). Returns
 * -1. */
static int
close_failed(int fd)
{
	int saved = errno;

	close(fd);
	errno = saved;
	return -1;
}

int
lg_master_listen(const char *addr, int port, int backlog, int *bound)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		((struct sockaddr_in *)&ss)->sin_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
		len = sizeof(struct sockaddr_in);
	} else if (inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
		len = sizeof(struct sockaddr_in6);
	} else {
		errno = EINVAL;
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(fd, (struct sockaddr *)&ss, len) == -1 || listen(fd, backlog) == -1)
		goto fail;
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1)
		goto fail;
	*bound = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port :
	    ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
fail:
	return close_failed(fd);
}

/* A socket file at path that no server accepts on (connect(2) is refused) is left over from a
 * server that died: it may go. Returns 0 when path is free now, -1 with errno otherwise. */
static int
clear_stale(const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, r;

	if (lstat(sa->sun_path, &st) == -1)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(st.st_mode)) {
		errno = EEXIST;
		return -1;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (r == 0) {
		errno = EADDRINUSE;
		return -1;
	}
	return unlink(sa->sun_path);
}

/* Applies ",mode=OCTAL" and ",owner=USER[:GROUP]" of opts (checked by master/options.c). */
static int
unix_perms(const char *path, const char *opts)
{
	char buf[160], *o, *next;

	snprintf(buf, sizeof(buf), "%s", opts);
	for (o = buf[0] == ',' ? buf + 1 : NULL; o != NULL; o = next) {
		if ((next = strchr(o, ',')) != NULL)
			*next++ = '\0';
		if (strncmp(o, "mode=", 5) == 0 &&
		    chmod(path, (mode_t)strtol(o + 5, NULL, 8)) == -1)
			return -1;
		if (strncmp(o, "owner=", 6) == 0) {
			char *grp = strchr(o + 6, ':');
			struct passwd *pw;
			struct group *gr = NULL;

			if (grp != NULL)
				*grp++ = '\0';
			if ((pw = getpwnam(o + 6)) == NULL || (grp && (gr = getgrnam(grp)) == NULL)) {
				errno = ENOENT;
				return -1;
			}
			if (chown(path, pw->pw_uid, gr ? gr->gr_gid : pw->pw_gid) == -1)
				return -1;
		}
	}
	return 0;
}

static int
listen_unix(const char *spec, int backlog, char *shown, size_t cap)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t plen = strcspn(spec + 5, ",");
	int fd, saved;

	if (plen >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, spec + 5, plen);
	snprintf(shown, cap, "unix:%s", sa.sun_path);
	if (clear_stale(&sa) == -1)
		return -1;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1)
		goto fail;
	if (unix_perms(sa.sun_path, spec + 5 + plen) == -1 || listen(fd, backlog) == -1) {
		saved = errno;
		unlink(sa.sun_path);
		errno = saved;
		goto fail;
	}
	return fd;
fail:
	return close_failed(fd);
}

int
lg_master_listen_spec(const char *spec, int backlog, char *shown, size_t cap)
{
	char addr[64];
	const char *colon = strrchr(spec, ':');
	size_t alen;
	int bound = 0, fd;

	if (strncmp(spec, "unix:", 5) == 0)
		return listen_unix(spec, backlog, shown, cap);
	if (colon == NULL || (alen = (size_t)(colon - spec)) >= sizeof(addr) + 2) {
		errno = EINVAL;
		return -1;
	}
	if (spec[0] == '[')
		snprintf(addr, sizeof(addr), "%.*s", (int)(alen - 2), spec + 1);
	else
		snprintf(addr, sizeof(addr), "%.*s", (int)alen, spec);
	if ((fd = lg_master_listen(addr, atoi(colon + 1), backlog, &bound)) == -1)
		return -1;
	snprintf(shown, cap, spec[0] == '[' ? "[%s]:%d" : "%s:%d", addr, bound);
	return fd;
}

void
lg_listeners_close(struct lg_listeners *l)
{
	for (int i = 0; i < l->nmore; i++)
		close(l->more[i]);
	for (int i = 0; i < l->nunix; i++)
		unlink(l->unix_paths[i]);
	l->nmore = l->nunix = 0;
	lg_gen_set_listeners(NULL, 0);
	if (l->admin >= 0)
		close(l->admin);
	l->admin = -1;
	lg_gen_set_admin(-1);
}

static int
open_admin(struct lg_listeners *l, const struct lg_config *cfg)
{
	char shown[192];

	if (cfg->master.admin_listen[0] == '\0')
		return 0;
	if ((l->admin = lg_master_listen_spec(cfg->master.admin_listen, cfg->master.backlog, shown,
	    sizeof(shown))) == -1) {
		log_error("cannot listen on %s (--admin-listen): %s", cfg->master.admin_listen,
		    strerror(errno));
		return -1;
	}
	log_info("admin listener on %s: /metrics /status /health /ready /ping", shown);
	lg_gen_set_admin(l->admin);
	return 0;
}

int
lg_listeners_open(struct lg_listeners *l, const struct lg_config *cfg, int *first,
    int admin_only)
{
	for (int i = 0; !admin_only && i < LG_LISTEN_MAX && cfg->master.listen_more[i][0]; i++) {
		const char *spec = cfg->master.listen_more[i];
		char shown[192];
		int fd = lg_master_listen_spec(spec, cfg->master.backlog, shown, sizeof(shown));

		if (fd == -1) {
			log_error("cannot listen on %s: %s", spec, strerror(errno));
			return -1;
		}
		log_info("listening on %s", shown);
		if (strncmp(spec, "unix:", 5) == 0)
			snprintf(l->unix_paths[l->nunix++], sizeof(l->unix_paths[0]), "%.*s",
			    (int)strcspn(spec + 5, ","), spec + 5);
		if (first != NULL && *first < 0)
			*first = fd;
		else
			l->more[l->nmore++] = fd;
	}
	lg_gen_set_listeners(l->more, l->nmore);
	return open_admin(l, cfg);
}
