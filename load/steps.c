/* Step mode: levels, their rows, the knee, its table, JSON and plot (load/steps.h). */
#include "load/steps.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load/err.h"
#include "load/jw.h"
#include "load/plot.h"

static const char level_help[] = "a level is Nx (times each heavy route's capacity, at most "
                                 "1000) or a rate (N, N/s, N/1s, 30/m: requests per period)";

static int
parse_ramp(char *copy, struct ll_steps *st, char *err, size_t errlen)
{
	char *a = copy, *b = strchr(a, ':'), *c, *end;
	struct ll_rate from, to;
	long n;
	unsigned i;

	if (b == NULL || (c = strchr(b + 1, ':')) == NULL)
		return ll_fail(err, errlen, "--ramp %s: FROM:TO:N, e.g. 0.5x:3x:6", copy);
	*b++ = '\0';
	*c++ = '\0';
	n = strtol(c, &end, 10);
	if (ll_sched_parse_rate(a, &from) == -1 || ll_sched_parse_rate(b, &to) == -1)
		return ll_fail(err, errlen, "--ramp %s:%s: %s", a, b, level_help);
	if (from.relative != to.relative || !(to.value > from.value))
		return ll_fail(err, errlen, "--ramp %s:%s: both Nx or both rates, rising", a, b);
	if (end == c || *end != '\0' || n < 2 || n > LL_STEPS_MAX)
		return ll_fail(err, errlen, "--ramp ...:%s: N is the number of levels, 2 to %d", c,
		            LL_STEPS_MAX);
	for (i = 0; i < (unsigned)n; i++) {
		st->s[i].level.relative = from.relative;
		st->s[i].level.value = from.value + (to.value - from.value) * i / (double)(n - 1);
	}
	st->n = (unsigned)n;
	return 0;
}

int
ll_steps_parse(const char *s, int ramp, struct ll_steps *st, char *err, size_t errlen)
{
	char *copy = strdup(s), *tok, *save = NULL;
	int rc = 0;

	memset(st, 0, sizeof(*st));
	st->knee = st->capacity = st->graceful = -1;
	if (copy == NULL)
		return ll_fail(err, errlen, "out of memory");
	if (ramp) {
		rc = parse_ramp(copy, st, err, errlen);
		free(copy);
		return rc;
	}
	for (tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
		if (st->n == LL_STEPS_MAX)
			rc = ll_fail(err, errlen, "--steps %s: at most %d levels", s, LL_STEPS_MAX);
		else if (ll_sched_parse_rate(tok, &st->s[st->n].level) == -1)
			rc = ll_fail(err, errlen, "--steps %s: '%s': %s", s, tok, level_help);
		else
			st->n++;
	}
	free(copy);
	if (rc == 0 && st->n == 0)
		rc = ll_fail(err, errlen, "--steps: no level (e.g. 0.5x,1x,1.5x,2x,3x)");
	return rc;
}

static double
capacity(const struct ll_route *rt)
{
	return rt->capacity_rps > 0 ? rt->capacity_rps : rt->capacity_metrics_rps;
}

double
ll_steps_offer(const struct ll_step *k, const struct ll_route *rt)
{
	return k->level.relative ? k->level.value * capacity(rt) : k->level.value;
}


void
ll_steps_fill(struct ll_step *k, const struct ll_report *r)
{
	const struct ll_engine *e = r->e;
	double answers = 0, n503 = 0, ok = 0;
	unsigned i;

	k->offered_rps = 0;
	k->capacity_rps = 0;
	k->cheap_p99_ms = -1;
	for (i = 0; i < e->nroutes; i++) {
		const struct ll_rstats *st = &e->routes[i].st[LL_PH_RUN];

		if (ll_engine_route_stepped(e, i)) {
			k->offered_rps += e->routes[i].rps;
			k->capacity_rps = k->capacity_rps < 0 || e->routes[i].capacity_rps <= 0 ? -1 :
			                  k->capacity_rps + e->routes[i].capacity_rps;
			ok += (double)st->ok_in_time;
			n503 += (double)ll_rstats_count(st, 503, 503);
			answers += (double)st->all.total;
		} else {
			k->cheap_p99_ms = fmax(k->cheap_p99_ms,
			                       (double)ll_hist_value_at(&st->all, 99) / 1e6);
		}
	}
	k->ok_rps = ok / r->duration_s;
	if (k->capacity_rps < 0)
		k->capacity_rps = 0;
	k->refused_rps = n503 / r->duration_s;
	k->share_503 = answers > 0 ? n503 / answers : 0;
	if (r->lagless)
		ll_report_server_figures(r, &k->sf);
	memcpy(k->v, r->v, sizeof(k->v));
	k->pass = ll_report_ok(r);
}

