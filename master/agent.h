/* The HAProxy agent (--agent-listen ADDR:PORT; haproxy configuration manual 5.2 "agent-check",
 * haproxy 2.6): a TCP listener of the master that answers every connection with one line and
 * closes it. The line always carries the admin state, "ready", or "drain" from the moment a
 * graceful stop begins (the start of --drain-delay-ms, before the main listener closes), so a
 * replica restarted after a drain says "ready" again (HAProxy lets the agent undo only what the
 * agent did), and a weight "NN%" from the serving generation's smoothed offered load
 * (stats/offered.h, damped). Never "up" or "down": health stays with `option httpchk GET
 * /ready`. The master serves it: its poll loop never waits behind compute, it knows the stop
 * state exactly (a reload keeps saying "ready": the replica keeps serving through it), and it
 * keeps answering "drain" until it exits, after the loop workers closed their listeners. */
#ifndef LG_MASTER_AGENT_H
#define LG_MASTER_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/cfg_master.h"
#include "shm/arena.h"
#include "shm/upstream.h"

struct lg_agent {
	int fd;      /* the listener, -1 none */
	int weight;  /* the weight last reported, percent; 0 none yet */
	int maxconn; /* --agent-maxconn: 0 none, else added to the job slots */
};

/* Opens mc->agent_listen (the master's settings; nothing when it is ""), logging the
 * address. Returns 0, or -1 with the reason logged. ag->fd is non-blocking and close-on-exec. */
int lg_agent_open(struct lg_agent *ag, const struct lg_master_cfg *mc);

/* Formats the agent's line for a replica (draining: 1 while stopping) whose largest smoothed
 * offered load is load, damped against ag->weight (updated): "ready 100%\n", "drain 40%\n";
 * with ag->maxconn > 0, " maxconn:N" (N = slots + ag->maxconn; slots: the job slots, compute
 * processes + queue capacity) before the newline. Returns the length written into buf (cap
 * bytes, NUL-terminated). */
size_t lg_agent_line(struct lg_agent *ag, int draining, double load, uint32_t slots, char *buf,
    size_t cap);

/* Accepts what is queued on ag->fd (at most a batch) and answers each connection with the line
 * for a (the serving generation's arena) and draining, then closes it; the load is the larger
 * of the pools' offered load and the upstreams' (ups, shm/upstream.h lg_upshm_load: an
 * upstream's saturation counts as a pool's). Non-blocking: a peer that does not read loses its
 * line, the master never waits. */
void lg_agent_serve(struct lg_agent *ag, const struct lg_arena *a, const struct lg_upshm *ups,
    int draining);

/* Closes the listener. */
void lg_agent_close(struct lg_agent *ag);

/* The drain delay in force for the master's settings mc, ms: --drain-delay-ms when given, else 2500 with
 * --agent-listen (two and a half agent-inter 1s: HAProxy has seen "drain" before the main
 * listener closes), else 0. */
uint64_t lg_agent_drain_delay_ms(const struct lg_master_cfg *mc);

#endif
