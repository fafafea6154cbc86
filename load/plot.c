/* gnuplot drawing of a run (load/plot.h). */
#include "load/plot.h"
#include "load/steps.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *const colours[] = {
	"#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
};
#define NCOLOURS (sizeof(colours) / sizeof(colours[0]))

/* a file name inside the temporary directory; dir is short (mkdtemp of a checked prefix) */
static void __attribute__((format(printf, 3, 4)))
fname(char *p, size_t n, const char *fmt, ...)
{
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(p, n, fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= n)
		p[0] = '\0';
}

/* s inside a single-quoted gnuplot string, where '' stands for one quote */
static void
gq(FILE *g, const char *s)
{
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', g);
		fputc(*s, g);
	}
}

/* the samples' axis: the run, or every step level */
static double
span(const struct ll_report *r)
{
	return r->span_s > 0 ? r->span_s : r->duration_s;
}

/* the named pools of the last scrape (the plot's columns) */
static unsigned
npools(const struct ll_report *r)
{
	/* one pool (the default) adds nothing to the every-pool panel */
	return r->e->npoints > 0 && r->e->points[r->e->npoints - 1].m.npools > 1 ?
	       r->e->points[r->e->npoints - 1].m.npools : 0;
}

static const char *
pool_name(const struct ll_report *r, unsigned k)
{
	return r->e->points[r->e->npoints - 1].m.pools[k].name;
}

static int
ends_with(const char *s, const char *tail)
{
	size_t a = strlen(s), b = strlen(tail);

	return a >= b && strcmp(s + a - b, tail) == 0;
}

/* One data file per route and kind (0: answers other than 503, 1: 503s): "t_s latency_ms".
 * Sets has[] when the file has a point. */
static int
write_samples(const struct ll_report *r, const char *dir, int *has)
{
	const struct ll_engine *e = r->e;
	char p[PATH_MAX];
	unsigned i, k;
	size_t j;

	for (i = 0; i < e->nroutes; i++)
		for (k = 0; k < 2; k++) {
			FILE *f;

			fname(p, sizeof(p), "%s/r%u_%u.dat", dir, i, k);
			if ((f = fopen(p, "w")) == NULL)
				return -1;
			for (j = 0; j < e->nsamples; j++) {
				const struct ll_sample *s = &e->samples[j];

				if (s->route != i || (s->status == 503) != (int)k)
					continue;
				fprintf(f, "%.6f %.6f\n", (double)s->due_ns / 1e9,
				        s->latency_ns > 0 ? (double)s->latency_ns / 1e6 : 1e-6);
				has[i * 2 + k] = 1;
			}
			if (fclose(f) != 0)
				return -1;
		}
	return 0;
}

static int
write_server(const struct ll_report *r, const char *dir)
{
	const struct ll_engine *e = r->e;
	char p[PATH_MAX];
	FILE *f;
	size_t i;

	fname(p, sizeof(p), "%s/server.dat", dir);
	if ((f = fopen(p, "w")) == NULL)
		return -1;
	for (i = 1; i < e->npoints; i++) {
		const struct ll_point *pt = &e->points[i];

		/* a scrape without an interval of its own phase starts a new line (blank line) */
		if (!pt->has_lag) {
			fputs("\n", f);
			continue;
		}
		fprintf(f, "%.4f %.6f %.6f %.0f %.0f %.0f %.6f\n", pt->t_s, pt->lag_p99_s * 1e3,
		        pt->lag_mean_s * 1e3, pt->m.v[LL_SF_QUEUE_DEPTH], pt->m.v[LL_SF_INFLIGHT],
		        pt->m.v[LL_SF_BUSY], pt->lag_p50_s * 1e3);
	}
	if (fclose(f) != 0)
		return -1;
	/* per named pool: busy processes and queue depth, two columns a pool */
	fname(p, sizeof(p), "%s/pools.dat", dir);
	if ((f = fopen(p, "w")) == NULL)
		return -1;
	for (i = 0; i < e->npoints; i++) {
		const struct ll_point *pt = &e->points[i];
		unsigned k;

		fprintf(f, "%.4f", pt->t_s);
		for (k = 0; k < npools(r); k++) {
			const struct ll_scrape_pool *pp = ll_scrape_pool(&pt->m, pool_name(r, k));

			fprintf(f, " %.0f %.0f", pp ? pp->v[LL_PF_ACTIVE] : 0, pp ? pp->v[LL_PF_DEPTH] : 0);
		}
		fputs("\n", f);
	}
	return fclose(f) == 0 ? 0 : -1;
}

