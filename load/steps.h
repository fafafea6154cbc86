/* Step mode of lagless-load: "how much can it take, and where does it break?". The heavy routes
 * (every route when none is heavy) are offered a list of levels in turn, each for a set time,
 * with the cheap routes at their own rates; each level is judged like a run, and the knee is
 * the highest level whose verdicts all pass (none failed), as every level below it does (a
 * level passing again above a failed one, on a busy machine, does not move it). One row per level: offered and
 * achieved 2xx per second, the 503 share, the cheap routes' p99, the server's loop lag and
 * queue wait. */
#ifndef LL_LOAD_STEPS_H
#define LL_LOAD_STEPS_H

#include <stdio.h>

#include "load/report.h"

struct ll_jw;  /* load/jw.h */

#define LL_STEPS_MAX 32

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
	int knee;                    /* index of the highest passing level, -1 when none passed */
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

/* Sets st->knee from the rows: levels in the order given, which parse keeps rising for a ramp
 * and the user for a list. */
void ll_steps_knee(struct ll_steps *st);

/* The table of levels, each level's failed verdicts, and the knee. */
void ll_steps_text(FILE *f, const struct ll_steps *st);

/* "steps":{...} for the JSON document (docs/LOAD.md), into w's object open. */
void ll_steps_json(struct ll_jw *w, const struct ll_steps *st);

/* Achieved 2xx/s and 503/s against offered per level, the y = x line and the knee marked, to
 * path (.png or .svg) by gnuplot. Returns 0, or -1 with errno as ll_plot_write. */
int ll_steps_plot(const struct ll_steps *st, const char *path);

#endif
