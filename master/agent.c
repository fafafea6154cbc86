#include "master/agent.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "master/gen.h"
#include "master/master.h"
#include "stats/offered.h"

#define AGENT_BATCH 64 /* connections answered per readiness event */

int
lg_agent_open(struct lg_agent *ag, const struct lg_master_cfg *mc)
{
	char shown[192];

	ag->fd = -1;
	ag->weight = 0;
	ag->maxconn = mc->agent_maxconn;
	if (mc->agent_listen[0] == '\0')
		return 0;
	if ((ag->fd = lg_master_listen_spec(mc->agent_listen, 128, shown, sizeof(shown))) == -1) {
		log_error("cannot listen on %s (--agent-listen): %s", mc->agent_listen,
		    strerror(errno));
		return -1;
	}
	lg_gen_set_master_only(ag->fd);
	log_info("HAProxy agent on %s (drain delay %llu ms)", shown,
	    (unsigned long long)lg_agent_drain_delay_ms(mc));
	return 0;
}

size_t
lg_agent_line(struct lg_agent *ag, int draining, double load, uint32_t slots, char *buf,
    size_t cap)
{
	char maxconn[32] = "";
	int n;

	ag->weight = lg_offered_weight(load, ag->weight);
	if (ag->maxconn > 0)
		snprintf(maxconn, sizeof(maxconn), " maxconn:%llu",
		    (unsigned long long)slots + (unsigned long long)ag->maxconn);
	n = snprintf(buf, cap, "%s %d%%%s\n", draining ? "drain" : "ready", ag->weight, maxconn);
	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

void
lg_agent_serve(struct lg_agent *ag, const struct lg_arena *a, const struct lg_upshm *ups,
    int draining)
{
	double load = lg_offered_max(a), up = lg_upshm_load(ups);

	char line[64], sink[256];
	size_t len = 0;

	for (int i = 0; ag->fd >= 0 && i < AGENT_BATCH; i++) {
		int fd = accept4(ag->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd == -1)
			return; /* EAGAIN, or a transient error: the next readiness retries */
		if (len == 0)
			len = lg_agent_line(ag, draining, up > load ? up : load,
			    atomic_load(&a->master->compute_workers) +
			    atomic_load(&a->master->queue_capacity), line, sizeof(line));
		(void)send(fd, line, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		/* Read what the peer sent (agent-send) so the close sends FIN, not RST. */
		for (int k = 0; k < 4 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; k++)
			;
		shutdown(fd, SHUT_WR);
		close(fd);
	}
}

void
lg_agent_close(struct lg_agent *ag)
{
	if (ag->fd >= 0)
		close(ag->fd);
	ag->fd = -1;
	lg_gen_set_master_only(-1);
}

uint64_t
lg_agent_drain_delay_ms(const struct lg_master_cfg *mc)
{
	if (mc->drain_delay_ms != LG_DRAIN_DELAY_AUTO)
		return mc->drain_delay_ms;
	return mc->agent_listen[0] ? 2500 : 0;
}
