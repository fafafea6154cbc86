/* lagless: command line, sizing, then the master. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/master.h"
#include "master/sizing.h"

#define LG_VERSION "0.1.0"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: lagless [options]\n"
	    "  --listen [ADDR:]PORT     listen address (default 0.0.0.0:8080; IPv6 as [::1]:8080;\n"
	    "                           port 0 picks a free port, logged at start)\n"
	    "  -p, --port N             listen port (short form of --listen)\n"
	    "  --loop-workers N         event-loop processes (default: the CPU budget)\n"
	    "  --compute-workers N      compute processes (default: max(1, budget - 1))\n"
	    "  --queue N                waiting jobs beyond the running ones (default: 2 x compute)\n"
	    "  --cpus X                 use X CPUs as the budget instead of measuring it\n"
	    "  --cpu-rounding floor|ceil  how a fractional CPU quota rounds (default floor)\n"
	    "  --max-body BYTES         largest request body, K/M/G suffixes (default 64M); 413 above\n"
	    "  --deadline-ms MS         per offloaded job, queue wait included (default 30000); 504 past it\n"
	    "  --drain-timeout-ms MS    graceful stop: time for in-flight requests (default 30000)\n"
	    "  --kill-grace-ms MS       SIGTERM to SIGKILL grace for a compute process (default 200)\n"
	    "  --max-conns N            open connections per loop worker (default 10000)\n"
	    "  --log-level LEVEL        error, warn, info or debug (default info)\n"
	    "  --print-sizing           print the CPU sizing inputs and decision as JSON and exit\n"
	    "  -h, --help               this text\n"
	    "  -V, --version            print the version and exit\n"
	    "environment: LAGLESS_SYSROOT prefixes every /proc and /sys path the sizing reads\n"
	    "signals: SIGTERM/SIGINT graceful drain, SIGQUIT immediate stop\n");
}

/* Parses a non-negative decimal with an optional K/M/G (binary) suffix. */
static int
parse_u64(const char *s, uint64_t max, int suffixes, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	if (suffixes && *end != '\0' && end[1] == '\0') {
		switch (*end) {
		case 'k': case 'K': mul = 1ull << 10; end++; break;
		case 'm': case 'M': mul = 1ull << 20; end++; break;
		case 'g': case 'G': mul = 1ull << 30; end++; break;
		}
	}
	if (*end != '\0' || v > max / mul)
		return -1;
	*out = v * mul;
	return 0;
}

/* "[ADDR:]PORT", "[v6addr]:PORT" or "PORT". */
static int
parse_listen(const char *s, struct lg_config *cfg)
{
	const char *colon = strrchr(s, ':');
	const char *port = colon ? colon + 1 : s;
	uint64_t p;
	size_t alen;

	if (parse_u64(port, 65535, 0, &p) == -1)
		return -1;
	cfg->port = (int)p;
	if (colon == NULL)
		return 0;
	alen = (size_t)(colon - s);
	if (alen >= 2 && s[0] == '[' && s[alen - 1] == ']') {
		s++;
		alen -= 2;
	}
	if (alen == 0 || alen >= sizeof(cfg->listen_addr))
		return -1;
	memcpy(cfg->listen_addr, s, alen);
	cfg->listen_addr[alen] = '\0';
	return 0;
}

enum {
	OPT_LISTEN = 256, OPT_LOOPS, OPT_COMPUTE, OPT_QUEUE, OPT_CPUS, OPT_ROUNDING, OPT_MAX_BODY,
	OPT_DEADLINE, OPT_DRAIN, OPT_GRACE, OPT_MAX_CONNS, OPT_LOG_LEVEL, OPT_PRINT_SIZING,
};

static const struct option options[] = {
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "port", required_argument, NULL, 'p' },
	{ "loop-workers", required_argument, NULL, OPT_LOOPS },
	{ "compute-workers", required_argument, NULL, OPT_COMPUTE },
	{ "queue", required_argument, NULL, OPT_QUEUE },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "cpu-rounding", required_argument, NULL, OPT_ROUNDING },
	{ "max-body", required_argument, NULL, OPT_MAX_BODY },
	{ "deadline-ms", required_argument, NULL, OPT_DEADLINE },
	{ "drain-timeout-ms", required_argument, NULL, OPT_DRAIN },
	{ "kill-grace-ms", required_argument, NULL, OPT_GRACE },
	{ "max-conns", required_argument, NULL, OPT_MAX_CONNS },
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
	{ "print-sizing", no_argument, NULL, OPT_PRINT_SIZING },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

