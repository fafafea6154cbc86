/* gnuplot drawing of a run (load/plot.h). */
#include "load/plot.h"

#include <errno.h>
#include <limits.h>
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

static int
ends_with(const char *s, const char *tail)
{
	size_t a = strlen(s), b = strlen(tail);

	return a >= b && strcmp(s + a - b, tail) == 0;
}

/* One data file per route and kind (0: answers other than 503, 1: 503s): "t_s latency_ms".
 * Sets has[] when the file has a point. */
static int
write_samples(const struct lg_report *r, const char *dir, int *has)
{
	const struct lg_engine *e = r->e;
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
				const struct lg_sample *s = &e->samples[j];

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
write_server(const struct lg_report *r, const char *dir)
{
	const struct lg_engine *e = r->e;
	char p[PATH_MAX];
	FILE *f;
	size_t i;

	fname(p, sizeof(p), "%s/server.dat", dir);
	if ((f = fopen(p, "w")) == NULL)
		return -1;
	for (i = 1; i < e->npoints; i++) {
		const struct lg_point *pt = &e->points[i];

		fprintf(f, "%.4f %.6f %.6f %.0f %.0f %.0f\n", pt->t_s, pt->lag_max_s * 1e3,
		        pt->lag_mean_s * 1e3, pt->m.v[LG_SF_QUEUE_DEPTH], pt->m.v[LG_SF_INFLIGHT],
		        pt->m.v[LG_SF_BUSY]);
	}
	return fclose(f) == 0 ? 0 : -1;
}

static void
latency_panel(FILE *g, const struct lg_report *r, const char *dir, const int *has)
{
	const struct lg_engine *e = r->e;
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
server_panels(FILE *g, const char *dir)
{
	fprintf(g, "set ylabel 'loop lag (ms)'\nset yrange [0:*]\n"
	        "plot '%s/server.dat' using 1:2 with steps lw 1.5 lc rgb '#d62728' "
	        "title 'max (histogram bucket bound)', \\\n"
	        "  '' using 1:3 with lines lw 1.5 lc rgb '#1f77b4' title 'mean'\n", dir);
	fprintf(g, "set ylabel 'jobs / requests'\nset xlabel 'seconds since the run started'\n"
	        "plot '%s/server.dat' using 1:4 with steps lw 1.5 lc rgb '#ff7f0e' "
	        "title 'queue depth', \\\n"
	        "  '' using 1:6 with steps lw 1.5 lc rgb '#2ca02c' title 'compute busy', \\\n"
	        "  '' using 1:5 with steps lw 1 lc rgb '#7f7f7f' title 'in flight'\n", dir);
}

static int
write_script(const struct lg_report *r, const char *dir, const char *out, const int *has)
{
	char p[PATH_MAX];
	FILE *g;
	int panels = r->lagless && r->e->npoints > 1 ? 3 : 1;

	fname(p, sizeof(p), "%s/plot.gp", dir);
	if ((g = fopen(p, "w")) == NULL)
		return -1;
	if (ends_with(out, ".svg"))
		fprintf(g, "set terminal svg size 1200,%d dynamic font 'sans,11' background '#ffffff'\n",
		        panels == 3 ? 960 : 480);
	else
		fprintf(g, "set terminal pngcairo size 1200,%d font 'sans,10'\n",
		        panels == 3 ? 960 : 480);
	fputs("set output '", g);
	gq(g, out);
	fprintf(g, "'\nset grid\nset lmargin 12\nset rmargin 4\nset xrange [0:%g]\n", r->duration_s);
	fprintf(g, "set multiplot layout %d,1 title 'lagless-load: ", panels);
	gq(g, r->url);
	fprintf(g, ", %.0f s%s'\n", r->duration_s,
	        r->lagless ? "" : " (not lagless: no server metrics)");
	if (panels == 1)
		fprintf(g, "set xlabel 'seconds since the run started'\n");
	latency_panel(g, r, dir, has);
	if (panels == 3)
		server_panels(g, dir);
	fprintf(g, "unset multiplot\n");
	return fclose(g) == 0 ? 0 : -1;
}

static int
run_gnuplot(const char *dir)
{
	char script[PATH_MAX];

	fname(script, sizeof(script), "%s/plot.gp", dir);
	return lg_plot_gnuplot(script);
}

int
lg_plot_gnuplot(const char *script)
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
	fname(p, sizeof(p), "%s/plot.gp", dir);
	unlink(p);
	rmdir(dir);
}

int
lg_plot_write(const struct lg_report *r, const char *path)
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
	    write_script(r, dir, path, has) == 0)
		rc = run_gnuplot(dir);
	saved = errno;
	free(has);
	cleanup(dir, r->e->nroutes);
	errno = saved;
	return rc;
}
