/* Scenario files (load/scenario.h). */
#include "load/scenario.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "load/err.h"
#include "load/jw.h"

static const char *const state_names[] = { "n/a", "fail", "pass" };   /* state + 1 */

/* Splits line into words at blanks; quotes keep blanks. Returns the count, or -1 (unclosed
 * quote). Words are written in place into line. */
static int
split(char *line, char **w, int max)
{
	char *r = line, *o = line;
	int n = 0;

	for (;;) {
		char q = 0;

		while (*r == ' ' || *r == '\t')
			r++;
		if (*r == '\0' || *r == '#')
			return n;
		if (n == max)
			return -2;
		w[n++] = o;
		while (*r != '\0' && (q || (*r != ' ' && *r != '\t'))) {
			if (!q && (*r == '\'' || *r == '"'))
				q = *r++;
			else if (q && *r == q)
				q = 0, r++;
			else
				*o++ = *r++;
		}
		if (q)
			return -1;
		if (*r != '\0')
			r++;
		*o++ = '\0';   /* o never passes r: a word is at most as long as its text */
	}
}

/* "body=@F" or "keys=@F" with F relative: F relative to the scenario's directory */
static char *
word_copy(const char *w, const char *file)
{
	const char *at = strstr(w, "=@"), *slash = strrchr(file, '/');
	char *out = NULL;

	if (at != NULL && at[2] != '/' && slash != NULL &&
	    (strncmp(at - 4, "body", 4) == 0 || strncmp(at - 4, "keys", 4) == 0) && at - w >= 4) {
		if (asprintf(&out, "%.*s%.*s%s", (int)(at + 2 - w), w, (int)(slash + 1 - file), file,
		             at + 2) < 0)
			return NULL;
		return out;
	}
	return strdup(w);
}

static int
expectation(struct ll_scenario *sc, char **w, int n, char *err, size_t errlen, unsigned line)
{
	struct ll_expect *x;
	char *s, *save = NULL;
	unsigned p, k;

	if (n != 3)
		return ll_fail(err, errlen, "%s:%u: expect VERDICT pass|fail|n/a", sc->file, line);
	if (sc->nexpect == LL_SCENARIO_EXPECT)
		return ll_fail(err, errlen, "%s:%u: at most %d expectations", sc->file, line,
		            LL_SCENARIO_EXPECT);
	for (p = 0; p < LL_P_COUNT && strcmp(w[1], ll_report_promise_key(p)) != 0; p++)
		;
	if (p == LL_P_COUNT)
		return ll_fail(err, errlen, "%s:%u: '%s' is not a verdict (cheap_stays_cheap, "
		            "refusal_is_fast, pool_used_to_capacity, nothing_timed_out)", sc->file,
		            line, w[1]);
	x = &sc->expect[sc->nexpect];
	x->p = p;
	x->states = 0;
	for (s = strtok_r(w[2], "|", &save); s; s = strtok_r(NULL, "|", &save)) {
		for (k = 0; k < 3 && strcmp(s, state_names[k]) != 0; k++)
			;
		if (k == 3)
			return ll_fail(err, errlen, "%s:%u: '%s' is not pass, fail or n/a", sc->file, line, s);
		x->states |= 1u << k;
	}
	sc->nexpect++;
	return 0;
}