/* Offered (requests due), 2xx and 503 per second of the run: of the heavy routes (every route
 * when none is heavy, load/steps.h), and offered of every route. */
static int
write_throughput(const struct ll_report *r, const char *dir)
{
	const struct ll_engine *e = r->e;
	unsigned nsec = (unsigned)ceil(span(r)), t;
	unsigned (*bins)[4] = calloc(nsec + 1, sizeof(*bins));
	char p[PATH_MAX];
	FILE *f;
	size_t i;

	if (bins == NULL)
		return -1;
	for (i = 0; i < e->nsamples; i++) {
		const struct ll_sample *sm = &e->samples[i];

		if ((t = (unsigned)(sm->due_ns / 1000000000u)) >= nsec)
			continue;
		bins[t][3]++;
		if (!ll_engine_route_stepped(e, sm->route))
			continue;
		bins[t][0]++;
		bins[t][1] += sm->status >= 200 && sm->status < 300;
		bins[t][2] += sm->status == 503;
	}
	fname(p, sizeof(p), "%s/thr.dat", dir);
	if ((f = fopen(p, "w")) == NULL) {
		free(bins);
		return -1;
	}
	for (t = 0; t < nsec; t++)
		fprintf(f, "%u %u %u %u %u\n", t, bins[t][0], bins[t][1], bins[t][2], bins[t][3]);
	free(bins);
	return fclose(f) == 0 ? 0 : -1;
}

static void
throughput_panel(FILE *g, const struct ll_report *r, const char *dir)
{
	unsigned i, heavy = 0;

	for (i = 0; i < r->e->nroutes; i++)
		heavy += r->e->routes[i].heavy;
	fprintf(g, "set ylabel '%s per second (by due time)'\nset yrange [0:*]\nset logscale y\n"
	        "set yrange [0.8:*]\n", heavy ? "heavy routes," : "every route,");
	if (heavy)
		fprintf(g, "plot '%s/thr.dat' using ($1+0.5):5 with steps lw 1 dt 2 lc rgb '#bbbbbb' "
		        "title 'offered, every route', \\\n  '' ", dir);
	else
		fprintf(g, "plot '%s/thr.dat' ", dir);
	fprintf(g, "using ($1+0.5):2 with steps lw 1.5 lc rgb '#7f7f7f' "
	        "title 'offered', \\\n"
	        "  '' using ($1+0.5):3 with steps lw 2 lc rgb '#1f77b4' title '2xx', \\\n"
	        "  '' using ($1+0.5):4 with steps lw 2 lc rgb '#d62728' title '503'\n"
	        "unset logscale y\nset autoscale y\n");
}

/* The step levels as dashed lines and their names along the top of every panel */
static void
level_marks(FILE *g, const struct ll_report *r)
{
	unsigned k;

	for (k = 0; r->steps != NULL && k < r->steps->n; k++) {
		const struct ll_step *lv = &r->steps->s[k];

		fprintf(g, "set arrow %u from %g, graph 0 to %g, graph 1 nohead dt 3 lc rgb "
		        "'#555555'\nset label %u '%g%s' at %g, graph 0.04 offset 0.5,0 font ',9'\n",
		        10 + k, lv->t0_s, lv->t0_s, 10 + k, lv->level.value,
		        lv->level.relative ? "x" : "/s", lv->t0_s);
	}
}

