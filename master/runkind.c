#include "master/runkind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "kinds/params.h"
#include "kinds/registry.h"
#include "shm/layout.h"

static unsigned char *
read_all(uint64_t max, size_t *len)
{
	size_t cap = 65536, n = 0;
	unsigned char *buf = malloc(cap);

	while (buf != NULL) {
		ssize_t r = read(0, buf + n, cap - n);

		if (r == 0)
			break;
		if (r < 0 || n + (size_t)r > max) {
			fprintf(stderr, "lagless: %s\n", r < 0 ? "cannot read standard input" :
			    "input over max_body");
			free(buf);
			return NULL;
		}
		n += (size_t)r;
		if (n == cap) {
			unsigned char *p = realloc(buf, cap *= 2);
			if (p == NULL)
				free(buf);
			buf = p;
		}
	}
	*len = n;
	return buf;
}

/* The first route of kind k into *rt (NULL for none); the declared query arguments parsed
 * once, as the loop parses them (a bad one is the 400 the server answers before queueing),
 * into *qargs (the kind's query struct, then its strings; heap, the caller frees; NULL when
 * the kind has none), and with no route, the kind's route struct from its declared defaults
 * into *defs (heap, the caller frees). Returns 0, or -1 (printed). */
static int
kind_args(const struct lg_registry *r, const struct lg_kind *k, const struct lg_route_def **rt,
    const struct lg_view *v, void **qargs, void **defs)
{
	size_t strs = v->query_len + k->nqparams + 1;
	char why[512];
	uint32_t fault;
	int line;

	for (uint32_t i = 0; i < r->nroutes && *rt == NULL; i++)
		if (r->routes[i].kind == k->id)
			*rt = &r->routes[i];

	if ((*qargs = malloc(k->query_size + strs)) == NULL) {
		fprintf(stderr, "lagless: kind %s: out of memory\n", k->name);
		return -1;
	}
	if (lg_params_parse_query(k->qparams, k->nqparams, v->query, v->query_len,
	    k->query_size ? *qargs : NULL, k->query_size, (char *)*qargs + k->query_size, strs,
	    &fault) == -1) {
		lg_params_query_why(k->qparams, k->nqparams, fault, why, sizeof(why));
		fprintf(stderr, "lagless: kind %s: bad input: %s\n", k->name, why);
		return -1;
	}
	if (*rt != NULL || k->route_size == 0)
		return 0;
	if ((*defs = calloc(1, k->route_size)) == NULL ||
	    lg_params_parse_route(k->rparams, k->nrparams, NULL, *defs, k->route_size, &line,
	    why, sizeof(why)) == -1) {
		fprintf(stderr, "lagless: kind %s: %s\n", k->name, *defs ? why : "out of memory");
		free(*defs);
		*defs = NULL;
		return -1;
	}
	return 0;
}

int
lg_runkind_main(const struct lg_config *cfg, const char *name)
{
	struct lg_registry *r = cfg->reg;
	const struct lg_kind *k = lg_registry_find(r, name);
	const struct lg_route_def *rt = NULL;
	const char *q = getenv("LAGLESS_RUN_QUERY");
	struct lg_view v = { .method = "POST", .method_len = 4, .path = "/", .path_len = 1,
	    .query = q ? q : "", .query_len = q ? strlen(q) : 0 };
	size_t in_len, region_cap;
	unsigned char *in, *region;
	uint64_t out_len, now = lg_now_ns();
	void *defs = NULL;          /* the kind's route struct from its defaults, with no route */
	void *qargs = NULL;         /* its query struct (rq->query_args), then its strings */
	struct lagless_request rq;
	int st;

	if (k == NULL) {
		fprintf(stderr, "lagless: unknown kind %s\n", name);
		return 2;
	}
	if (kind_args(r, k, &rt, &v, &qargs, &defs) == -1 ||
	    (in = read_all(cfg->http.max_body, &in_len)) == NULL) {
		free(qargs);
		free(defs);
		return 1;
	}
	/* The output region the server gives the job (master/gen.c): sized from max_body, not
	 * from this input, or a kind whose answer is larger than its input (decompress) would
	 * get 413 here for what the server answers. Untouched pages cost nothing. */
	region_cap = LG_OUT_META + (size_t)(cfg->jobs.max_output ? cfg->jobs.max_output :
	    cfg->http.max_body + cfg->http.max_body / 256 + (128u << 10));
	region = mmap(NULL, region_cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_NORESERVE, -1, 0);
	if (region == MAP_FAILED) {
		perror("lagless: mmap");
		free(in);
		free(qargs);
		free(defs);
		return 1;
	}
	lg_registry_init_process(r, 0, NULL);
	const struct lg_module *m = &r->modules[k->module];
	lg_host_request(&rq, &v, in, in_len);
	rq.conf = rt ? &rt->conf : NULL;
	rq.state = m->state;
	rq.kind_data = k->desc.data;
	rq.deadline_ns = now + (rt ? rt->deadline_ms : cfg->jobs.deadline_ms) * LG_NS_PER_MS;
	rq.enqueue_ns = rq.start_ns = now;
	rq.route = rt ? rt->kconf : defs;
	rq.query_args = k->query_size ? qargs : NULL;
	st = m->ready ? lg_host_call(k->desc.run, m->name, &rq, region, region_cap, &out_len) :
	    LG_JOB_ERROR;
	const struct lg_out_meta *meta = (const struct lg_out_meta *)region;
	if (st == LG_JOB_OK) {
		fwrite(region + LG_OUT_META, 1, out_len, stdout);
		fflush(stdout);
	} else {
		fprintf(stderr, "lagless: kind %s: %s%s%.*s\n", name, st == LG_JOB_BAD_INPUT ?
		    "bad input" : st == LG_JOB_TOO_LARGE ? "too large" : "error",
		    meta->msg_len ? ": " : "",
		    (int)(meta->msg_len < sizeof(meta->msg) ? meta->msg_len : 0), meta->msg);
	}
	lg_registry_exit_process(r);
	munmap(region, region_cap);
	free(in);
	free(qargs);
	free(defs);
	return st == LG_JOB_OK ? 0 : 1;
}