/* 2xx/s over offered/s of level k; 1 for a level offered nothing */
static double
goodput(const struct ll_step *k)
{
	return k->offered_rps > 0 ? k->ok_rps / k->offered_rps : 1;
}

void
ll_steps_knee(struct ll_steps *st)
{
	unsigned i;

	st->knee = st->capacity = st->graceful = -1;
	for (i = 0; i < st->n; i++) {
		if (st->knee < 0 && goodput(&st->s[i]) < LL_STEPS_GOODPUT)
			st->knee = (int)i;
		if (st->capacity < 0 || st->s[i].ok_rps > st->s[st->capacity].ok_rps)
			st->capacity = (int)i;
	}
	/* the levels pass from the lowest up to the graceful one: a level that passes again above
	 * a failed one (a quiet moment of a busy machine) does not move it */
	for (i = 0; i < st->n && st->s[i].pass; i++)
		st->graceful = (int)i;
}

static const char *
level_name(const struct ll_step *k, char *buf, size_t len)
{
	snprintf(buf, len, k->level.relative ? "%gx" : "%g/s", k->level.value);
	return buf;
}

/* The knee, the capacity and the highest level that degrades gracefully, one line each */
static void
steps_summary(FILE *f, const struct ll_steps *st)
{
	const struct ll_step *k;
	char name[32];

	if (st->knee >= 0) {
		k = &st->s[st->knee];
		fprintf(f, "knee: level %s, %.1f/s offered, %.1f 2xx/s (%.0f %% of the offer, under "
		        "%.0f %%): the 2xx rate stops following the offered rate here\n",
		        level_name(k, name, sizeof(name)), k->offered_rps, k->ok_rps, 100 * goodput(k),
		        100 * LL_STEPS_GOODPUT);
	} else if (st->n > 0) {
		fprintf(f, "knee: not reached: the 2xx rate kept within %.0f %% of the offer at every "
		        "level, up to %.1f/s offered (offer more)\n", 100 * LL_STEPS_GOODPUT,
		        st->s[st->n - 1].offered_rps);
	}
	if (st->capacity >= 0) {
		k = &st->s[st->capacity];
		fprintf(f, "capacity: %s%.1f 2xx/s, at level %s (the highest 2xx rate of any level)\n",
		        st->knee >= 0 ? "" : "at least ", k->ok_rps, level_name(k, name, sizeof(name)));
	}
	if (st->graceful >= 0) {
		k = &st->s[st->graceful];
		fprintf(f, "highest level that degrades gracefully: %s, %.1f/s offered, %.1f 2xx/s (its "
		        "verdicts all pass, as every level below it does; not the capacity)\n",
		        level_name(k, name, sizeof(name)), k->offered_rps, k->ok_rps);
	} else {
		fprintf(f, "highest level that degrades gracefully: none (the lowest level failed a "
		        "verdict): start lower\n");
	}
}

void
ll_steps_text(FILE *f, const struct ll_steps *st)
{
	char name[32];
	unsigned i, p;

	fprintf(f, "steps: %u levels of %.1f s each\n", st->n, st->seconds);
	fprintf(f, "%-8s %10s %10s %10s %8s %12s %12s %12s %10s  %s\n", "level", "offered/s",
	        "2xx/s", "2xx/offer", "503 %", "cheap p99 ms", "lag p99 ms", "lag mean ms", "wait ms",
	        "verdicts");
	for (i = 0; i < st->n; i++) {
		const struct ll_step *k = &st->s[i];

		fprintf(f, "%-8s %10.1f %10.1f %9.0f%% %8.1f ", level_name(k, name, sizeof(name)),
		        k->offered_rps, k->ok_rps, 100 * goodput(k), 100 * k->share_503);
		if (k->cheap_p99_ms >= 0)
			fprintf(f, "%12.3f ", k->cheap_p99_ms);
		else
			fprintf(f, "%12s ", "n/a");
		if (st->lagless)
			fprintf(f, "%12.3f %12.3f %10.3f  ", k->sf.lag_p99_ms, k->sf.lag_mean_ms,
			        k->sf.wait_mean_ms);
		else
			fprintf(f, "%12s %12s %10s  ", "n/a", "n/a", "n/a");
		fprintf(f, "%s%s%s\n", k->pass ? "PASS" : "FAIL", (int)i == st->knee ? "  <- knee" : "",
		        (int)i == st->graceful ? "  <- highest graceful" : "");
	}
	for (i = 0; i < st->n; i++)
		for (p = 0; p < LL_P_COUNT; p++)
			if (st->s[i].v[p].state == LL_V_FAIL)
				fprintf(f, "level %s: FAIL %s: %s\n", level_name(&st->s[i], name, sizeof(name)),
				        ll_report_promise(p), st->s[i].v[p].why);
	for (i = 0; i < st->n; i++) {
		const struct ll_step *k = &st->s[i];

		/* flooded, yet the 2xx rate is far from the calibration: the machine changed */
		if (k->capacity_rps > 0 && k->offered_rps >= k->capacity_rps &&
		    fabs(k->ok_rps / k->capacity_rps - 1) > LL_REPORT_CALIB_OFF)
			fprintf(f, "level %s: WARNING: 2xx at %.1f/s, %.0f %% of the calibrated %.1f/s "
			        "(more than %.0f %% off): the machine's load changed, so the level was "
			        "really %.2fx of what the server did\n", level_name(k, name, sizeof(name)),
			        k->ok_rps, 100 * k->ok_rps / k->capacity_rps, k->capacity_rps,
			        100 * LL_REPORT_CALIB_OFF, k->ok_rps > 0 ? k->offered_rps / k->ok_rps : 0.0);
	}
	steps_summary(f, st);
}