/* Applies one option; returns -1 on a bad value. */
static int
apply(struct lg_config *cfg, int opt, const char *arg, int *print_sizing)
{
	uint64_t v;
	char *end;

	switch (opt) {
	case OPT_LISTEN:
		return parse_listen(arg, cfg);
	case 'p':
		if (parse_u64(arg, 65535, 0, &v) == -1)
			return -1;
		cfg->port = (int)v;
		return 0;
	case OPT_LOOPS:
	case OPT_COMPUTE:
		if (parse_u64(arg, 1024, 0, &v) == -1 || v == 0)
			return -1;
		*(opt == OPT_LOOPS ? &cfg->loop_workers : &cfg->compute_workers) = (int)v;
		return 0;
	case OPT_QUEUE:
		if (parse_u64(arg, 100000, 0, &v) == -1)
			return -1;
		cfg->queue_capacity = (int)v;
		return 0;
	case OPT_CPUS:
		errno = 0;
		cfg->cpus = strtod(arg, &end);
		return errno || *end || end == arg || !(cfg->cpus > 0 && cfg->cpus <= 4096) ? -1 : 0;
	case OPT_ROUNDING:
		if (strcmp(arg, "floor") && strcmp(arg, "ceil"))
			return -1;
		cfg->rounding = strcmp(arg, "ceil") == 0 ? LG_ROUND_CEIL : LG_ROUND_FLOOR;
		return 0;
	case OPT_MAX_BODY:
		return parse_u64(arg, 1ull << 40, 1, &cfg->max_body);
	case OPT_DEADLINE:
		return parse_u64(arg, 86400000, 0, &cfg->deadline_ms) == -1 || !cfg->deadline_ms ? -1 : 0;
	case OPT_DRAIN:
		return parse_u64(arg, 86400000, 0, &cfg->drain_timeout_ms);
	case OPT_GRACE:
		return parse_u64(arg, 60000, 0, &cfg->kill_grace_ms);
	case OPT_MAX_CONNS:
		if (parse_u64(arg, 1000000, 0, &v) == -1 || v == 0)
			return -1;
		cfg->max_conns = (int)v;
		return 0;
	case OPT_LOG_LEVEL:
		return (lg_log_level = lg_log_parse_level(arg)) == -1 ? (lg_log_level = LG_LOG_INFO, -1) : 0;
	case OPT_PRINT_SIZING:
		*print_sizing = 1;
		return 0;
	}
	return -1;
}

static const char *
option_name(int opt)
{
	for (const struct option *o = options; o->name != NULL; o++)
		if (o->val == opt)
			return o->name;
	return "?";
}

int
main(int argc, char **argv)
{
	struct lg_config cfg = {
		.listen_addr = "0.0.0.0", .port = 8080, .queue_capacity = -1,
		.rounding = LG_ROUND_FLOOR, .max_body = 64ull << 20, .deadline_ms = 30000,
		.drain_timeout_ms = 30000, .kill_grace_ms = 200, .max_conns = 10000, .backlog = 4096,
		.compute_nice = 5,
	};
	struct lg_sizing sz;
	char json[4096];
	int opt, print_sizing = 0;

	lg_log_set_role("master", 0);
	while ((opt = getopt_long(argc, argv, "p:hV", options, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout);
			return 0;
		}
		if (opt == 'V') {
			printf("lagless %s\n", LG_VERSION);
			return 0;
		}
		if (opt == '?' || apply(&cfg, opt, optarg, &print_sizing) == -1) {
			if (opt != '?')
				fprintf(stderr, "lagless: invalid value for --%s: '%s'\n",
				    option_name(opt), optarg);
			fprintf(stderr, "try 'lagless --help'\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lagless: unexpected argument '%s'\ntry 'lagless --help'\n", argv[optind]);
		return 2;
	}
	lg_sizing_read(getenv("LAGLESS_SYSROOT"), &sz);
	lg_sizing_decide(&sz, &cfg);
	if (lg_sizing_json(&sz, json, sizeof(json)) == -1)
		snprintf(json, sizeof(json), "{}");
	if (print_sizing) {
		printf("%s\n", json);
		return 0;
	}
	log_info("lagless %s sizing: %s", LG_VERSION, json);
	return lg_master_run(&cfg, &sz);
}
