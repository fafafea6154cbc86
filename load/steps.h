/* Step mode of lagless-load: "how much can it take, and where does it break?". The heavy routes
 * (every route when none is heavy) are offered a list of levels in turn, each for a set time,
 * with the cheap routes at their own rates; each level is judged like a run. Two figures come
 * out, named for what they are:
 *
 *   the knee (the capacity, as k6 and vegeta users read the word): the first level whose 2xx
 *     rate falls under LL_STEPS_GOODPUT of its offer, i.e. where the 2xx rate stops following
 *     the offered rate, with the highest 2xx rate of any level beside it;
 *   the highest level that degrades gracefully: the highest level whose verdicts all pass, as
 *     every level below it does (a level passing again above a failed one, on a busy machine,
 *     does not move it). A server that refuses overload fast passes far past its capacity.
 *
 * One row per level: offered and achieved 2xx per second, 2xx over offered, the 503 share, the
 * cheap routes' p99, the server's loop lag and queue wait. */
#ifndef LL_LOAD_STEPS_H
#define LL_LOAD_STEPS_H

#include <stdio.h>

#include "load/report.h"

struct ll_jw;  /* load/jw.h */

#define LL_STEPS_MAX 32
#define LL_STEPS_GOODPUT 0.9   /* 2xx/s over offered/s under which the 2xx rate stopped following */

struct ll_step {
	struct ll_rate level;        /* Nx: times each heavy route's capacity; else per second */
	double t0_s, t1_s;           /* the level's schedule on the run's axis (samples, scrapes) */
	double offered_rps;          /* the stepped routes' offer, summed */
	double capacity_rps;         /* their calibrated capacity, summed (0: some unknown) */
	double ok_rps;               /* their 2xx complete within the level, per second */
	double refused_rps;          /* their 503s, per second */
	double share_503;            /* 503s of their answers, 0..1 */
	double cheap_p99_ms;         /* the worst cheap route's p99; < 0 without a cheap route */
	struct ll_server_figures sf; /* lagless only (zero otherwise) */
	struct ll_verdict v[LL_P_COUNT];
	int pass;                    /* no verdict failed */
};

struct ll_steps {
	unsigned n;
	struct ll_step s[LL_STEPS_MAX];
	double seconds;              /* each level's length */
	int knee;                    /* the first level whose 2xx rate fell under LL_STEPS_GOODPUT of
	                              * its offer, -1 when every level kept up */
	int capacity;                /* the level of the highest 2xx rate, -1 without a level */
	int graceful;                /* the highest passing level (every one below passed too), -1
	                              * when the lowest failed */
	int lagless;
};

/* Parses "0.5x,1x,1.5x,2x,3x" (levels, each Nx or a rate as --rate takes it) or, with ramp set,
 * "FROM:TO:N" (N levels evenly from FROM to TO, both Nx or both rates; N in [2, 32]) into st
 * (zeroed first). Returns 0, or -1 with a message in err. */
int ll_steps_parse(const char *s, int ramp, struct ll_steps *st, char *err, size_t errlen);

/* Offer of level k to route rt: Nx times its capacity, or the level's rate. Returns requests
 * per second, or 0 when an Nx level meets a route of unknown capacity. */
double ll_steps_offer(const struct ll_step *k, const struct ll_route *rt);

/* Fills level k's row from r, the report of its run (judged; r->p0/p1 its scrapes). */
void ll_steps_fill(struct ll_step *k, const struct ll_report *r);

/* Sets st->knee, st->capacity and st->graceful from the rows: levels in the order given, which
 * parse keeps rising for a ramp and the user for a list. */
void ll_steps_knee(struct ll_steps *st);

/* The table of levels, each level's failed verdicts, the knee with the capacity, and the highest
 * level that degrades gracefully. */
void ll_steps_text(FILE *f, const struct ll_steps *st);

/* "steps":{...} for the JSON document (docs/LOAD.md), into w's object open. */
void ll_steps_json(struct ll_jw *w, const struct ll_steps *st);

/* Achieved 2xx/s and 503/s against offered per level, the y = x line, the knee, the capacity
 * and the highest graceful level marked, to
 * path (.png or .svg) by gnuplot. Returns 0, or -1 with errno as ll_plot_write. */
int ll_steps_plot(const struct ll_steps *st, const char *path);

#endif