int
ll_scenario_load(struct ll_scenario *sc, const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	char *line = NULL, *w[64];
	size_t cap = 0;
	unsigned no = 0;
	int n, i, rc = 0;

	memset(sc, 0, sizeof(*sc));
	sc->file = file;
	if (f == NULL)
		return ll_fail(err, errlen, "--scenario %s: %s", file, strerror(errno));
	while (rc == 0 && getline(&line, &cap, f) >= 0) {
		line[strcspn(line, "\r\n")] = '\0';
		no++;
		if ((n = split(line, w, 64)) < 0) {
			rc = ll_fail(err, errlen, "%s:%u: %s", file, no, n == -1 ? "a quote is not closed"
			          : "too many words on a line");
			break;
		}
		if (n == 0 || strcmp(w[0], "server") == 0)
			continue;
		if (strcmp(w[0], "expect") == 0) {
			rc = expectation(sc, w, n, err, errlen, no);
			continue;
		}
		for (i = 0; i < n && rc == 0; i++) {
			if (sc->nwords == LL_SCENARIO_WORDS)
				rc = ll_fail(err, errlen, "%s:%u: at most %d words", file, no,
				          LL_SCENARIO_WORDS);
			else if ((sc->words[sc->nwords] = word_copy(w[i], file)) == NULL)
				rc = ll_fail(err, errlen, "%s: out of memory", file);
			else
				sc->nwords++;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

const char *
ll_scenario_find(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return NULL;
		if (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc)
			return argv[i + 1];
		if (strncmp(argv[i], "--scenario=", 11) == 0)
			return argv[i] + 11;
	}
	return NULL;
}

char **
ll_scenario_argv(const struct ll_scenario *sc, int *argc, char **argv)
{
	char **out = calloc((size_t)*argc + sc->nwords + 1, sizeof(*out));
	int i, n = 0;
	unsigned k;

	if (out == NULL)
		return NULL;
	out[n++] = argv[0];
	for (k = 0; k < sc->nwords; k++)
		out[n++] = sc->words[k];
	for (i = 1; i < *argc; i++) {
		if (strcmp(argv[i], "--scenario") == 0 && i + 1 < *argc) {
			i++;
			continue;
		}
		if (strncmp(argv[i], "--scenario=", 11) == 0)
			continue;
		out[n++] = argv[i];
	}
	out[n] = NULL;
	*argc = n;
	return out;
}

int
ll_scenario_check(struct ll_scenario *sc, const struct ll_report *r)
{
	unsigned i;
	int all = 1;

	for (i = 0; i < sc->nexpect; i++) {
		struct ll_expect *x = &sc->expect[i];

		x->met = (x->states >> (r->v[x->p].state + 1)) & 1;
		all &= x->met;
	}
	return all;
}

/* the states wanted, "pass" or "n/a|pass" ...: out holds WANTED_MAX bytes */
#define WANTED_MAX sizeof("n/a|fail|pass")
static const char *
wanted(char *out, unsigned states)
{
	size_t n = 0;
	unsigned k;

	out[0] = '\0';
	for (k = 0; k < 3; k++)
		if (states & (1u << k))
			n += (size_t)snprintf(out + n, WANTED_MAX - n, "%s%s", n ? "|" : "",
			                      state_names[k]);
	return out;
}

void
ll_scenario_text(FILE *f, const struct ll_scenario *sc, const struct ll_report *r)
{
	char buf[WANTED_MAX];
	unsigned i;

	for (i = 0; i < sc->nexpect; i++) {
		const struct ll_expect *x = &sc->expect[i];

		fprintf(f, "scenario %s: %s expected %s, got %s: %s\n", sc->file,
		        ll_report_promise(x->p), wanted(buf, x->states),
		        state_names[r->v[x->p].state + 1], x->met ? "met" : "NOT MET");
	}
}

void
ll_scenario_json(struct ll_jw *w, const struct ll_scenario *sc, const struct ll_report *r)
{
	char buf[WANTED_MAX];
	unsigned i;

	ll_jw_map(w, "scenario");
	ll_jw_arr(w, "expectations");
	for (i = 0; i < sc->nexpect; i++) {
		const struct ll_expect *x = &sc->expect[i];

		ll_jw_map(w, NULL);
		ll_jw_str(w, "verdict", ll_report_promise_key(x->p));
		ll_jw_str(w, "expected", wanted(buf, x->states));
		ll_jw_str(w, "got", state_names[r->v[x->p].state + 1]);
		ll_jw_bool(w, "met", x->met);
		ll_jw_end_map(w);
	}
	ll_jw_end_arr(w);
	ll_jw_end_map(w);
}

void
ll_scenario_free(struct ll_scenario *sc)
{
	unsigned i;

	for (i = 0; i < sc->nwords; i++)
		free(sc->words[i]);
	sc->nwords = 0;
}
