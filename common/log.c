#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

int lg_log_level = LG_LOG_INFO;

static const char *log_role = "main";
static int log_index = 0;
static const char *const level_names[] = { "error", "warn", "info", "debug" };
static char log_path[256];

void
lg_log_set_role(const char *role, int index)
{
	log_role = role;
	log_index = index;
}

int
lg_log_reopen(void)
{
	int fd, saved;

	if (log_path[0] == '\0')
		return 0;
	if ((fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640)) == -1)
		return -1;
	if (fd != STDERR_FILENO && dup2(fd, STDERR_FILENO) == -1) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	if (fd != STDERR_FILENO)
		close(fd);
	return 0;
}

int
lg_log_open(const char *path)
{
	if (path == NULL || path[0] == '\0')
		return 0;
	if (strlen(path) >= sizeof(log_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(log_path, path, strlen(path) + 1);
	if (lg_log_reopen() == -1) {
		log_path[0] = '\0';
		return -1;
	}
	return 0;
}

int
lg_log_parse_level(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcasecmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

void
lg_log_write(int level, const char *func, const char *fmt, ...)
{
	char line[4096]; /* PIPE_BUF: one write(2) of it is atomic (pipe(7)) */
	struct timespec ts;
	struct tm tm;
	size_t n;
	int r;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	r = snprintf(line + n, sizeof(line) - n, ".%03ldZ %s %s[%d] pid=%d %s: ",
	    ts.tv_nsec / 1000000, level_names[level < 0 ? 0 : level > 3 ? 3 : level],
	    log_role, log_index, (int)getpid(), func);
	if (r > 0)
		n += (size_t)r < sizeof(line) - n ? (size_t)r : sizeof(line) - n - 1;
	va_start(ap, fmt);
	r = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (r > 0)
		n += (size_t)r < sizeof(line) - n ? (size_t)r : sizeof(line) - n - 1;
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write so lines from several processes do not interleave (PIPE_BUF is 4 KiB). */
	(void)!write(STDERR_FILENO, line, n);
}
