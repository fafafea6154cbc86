/* [app NAME] sections: read key by key, split without a shell, checked as a whole. */
#include "master/appconf.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/value.h"
#include "sizing/sizing.h"

#define NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_-"

/* The keys of an [app] section, in `given` bit order. */
static const char *const keys[] = { "command", "processes", "env", "cwd", "user", "ready_path",
	"ready_timeout_ms", "stop_grace_ms", "start_failures", "upstream", "live_interval_ms",
	"live_failures", "probe_timeout_ms", NULL };
_Static_assert(sizeof(keys) / sizeof(keys[0]) == LG_APP_KEYS + 1, "key_line has a slot per key");

void
lg_appconf_free(struct lg_apps *apps)
{
	free(apps);
}

int
lg_appconf_split(const char *s, char *out, size_t cap, int max, const char **why)
{
	size_t n = 0;
	int words = 0;

	for (;;) {
		char quote = 0;

		s += strspn(s, " \t");
		if (*s == '\0')
			return words;
		if (words == max) {
			*why = "too many words";
			return -1;
		}
		for (; *s != '\0' && (quote || (*s != ' ' && *s != '\t')); s++) {
			if (quote == 0 && (*s == '\'' || *s == '"')) {
				quote = *s;
				continue;
			}
			if (quote != 0 && *s == quote) {
				quote = 0;
				continue;
			}
			if (*s == '\\' && quote != '\'' && (quote == 0 || s[1] == '"' || s[1] == '\\')) {
				if (*++s == '\0') {
					*why = "a backslash at the end";
					return -1;
				}
			}
			if (n + 2 > cap) {
				*why = "too long";
				return -1;
			}
			out[n++] = *s;
		}
		if (quote != 0) {
			*why = "an unclosed quote";
			return -1;
		}
		if (n + 1 > cap) {
			*why = "too long";
			return -1;
		}
		out[n++] = '\0';
		words++;
	}
}

int
lg_appconf_subst(const char *word, const char *socket, int port, char *out, size_t cap)
{
	size_t n = 0;

	while (*word != '\0') {
		char num[16];
		const char *rep = NULL;
		size_t skip = 1, len;

		if (strncmp(word, "{socket}", 8) == 0)
			rep = socket, skip = 8;
		else if (strncmp(word, "{port}", 6) == 0)
			snprintf(num, sizeof(num), "%d", port), rep = num, skip = 6;
		len = rep ? strlen(rep) : 1;
		if (n + len + 1 > cap)
			return -1;
		memcpy(out + n, rep ? rep : word, len);
		n += len;
		word += skip;
	}
	out[n] = '\0';
	return 0;
}

static struct lg_app_conf *
app_of(struct lg_apps **apps, const char *name, const char *file, int line, const char **why)
{
	size_t n = strlen(name);

	if (n == 0 || n > LG_APP_NAME_LEN || name[strspn(name, NAME_CHARS)] != '\0') {
		*why = "an app name is 1 to 23 of a-z, 0-9, _ and -";
		return NULL;
	}
	if (*apps == NULL && (*apps = calloc(1, sizeof(**apps))) == NULL) {
		*why = "out of memory";
		return NULL;
	}
	for (int i = 0; i < (*apps)->n; i++)
		if (strcmp((*apps)->app[i].name, name) == 0)
			return &(*apps)->app[i];
	if ((*apps)->n == LG_APP_MAX) {
		*why = "too many [app] sections (at most 8)";
		return NULL;
	}
	struct lg_app_conf *a = &(*apps)->app[(*apps)->n++];
	memcpy(a->name, name, n + 1);
	snprintf(a->file, sizeof(a->file), "%s", file);
	a->line = line;
	a->ready_timeout_ms = 30000;
	a->stop_grace_ms = 10000;
	a->start_failures = 5;
	a->live_failures = 3;
	a->probe_timeout_ms = 1000;
	return a;
}

/* command: split now, so a bad quote is refused at its line; what it names ({socket},
 * {port}: one of them) is noted for the master. */
