/* The client of each connection of this loop worker (worker/core/client.h). */
#include "worker/core/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cidr.h"
#include "common/log.h"
#include "http/proxyproto.h"
#include "worker/core/conn.h"

enum { PEER, WANT_HEADER, FROM_HEADER };

/* What the accept and a PROXY header said about a descriptor number. The peer's address is
 * kept from the accept: getpeername(2) fails once the peer has reset the connection, and a
 * client that resets it right after its answer was written would be logged without one. */
struct fd_client {
	uint8_t state;           /* PEER, WANT_HEADER, FROM_HEADER */
	uint8_t v6;              /* FROM_HEADER: addr is IPv6 (else IPv4, 4 bytes) */
	uint8_t addr[16];
	sa_family_t peer_fam;    /* AF_INET, AF_INET6, AF_UNIX, or 0: unknown (ask the socket) */
	uint8_t peer[16];        /* AF_INET (4 bytes) or AF_INET6: the peer's IP address */
};

static struct fd_client *by_fd;    /* per descriptor number, grown as accept returns higher */
static size_t by_fd_cap;

/* --trusted-proxies of this process, parsed on first use (-t checked it already). */
static struct lg_cidr trusted[LG_CIDR_MAX];
static int ntrusted = -1;

static void
trusted_init(const struct lg_conn_cfg *cc)
{
	if (ntrusted < 0 && (ntrusted = lg_cidr_parse(cc->trusted_proxies, trusted)) < 0)
		ntrusted = 0;
}

/* The IP address bytes of ss (AF_INET or AF_INET6), or NULL. */
static const void *
ip_of(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr :
	    ss->ss_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr :
	    NULL;
}

static int
is_trusted(const struct sockaddr_storage *ss)
{
	const void *ip = ip_of(ss);

	return ip != NULL && ntrusted > 0 && lg_cidr_match(trusted, ntrusted, ss->ss_family, ip);
}

/* ss (*len) made the address of family fam (AF_INET or AF_INET6) whose bytes are at ip. */
static void
set_addr(struct sockaddr_storage *ss, socklen_t *len, int fam, const void *ip)
{
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = (sa_family_t)fam;
	if (fam == AF_INET) {
		memcpy(&((struct sockaddr_in *)ss)->sin_addr, ip, 4);
		*len = sizeof(struct sockaddr_in);
	} else {
		memcpy(&((struct sockaddr_in6 *)ss)->sin6_addr, ip, 16);
		*len = sizeof(struct sockaddr_in6);
	}
}

int
lg_client_accepted(struct lg_worker *w, int fd, int proxy, const struct sockaddr_storage *peer)
{
	const struct sockaddr_storage *ss = peer;
	const void *pip = ip_of(peer);

	if ((size_t)fd >= by_fd_cap) {
		size_t cap = (size_t)fd * 2 + 64;
		struct fd_client *p = realloc(by_fd, cap * sizeof(*p));

		if (p == NULL) {
			errno = ENOMEM;
			return -1;
		}
		memset(p + by_fd_cap, 0, (cap - by_fd_cap) * sizeof(*p));
		by_fd = p;
		by_fd_cap = cap;
	}
	by_fd[fd].state = PEER;
	by_fd[fd].peer_fam = pip != NULL || peer->ss_family == AF_UNIX ? peer->ss_family : 0;
	if (pip != NULL)
		memcpy(by_fd[fd].peer, pip, peer->ss_family == AF_INET ? 4 : 16);
	if (!proxy)
		return 0;
	trusted_init(&w->env->cfg->conn);
	if (ss->ss_family != AF_UNIX && !is_trusted(ss)) {
		char text[INET6_ADDRSTRLEN] = "-";

		if (pip != NULL)
			inet_ntop(ss->ss_family, pip, text, sizeof(text));
		log_debug("PROXY listener: %s is not in --trusted-proxies, closing fd %d", text, fd);
		return -1;
	}
	by_fd[fd].state = WANT_HEADER;
	return 0;
}

int
lg_client_proxy_wanted(int fd)
{
	return fd >= 0 && (size_t)fd < by_fd_cap && by_fd[fd].state == WANT_HEADER;
}

ssize_t
lg_client_proxy_feed(int fd, const char *buf, size_t len)
{
	struct lg_proxy_addr a;
	ssize_t r = lg_proxy_parse(buf, len, &a);
	struct fd_client *f = &by_fd[fd];

	if (r <= 0)
		return r;
	f->state = a.family == 0 ? PEER : FROM_HEADER;
	f->v6 = a.family == AF_INET6;
	memcpy(f->addr, a.src, sizeof(f->addr));
	return r;
}

/* One X-Forwarded-For field line v (n bytes), entries from right to left: 1 with the first
 * untrusted address in *ss, -1 on an entry that is no address (the list is unusable), 0 when
 * every entry is a trusted hop (look at the line before). */
