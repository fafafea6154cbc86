/* Who the client of a connection is (docs/OPERATIONS.md "Behind a load balancer"): the peer,
 * or, behind a trusted proxy, the client the proxy names: the address of a PROXY protocol
 * header on a ",proxy" listener (http/proxyproto.h), then the rightmost X-Forwarded-For entry
 * that is not itself a trusted proxy (RFC 7239 section 5.2's rule for the chain). The access
 * log, the per-address transit share and the upload cut's lock-out (worker/job/fairshare.c) all
 * ask here, so they name the same client. State per descriptor number of this loop worker,
 * set at every accept, so it survives the connection's idle periods (worker/core/conn_idle.c). */
#ifndef LG_WORKER_CLIENT_H
#define LG_WORKER_CLIENT_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

struct lg_conn;
struct lg_worker;

/* fd was just accepted, from peer (accept4(2)'s address), on a listener that takes a PROXY
 * header first (proxy 1) or not (0). On a proxy listener the peer must be in --trusted-proxies (a unix socket's peer is whoever
 * its file lets in: taken); the header is then awaited (lg_client_proxy_feed). Returns 0, or
 * -1 when fd is to be closed at once, unanswered: an untrusted peer of a proxy listener
 * (logged at debug level), or no memory to record the state (ENOMEM). */
int lg_client_accepted(struct lg_worker *w, int fd, int proxy,
    const struct sockaddr_storage *peer);

/* 1 while connection fd still owes its PROXY header, else 0. */
int lg_client_proxy_wanted(int fd);

/* The PROXY header of connection fd from the len bytes buf holds so far (the start of what
 * the connection sent). Returns as lg_proxy_parse: the header's length (its address now
 * names the client: a LOCAL or UNKNOWN header keeps the peer), LG_PROXY_PARTIAL (read more,
 * within the head timeout), or LG_PROXY_BAD (close without an answer). */
ssize_t lg_client_proxy_feed(int fd, const char *buf, size_t len);

/* The client of c's current request into *ss (*len bytes, AF_INET or AF_INET6, or the peer's
 * AF_UNIX address), by the rule above; the X-Forwarded-For lines are those of c's parsed
 * head. Returns 1 when a trusted proxy named it (PROXY header or X-Forwarded-For), 0 when it
 * is the peer itself (as accepted), -1 when there is none. */
int lg_client_addr(const struct lg_conn *c, struct sockaddr_storage *ss, socklen_t *len);

/* lg_client_addr as text into out (cap bytes, 46 fit any address): numeric, "unix" for a
 * unix socket's peer, "-" for none. */
void lg_client_text(const struct lg_conn *c, char *out, size_t cap);

#endif