static void
latency_panel(FILE *g, const struct ll_report *r, const char *dir, const int *has)
{
	const struct ll_engine *e = r->e;
	const char *sep = "plot ";
	unsigned i;

	fprintf(g, "set logscale y\nset ylabel 'latency from scheduled send (ms)'\n"
	        "set format y '%%g'\nset key top left opaque box\n");
	for (i = 0; i < e->nroutes; i++) {
		if (has[i * 2]) {
			fprintf(g, "%s'%s/r%u_0.dat' using 1:2 with points pt 7 ps 0.35 lc rgb '%s' "
			        "title '", sep, dir, i, colours[i % NCOLOURS]);
			gq(g, e->routes[i].path);
			fputc('\'', g);
			sep = ", \\\n  ";
		}
		if (has[i * 2 + 1]) {
			fprintf(g, "%s'%s/r%u_1.dat' using 1:2 with points pt 2 ps 0.9 lw 1.5 lc rgb '#d62728' "
			        "title '", sep, dir, i);
			gq(g, e->routes[i].path);
			fputs(" 503'", g);
			sep = ", \\\n  ";
		}
	}
	if (strcmp(sep, "plot ") == 0)
		fprintf(g, "set label 1 'no request completed' at graph 0.4, 0.5\n"
		        "plot [0:1] [1:10] NaN notitle\n");
	else
		fprintf(g, "\n");
	fprintf(g, "unset logscale y\nunset label 1\n");
}

static void
pools_panel(FILE *g, const struct ll_report *r, const char *dir)
{
	const char *sep = "plot ";
	unsigned k;

	fprintf(g, "set ylabel 'per pool'\nset yrange [0:*]\n");
	for (k = 0; k < npools(r); k++) {
		fprintf(g, "%s'%s/pools.dat' using 1:%u with steps lw 2 lc rgb '%s' title '", sep, dir,
		        2 + 2 * k, colours[k % NCOLOURS]);
		gq(g, pool_name(r, k));
		fprintf(g, " busy', \\\n  '' using 1:%u with steps lw 1.5 dt 2 lc rgb '%s' title '",
		        3 + 2 * k, colours[k % NCOLOURS]);
		gq(g, pool_name(r, k));
		fputs(" queue depth'", g);
		sep = ", \\\n  ";
	}
	fputs("\n", g);
}

static void
server_panels(FILE *g, const struct ll_report *r, const char *dir)
{
	/* p50 and p99 interpolated from the buckets' counts of each interval: a loop at 0.1-1 ms
	 * reads so, where the highest bucket bound drew a flat line at the bound */
	fprintf(g, "set ylabel 'loop lag (ms)'\nset yrange [0:*]\n"
	        "plot '%s/server.dat' using 1:2 with lines lw 1.5 lc rgb '#d62728' "
	        "title 'p99 per interval (from bucket counts)', \\\n"
	        "  '' using 1:7 with lines lw 1.5 lc rgb '#ff7f0e' title 'p50', \\\n"
	        "  '' using 1:3 with lines lw 1.5 lc rgb '#1f77b4' title 'mean'\n", dir);
	if (npools(r) == 0)
		fprintf(g, "set xlabel 'seconds since the run started'\n");
	fprintf(g, "set ylabel 'jobs / requests (every pool)'\n"
	        "plot '%s/server.dat' using 1:4 with steps lw 1.5 lc rgb '#ff7f0e' "
	        "title 'queue depth', \\\n"
	        "  '' using 1:6 with steps lw 1.5 lc rgb '#2ca02c' title 'compute busy', \\\n"
	        "  '' using 1:5 with steps lw 1 lc rgb '#7f7f7f' title 'in flight'\n", dir);
	if (npools(r) > 0) {
		fprintf(g, "set xlabel 'seconds since the run started'\n");
		pools_panel(g, r, dir);
	}
}

