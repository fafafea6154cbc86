#include "master/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "common/clock.h"

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
lg_notify_listen_fds(int *fds, int cap, char *err, size_t errlen)
{
	int n = sd_listen_fds(1);

	if (n < 0) {
		snprintf(err, errlen, "LISTEN_FDS: %s", strerror(-n));
		return -1;
	}
	if (n > cap) {
		snprintf(err, errlen, "systemd passed %d sockets (LISTEN_FDS); lagless serves at most "
		    "%d, as many as listen takes", n, cap);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;

		if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
			snprintf(err, errlen, "passed descriptor %d (number %d of LISTEN_FDS=%d) is "
			    "not a listening stream socket (ListenStream= in the .socket unit)", fd,
			    i + 1, n);
			return -1;
		}
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == -1 ||
		    fcntl(fd, F_SETFD, FD_CLOEXEC) == -1) {
			snprintf(err, errlen, "passed descriptor %d: fcntl: %s", fd, strerror(errno));
			return -1;
		}
		fds[i] = fd;
	}
	return n;
}