static int
forwarded_line(const char *v, size_t n, struct sockaddr_storage *ss, socklen_t *sslen)
{
	for (;;) {
		size_t start = n;
		char one[64];
		unsigned char bin[16];

		while (start > 0 && v[start - 1] != ',')
			start--;
		const char *e = v + start;
		size_t len = n - start;

		while (len > 0 && (*e == ' ' || *e == '\t'))
			e++, len--;
		while (len > 0 && (e[len - 1] == ' ' || e[len - 1] == '\t'))
			len--;
		if (len == 0 || len >= sizeof(one))
			return -1;
		memcpy(one, e, len);
		one[len] = '\0';
		int fam = inet_pton(AF_INET, one, bin) == 1 ? AF_INET :
		    inet_pton(AF_INET6, one, bin) == 1 ? AF_INET6 : 0;
		if (fam == 0)
			return -1;
		if (!lg_cidr_match(trusted, ntrusted, fam, bin)) {
			set_addr(ss, sslen, fam, bin);
			return 1;
		}
		if (start == 0)
			return 0; /* a trusted hop: look further left */
		n = start - 1;
	}
}

/* The rightmost X-Forwarded-For entry that is not a trusted proxy (RFC 7239 section 5.2's
 * rule for the "for" chain), into *ss; 0 when there is none usable. Several field lines are
 * one list, in order (RFC 9110 section 5.3): HAProxy's "option forwardfor" appends a line of
 * its own after the one a client sent, so the last line is read first. When the parser kept
 * only the first fields (no keep set: http/http.h), the proxy's line may be among those
 * dropped, and the rightmost kept entry is then one the client wrote: none is usable. */
static int
forwarded_for(const struct lg_conn *c, struct sockaddr_storage *ss, socklen_t *sslen)
{
	const char *line[LG_HTTP_KEPT];
	size_t len[LG_HTTP_KEPT];
	unsigned pos = 0, nl = 0;

	if (c->http.req.kept_short)
		return 0;
	while (nl < LG_HTTP_KEPT && (line[nl] = lg_http_field_next(&c->http.req,
	    "x-forwarded-for", &pos, &len[nl])) != NULL)
		nl++;
	while (nl-- > 0) {
		int r = len[nl] > 0 ? forwarded_line(line[nl], len[nl], ss, sslen) : -1;

		if (r != 0)
			return r == 1;
	}
	return 0;
}

int
lg_client_addr(const struct lg_conn *c, struct sockaddr_storage *ss, socklen_t *len)
{
	const struct fd_client *f = c->fd >= 0 && (size_t)c->fd < by_fd_cap ? &by_fd[c->fd] : NULL;
	int named = 0;

	trusted_init(&c->w->env->cfg->conn);
	*len = sizeof(*ss);
	if (f != NULL && f->state == FROM_HEADER) {
		set_addr(ss, len, f->v6 ? AF_INET6 : AF_INET, f->addr);
		named = 1;
	} else if (f != NULL && (f->peer_fam == AF_INET || f->peer_fam == AF_INET6)) {
		set_addr(ss, len, f->peer_fam, f->peer);
	} else if (f != NULL && f->peer_fam == AF_UNIX) {
		memset(ss, 0, sizeof(*ss));
		ss->ss_family = AF_UNIX;
		*len = sizeof(sa_family_t);
	} else if (getpeername(c->fd, (struct sockaddr *)ss, len) == -1) {
		return -1;
	}
	if (is_trusted(ss)) {
		struct sockaddr_storage fwd;
		socklen_t flen;

		if (forwarded_for(c, &fwd, &flen)) {
			*ss = fwd;
			*len = flen;
			named = 1;
		}
	}
	return named;
}

/* The IPv4 address ip (4 bytes, network order) in dotted decimal, as inet_ntop(3) writes it,
 * into out (INET_ADDRSTRLEN bytes fit any), NUL-terminated: by hand, since inet_ntop formats
 * each byte with sprintf, and a proxied request names its client once (worker/upstream/). */
static void
ipv4_text(const void *ip, char *out)
{
	const unsigned char *b = ip;

	for (int i = 0; i < 4; i++) {
		unsigned v = b[i];

		if (v >= 100)
			*out++ = (char)('0' + v / 100);
		if (v >= 10)
			*out++ = (char)('0' + v / 10 % 10);
		*out++ = (char)('0' + v % 10);
		*out++ = i < 3 ? '.' : '\0';
	}
}

void
lg_client_text(const struct lg_conn *c, char *out, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len;
	const void *ip;

	if (lg_client_addr(c, &ss, &len) == -1) {
		snprintf(out, cap, "-");
		return;
	}
	if ((ip = ip_of(&ss)) == NULL) {
		snprintf(out, cap, "%s", ss.ss_family == AF_UNIX ? "unix" : "-");
		return;
	}
	if (ss.ss_family == AF_INET && cap >= INET_ADDRSTRLEN) {
		ipv4_text(ip, out);
		return;
	}
	if (inet_ntop(ss.ss_family, ip, out, (socklen_t)cap) == NULL)
		snprintf(out, cap, "-");
}
