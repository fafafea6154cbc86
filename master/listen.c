#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "master/master.h"

int
lg_master_listen(const char *addr, int port, int backlog, int *bound)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, saved;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		((struct sockaddr_in *)&ss)->sin_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
		len = sizeof(struct sockaddr_in);
	} else if (inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
		len = sizeof(struct sockaddr_in6);
	} else {
		errno = EINVAL;
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(fd, (struct sockaddr *)&ss, len) == -1 || listen(fd, backlog) == -1)
		goto fail;
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1)
		goto fail;
	*bound = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port :
	    ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

/* A socket file at path that no server accepts on (connect(2) is refused) is left over from a
 * server that died: it may go. Returns 0 when path is free now, -1 with errno otherwise. */
static int
clear_stale(const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, r;

	if (lstat(sa->sun_path, &st) == -1)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(st.st_mode)) {
		errno = EEXIST;
		return -1;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (r == 0) {
		errno = EADDRINUSE;
		return -1;
	}
	return unlink(sa->sun_path);
}

/* Applies ",mode=OCTAL" and ",owner=USER[:GROUP]" of opts (checked by master/options.c). */
static int
unix_perms(const char *path, const char *opts)
{
	char buf[160], *o, *next;

	snprintf(buf, sizeof(buf), "%s", opts);
	for (o = buf[0] == ',' ? buf + 1 : NULL; o != NULL; o = next) {
		if ((next = strchr(o, ',')) != NULL)
			*next++ = '\0';
		if (strncmp(o, "mode=", 5) == 0 &&
		    chmod(path, (mode_t)strtol(o + 5, NULL, 8)) == -1)
			return -1;
		if (strncmp(o, "owner=", 6) == 0) {
			char *grp = strchr(o + 6, ':');
			struct passwd *pw;
			struct group *gr = NULL;

			if (grp != NULL)
				*grp++ = '\0';
			if ((pw = getpwnam(o + 6)) == NULL || (grp && (gr = getgrnam(grp)) == NULL)) {
				errno = ENOENT;
				return -1;
			}
			if (chown(path, pw->pw_uid, gr ? gr->gr_gid : pw->pw_gid) == -1)
				return -1;
		}
	}
	return 0;
}

static int
listen_unix(const char *spec, int backlog, char *shown, size_t cap)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t plen = strcspn(spec + 5, ",");
	int fd, saved;

	if (plen >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, spec + 5, plen);
	snprintf(shown, cap, "unix:%s", sa.sun_path);
	if (clear_stale(&sa) == -1)
		return -1;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1)
		goto fail;
	if (unix_perms(sa.sun_path, spec + 5 + plen) == -1 || listen(fd, backlog) == -1) {
		saved = errno;
		unlink(sa.sun_path);
		errno = saved;
		goto fail;
	}
	return fd;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

int
lg_master_listen_spec(const char *spec, int backlog, char *shown, size_t cap)
{
	char addr[64];
	const char *colon = strrchr(spec, ':');
	size_t alen;
	int bound = 0, fd;

	if (strncmp(spec, "unix:", 5) == 0)
		return listen_unix(spec, backlog, shown, cap);
	if (colon == NULL || (alen = (size_t)(colon - spec)) >= sizeof(addr) + 2) {
		errno = EINVAL;
		return -1;
	}
	if (spec[0] == '[')
		snprintf(addr, sizeof(addr), "%.*s", (int)(alen - 2), spec + 1);
	else
		snprintf(addr, sizeof(addr), "%.*s", (int)alen, spec);
	if ((fd = lg_master_listen(addr, atoi(colon + 1), backlog, &bound)) == -1)
		return -1;
	snprintf(shown, cap, spec[0] == '[' ? "[%s]:%d" : "%s:%d", addr, bound);
	return fd;
}
