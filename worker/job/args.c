/* A request's query parsed once, on the loop, against the query arguments its kind declares
 * (module ABI 1.1/1.2, kinds/params.h): the refusal of a bad argument is worded from that parse
 * (lg_job_query_why), and the values travel in the job's slot, after the request view, to the
 * kind (rq->query_args; kinds/run.c), so neither the runner nor the refusal parses it again. */
#include "worker/job/offload.h"

#include <stdlib.h>
#include <string.h>

#include "kinds/params.h"
#include "kinds/registry.h"
#include "worker/job/offload_int.h"

/* The loop's scratch grown to at least need bytes. Returns 0, or -1 (it stays as it was). */
static int
args_room(struct lg_worker_job *wj, size_t need)
{
	unsigned char *p;

	if (need <= wj->args_cap)
		return 0;
	if ((p = realloc(wj->args, need)) == NULL)
		return -1;
	wj->args = p;
	wj->args_cap = need;
	return 0;
}

int
lg_job_parse_query(struct lg_conn *c, uint32_t kind, const char *q, size_t qlen)
{
	struct lg_worker_job *wj = LG_WJOB(c->w);
	const struct lg_kind *k = lg_registry_kind(c->w->env->cfg->reg, kind);
	size_t strs, need;
	uint32_t fault = 0;
	int keep;

	if (wj->args_of == c)
		wj->args_of = NULL; /* a previous request's parse */
	if (k == NULL || k->nqparams == 0)
		return 0;
	if (q == NULL)
		qlen = 0;
	strs = qlen + k->nqparams + 1;
	need = (size_t)k->query_size + strs;
	keep = k->query_size > 0 && args_room(wj, need) == 0;
	if (!keep && args_room(wj, strs) == -1)
		return 0; /* no memory for the decoded strings: the runner parses and refuses */
	if (lg_params_parse_query(k->qparams, k->nqparams, q ? q : "", qlen,
	    keep ? wj->args : NULL, k->query_size, (char *)wj->args + (keep ? k->query_size : 0),
	    strs, &fault) == 0) {
		if (keep) {
			wj->args_of = c;
			wj->args_q = q;
			wj->args_qlen = qlen;
			wj->args_kind = kind;
			wj->args_len = need;
		}
		return 0;
	}
	LG_JOB(c)->query_fault = fault;
	return -1;
}

size_t
lg_job_query_why(const struct lg_conn *c, uint32_t kind, char *why, size_t cap)
{
	const struct lg_kind *k = lg_registry_kind(c->w->env->cfg->reg, kind);
	size_t n;

	if (LG_JOB(c)->query_fault == 0 || k == NULL || cap < 2)
		return 0;
	lg_params_query_why(k->qparams, k->nqparams, LG_JOB(c)->query_fault, why, cap - 1);
	n = strlen(why);
	why[n] = '\n';
	why[n + 1] = '\0';
	return n + 1;
}

uint32_t
lg_offload_args_write(struct lg_conn *c, unsigned char *dst, size_t cap, uint32_t *len)
{
	struct lg_worker_job *wj = LG_WJOB(c->w);
	const struct lg_kind *k;
	const struct lg_http_req *r = &c->http.req;

	*len = 0;
	if (wj->args_of != c || wj->args_kind != LG_JOB(c)->job.kind ||
	    wj->args_q != r->query || wj->args_qlen != (r->query ? r->query_len : 0) ||
	    wj->args_len > cap)
		return 0; /* not this request's parse, or over the kept bytes: the runner parses */
	k = lg_registry_kind(c->w->env->cfg->reg, wj->args_kind);
	memcpy(dst, wj->args, wj->args_len);
	if (lg_params_query_pack(k->qparams, k->nqparams, dst,
	    (const char *)wj->args + k->query_size, wj->args_len - k->query_size, 1) == -1)
		return 0;
	*len = (uint32_t)wj->args_len;
	return 1;
}