static int
set_command(struct lg_app_conf *a, const char *v, const char **why)
{
	int s = strstr(v, "{socket}") != NULL, p = strstr(v, "{port}") != NULL, n;
	char words[sizeof(a->words)];

	if (strlen(v) >= sizeof(a->command)) {
		*why = "too long (a command is at most " LG_LIMIT_STR(LG_APP_CMD_LEN) " bytes)";
		return -1;
	}
	if ((n = lg_appconf_split(v, words, sizeof(words), LG_APP_ARGS_MAX - 1, why)) <= 0) {
		*why = n == 0 ? "an empty command" : *why;
		return -1;
	}
	if (words[0] == '\0') { /* execvp("") fails with ENOENT at every start */
		*why = "an empty program (its first word)";
		return -1;
	}
	if (s && p) {
		*why = "a command names {socket} or {port}, not both";
		return -1;
	}
	memcpy(a->words, words, sizeof(words));
	a->argc = n;
	snprintf(a->command, sizeof(a->command), "%s", v);
	a->addr = s ? LG_APP_ADDR_SOCKET : p ? LG_APP_ADDR_PORT : LG_APP_ADDR_NONE;
	return 0;
}

static int
set_string(char *dst, size_t cap, const char *v, const char **why)
{
	if (strlen(v) >= cap || v[0] == '\0') {
		*why = v[0] == '\0' ? "an empty value" : "too long";
		return -1;
	}
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

/* user: a name, as start-up looks it up (getpwnam(3) in master/appproc.c). A uid or
 * user:group would be looked up as a name there and fail at every start, so they are refused
 * here rather than half-supported. */
static int
set_user(struct lg_app_conf *a, const char *v, const char **why)
{
	if (strchr(v, ':') != NULL) {
		*why = "a user name, not user:group (the app runs with the user's own group and "
		    "its supplementary groups, initgroups(3))";
		return -1;
	}
	if (v[0] != '\0' && v[strspn(v, "0123456789")] == '\0') {
		*why = "a user name, not a uid (it is looked up by name, getpwnam(3))";
		return -1;
	}
	return set_string(a->user, sizeof(a->user), v, why);
}

/* Whether s is all visible ASCII (0x21 to 0x7e): what a request target may hold (RFC 9112
 * section 3.2, RFC 3986 section 2); ready_path is sent as one. */
static int
visible(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

/* key k (index in keys[]) = v for app a. Returns 0, or -1 with *why (or the value's reason
 * in buf). */
static int
set_key(struct lg_app_conf *a, int k, const char *v, char *buf, size_t cap, const char **why)
{
	uint64_t u;
	int rc = 0;

	switch (k) {
	case 0:
		return set_command(a, v, why);
	case 1:
		if (strcmp(v, "auto") == 0) {
			a->processes = 0;
			return 0;
		}
		rc = lg_value_uint(v, 1, LG_APP_PROCS_MAX, &u, buf, cap);
		a->processes = (int)u;
		break;
	case 2:
		if (strchr(v, '=') == NULL || v[0] == '=' || a->nenv == LG_APP_ENV_MAX) {
			*why = a->nenv == LG_APP_ENV_MAX ? "too many env lines (at most 32)" :
			    "expected KEY=VALUE";
			return -1;
		}
		return set_string(a->env[a->nenv++], LG_APP_STR, v, why);
	case 3:
		return set_string(a->cwd, sizeof(a->cwd), v, why);
	case 4:
		return set_user(a, v, why);
	case 5:
		if (v[0] != '/' || !visible(v)) {
			*why = "an HTTP path: '/' then visible ASCII (no blank, control or non-ASCII "
			    "byte: percent-encode them)";
			return -1;
		}
		return set_string(a->ready_path, sizeof(a->ready_path), v, why);
	case 6:
		rc = lg_value_duration_ms(v, 1, 3600000, &a->ready_timeout_ms, buf, cap);
		break;
	case 7:
		rc = lg_value_duration_ms(v, 0, 3600000, &a->stop_grace_ms, buf, cap);
		break;
	case 8:
		rc = lg_value_uint(v, 1, 1000, &a->start_failures, buf, cap);
		break;
	case 9:
		if (v[strspn(v, NAME_CHARS)] != '\0') {
			*why = "an upstream name is 1 to 31 of a-z, 0-9, _ and -";
			return -1;
		}
		return set_string(a->upstream, sizeof(a->upstream), v, why);
	case 10:
		rc = lg_value_duration_ms(v, 0, 3600000, &a->live_interval_ms, buf, cap);
		break;
	case 11:
		rc = lg_value_uint(v, 1, 1000, &a->live_failures, buf, cap);
		break;
	case 12:
		rc = lg_value_duration_ms(v, 1, 3600000, &a->probe_timeout_ms, buf, cap);
		break;
	}
	if (rc == -1)
		*why = buf;
	return rc;
}

int
lg_appconf_collect(struct lg_apps **apps, const char *section, const char *key,
    const char *value, const char *file, int line, char *why, size_t cap)
{
	const char *reason = "unknown key of an [app] section";
	char buf[160];
	struct lg_app_conf *a;
	int k;

	if (strncmp(section, "app ", 4) != 0)
		return 0;
	if ((a = app_of(apps, section + 4 + strspn(section + 4, " \t"), file, line,
	    &reason)) == NULL) {
		snprintf(why, cap, "section [%s]: %s", section, reason);
		return -1;
	}
	for (k = 0; keys[k] != NULL; k++) {
		const char *x = keys[k], *y = key;

		while (*x && (*x == *y || (*x == '_' && *y == '-')))
			x++, y++;
		if (*x == '\0' && *y == '\0')
			break;
	}
	if (keys[k] != NULL && k != 2 && (a->given & 1u << k)) {
		snprintf(why, cap, "key '%s' given twice in [%s] (a key is given once; env may "
		    "repeat)", key, section);
		return -1;
	}
	if (keys[k] == NULL || set_key(a, k, value, buf, sizeof(buf), &reason) == -1) {
		snprintf(why, cap, "key '%s' = '%.*s%s': %s", key, LG_CLIP(value), reason);
		return -1;
	}
	a->given |= 1u << k;
	a->key_line[k] = line;
	return 1;
}

/* The upstream app serves: its `upstream =`, else its name. */
static const char *
serves(const struct lg_app_conf *a)
{
	return a->upstream[0] != '\0' ? a->upstream : a->name;
}

/* App i of apps against the others: an upstream takes the processes of one app (the others'
 * would be started and never sent to), and master/app.c lg_app_servers finds an app by its
 * name or by what it serves, so an `upstream =` that is another app's name would be found as
 * that app. Returns 0, or -1 with the reason in err. */
static int
check_serves(const struct lg_apps *apps, int i, char *err, size_t cap)
{
	const struct lg_app_conf *a = &apps->app[i];
	int line = a->key_line[LG_APP_KEY_UPSTREAM] ? a->key_line[LG_APP_KEY_UPSTREAM] : a->line;

	for (int j = 0; j < apps->n; j++) {
		const struct lg_app_conf *b = &apps->app[j];

		if (j < i && strcmp(serves(a), serves(b)) == 0) {
			snprintf(err, cap, "%s:%d: [app %s]: serves upstream %s, as [app %s] (%s:%d) "
			    "does: an upstream takes one app's processes; give one of them another "
			    "upstream =", a->file, line, a->name, serves(a), b->name, b->file,
			    b->key_line[LG_APP_KEY_UPSTREAM] ? b->key_line[LG_APP_KEY_UPSTREAM] : b->line);
			return -1;
		}
		if (j != i && a->upstream[0] != '\0' && strcmp(a->upstream, b->name) == 0) {
			snprintf(err, cap, "%s:%d: [app %s]: upstream = %s is the name of [app %s] "
			    "(%s:%d): an app serves its own name or an upstream no other app is named "
			    "after", a->file, line, a->name, a->upstream, b->name, b->file, b->line);
			return -1;
		}
	}
	return 0;
}

int
lg_appconf_check(const struct lg_apps *apps, char *err, size_t cap)
{
	for (int i = 0; apps != NULL && i < apps->n; i++) {
		const struct lg_app_conf *a = &apps->app[i];

		if (a->argc == 0) {
			snprintf(err, cap, "%s:%d: [app %s]: command = ... is required (the program "
			    "and its arguments, {socket} or {port} for its address)", a->file,
			    a->line, a->name);
			return -1;
		}
		if (a->ready_path[0] && a->addr == LG_APP_ADDR_NONE) {
			snprintf(err, cap, "%s:%d: [app %s]: ready_path needs an address to probe: "
			    "name {socket} or {port} in the command", a->file, a->line, a->name);
			return -1;
		}
		if (a->live_interval_ms > 0 && a->ready_path[0] == '\0') {
			/* a hung process's listening socket still accepts: only an answer tells */
			snprintf(err, cap, "%s:%d: [app %s]: live_interval_ms needs a ready_path to "
			    "probe (an address that accepts is no sign of life)", a->file,
			    a->key_line[10] ? a->key_line[10] : a->line, a->name);
			return -1;
		}
		if (check_serves(apps, i, err, cap) == -1)
			return -1;
	}
	return 0;
}

/* dir/file into out (cap bytes), dir "" or file absolute: file alone; dir taken from cwd
 * ("" this process's) when relative, as the child's chdir makes it. */
static void
join(const char *cwd, const char *dir, const char *file, char *out, size_t cap)
{
	if (file[0] == '/' || (dir[0] == '\0' && cwd[0] == '\0'))
		snprintf(out, cap, "%s", file);
	else if (dir[0] == '/' || cwd[0] == '\0')
		snprintf(out, cap, "%s/%s", dir[0] ? dir : ".", file);
	else
		snprintf(out, cap, "%s/%s%s%s", cwd, dir, dir[0] ? "/" : "", file);
}

/* The interpreter a script at path names ("#!", execve(2) "Interpreter scripts") into out
 * (cap bytes), taken from cwd when relative as the kernel does; "" when path is no script or
 * cannot be read by this process. */
static void
script_interp(const char *path, const char *cwd, char *out, size_t cap)
{
	char head[256];
	FILE *f = fopen(path, "re");
	size_t n;

	out[0] = '\0';
	if (f == NULL)
		return;
	n = fread(head, 1, sizeof(head) - 1, f);
	fclose(f);
	head[n] = '\0';
	if (n > 2 && head[0] == '#' && head[1] == '!') {
		char *i = head + 2 + strspn(head + 2, " \t");

		i[strcspn(i, " \t\r\n")] = '\0';
		if (i[0] != '\0')
			join(cwd, "", i, out, cap);
	}
}

/* Why execve(2) of path (a script's interpreter interp, "" none) fails for the calling
 * process, as an index of exec_why; 0 when it would run. access(2) checks as the real ids:
 * the execute bit, every directory on the way searchable; a script must be readable too (its
 * interpreter opens it). */
static const char *const exec_why[] = { NULL, "No such file or directory", "cannot be reached (a "
	"directory on its path is not searchable by its user, or not a directory)", "not a regular file",
	"not executable by its user (no execute permission)", "a script its user cannot read",
	"a script whose interpreter (#!) is missing or not executable by its user",
	"cannot take its user's ids here" };

static int
exec_check(const char *path, const char *interp)
{
	struct stat st;

	if (stat(path, &st) == -1)
		return errno == ENOENT ? 1 : 2;
	if (!S_ISREG(st.st_mode))
		return 3;
	if (access(path, X_OK) == -1)
		return 4;
	if (interp[0] != '\0' && access(path, R_OK) == -1)
		return 5;
	if (interp[0] != '\0' && access(interp, X_OK) == -1)
		return 6;
	return 0;
}

/* Whether execve(2) of path (from cwd) succeeds for pw (NULL: this process), as exec_check
 * in a child that took pw's groups and ids first, as become_user does at start (appproc.c).
 * Returns 0, or -1 with why. */
static int
may_exec(const char *path, const char *cwd, const struct passwd *pw, const char **why)
{
	char interp[2 * LG_APP_STR + 8];
	int rc, status;
	pid_t pid;

	script_interp(path, cwd, interp, sizeof(interp));
	if (pw == NULL || pw->pw_uid == geteuid()) {
		rc = exec_check(path, interp);
	} else if ((pid = fork()) == 0) {
		if (initgroups(pw->pw_name, pw->pw_gid) == -1 || setgid(pw->pw_gid) == -1 ||
		    setuid(pw->pw_uid) == -1)
			_exit(7);
		_exit(exec_check(path, interp));
	} else if (pid == -1 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
		rc = 0; /* not told: start-up will */
	} else {
		rc = WEXITSTATUS(status) < 8 ? WEXITSTATUS(status) : 0;
	}
	*why = exec_why[rc];
	return rc == 0 ? 0 : -1;
}

/* The PATH execvp(3) searches in the child: the last env line PATH= (setenv in order), else
 * this process's (the master's environment is inherited), else glibc's default. */
static const char *
child_path(const struct lg_app_conf *a)
{
	const char *p = getenv("PATH");

	for (int i = 0; i < a->nenv; i++)
		if (strncmp(a->env[i], "PATH=", 5) == 0)
			p = a->env[i] + 5;
	return p != NULL ? p : "/bin:/usr/bin";
}

/* a's program found as execvp(3) finds it for pw (NULL: this process). Returns 0, or -1 with
 * the reason in err. */
static int
host_program(const struct lg_app_conf *a, const struct passwd *pw, char *err, size_t cap)
{
	const char *prog = a->words, *why = "not found", *p;
	char path[2 * LG_APP_STR + 8];
	int line = a->key_line[LG_APP_KEY_COMMAND];

	if (strstr(prog, "{socket}") != NULL || strstr(prog, "{port}") != NULL)
		return 0; /* known at start only */
	if (strchr(prog, '/') != NULL) {
		join(a->cwd, "", prog, path, sizeof(path));
		if (may_exec(path, a->cwd, pw, &why) == 0)
			return 0;
		snprintf(err, cap, "%s:%d: [app %s]: command: program %s: %s (start-up would fail "
		    "with 'cannot run')", a->file, line, a->name, path, why);
		return -1;
	}
	for (p = child_path(a);; p += strcspn(p, ":") + 1) {
		char dir[LG_APP_STR];

		snprintf(dir, sizeof(dir), "%.*s", (int)strcspn(p, ":"), p); /* "" is "." */
		join(a->cwd, dir, prog, path, sizeof(path));
		if (may_exec(path, a->cwd, pw, &why) == 0)
			return 0;
		if (p[strcspn(p, ":")] == '\0')
			break;
	}
	snprintf(err, cap, "%s:%d: [app %s]: command: program %s is not an executable file in "
	    "its PATH %.300s (start-up would fail with 'cannot run')", a->file, line, a->name,
	    prog, child_path(a));
	return -1;
}

/* a's cwd is a directory this process (the master as it starts the child) can enter. */
static int
host_cwd(const struct lg_app_conf *a, char *err, size_t cap)
{
	struct stat st;
	char here[256] = "";
	const char *why = NULL;

	if (a->cwd[0] == '\0')
		return 0;
	if (stat(a->cwd, &st) == -1)
		why = strerror(errno);
	else if (!S_ISDIR(st.st_mode))
		why = "not a directory";
	else if (access(a->cwd, X_OK) == -1)
		why = strerror(errno);
	if (why == NULL)
		return 0;
	if (a->cwd[0] != '/' && getcwd(here, sizeof(here)) == NULL)
		snprintf(here, sizeof(here), "?");
	snprintf(err, cap, "%s:%d: [app %s]: cwd = %s: %s%s%s%s", a->file, a->key_line[LG_APP_KEY_CWD],
	    a->name, a->cwd, why, here[0] ? " (taken from lagless's working directory, " : "",
	    here, here[0] ? ")" : "");
	return -1;
}

int
lg_appconf_check_host(const struct lg_apps *apps, char *err, size_t cap)
{
	for (int i = 0; apps != NULL && i < apps->n; i++) {
		const struct lg_app_conf *a = &apps->app[i];
		const struct passwd *pw = NULL;

		/* as start-up: the user is taken only as root (appproc.c become_user) */
		if (a->user[0] != '\0' && geteuid() == 0 && (pw = getpwnam(a->user)) == NULL) {
			snprintf(err, cap, "%s:%d: [app %s]: user = %s: no such user on this machine "
			    "(getpwnam(3)); start-up would fail with 'no user %s'", a->file,
			    a->key_line[LG_APP_KEY_USER], a->name, a->user, a->user);
			return -1;
		}
		if (host_cwd(a, err, cap) == -1 || host_program(a, pw, err, cap) == -1)
			return -1;
	}
	return 0;
}

int
lg_appconf_nauto(const struct lg_apps *apps)
{
	int n = 0;

	for (int i = 0; apps != NULL && i < apps->n; i++)
		n += apps->app[i].processes == 0;
	return n;
}

int
lg_appconf_count(const struct lg_app_conf *a, int budget, int nauto)
{
	return a->processes > 0 ? a->processes : lg_sizing_app_share(budget, nauto);
}

int
lg_appconf_same(const struct lg_app_conf *a, const struct lg_app_conf *b)
{
	return strcmp(a->name, b->name) == 0 && strcmp(a->command, b->command) == 0 &&
	    a->processes == b->processes && a->nenv == b->nenv &&
	    memcmp(a->env, b->env, sizeof(a->env)) == 0 && strcmp(a->cwd, b->cwd) == 0 &&
	    strcmp(a->user, b->user) == 0 && strcmp(a->ready_path, b->ready_path) == 0 &&
	    strcmp(a->upstream, b->upstream) == 0 && a->ready_timeout_ms == b->ready_timeout_ms &&
	    a->stop_grace_ms == b->stop_grace_ms && a->start_failures == b->start_failures &&
	    a->live_interval_ms == b->live_interval_ms && a->live_failures == b->live_failures &&
	    a->probe_timeout_ms == b->probe_timeout_ms;
}

int
lg_appconf_socket_path(const char *dir, const char *name, uint32_t serial, int index,
    char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s.%u/%d.sock", dir, name, serial, index);

	return n < 0 || (size_t)n >= cap || n >= 108 ? -1 : 0;
}

void
lg_appconf_print(const struct lg_apps *apps, int budget, void *fp)
{
	FILE *f = fp;
	int nauto = lg_appconf_nauto(apps);

	for (int i = 0; apps != NULL && i < apps->n; i++) {
		const struct lg_app_conf *a = &apps->app[i];
		int n = lg_appconf_count(a, budget, nauto);

		fprintf(f, "app %s: %d process(es)%s, upstream %s, command: %s\n", a->name, n,
		    a->processes ? "" : " (auto)", a->upstream[0] ? a->upstream : a->name,
		    a->command);
		for (int k = 0; k < n; k++) {
			if (a->addr == LG_APP_ADDR_SOCKET)
				fprintf(f, "  %s[%d]: unix:$RUNTIME_DIRECTORY or $TMPDIR/lagless-PID/"
				    "%s.1/%d.sock\n", a->name, k, a->name, k);
			else if (a->addr == LG_APP_ADDR_PORT)
				fprintf(f, "  %s[%d]: 127.0.0.1:{port} (a free port picked at start)\n",
				    a->name, k);
			else
				fprintf(f, "  %s[%d]: no address ({socket} or {port} not in its "
				    "command)\n", a->name, k);
		}
	}
}
