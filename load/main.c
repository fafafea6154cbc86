/* lagless-load: an open-loop HTTP/1.1 load generator that cannot hide a stall, shipped with
 * lagless (man/lagless-load.1, docs/LOAD.md).
 *
 * Phases: probe the target (/metrics: is it lagless?), calibrate each route whose rate is a
 * multiple of its capacity (closed loop at saturation), measure the cheap routes alone (idle
 * p99), then the run with every route on its schedule while /metrics is scraped; then the
 * table, the verdicts, and on request JSON, a plot and the raw samples.
 *
 * Exit status: 0 when no verdict failed, 1 when one did, 2 on bad usage or an unreachable
 * target. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/version.h"
#include "load/engine.h"
#include "load/hints.h"
#include "load/json.h"
#include "load/plot.h"
#include "load/report.h"
#include "load/routespec.h"
#include "load/scenario.h"
#include "load/scraper.h"
#include "load/steps.h"
#include "load/units.h"

struct opts {
	const char *url;
	double duration, idle, calibrate, timeout, scrape_ms, capacity;
	unsigned max_conns, calib_conns, max_routes, nroutes;
	int cpu;                        /* pin to this CPU, or -1 */
	enum ll_arrival arrival;
	const char *json, *plot, *samples;
	const char *metrics;            /* --metrics URL,...: the replicas' /metrics, or NULL */
	struct ll_scraper *scraper;     /* where /metrics is read (load/scraper.h) */
	char *headers;                  /* -H, "Name: value\r\n"... */
	int scrape, progress, quiet;
	uint64_t seed;
	double cheap_factor, cheap_slack_ms, fast_ms, capacity_share;
	struct ll_route *routes;
	char *route_args[64];
	const char *steps_arg;          /* --steps LIST or --ramp FROM:TO:N */
	int ramp;
	double step_s;                  /* each level's length */
	struct ll_steps steps;
};

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: lagless-load [options] --rate PATH=RATE[,option...] ... http://HOST[:PORT]\n"
	    "  -r, --rate PATH=RATE[,..]  a route and its rate: N or N/s requests per second,\n"
	    "                             N/1s, 30/m, 100/500ms per period, or Nx (N times its\n"
	    "                             capacity, measured first); options:\n"
	    "                             method=M, body=@FILE, body=random:SIZE[K|KB|M|MB],\n"
	    "                             header=Name: value, capacity=RPS, keys=@FILE, heavy,\n"
	    "                             cheap, poisson, constant; PATH may hold {seq},\n"
	    "                             {rand:N}, {hit:R}, {key}, {run} (per request)\n"
	    "                             (repeatable, up to 64 routes)\n"
	    "  -H, --header 'Name: value' a header in every request (repeatable)\n"
	    "  -d, --duration S           length of the measured run (10; 10s, 500ms, 1m)\n"
	    "      --arrival constant|poisson   default arrival process (constant)\n"
	    "      --idle S               cheap routes alone before the run, for their idle p99 (2)\n"
	    "      --calibrate S          saturation run per Nx route to measure its capacity (3)\n"
	    "      --calibrate-conns N    requests kept outstanding then (lagless: its job slots,\n"
	    "                             else 2 per CPU of this machine)\n"
	    "      --capacity RPS         the heavy routes' capacity, skipping calibration (or a\n"
	    "                             route's own capacity=RPS)\n"
	    "  -c, --max-conns N          connections at most (1000); beyond, due requests wait\n"
	    "      --timeout S            per request (10)\n"
	    "      --scrape-ms MS         /metrics period against lagless (250); --no-scrape\n"
	    "      --metrics URL,...      every replica's /metrics behind a load balancer, summed\n"
	    "                             per scrape (http://10.0.0.1:8080/metrics,...)\n"
	    "      --json FILE            the report as JSON ('-': stdout, the table to stderr)\n"
	    "      --plot FILE.png|.svg   latency over time, loop lag, queue depth (gnuplot)\n"
	    "      --samples FILE         every request: due_s,route,status,latency_ms (CSV)\n"
	    "      --seed N               Poisson and random-body seed (1)\n"
	    "      --cpu N                run on CPU N only (sched_setaffinity), apart from the server\n"
	    "      --cheap-factor F       cheap p99 may be F x its idle p99 (2) ...\n"
	    "      --cheap-slack-ms MS    ... plus MS (1)\n"
	    "      --fast-ms MS           a 503's p99 at most (10)\n"
	    "      --capacity-share F     heavy 2xx at least F x capacity (0.8)\n"
	    "      --steps L1,L2,...      step mode: the heavy routes at each level in turn (Nx or\n"
	    "                             a rate: 0.5x,1x,1.5x,2x,3x); the knee is where 2xx/s\n"
	    "                             falls under 90 %% of the offer (the capacity)\n"
	    "      --ramp FROM:TO:N       step mode with N levels evenly from FROM to TO\n"
	    "      --step-duration S      each level's length (5s)\n"
	    "      --scenario FILE        options and expected verdicts of an experiment\n"
	    "                             (load/scenarios/); exit 0 when every expectation is met\n"
	    "      --progress / -q, --quiet   progress lines even without a terminal / none\n"
	    "  -h, --help, -V, --version\n");
}