/* one level's figures and verdicts, into the object open */
static void
steps_level(struct ll_jw *w, const struct ll_step *k, int lagless)
{
	unsigned p;

	ll_jw_g6(w, "level", k->level.value);
	ll_jw_bool(w, "relative", k->level.relative);
	ll_jw_num(w, "t0_s", "%.4f", k->t0_s);
	ll_jw_num(w, "t1_s", "%.4f", k->t1_s);
	ll_jw_g6(w, "offered_per_s", k->offered_rps);
	ll_jw_g6(w, "ok_per_s", k->ok_rps);
	ll_jw_g6(w, "refused_per_s", k->refused_rps);
	ll_jw_g6(w, "goodput_share", goodput(k));
	ll_jw_g6(w, "share_503", k->share_503);
	ll_jw_g6(w, "capacity_per_s", k->capacity_rps);
	if (k->cheap_p99_ms >= 0)
		ll_jw_g6(w, "cheap_p99_ms", k->cheap_p99_ms);
	else
		ll_jw_null(w, "cheap_p99_ms");
	if (lagless) {
		ll_jw_map(w, "server");
		ll_jw_g6(w, "lag_p99_ms", k->sf.lag_p99_ms);
		ll_jw_g6(w, "lag_bound_ms", k->sf.lag_bound_ms);
		ll_jw_g6(w, "lag_mean_ms", k->sf.lag_mean_ms);
		ll_jw_g6(w, "queue_wait_mean_ms", k->sf.wait_mean_ms);
		ll_jw_g6(w, "queue_depth_max", k->sf.depth_max);
		ll_jw_end_map(w);
	} else
		ll_jw_null(w, "server");
	ll_jw_bool(w, "pass", k->pass);
	ll_jw_map(w, "verdicts");
	for (p = 0; p < LL_P_COUNT; p++)
		ll_jw_tri(w, ll_report_promise_key(p), k->v[p].state);
	ll_jw_end_map(w);
}

void
ll_steps_json(struct ll_jw *w, const struct ll_steps *st)
{
	unsigned i;

	ll_jw_map(w, "steps");
	ll_jw_g6(w, "seconds", st->seconds);
	ll_jw_g6(w, "goodput_threshold", LL_STEPS_GOODPUT);
	if (st->knee >= 0) {
		ll_jw_map(w, "knee");
		ll_jw_u64(w, "level", (uint64_t)st->knee);
		ll_jw_g6(w, "offered_per_s", st->s[st->knee].offered_rps);
		ll_jw_g6(w, "ok_per_s", st->s[st->knee].ok_rps);
		ll_jw_g6(w, "goodput_share", goodput(&st->s[st->knee]));
		ll_jw_end_map(w);
	} else {
		ll_jw_null(w, "knee");
	}
	if (st->capacity >= 0) {
		ll_jw_map(w, "capacity");
		ll_jw_g6(w, "ok_per_s", st->s[st->capacity].ok_rps);
		ll_jw_u64(w, "level", (uint64_t)st->capacity);
		ll_jw_bool(w, "reached", st->knee >= 0);
		ll_jw_end_map(w);
	} else {
		ll_jw_null(w, "capacity");
	}
	if (st->graceful >= 0)
		ll_jw_u64(w, "graceful_level", (uint64_t)st->graceful);
	else
		ll_jw_null(w, "graceful_level");
	ll_jw_arr(w, "levels");
	for (i = 0; i < st->n; i++) {
		ll_jw_map(w, NULL);
		steps_level(w, &st->s[i], st->lagless);
		ll_jw_end_map(w);
	}
	ll_jw_end_arr(w);
	ll_jw_end_map(w);
}