static int
write_script(const struct ll_report *r, const char *dir, const char *out, const int *has)
{
	char p[PATH_MAX];
	FILE *g;
	int server = r->lagless && r->e->npoints > 1;
	int panels = 2 + (server ? 2 + (npools(r) > 0) : 0);

	fname(p, sizeof(p), "%s/plot.gp", dir);
	if ((g = fopen(p, "w")) == NULL)
		return -1;
	if (ends_with(out, ".svg"))
		fprintf(g, "set terminal svg noenhanced size 1200,%d dynamic font 'sans,11' "
		        "background '#ffffff'\n", 240 + 240 * panels);
	else
		fprintf(g, "set terminal pngcairo noenhanced size 1200,%d font 'sans,10'\n",
		        240 + 240 * panels);
	fputs("set output '", g);
	gq(g, out);
	fprintf(g, "'\nset grid\nset lmargin 12\nset rmargin 4\nset xrange [0:%g]\n", span(r));
	fprintf(g, "set multiplot layout %d,1 title 'lagless-load: ", panels);
	gq(g, r->url);
	fprintf(g, ", %.0f s%s%s'\n", span(r), r->steps ? " in step levels" : "",
	        r->lagless ? "" : " (not lagless: no server metrics)");
	level_marks(g, r);
	latency_panel(g, r, dir, has);
	if (!server)
		fprintf(g, "set xlabel 'seconds since the run started'\n");
	throughput_panel(g, r, dir);
	if (server)
		server_panels(g, r, dir);
	fprintf(g, "unset multiplot\n");
	return fclose(g) == 0 ? 0 : -1;
}

static int
run_gnuplot(const char *dir)
{
	char script[PATH_MAX];

	fname(script, sizeof(script), "%s/plot.gp", dir);
	return ll_plot_gnuplot(script);
}

int
ll_plot_gnuplot(const char *script)
{
	char *argv[] = { "gnuplot", (char *)script, NULL };
	pid_t pid;
	int st, rc;

	rc = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
	if (rc != 0) {
		errno = rc;
		return -1;
	}
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
		errno = ENOENT;
		return -1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		errno = EIO;
		return -1;
	}
	return 0;
}

static void
cleanup(const char *dir, unsigned nroutes)
{
	char p[PATH_MAX];
	unsigned i, k;

	for (i = 0; i < nroutes; i++)
		for (k = 0; k < 2; k++) {
			fname(p, sizeof(p), "%s/r%u_%u.dat", dir, i, k);
			unlink(p);
		}
	fname(p, sizeof(p), "%s/server.dat", dir);
	unlink(p);
	fname(p, sizeof(p), "%s/pools.dat", dir);
	unlink(p);
	fname(p, sizeof(p), "%s/thr.dat", dir);
	unlink(p);
	fname(p, sizeof(p), "%s/plot.gp", dir);
	unlink(p);
	rmdir(dir);
}

int
ll_plot_write(const struct ll_report *r, const char *path)
{
	const char *tmp = getenv("TMPDIR");
	char dir[600];
	int *has, rc = -1, saved;

	if (!ends_with(path, ".png") && !ends_with(path, ".svg")) {
		errno = EINVAL;
		return -1;
	}
	if (strchr(path, '\'') != NULL || strchr(r->url, '\'') != NULL) {
		errno = EINVAL;   /* the names go inside single-quoted gnuplot strings */
		return -1;
	}
	fname(dir, sizeof(dir), "%s/lagless-load.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL)
		return -1;
	has = calloc(r->e->nroutes * 2 + 1, sizeof(*has));
	if (has != NULL && write_samples(r, dir, has) == 0 && write_server(r, dir) == 0 &&
	    write_throughput(r, dir) == 0 && write_script(r, dir, path, has) == 0)
		rc = run_gnuplot(dir);
	saved = errno;
	free(has);
	cleanup(dir, r->e->nroutes);
	errno = saved;
	return rc;
}
