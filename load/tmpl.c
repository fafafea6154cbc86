/* Path templates of lagless-load's routes (load/tmpl.h). */
#include "load/tmpl.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load/err.h"
#include "load/sched.h"

int
ll_tmpl_has(const char *path)
{
	return strchr(path, '{') != NULL;
}

static struct ll_tmpl_part *
part(struct ll_tmpl *t, enum ll_tmpl_kind kind)
{
	struct ll_tmpl_part *p;

	if (t->nparts == LL_TMPL_PARTS)
		return NULL;
	p = &t->parts[t->nparts++];
	p->kind = kind;
	return p;
}

/* The placeholder in [s, e) (without braces) as a part. */
static int
placeholder(struct ll_tmpl *t, const char *s, size_t n, char *err, size_t errlen)
{
	struct ll_tmpl_part *p;
	char arg[64], *end;
	double v;

	if ((n == 3 && memcmp(s, "seq", 3) == 0) || (n == 3 && memcmp(s, "key", 3) == 0) ||
	    (n == 3 && memcmp(s, "run", 3) == 0)) {
		if ((p = part(t, s[0] == 's' ? LL_TP_SEQ : s[0] == 'k' ? LL_TP_KEY : LL_TP_RUN)) == NULL)
			return ll_fail(err, errlen, "at most %d template parts", LL_TMPL_PARTS);
		return 0;
	}
	if (n > 5 && n - 5 < sizeof(arg) && (memcmp(s, "rand:", 5) == 0 ||
	                                     memcmp(s, "hit:", 4) == 0)) {
		int rnd = s[0] == 'r';
		size_t off = rnd ? 5 : 4;

		memcpy(arg, s + off, n - off);
		arg[n - off] = '\0';
		errno = 0;
		v = strtod(arg, &end);
		if (errno != 0 || end == arg || *end != '\0' ||
		    (rnd ? !(v >= 1 && v <= 1e12 && v == (double)(uint64_t)v) : !(v >= 0 && v <= 1)))
			return ll_fail(err, errlen, rnd ? "{rand:%s}: N is a whole number of keys in "
			            "[1, 1e12]" : "{hit:%s}: R is a hit ratio in [0, 1]", arg);
		if ((p = part(t, rnd ? LL_TP_RAND : LL_TP_HIT)) == NULL)
			return ll_fail(err, errlen, "at most %d template parts", LL_TMPL_PARTS);
		p->arg = v;
		return 0;
	}
	return ll_fail(err, errlen, "{%.*s}: a placeholder is {seq}, {rand:N}, {hit:R}, {key} or "
	            "{run} ({{ for a literal {)", (int)n, s);
}

int
ll_tmpl_parse(struct ll_tmpl *t, const char *path, uint64_t seed, uint64_t run, char *err,
              size_t errlen)
{
	const char *s;
	struct ll_tmpl_part *p;
	unsigned k;

	memset(t, 0, sizeof(*t));
	t->rng = seed;
	t->run = run;
	if ((t->text = strdup(path)) == NULL)
		return ll_fail(err, errlen, "out of memory");
	for (s = t->text; *s;) {
		const char *open = strchr(s, '{'), *close;
		size_t n = open ? (size_t)(open - s) : strlen(s);

		if (n > 0 || (open && open[1] == '{')) {
			if ((p = part(t, LL_TP_LIT)) == NULL)
				return ll_fail(err, errlen, "at most %d template parts", LL_TMPL_PARTS);
			p->lit = s;
			p->len = n + (open && open[1] == '{');   /* "{{": the first brace is literal */
		}
		if (open == NULL)
			break;
		if (open[1] == '{') {
			s = open + 2;
			continue;
		}
		if ((close = strchr(open, '}')) == NULL)
			return ll_fail(err, errlen, "%s: a '{' without its '}' ({{ for a literal {)", path);
		if (placeholder(t, open + 1, (size_t)(close - open - 1), err, errlen) == -1)
			return -1;
		s = close + 1;
	}
	t->value_part = -1;
	t->value = NAN;
	for (k = 0; k < t->nparts && t->value_part < 0; k++)
		if (t->parts[k].kind == LL_TP_SEQ || t->parts[k].kind == LL_TP_RAND ||
		    t->parts[k].kind == LL_TP_KEY)
			t->value_part = (int)k;
	return 0;
}