enum { O_ARRIVAL = 256, O_IDLE, O_CALIB, O_CALIB_CONNS, O_CAPACITY, O_TIMEOUT, O_SCRAPE_MS,
       O_NO_SCRAPE, O_JSON, O_PLOT, O_SAMPLES, O_SEED, O_CHEAP_F, O_CHEAP_S, O_FAST, O_SHARE,
       O_PROGRESS, O_CPU, O_STEPS, O_RAMP, O_STEP_S, O_METRICS };

static const struct option longopts[] = {
	{ "rate", required_argument, NULL, 'r' },
	{ "duration", required_argument, NULL, 'd' },
	{ "max-conns", required_argument, NULL, 'c' },
	{ "header", required_argument, NULL, 'H' },
	{ "arrival", required_argument, NULL, O_ARRIVAL },
	{ "idle", required_argument, NULL, O_IDLE },
	{ "calibrate", required_argument, NULL, O_CALIB },
	{ "calibrate-conns", required_argument, NULL, O_CALIB_CONNS },
	{ "capacity", required_argument, NULL, O_CAPACITY },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "scrape-ms", required_argument, NULL, O_SCRAPE_MS },
	{ "no-scrape", no_argument, NULL, O_NO_SCRAPE },
	{ "metrics", required_argument, NULL, O_METRICS },
	{ "json", required_argument, NULL, O_JSON },
	{ "plot", required_argument, NULL, O_PLOT },
	{ "samples", required_argument, NULL, O_SAMPLES },
	{ "seed", required_argument, NULL, O_SEED },
	{ "cheap-factor", required_argument, NULL, O_CHEAP_F },
	{ "cheap-slack-ms", required_argument, NULL, O_CHEAP_S },
	{ "fast-ms", required_argument, NULL, O_FAST },
	{ "capacity-share", required_argument, NULL, O_SHARE },
	{ "progress", no_argument, NULL, O_PROGRESS },
	{ "cpu", required_argument, NULL, O_CPU },
	{ "steps", required_argument, NULL, O_STEPS },
	{ "ramp", required_argument, NULL, O_RAMP },
	{ "step-duration", required_argument, NULL, O_STEP_S },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

/* A duration (load/units.h) in [lo, hi] seconds, a bare number in unit seconds (1 or 1e-3);
 * exits 2 otherwise, saying the unit. */
static double
duration(const char *opt, const char *s, double unit, double lo, double hi)
{
	const char *un = unit == 1 ? "s" : "ms";
	double v, k = unit == 1 ? 1 : 1e3;

	if (ll_units_duration(s, unit, &v) == -1 || !(v >= lo && v <= hi)) {
		fprintf(stderr, "lagless-load: --%s %s: not a duration in [%g %s, %g %s] (10s, 500ms, "
		        "1m, 1m30s; a bare number is in %s)\n", opt, s, lo * k, un, hi * k, un,
		        unit == 1 ? "seconds" : "milliseconds");
		exit(2);
	}
	return v;
}

/* A number in [lo, hi]; exits 2 otherwise. */
static double
number(const char *opt, const char *s, double lo, double hi)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
		fprintf(stderr, "lagless-load: --%s %s: not a number in [%g, %g]\n", opt, s, lo, hi);
		exit(2);
	}
	return v;
}

static void check_args(struct opts *o, const char *url);

