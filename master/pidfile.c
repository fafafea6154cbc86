#include "master/pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes len bytes of text to path through path.tmp and rename(2). */
static int
replace_file(const char *path, const char *text, size_t len)
{
	char tmp[PATH_MAX];
	int fd, saved;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) == -1)
		return -1;
	if (write(fd, text, len) != (ssize_t)len || close(fd) == -1) {
		saved = errno ? errno : EIO;
		unlink(tmp);
		errno = saved;
		return -1;
	}
	if (rename(tmp, path) == -1) {
		saved = errno;
		unlink(tmp);
		errno = saved;
		return -1;
	}
	return 0;
}

static int
outcome_path(const char *path, char *out, size_t cap)
{
	if (snprintf(out, cap, "%s.reload", path) >= (int)cap) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

int
lg_pidfile_write(const char *path, pid_t pid)
{
	char line[32], rel[PATH_MAX];
	int n = snprintf(line, sizeof(line), "%d\n", (int)pid);

	if (outcome_path(path, rel, sizeof(rel)) == -1)
		return -1;
	if (unlink(rel) == -1 && errno != ENOENT)
		return -1;
	return replace_file(path, line, (size_t)n);
}

/* The first line of the file at path into buf (cap bytes, the newline kept when it fits).
 * Returns 0, or -1 with errno from fopen(3), or EINVAL for an empty file. */
static int
first_line(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "re");

	if (f == NULL)
		return -1;
	if (fgets(buf, (int)cap, f) == NULL) {
		fclose(f);
		errno = EINVAL;
		return -1;
	}
	fclose(f);
	return 0;
}

int
lg_pidfile_read(const char *path, pid_t *pid)
{
	char buf[32], *end;
	long v;

	if (first_line(path, buf, sizeof(buf)) == -1)
		return -1;
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || end == buf || (*end != '\n' && *end != '\0') || v <= 0 || v > INT_MAX) {
		errno = EINVAL;
		return -1;
	}
	*pid = (pid_t)v;
	return 0;
}

int
lg_pidfile_is_master(pid_t pid)
{
	char path[64], comm[32];

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (first_line(path, comm, sizeof(comm)) == -1)
		return 0;
	comm[strcspn(comm, "\n")] = '\0';
	return strcmp(comm, LG_MASTER_COMM) == 0;
}

void
lg_pidfile_remove(const char *path, pid_t pid)
{
	char rel[PATH_MAX];
	pid_t in;

	if (lg_pidfile_read(path, &in) == 0 && in == pid) {
		unlink(path);
		if (outcome_path(path, rel, sizeof(rel)) == 0)
			unlink(rel);
	}
}

int
lg_pidfile_put_outcome(const char *path, const struct lg_reload_outcome *o)
{
	char rel[PATH_MAX], line[512];
	int n;

	if (outcome_path(path, rel, sizeof(rel)) == -1)
		return -1;
	n = snprintf(line, sizeof(line), "%" PRIu64 " %d %" PRIu64 " %s %s\n", o->seq,
	    (int)o->from, o->asked_ns, o->ok ? "ok" : "refused", o->text);
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1, line[n - 1] = '\n';
	/* one line: a reason never carries a newline into the file */
	for (int i = 0; i < n - 1; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	return replace_file(rel, line, (size_t)n);
}

int
lg_pidfile_get_outcome(const char *path, struct lg_reload_outcome *o)
{
	char rel[PATH_MAX], line[512], word[16];
	int from, used = 0;

	if (outcome_path(path, rel, sizeof(rel)) == -1 ||
	    first_line(rel, line, sizeof(line)) == -1)
		return -1;
	line[strcspn(line, "\n")] = '\0';
	o->asked_ns = 0; /* an older master's line has no asked time */
	if ((sscanf(line, "%" SCNu64 " %d %" SCNu64 " %15s %n", &o->seq, &from, &o->asked_ns,
	    word, &used) != 4 && sscanf(line, "%" SCNu64 " %d %15s %n", &o->seq, &from, word,
	    &used) != 3) || (strcmp(word, "ok") != 0 && strcmp(word, "refused") != 0)) {
		errno = EINVAL;
		return -1;
	}
	o->from = (pid_t)from;
	o->ok = strcmp(word, "ok") == 0;
	snprintf(o->text, sizeof(o->text), "%s", line + used);
	return 0;
}