static void
plot_script(FILE *g, const struct ll_steps *st, const char *dat, const char *out)
{
	double xmax = 0;
	char name[32];
	unsigned i;

	for (i = 0; i < st->n; i++)
		xmax = fmax(xmax, fmax(st->s[i].offered_rps, st->s[i].ok_rps));
	if (strlen(out) > 4 && strcmp(out + strlen(out) - 4, ".svg") == 0)
		fputs("set terminal svg noenhanced size 900,600 dynamic font 'sans,11' "
		      "background '#ffffff'\n", g);
	else
		fputs("set terminal pngcairo noenhanced size 900,600 font 'sans,10'\n", g);
	fprintf(g, "set output '%s'\nset grid\nset key top left opaque box\n"
	        "set title 'lagless-load steps: achieved against offered, %.1f s per level'\n"
	        "set xlabel 'offered per second (stepped routes)'\nset ylabel 'answers per second'\n"
	        "set xrange [0:%g]\nset yrange [0:%g]\n", out, st->seconds, xmax * 1.1 + 1,
	        xmax * 1.1 + 1);
	if (st->knee >= 0) {
		const struct ll_step *k = &st->s[st->knee];

		fprintf(g, "set arrow 1 from %g, graph 0 to %g, graph 1 nohead lw 2 dt 2 lc rgb "
		        "'#d62728'\nset label 1 'knee: %s, %.1f/s' at %g, graph 0.95 offset 1,0 "
		        "tc rgb '#d62728'\n", k->offered_rps, k->offered_rps,
		        level_name(k, name, sizeof(name)), k->offered_rps, k->offered_rps);
	} else {
		fputs("set label 1 'knee not reached: offer more' at graph 0.3, 0.9\n", g);
	}
	if (st->capacity >= 0)
		fprintf(g, "set arrow 2 from graph 0, first %g to graph 1, first %g nohead lw 1.5 dt 4 "
		        "lc rgb '#1f77b4'\nset label 2 'capacity %.1f 2xx/s' at graph 0.6, first %g "
		        "offset 0,0.7 tc rgb '#1f77b4'\n", st->s[st->capacity].ok_rps,
		        st->s[st->capacity].ok_rps, st->s[st->capacity].ok_rps,
		        st->s[st->capacity].ok_rps);
	if (st->graceful >= 0) {
		const struct ll_step *k = &st->s[st->graceful];

		fprintf(g, "set arrow 3 from %g, graph 0 to %g, graph 1 nohead lw 2 dt 2 lc rgb "
		        "'#2ca02c'\nset label 3 'highest graceful: %s' at %g, graph 0.88 offset 1,0 "
		        "tc rgb '#2ca02c'\n", k->offered_rps, k->offered_rps,
		        level_name(k, name, sizeof(name)), k->offered_rps);
	}
	fprintf(g, "plot x with lines dt 3 lc rgb '#7f7f7f' title 'achieved = offered', \\\n"
	        "  '%s' using 1:2 with linespoints pt 7 lw 2 lc rgb '#1f77b4' title '2xx/s', \\\n"
	        "  '' using 1:3 with linespoints pt 2 lw 1.5 lc rgb '#d62728' title '503/s', \\\n"
	        "  '' using 1:($4 > 0 ? $2 : 1/0) with points pt 6 ps 2.5 lw 2 lc rgb '#d62728' "
	        "title 'a verdict failed'\n", dat);
}

int
ll_steps_plot(const struct ll_steps *st, const char *path)
{
	const char *tmp = getenv("TMPDIR");
	char dir[600], dat[PATH_MAX], gp[PATH_MAX];
	FILE *d = NULL, *g = NULL;
	unsigned i;
	int rc = -1, saved;

	if (strchr(path, '\'') != NULL) {
		errno = EINVAL;
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s/lagless-load.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(dat, sizeof(dat), "%s/steps.dat", dir);
	snprintf(gp, sizeof(gp), "%s/steps.gp", dir);
	if ((d = fopen(dat, "w")) != NULL && (g = fopen(gp, "w")) != NULL) {
		for (i = 0; i < st->n; i++)
			fprintf(d, "%.6f %.6f %.6f %d\n", st->s[i].offered_rps, st->s[i].ok_rps,
			        st->s[i].refused_rps, !st->s[i].pass);
		plot_script(g, st, dat, path);
		if (fclose(d) == 0 && fclose(g) == 0)
			rc = ll_plot_gnuplot(gp);
		d = g = NULL;
	}
	saved = errno;
	if (d)
		fclose(d);
	if (g)
		fclose(g);
	unlink(dat);
	unlink(gp);
	rmdir(dir);
	errno = saved;
	return rc;
}
