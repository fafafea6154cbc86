/* Constant and Poisson request schedules (load/sched.h). */
#include "load/sched.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load/units.h"

int
ll_sched_parse_rate(const char *s, struct ll_rate *r)
{
	size_t n = s ? strlen(s) : 0;
	char *end;
	double v;

	if (n >= 2 && s[n - 1] == 'x' && isdigit((unsigned char)s[0])) {
		errno = 0;
		v = strtod(s, &end);
		if (errno != 0 || end != s + n - 1 || !isfinite(v) || v <= 0 || v > 1000)
			goto bad;
		r->value = v;
		r->relative = 1;
		return 0;
	}
	/* "500", "500/s", "500/1s", "30/m", "100/500ms" (load/units.h) */
	if (ll_units_rate(s, &v) == -1 || !(v > 0) || v > 1e7)
		goto bad;
	r->value = v;
	r->relative = 0;
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

int
ll_sched_parse_arrival(const char *s, enum ll_arrival *a)
{
	if (strcmp(s, "constant") == 0)
		*a = LL_ARRIVAL_CONSTANT;
	else if (strcmp(s, "poisson") == 0)
		*a = LL_ARRIVAL_POISSON;
	else {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

double
ll_sched_uniform(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	/* 53 random bits, shifted into (0, 1] so log() below is finite */
	return ((double)(z >> 11) + 1.0) / 9007199254740992.0;
}

/* start_ns + offset_ns, or UINT64_MAX (never due) when that is past what a uint64_t holds: a
 * tiny rate (1e-300/s) puts request 1 at +inf ns, whose conversion would be undefined (on x86
 * it gave 0, so every request was due at once and the generator issued them without end). */
static uint64_t
due_at(uint64_t start_ns, double offset_ns)
{
	if (!(offset_ns < (double)(UINT64_MAX - start_ns) * 0.5))
		return UINT64_MAX;
	return start_ns + (uint64_t)offset_ns;
}

static void
advance(struct ll_sched *s)
{
	if (s->arrival == LL_ARRIVAL_CONSTANT) {
		s->next_ns = due_at(s->start_ns, (double)s->n * 1e9 / s->rate);
		return;
	}
	s->acc_s += -log(ll_sched_uniform(&s->rng)) / s->rate;
	s->next_ns = due_at(s->start_ns, s->acc_s * 1e9);
}

void
ll_sched_init(struct ll_sched *s, enum ll_arrival arrival, double rate, uint64_t start_ns,
              uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->arrival = arrival;
	s->rate = rate;
	s->start_ns = start_ns;
	s->rng = seed;
	advance(s);
}

uint64_t
ll_sched_peek(const struct ll_sched *s)
{
	return s->next_ns;
}

uint64_t
ll_sched_take(struct ll_sched *s)
{
	uint64_t t = s->next_ns;

	s->n++;
	advance(s);
	return t;
}
