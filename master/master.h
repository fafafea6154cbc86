/* The master: owns every shared resource, forks and supervises the loop workers and compute
 * processes, turns signals into lifecycle actions, and serves no request. */
#ifndef LG_MASTER_MASTER_H
#define LG_MASTER_MASTER_H

#include "common/config.h"
#include "sizing/sizing.h"

/* Creates the listen socket, the arena and the channels, forks sz->loop_workers loop workers
 * and sz->compute_workers compute processes, and supervises them until SIGTERM/SIGINT (graceful
 * drain, bounded by cfg->master.drain_timeout_ms) or SIGQUIT (immediate stop). SIGHUP re-reads the
 * configuration from argc/argv (lg_options_load; argv must stay valid) and replaces the workers
 * without closing the listen socket. Returns the process exit status: 0 after a stop, 1 when
 * start-up failed (logged) or a role kept crashing. */
int lg_master_run(const struct lg_config *cfg, const struct lg_sizing *sz, int argc, char **argv);

/* Opens a non-blocking, CLOEXEC TCP listening socket on addr (numeric IPv4/IPv6) and port
 * (0 picks a free one) with SO_REUSEADDR, and stores the bound port in *bound.
 * Returns the descriptor, or -1 with errno from getaddrinfo-free inet_pton (EINVAL),
 * socket/bind/listen (EADDRINUSE, EACCES, EMFILE). */
int lg_master_listen(const char *addr, int port, int backlog, int *bound);

/* Opens one listener of cfg->master.listen_more (common/config.h): "ADDR:PORT" (numeric, IPv6 in
 * brackets) as lg_master_listen does, or "unix:/path[,mode=OCTAL][,owner=USER[:GROUP]]": a
 * stream socket bound at path (a stale socket file nobody accepts on is replaced; one a server
 * still accepts on is EADDRINUSE), then chmod and chown as given (unix(7): connecting needs
 * write permission on the socket file). Writes what to log ("127.0.0.1:8081", the path) into
 * shown (cap bytes). Returns the non-blocking, CLOEXEC descriptor, or -1 with errno. */
int lg_master_listen_spec(const char *spec, int backlog, char *shown, size_t cap);

/* The master's listeners besides its first TCP one: cfg->master.listen_more and --admin-listen. */
struct lg_listeners {
	int more[LG_LISTEN_MAX];             /* handed to every loop worker (lg_gen_set_listeners) */
	int nmore;
	char unix_paths[LG_LISTEN_MAX][108]; /* socket files bound, removed by lg_listeners_close */
	int nunix;
	int admin;                           /* --admin-listen (lg_gen_set_admin), or -1 */
};

/* Opens and logs the listeners of cfg->master.listen_more (when first is not NULL, the first of them
 * goes to *first: a unix:/path listener given first, with no TCP one) unless admin_only, then
 * the admin listener, and hands them to the loop workers forked from now on. Returns 0, or -1
 * with the error logged (what was opened stays in l, for lg_listeners_close). */
int lg_listeners_open(struct lg_listeners *l, const struct lg_config *cfg, int *first,
    int admin_only);

/* Closes what l holds and removes the unix socket files it bound; loop workers forked later
 * get none of them. Safe to call again. */
void lg_listeners_close(struct lg_listeners *l);

/* The value of a listen setting (master/options.c): blank-separated listeners, the first TCP
 * one into cfg->master.listen_addr and cfg->master.port, the others into cfg->master.listen_more (replaced, or
 * added to when append); a listener's ",proxy" option sets its bit in cfg->master.listen_proxy. Host names are resolved here (getaddrinfo(3), the first address).
 * Returns 0, or -1 for a malformed or unresolvable listener, or more than LG_LISTEN_MAX. */
int lg_listen_parse(const char *v, struct lg_config *cfg, int append);

/* The socket path of a listener spec "unix:/path[,mode=...][,owner=...]" (cfg->master.listen_more)
 * into out (cap bytes, cut to fit): 1, or 0 for a TCP "ADDR:PORT" (out untouched). */
int lg_listen_unix_path(const char *spec, char *out, size_t cap);

/* The directory part of path into out (cap bytes, cut to fit): "." for a bare name, "/" for a
 * name at the root (dirname(3)'s answers, without modifying path). */
void lg_path_dir(const char *path, char *out, size_t cap);

/* Refuses listeners that cannot all be bound: two of --listen, --admin-listen and
 * --agent-listen on the same unix path, or on the same TCP port (not 0) of the same address
 * (compared as bytes when numeric, an IPv4 one and its v4-mapped form alike) or
 * of the wildcard of its family (0.0.0.0, [::]), or of [::] and an IPv4 address where [::]
 * takes IPv4 too (net.ipv6.bindv6only 0, the default: ipv6(7)). The start-up would fail at
 * bind(2); -t and a reload's check now say so first. Returns 0, or -1 naming both settings in
 * err (cap bytes). */
int lg_listen_check_distinct(const struct lg_config *cfg, char *err, size_t cap);

/* Refuses a TCP listener with ",proxy" (cfg->master.listen_proxy) while --trusted-proxies is empty:
 * its header is taken only from a trusted peer, so it would close every connection. A unix
 * listener's peers are whoever its file's mode and owner let in: no address to check.
 * Returns 0, or -1 with the reason in err (cap bytes). */
int lg_listen_check_proxy(const struct lg_config *cfg, char *err, size_t cap);

/* One TCP listener "ADDR:PORT" (or "PORT", or a host name) normalized into out (cap bytes) as
 * numeric "ADDR:PORT", IPv6 in brackets. Returns 0 or -1. */
int lg_listen_parse_addr(const char *v, char *out, size_t cap);

#endif
