#include "shm/channel.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static void
close_pair(int p[2])
{
	for (int k = 0; k < 2; k++) {
		if (p[k] >= 0)
			close(p[k]);
		p[k] = -1;
	}
}

static int
seqpacket_pair(int p[2])
{
	return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p);
}

int
lg_channels_create(struct lg_channels *ch, uint32_t nloops, uint32_t npools)
{
	int saved;

	for (uint32_t p = 0; p < LG_MAX_POOLS; p++)
		ch->job[p][0] = ch->job[p][1] = -1;
	ch->ctl[0] = ch->ctl[1] = -1;
	ch->nloops = nloops;
	ch->npools = npools;
	ch->done = NULL;
	if (npools < 1 || npools > LG_MAX_POOLS) {
		errno = EINVAL;
		return -1;
	}
	if ((ch->done = malloc(sizeof(*ch->done) * (nloops ? nloops : 1))) == NULL)
		return -1;
	for (uint32_t i = 0; i < nloops; i++)
		ch->done[i][0] = ch->done[i][1] = -1;
	for (uint32_t p = 0; p < npools; p++)
		if (seqpacket_pair(ch->job[p]) == -1)
			goto fail;
	if (seqpacket_pair(ch->ctl) == -1)
		goto fail;
	for (uint32_t i = 0; i < nloops; i++)
		if (seqpacket_pair(ch->done[i]) == -1)
			goto fail;
	return 0;
fail:
	saved = errno;
	lg_channels_close(ch);
	errno = saved;
	return -1;
}

void
lg_channels_close(struct lg_channels *ch)
{
	for (uint32_t p = 0; p < LG_MAX_POOLS; p++)
		close_pair(ch->job[p]);
	close_pair(ch->ctl);
	if (ch->done != NULL) {
		for (uint32_t i = 0; i < ch->nloops; i++)
			close_pair(ch->done[i]);
		free(ch->done);
		ch->done = NULL;
	}
}

static void
close_end(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void
lg_channels_keep(struct lg_channels *ch, char role, uint32_t index, uint32_t pool)
{
	int loop = role == 'l';

	for (uint32_t p = 0; p < LG_MAX_POOLS; p++) {
		close_end(&ch->job[p][loop ? 1 : 0]);
		if (!loop && p != pool)
			close_end(&ch->job[p][1]);
	}
	close_end(&ch->ctl[1]);
	if (!loop)
		close_end(&ch->ctl[0]);
	for (uint32_t i = 0; i < ch->nloops; i++) {
		if (!loop) {
			close_end(&ch->done[i][0]);
			continue;
		}
		if (i != index)
			close_end(&ch->done[i][0]);
	}
}

int
lg_chan_send(int fd, const struct lg_msg *m, int flags)
{
	char buf[LG_WIRE_MAX];
	int n = lg_wire_encode(m, buf, sizeof(buf));

	if (n < 0)
		return -1;
	for (;;) {
		if (send(fd, buf, (size_t)n, flags | MSG_NOSIGNAL) == n)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

int
lg_chan_recv(int fd, struct lg_msg *m, int flags)
{
	char buf[LG_WIRE_MAX + 1];
	ssize_t n;

	/* One byte more than any valid header: a longer datagram is truncated (MSG_TRUNC) and
	 * then fails to decode instead of passing as a prefix. */
	n = recv(fd, buf, sizeof(buf), flags);
	if (n < 0)
		return -1;
	return lg_wire_decode(buf, (size_t)n, m) == 0 ? 1 : 0;
}