const char *
ll_tmpl_part_name(const struct ll_tmpl *t, unsigned k, char *buf, size_t len)
{
	const struct ll_tmpl_part *p = &t->parts[k];

	switch (p->kind) {
	case LL_TP_SEQ: snprintf(buf, len, "{seq}"); break;
	case LL_TP_RAND: snprintf(buf, len, "{rand:%.0f}", p->arg); break;
	case LL_TP_HIT: snprintf(buf, len, "{hit:%g}", p->arg); break;
	case LL_TP_KEY: snprintf(buf, len, "{key}"); break;
	case LL_TP_RUN: snprintf(buf, len, "{run}"); break;
	default: snprintf(buf, len, "%.*s", (int)p->len, p->lit); break;
	}
	return buf;
}

int
ll_tmpl_keys(struct ll_tmpl *t, const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	char *line = NULL;
	size_t cap = 0, i;
	ssize_t n;
	int rc = 0;

	if (f == NULL)
		return ll_fail(err, errlen, "keys=@%s: %s", file, strerror(errno));
	while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
		char **nk;

		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0)
			continue;
		for (i = 0; i < (size_t)n; i++)
			if (line[i] == ' ' || iscntrl((unsigned char)line[i]))
				break;
		if (i < (size_t)n)
			rc = ll_fail(err, errlen, "keys=@%s: line %zu: a key has no space or control byte "
			          "(it goes into the request line; percent-encode it)", file, t->nkeys + 1);
		else if ((nk = realloc(t->keys, (t->nkeys + 1) * sizeof(*nk))) == NULL)
			rc = ll_fail(err, errlen, "keys=@%s: out of memory", file);
		else if ((t->keys = nk, nk[t->nkeys] = strdup(line)) == NULL)
			rc = ll_fail(err, errlen, "keys=@%s: out of memory", file);
		else
			t->nkeys++;
	}
	free(line);
	fclose(f);
	if (rc == 0 && t->nkeys == 0)
		rc = ll_fail(err, errlen, "keys=@%s: no key in the file", file);
	return rc;
}

static int
put(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
	if (*len + n >= cap) {
		errno = ENOSPC;
		return -1;
	}
	memcpy(out + *len, s, n);
	*len += n;
	return 0;
}

long
ll_tmpl_expand(struct ll_tmpl *t, char *out, size_t cap)
{
	size_t len = 0;
	unsigned i;
	char num[32];
	uint64_t seq = t->seq++;

	for (i = 0; i < t->nparts; i++) {
		const struct ll_tmpl_part *p = &t->parts[i];
		const char *s = num;
		size_t n;

		switch (p->kind) {
		case LL_TP_LIT: s = p->lit, n = p->len; break;
		case LL_TP_SEQ: n = (size_t)snprintf(num, sizeof(num), "%" PRIu64, seq); break;
		case LL_TP_RUN: n = (size_t)snprintf(num, sizeof(num), "%" PRIu64, t->run); break;
		case LL_TP_RAND: {
			uint64_t k = (uint64_t)(ll_sched_uniform(&t->rng) * p->arg);

			n = (size_t)snprintf(num, sizeof(num), "%" PRIu64, k < p->arg ? k : k - 1);
			break;
		}
		case LL_TP_HIT:
			/* a miss is a key never drawn before: 1, 2, 3, ... ("0" is the hot key) */
			n = (size_t)snprintf(num, sizeof(num), "%" PRIu64,
			                     ll_sched_uniform(&t->rng) <= p->arg ? 0 : ++t->misses);
			break;
		default:
			if (t->nkeys == 0) {
				errno = EINVAL;
				return -1;
			}
			s = t->keys[t->next_key];
			n = strlen(s);
			t->next_key = (t->next_key + 1) % t->nkeys;
			break;
		}
		if (put(out, cap, &len, s, n) == -1)
			return -1;
		if ((int)i == t->value_part) {
			/* a number, or NaN (a {key} that is not one, or too long) */
			char v[40], *end;

			snprintf(v, sizeof(v), "%.*s", (int)n, s);
			t->value = strtod(v, &end);
			if (end == v || *end != '\0' || n >= sizeof(v))
				t->value = NAN;
		}
	}
	out[len] = '\0';
	return (long)len;
}

void
ll_tmpl_free(struct ll_tmpl *t)
{
	size_t i;

	for (i = 0; i < t->nkeys; i++)
		free(t->keys[i]);
	free(t->keys);
	free(t->text);
	memset(t, 0, sizeof(*t));
}
