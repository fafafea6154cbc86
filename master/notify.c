#include "master/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

/* sd_notify returns a negative errno; turn it into our -1/errno convention. */
static int
sent(int r)
{
	if (r >= 0)
		return r;
	errno = -r;
	return -1;
}

int
lg_notify_ready(const char *status)
{
	return sent(status ? sd_notifyf(0, "READY=1\nSTATUS=%s", status) : sd_notify(0, "READY=1"));
}

int
lg_notify_reloading(void)
{
	return sent(sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)(lg_now_ns() / 1000)));
}

int
lg_notify_stopping(void)
{
	return sent(sd_notify(0, "STOPPING=1"));
}

int
lg_notify_status(const char *status)
{
	return sent(sd_notifyf(0, "STATUS=%s", status));
}

int
lg_notify_watchdog(void)
{
	return sent(sd_notify(0, "WATCHDOG=1"));
}

uint64_t
lg_notify_watchdog_usec(void)
{
	uint64_t usec = 0;

	return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

int
lg_notify_listen_fd(void)
{
	int n = sd_listen_fds(1), fd = SD_LISTEN_FDS_START;

	if (n <= 0) {
		errno = n < 0 ? -n : 0;
		return -1;
	}
	if (n > 1)
		log_warn("socket activation passed %d descriptors; using only fd %d", n, fd);
	for (int extra = 1; extra < n; extra++)
		close(fd + extra);
	if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
		errno = EINVAL;
		return -1;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == -1 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) == -1)
		return -1;
	return fd;
}