/* "lagless-load: " and the message on stderr, exit 2 (bad usage). */
static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	va_list ap;

	fputs("lagless-load: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void
parse_args(struct opts *o, int argc, char **argv)
{
	char err[512];
	int c;

	while ((c = getopt_long(argc, argv, "r:d:c:H:qhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (o->nroutes == 64)
				die("at most 64 routes");
			o->route_args[o->nroutes++] = optarg;
			break;
		case 'd': o->duration = duration("duration", optarg, 1, 0.1, 86400); break;
		case 'c': o->max_conns = (unsigned)number("max-conns", optarg, 1, 1000000); break;
		case O_ARRIVAL:
			if (ll_sched_parse_arrival(optarg, &o->arrival) == -1)
				die("--arrival constant|poisson");
			break;
		case O_IDLE: o->idle = duration("idle", optarg, 1, 0, 3600); break;
		case O_CALIB: o->calibrate = duration("calibrate", optarg, 1, 0.5, 3600); break;
		case O_CALIB_CONNS:
			o->calib_conns = (unsigned)number("calibrate-conns", optarg, 1, 100000);
			break;
		case O_CAPACITY: o->capacity = number("capacity", optarg, 0.001, 1e7); break;
		case O_TIMEOUT: o->timeout = duration("timeout", optarg, 1, 0.001, 3600); break;
		case O_SCRAPE_MS:
			o->scrape_ms = 1e3 * duration("scrape-ms", optarg, 1e-3, 0.010, 60);
			break;
		case 'H':
			if (ll_routespec_header(&o->headers, optarg, err, sizeof(err)) == -1)
				die("-H: %s", err);
			break;
		case O_NO_SCRAPE: o->scrape = 0; break;
		case O_METRICS: o->metrics = optarg; break;
		case O_JSON: o->json = optarg; break;
		case O_PLOT: o->plot = optarg; break;
		case O_SAMPLES: o->samples = optarg; break;
		case O_SEED: o->seed = (uint64_t)number("seed", optarg, 0, 1e18); break;
		case O_CHEAP_F: o->cheap_factor = number("cheap-factor", optarg, 1, 1e6); break;
		case O_CHEAP_S: o->cheap_slack_ms = number("cheap-slack-ms", optarg, 0, 1e6); break;
		case O_FAST: o->fast_ms = number("fast-ms", optarg, 0.001, 1e6); break;
		case O_SHARE: o->capacity_share = number("capacity-share", optarg, 0, 1); break;
		case O_PROGRESS: o->progress = 1; break;
		case O_CPU: o->cpu = (int)number("cpu", optarg, 0, CPU_SETSIZE - 1); break;
		case O_STEPS: o->steps_arg = optarg, o->ramp = 0; break;
		case O_RAMP: o->steps_arg = optarg, o->ramp = 1; break;
		case O_STEP_S: o->step_s = duration("step-duration", optarg, 1, 0.5, 3600); break;
		case 'q': o->quiet = 1; break;
		case 'h': usage(stdout); exit(0);
		case 'V': printf("lagless-load %s\n", LG_VERSION); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind != argc - 1 || o->nroutes == 0) {
		usage(stderr);
		exit(2);
	}
	check_args(o, argv[optind]);
}

/* What parse_args cannot check option by option: the plot's name, the step levels. */
static void
check_args(struct opts *o, const char *url)
{
	char err[512];

	o->url = url;
	if (o->steps_arg != NULL &&
	    ll_steps_parse(o->steps_arg, o->ramp, &o->steps, err, sizeof(err)) == -1)
		die("%s", err);
	o->steps.seconds = o->step_s;
	if (o->plot != NULL) {
		size_t n = strlen(o->plot);

		if (n < 5 || (strcmp(o->plot + n - 4, ".png") != 0 &&
		              strcmp(o->plot + n - 4, ".svg") != 0))
			die("--plot %s: the name must end in .png or .svg", o->plot);
	}
}

static int
resolve(const struct opts *o, struct sockaddr_storage *ss, socklen_t *len, char *hosthdr,
        size_t hdrlen)
{
	char host[256], port[16];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	int rc;

	if (ll_routespec_url(o->url, host, sizeof(host), port, sizeof(port), hosthdr,
	                     hdrlen) == -1) {
		fprintf(stderr, "lagless-load: %s: not http://HOST[:PORT] (https is not supported)\n",
		        o->url);
		return -1;
	}
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		fprintf(stderr, "lagless-load: %s: %s\n", host, gai_strerror(rc));
		return -1;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

/* One /metrics of the target, or the sum of every replica's, into s. Returns 1 when it is
 * lagless, 0 when it answered otherwise, -1 when it cannot be reached. */
static int
probe(const struct opts *o, struct ll_scrape *s)
{
	return ll_scraper_probe(o->scraper, s);
}

struct progress {
	int tty, plain;
	unsigned ticks;
	double duration;
};

static void
progress(struct ll_engine *e, void *ctx)
{
	struct progress *p = ctx;
	double t = (double)(lg_now_ns() - e->phase_start) / 1e9;
	char line[512];
	size_t n = 0;
	unsigned i;

	if (!p->tty && (!p->plain || p->ticks++ % 2 != 0))
		return;
	if (e->phase != LL_PH_RUN)
		return;
	if (t > p->duration)
		t = p->duration;
	n += (size_t)snprintf(line + n, sizeof(line) - n, "%5.1f/%.0f s", t, p->duration);
	for (i = 0; i < e->nroutes && n < sizeof(line) - 80; i++) {
		const struct ll_rstats *st = &e->routes[i].st[LL_PH_RUN];

		n += (size_t)snprintf(line + n, sizeof(line) - n, " | %s %" PRIu64 " p99 %.1fms",
		                      e->routes[i].path, st->all.total,
		                      (double)ll_hist_value_at(&st->all, 99) / 1e6);
		if (ll_rstats_count(st, 503, 503) > 0)
			n += (size_t)snprintf(line + n, sizeof(line) - n, " 503 %.0f%%",
			                      100.0 * (double)ll_rstats_count(st, 503, 503) /
			                      (double)st->all.total);
	}
	if (n < sizeof(line) - 60)
		n += (size_t)snprintf(line + n, sizeof(line) - n, " | conns %u wait %u", e->nconns,
		                      e->npending);
	if (e->npoints > 0 && n < sizeof(line) - 40) {
		const struct ll_point *pt = &e->points[e->npoints - 1];

		snprintf(line + n, sizeof(line) - n, " | lag %.1fms q %.0f", pt->lag_max_s * 1e3,
		         pt->m.v[LL_SF_QUEUE_DEPTH]);
	}
	if (p->tty)
		fprintf(stderr, "\r%-110.110s", line);
	else
		fprintf(stderr, "%s\n", line);
}

static int
write_samples(const struct ll_engine *e, const char *path)
{
	FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
	size_t i;

	if (f == NULL)
		return -1;
	fprintf(f, "due_s,route,status,latency_ms\n");
	for (i = 0; i < e->nsamples; i++) {
		const struct ll_sample *s = &e->samples[i];

		fprintf(f, "%.9f,%s,%d,%.6f\n", (double)s->due_ns / 1e9, e->routes[s->route].path,
		        s->status, (double)s->latency_ns / 1e6);
	}
	return f == stdout ? fflush(f) : fclose(f);
}

/* The calibration's spread: the 2xx rate of about four equal windows after the warm-up (bins
 * of LL_CALIB_BIN_S put together, so a window holds more than one slow job). */
static void
spread(struct ll_route *rt, const struct ll_engine *e, double measured_s)
{
	unsigned nb = (unsigned)(measured_s / LL_CALIB_BIN_S + 1e-9), per, n, i, j;
	double sum = 0, sq = 0, v, mean;

	if (nb > LL_CALIB_BINS)
		nb = LL_CALIB_BINS;
	per = nb >= 8 ? nb / 4 : 1;
	n = nb / per;
	rt->capacity_windows = n;
	rt->capacity_window_s = per * LL_CALIB_BIN_S;
	rt->capacity_min_rps = n ? INFINITY : 0;
	rt->capacity_max_rps = 0;
	for (i = 0; i < n; i++) {
		for (v = 0, j = 0; j < per; j++)
			v += e->calib_bins[i * per + j];
		v /= rt->capacity_window_s;
		sum += v;
		sq += v * v;
		rt->capacity_min_rps = fmin(rt->capacity_min_rps, v);
		rt->capacity_max_rps = fmax(rt->capacity_max_rps, v);
	}
	mean = n ? sum / n : 0;
	rt->capacity_sd_rps = n > 1 ? sqrt(fmax(0, (sq - n * mean * mean) / (n - 1))) : 0;
}

/* Measures route i's capacity by a closed loop at saturation; against lagless also from its
 * metrics, with a warning when the answers came from a cache. Exits 2 without a 2xx. */
static void
calibrate_route(struct opts *o, struct ll_engine *e, unsigned i, int lagless,
                const struct ll_scrape *m)
{
	struct ll_route *rt = &e->routes[i];
	struct ll_scrape a, b;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned conc = o->calib_conns;
	double warm = fmin(1.0, o->calibrate / 3), jobs;
	int seen;
	char got[256];

	if (conc == 0)
		conc = lagless && m->v[LL_SF_SLOTS] >= 1 ? (unsigned)m->v[LL_SF_SLOTS]
		                                          : (unsigned)(2 * (ncpu > 1 ? ncpu : 2));
	if (!o->quiet)
		fprintf(stderr, "calibrating %s: %u outstanding for %.1f s\n", rt->path, conc,
		        o->calibrate);
	seen = lagless && probe(o, &a) == 1;
	rt->capacity_rps = ll_engine_calibrate(e, i, conc, o->calibrate, warm);
	spread(rt, e, o->calibrate - warm);
	/* b minus a only when both are of the same servers (not two replicas behind a balancer) */
	seen = seen && probe(o, &b) == 1 && ll_scrape_same(&a, &b);
	jobs = seen ? b.v[LL_SF_RUN_COUNT] - a.v[LL_SF_RUN_COUNT] : 0;
	if (jobs > 0 && b.v[LL_SF_RUN_SUM] > a.v[LL_SF_RUN_SUM])
		/* C processes each finishing one job per mean run time */
		rt->capacity_metrics_rps = b.v[LL_SF_COMPUTE] * jobs /
		    (b.v[LL_SF_RUN_SUM] - a.v[LL_SF_RUN_SUM]);
	/* A route with a coalesce rule answers most requests from its cache or a shared job:
	 * the saturation rate is then the cache's, not the pool's. */
	if (seen && rt->capacity_rps > 0 &&
	    (jobs <= 0 || rt->capacity_rps > 4 * jobs / o->calibrate))
		fprintf(stderr, "lagless-load: warning: calibrating %s: %.1f answers/s but %.0f jobs "
		        "ran in %.1f s (server metrics): most answers came from the cache or a shared "
		        "job (X-Cache), not the pool; vary the route's key or give --capacity\n",
		        rt->path, rt->capacity_rps, jobs > 0 ? jobs : 0, o->calibrate);
	if (rt->capacity_rps <= 0) {
		fprintf(stderr, "lagless-load: calibrating %s: no 2xx answer at saturation (it "
		        "answered %s); give --capacity\n", rt->path, rt->st[LL_PH_CALIBRATE].ncodes ?
		        ll_report_statuses(&rt->st[LL_PH_CALIBRATE], got, sizeof(got)) : "nothing");
		exit(2);
	}
}

static void
calibrate(struct opts *o, struct ll_engine *e, int lagless, const struct ll_scrape *m)
{
	unsigned i;

	for (i = 0; i < e->nroutes; i++) {
		struct ll_route *rt = &e->routes[i];
		double given = rt->capacity_given > 0 ? rt->capacity_given : o->capacity;

		if (!rt->rate.relative) {
			rt->rps = rt->rate.value;
			if (rt->heavy && given > 0)
				rt->capacity_rps = given;
			continue;
		}
		if (given > 0)
			rt->capacity_rps = given;
		else
			calibrate_route(o, e, i, lagless, m);
		rt->rps = rt->rate.value * rt->capacity_rps;
		if (!o->quiet)
			fprintf(stderr, "%s: capacity %.1f/s, offering %gx = %.1f/s\n", rt->path,
			        rt->capacity_rps, rt->rate.value, rt->rps);
		if (!o->quiet && rt->capacity_windows > 1)
			fprintf(stderr, "%s: calibration spread: sd %.1f/s (%.0f %%) over %u windows of "
			        "%.2f s, slowest %.1f/s, fastest %.1f/s\n", rt->path, rt->capacity_sd_rps,
			        100 * rt->capacity_sd_rps / rt->capacity_rps, rt->capacity_windows,
			        rt->capacity_window_s, rt->capacity_min_rps, rt->capacity_max_rps);
	}
}

static struct ll_engine *sig_engine;

static void
on_sigint(struct ev_loop *loop, ev_signal *w, int revents)
{
	ll_engine_stop(sig_engine);
}

static void
defaults(struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->duration = 10;
	o->idle = 2;
	o->calibrate = 3;
	o->timeout = 10;
	o->scrape_ms = 250;
	o->max_conns = 1000;
	o->scrape = 1;
	o->seed = 1;
	o->cheap_factor = 2;
	o->cheap_slack_ms = 1;
	o->fast_ms = 10;
	o->capacity_share = 0.8;
	o->cpu = -1;
	o->step_s = 5;
}

static int
outputs(const struct opts *o, struct ll_report *r)
{
	FILE *text = o->json && strcmp(o->json, "-") == 0 ? stderr : stdout;
	int rc = 0;

	if ((!o->quiet || !o->json) && r->steps != NULL) {
		ll_steps_text(text, r->steps);
		ll_report_servers_text(text, r);
		ll_report_hints_text(text, r);
	} else if (!o->quiet || !o->json)
		ll_report_text(text, r);
	if (r->scenario != NULL && r->steps == NULL)
		ll_scenario_text(text, r->scenario, r);
	if (o->json) {
		FILE *f = strcmp(o->json, "-") == 0 ? stdout : fopen(o->json, "w");
		char why[160] = "";

		if (f == NULL || ll_json_write(f, r, why, sizeof(why)) == -1 ||
		    (f != stdout && fclose(f) != 0)) {
			fprintf(stderr, "lagless-load: --json %s: %s\n", o->json,
			        why[0] ? why : strerror(errno));
			rc = -1;
		}
	}
	if (o->samples && write_samples(r->e, o->samples) != 0) {
		fprintf(stderr, "lagless-load: --samples %s: %s\n", o->samples, strerror(errno));
		rc = -1;
	}
	if (o->plot && ll_plot_write(r, o->plot) == -1) {
		fprintf(stderr, "lagless-load: --plot %s: %s\n", o->plot,
		        errno == ENOENT ? "gnuplot is not installed (Debian: gnuplot-nox)" :
		        errno == EINVAL ? "the name must end in .png or .svg" : strerror(errno));
		rc = -1;
	}
	if (o->plot && r->steps != NULL) {
		char knee[1100];
		size_t n = strlen(o->plot);

		snprintf(knee, sizeof(knee), "%.*s-knee%s", (int)(n - 4), o->plot, o->plot + n - 4);
		if (ll_steps_plot(r->steps, knee) == -1) {
			fprintf(stderr, "lagless-load: --plot %s: %s\n", knee, strerror(errno));
			rc = -1;
		} else if (!o->quiet) {
			fprintf(stderr, "knee plot: %s\n", knee);
		}
	}
	return rc;
}

/* The idle phase: the cheap routes alone, for their idle p99. Returns the phase's length. */
static double
idle_phase(const struct opts *o, struct ll_engine *e)
{
	unsigned char *active = calloc(o->nroutes, 1);
	unsigned i, ncheap = 0;

	if (active == NULL)
		return 0;
	for (i = 0; i < o->nroutes; i++)
		if (!o->routes[i].heavy && o->idle > 0)
			active[i] = 1, ncheap++;
	if (ncheap > 0) {
		if (!o->quiet)
			fprintf(stderr, "idle: cheap routes alone for %.1f s\n", o->idle);
		ll_engine_run(e, LL_PH_IDLE, active, o->idle);
	}
	free(active);
	return ncheap ? o->idle : 0;
}

/* One run of every route for seconds, probed before and after; fills r from the engine (its
 * scrapes from p0 on). Returns 0 or -1. */
static int
run_phase(const struct opts *o, struct ll_engine *e, struct ll_report *r, int lagless,
          double seconds)
{
	static unsigned char *active;  /* static: reachable on every early return (LeakSanitizer) */
	static struct progress pg;
	size_t p0 = e->npoints;

	if (active == NULL && (active = calloc(o->nroutes, 1)) == NULL)
		return -1;
	pg.tty = !o->quiet && isatty(STDERR_FILENO);
	pg.plain = !o->quiet && o->progress;
	pg.duration = seconds;
	e->progress = pg.tty || pg.plain ? progress : NULL;
	e->progress_ctx = &pg;
	if (lagless)
		probe(o, &r->before);
	memset(active, 1, o->nroutes);
	if (lagless && o->scrape)
		ll_scraper_start(o->scraper, o->scrape_ms / 1e3);
	if (ll_engine_run(e, LL_PH_RUN, active, seconds) == -1)
		return -1;
	ll_scraper_stop(o->scraper);
	if (pg.tty)
		fprintf(stderr, "\n");
	r->have_scrapes = lagless && probe(o, &r->after) == 1;
	r->e = e;
	r->url = o->url;
	r->lagless = lagless;
	r->duration_s = (double)(e->phase_end - e->phase_start) / 1e9;
	r->span_s = (double)(e->phase_end - e->origin_ns) / 1e9;
	r->p0 = p0;
	r->p1 = e->npoints;
	r->cheap_factor = o->cheap_factor;
	r->cheap_slack_ms = o->cheap_slack_ms;
	r->fast_ms = o->fast_ms;
	r->capacity_share = o->capacity_share;
	return 0;
}

/* Step mode: each level in turn, judged on its own; then the knee and the highest graceful
 * level. Returns 0 or -1. */
static int
step_phases(struct opts *o, struct ll_engine *e, struct ll_report *r, int lagless)
{
	struct ll_steps *st = &o->steps;
	char name[32];
	unsigned k, i;

	st->lagless = lagless;
	for (k = 0; k < st->n; k++) {
		struct ll_step *lv = &st->s[k];

		for (i = 0; i < e->nroutes; i++)
			if (ll_engine_route_stepped(e, i) && (e->routes[i].rps = ll_steps_offer(lv,
			                                                 &e->routes[i])) <= 0) {
				fprintf(stderr, "lagless-load: --steps %gx: %s has no known capacity (give it "
				        "an Nx rate, capacity=RPS or --capacity)\n", lv->level.value,
				        e->routes[i].path);
				exit(2);
			}
		if (ll_engine_reset(e, LL_PH_RUN) == -1 || run_phase(o, e, r, lagless, st->seconds))
			return -1;
		lv->t0_s = (double)(e->phase_start - e->origin_ns) / 1e9;
		lv->t1_s = (double)(e->phase_end - e->origin_ns) / 1e9;
		ll_report_judge(r);
		ll_steps_fill(lv, r);
		if (!o->quiet)
			fprintf(stderr, "level %s: offered %.1f/s, 2xx %.1f/s, 503 %.1f %%: %s\n",
			        snprintf(name, sizeof(name), lv->level.relative ? "%gx" : "%g/s",
			                 lv->level.value) > 0 ? name : "?", lv->offered_rps, lv->ok_rps,
			        100 * lv->share_503, lv->pass ? "PASS" : "FAIL");
	}
	ll_steps_knee(st);
	r->steps = st;
	r->p0 = r->p1 = 0;    /* the plots span every level */
	return 0;
}

static int
pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) == -1) {
		fprintf(stderr, "lagless-load: --cpu %d: %s\n", cpu, strerror(errno));
		return -1;
	}
	return 0;
}

/* The routes from their arguments, the target resolved, and the URL's path put before every
 * route's. Returns 0, or -1 after saying why. */
static int
setup_routes(struct opts *o, struct sockaddr_storage *ss, socklen_t *sslen, char *hosthdr,
             size_t hdrlen)
{
	char err[512], prefix[1024];
	unsigned i;

	if ((o->routes = calloc(o->nroutes, sizeof(*o->routes))) == NULL)
		return -1;
	for (i = 0; i < o->nroutes; i++) {
		if (ll_routespec_parse(o->route_args[i], o->arrival, o->seed + i, &o->routes[i], err,
		                       sizeof(err)) == -1) {
			fprintf(stderr, "lagless-load: %s\n", err);
			return -1;
		}
		if (o->routes[i].tmpl != NULL) {
			/* {run}: new for every process, so its key is cold at the start of each run */
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			o->routes[i].tmpl->run = (uint64_t)ts.tv_sec * 1000000u +
			                         (uint64_t)ts.tv_nsec / 1000u;
		}
	}
	if (resolve(o, ss, sslen, hosthdr, hdrlen) == -1)
		return -1;
	/* a path in the target URL is a prefix of every route's ("http://h/api" + "/users") */
	if (ll_routespec_url_prefix(o->url, prefix, sizeof(prefix)) == -1) {
		fprintf(stderr, "lagless-load: %s: the URL may have a path (a prefix of every route) "
		        "but no query or fragment: give those on the routes\n", o->url);
		return -1;
	}
	for (i = 0; i < o->nroutes; i++)
		if (ll_routespec_prefix(&o->routes[i], prefix) == -1)
			return -1;
	return 0;
}

/* 0 or 1: step mode, the lowest level passed (some level degrades gracefully); a scenario,
 * every expectation met; else no verdict failed. */
static int
exit_status(const struct opts *o, const struct ll_report *r, struct ll_scenario *sc)
{
	if (o->steps.n > 0)
		return o->steps.graceful >= 0 ? 0 : 1;
	if (r->scenario != NULL && sc->nexpect > 0)
		return ll_scenario_check(sc, r) ? 0 : 1;
	return ll_report_ok(r) ? 0 : 1;
}

int
main(int argc, char **argv)
{
	static struct opts o;
	static struct ll_engine e;
	static struct ll_report r;
	struct sockaddr_storage ss;
	socklen_t sslen;
	static struct ll_scenario sc;
	static struct ll_scraper scraper;
	char hosthdr[300], err[512];
	ev_signal sigint;
	unsigned i;
	int lagless, rc;
	char **sargv = NULL;
	const char *scn = ll_scenario_find(argc, argv);

	defaults(&o);
	if (scn != NULL) {
		if (ll_scenario_load(&sc, scn, err, sizeof(err)) == -1)
			die("%s", err);
		if ((sargv = ll_scenario_argv(&sc, &argc, argv)) == NULL)
			return 2;
		argv = sargv;
		r.scenario = &sc;
	}
	parse_args(&o, argc, argv);
	free(sargv);   /* the options point into the scenario's words, not into this array */
	signal(SIGPIPE, SIG_IGN);
	(void)prctl(PR_SET_TIMERSLACK, 1UL);  /* wake at the due time, not 50 us after */
	if (pin(o.cpu) == -1)
		return 2;
	if (setup_routes(&o, &ss, &sslen, hosthdr, sizeof(hosthdr)) == -1)
		return 2;
	if (ll_engine_init(&e, (struct sockaddr *)&ss, sslen, hosthdr, o.headers, o.routes,
	                   o.nroutes, o.max_conns, o.timeout, o.seed, 2000000) == -1)
		die("%s", strerror(errno));
	if (ll_scraper_init(&scraper, &e, o.metrics, err, sizeof(err)) == -1)
		die("%s", err);
	o.scraper = &scraper;
	sig_engine = &e;
	ev_signal_init(&sigint, on_sigint, SIGINT);
	ev_signal_start(e.loop, &sigint);
	ev_unref(e.loop);  /* the signal watcher alone does not keep a phase running */
	if ((lagless = probe(&o, &r.before)) == -1)
		die("%s: cannot connect or no answer", o.metrics ? o.metrics : o.url);
	if (!o.quiet && !lagless)
		fprintf(stderr, "%s is not lagless (no lagless /metrics): server-side figures will be "
		        "n/a\n", o.url);
	calibrate(&o, &e, lagless, &r.before);
	r.idle_s = idle_phase(&o, &e);
	if ((o.steps.n > 0 ? step_phases(&o, &e, &r, lagless) :
	     run_phase(&o, &e, &r, lagless, o.duration)) == -1)
		die("%s", strerror(errno));
	if (o.steps.n == 0)
		ll_report_judge(&r);
	ll_hints_find(&r);
	if (r.scenario != NULL && o.steps.n == 0)
		ll_scenario_check(&sc, &r);
	rc = outputs(&o, &r);
	ll_scraper_free(&scraper);
	ll_engine_free(&e);
	for (i = 0; i < o.nroutes; i++)
		ll_routespec_free(&o.routes[i]);
	free(o.routes);
	free(o.headers);
	return rc == -1 ? 2 : exit_status(&o, &r, &sc);
}
