/* The master: owns every shared resource, forks and supervises the loop workers and compute
 * processes, turns signals into lifecycle actions, and serves no request. */
#ifndef LG_MASTER_MASTER_H
#define LG_MASTER_MASTER_H

#include "common/config.h"
#include "master/sizing.h"

/* Creates the listen socket, the arena and the channels, forks sz->loop_workers loop workers
 * and sz->compute_workers compute processes, and supervises them until SIGTERM/SIGINT (graceful
 * drain, bounded by cfg->drain_timeout_ms) or SIGQUIT (immediate stop). SIGHUP re-reads the
 * configuration from argc/argv (lg_options_load; argv must stay valid) and replaces the workers
 * without closing the listen socket. Returns the process exit status: 0 after a stop, 1 when
 * start-up failed (logged) or a role kept crashing. */
int lg_master_run(const struct lg_config *cfg, const struct lg_sizing *sz, int argc, char **argv);

/* Opens a non-blocking, CLOEXEC TCP listening socket on addr (numeric IPv4/IPv6) and port
 * (0 picks a free one) with SO_REUSEADDR, and stores the bound port in *bound.
 * Returns the descriptor, or -1 with errno from getaddrinfo-free inet_pton (EINVAL),
 * socket/bind/listen (EADDRINUSE, EACCES, EMFILE). */
int lg_master_listen(const char *addr, int port, int backlog, int *bound);

/* Opens one listener of cfg->listen_more (common/config.h): "ADDR:PORT" (numeric, IPv6 in
 * brackets) as lg_master_listen does, or "unix:/path[,mode=OCTAL][,owner=USER[:GROUP]]": a
 * stream socket bound at path (a stale socket file nobody accepts on is replaced; one a server
 * still accepts on is EADDRINUSE), then chmod and chown as given (unix(7): connecting needs
 * write permission on the socket file). Writes what to log ("127.0.0.1:8081", the path) into
 * shown (cap bytes). Returns the non-blocking, CLOEXEC descriptor, or -1 with errno. */
int lg_master_listen_spec(const char *spec, int backlog, char *shown, size_t cap);

#endif
