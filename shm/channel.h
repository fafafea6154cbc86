/* The kernel channels the headers travel on (AF_UNIX SOCK_SEQPACKET socketpairs, unix(7)):
 * message boundaries are kept, a reader gets a whole header or nothing, and the kernel queues and
 * wakes, so a process killed at any instant cannot corrupt a channel.
 *
 *   job        every loop worker sends JOB headers on job[0] (the master RETIRE headers, to
 *              shrink the pool); every compute process receives on job[1] (blocking recv: the
 *              kernel hands each message to one waiting reader).
 *   done[i]    completion channel of loop worker i: compute processes and the master send DONE
 *              on done[i][1]; loop worker i receives on done[i][0]. The master keeps both ends
 *              open across respawns, so a new incarnation inherits the channel.
 *              Loop workers also send WAKE and UNWANTED (single-flight, shm/flight.h) on
 *              every other loop's done[i][1].
 *   ctl        loop workers send KILL requests on ctl[0]; the master receives on ctl[1].
 *
 * All descriptors are created by the master before forking, and are CLOEXEC. */
#ifndef LG_SHM_CHANNEL_H
#define LG_SHM_CHANNEL_H

#include <stdint.h>

#include "common/limits.h"
#include "shm/wire.h"


struct lg_channels {
	int job[LG_MAX_POOLS][2]; /* job[p]: pool p's job channel (npools of them) */
	int ctl[2];
	int (*done)[2];   /* nloops pairs, heap-owned by this struct */
	uint32_t nloops;
	uint32_t npools;
};

/* Creates every channel for nloops loop workers and npools pools (1..LG_MAX_POOLS; each pool
 * has its own job channel, so a full or slow pool never delays another's jobs). Returns 0, or
 * -1 with errno from socketpair(2)/malloc (EMFILE, ENFILE, ENOMEM) or EINVAL for npools; on
 * failure nothing is left open. */
int lg_channels_create(struct lg_channels *ch, uint32_t nloops, uint32_t npools);

/* Closes every descriptor still open (>= 0) and frees done[]. Safe to call twice. */
void lg_channels_close(struct lg_channels *ch);

/* Closes, in a freshly forked child, every end that role does not use, so a compute process
 * holds no loop-side end and a loop worker holds only its own completion channel.
 * role 'l' keeps every job[p][0], ctl[0], done[index][0] and every done[i][1] (to wake
 * other loops' coalesced waiters); role 'c' keeps job[pool][1] (its own
 * pool's) and every done[i][1]. pool is ignored for 'l'. */
void lg_channels_keep(struct lg_channels *ch, char role, uint32_t index, uint32_t pool);

/* Encodes m and sends it as one datagram on fd with send(2) flags (MSG_DONTWAIT from a loop).
 * MSG_NOSIGNAL is always added. Returns 0, or -1 with errno from send(2) (EAGAIN when the
 * channel is full) or lg_wire_encode. */
int lg_chan_send(int fd, const struct lg_msg *m, int flags);

/* Receives one datagram from fd with recv(2) flags and decodes it into *m. Returns 1 with a
 * valid header, 0 when a datagram was read but failed to decode (counted by the caller and
 * dropped; errno from lg_wire_decode), or -1 with errno from recv(2) (EAGAIN, EINTR). */
int lg_chan_recv(int fd, struct lg_msg *m, int flags);

#endif
