/* [app NAME] sections: read key by key, split without a shell, checked as a whole. */
#include "master/appconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/value.h"
#include "sizing/sizing.h"

#define NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_-"

/* The keys of an [app] section, in `given` bit order. */
static const char *const keys[] = { "command", "processes", "env", "cwd", "user", "ready_path",
	"ready_timeout_ms", "stop_grace_ms", "start_failures", "upstream", NULL };

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
		return set_string(a->user, sizeof(a->user), v, why);
	case 5:
		if (v[0] != '/' || strpbrk(v, " \t\r\n") != NULL) {
			*why = "an HTTP path: '/' then no blank";
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
	return 1;
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
	    a->stop_grace_ms == b->stop_grace_ms && a->start_failures == b->start_failures;
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
