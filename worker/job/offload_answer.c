/* The offload path's answers (worker/job/offload.h): a finished slot's output, status and
 * headers turned into the client's response, a failed job's status and message, the text of a
 * module that is unavailable, and the slot given back. A leaf of offload.c: it calls nothing
 * of it, so the calls between the two go one way. */
#include "worker/job/offload_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "kinds/answer.h"
#include "kinds/registry.h"
#include "shm/slot.h"
#include "shm/stats.h"
#include "worker/observe.h"

const char *
lg_offload_kind_name(const struct lg_worker *w, uint32_t kind)
{
	const struct lg_registry *reg = w->env->cfg->reg;

	/* the registry's name, as the router's kind_names table holds it (kind 0 is none) */
	return kind > 0 && kind < reg->nkinds ? reg->kinds[kind].name : "unknown";
}

const char *
lg_job_ctype(const struct lg_conn *c)
{
	const struct lg_registry *reg = c->w->env->cfg->reg;
	const struct lg_kind *k = lg_registry_kind(reg, LG_JOB(c)->job.kind);
	uint32_t route = LG_JOB(c)->job.route;

	if (route < reg->nroutes && reg->routes[route].ctype[0])
		return reg->routes[route].ctype;
	return k && k->desc.ctype ? k->desc.ctype : "application/octet-stream";
}

/* The HTTP status of a failed job: the kind's own 4xx for bad input when it set one. */
int
lg_offload_failure_status(uint32_t st, const void *m)
{
	const struct lg_out_meta *meta = m;

	switch (st) {
	case LG_JOB_BAD_INPUT:
		return meta && meta->http_status >= 400 && meta->http_status <= 499 ?
		    (int)meta->http_status : 400;
	case LG_JOB_ERROR: /* ABI 1.2: a kind's own 501-504 */
		return meta && lg_answer_status_ok((int)meta->http_status, LAGLESS_ERROR) ?
		    (int)meta->http_status : 500;
	case LG_JOB_TOO_LARGE:
		return 413;
	case LG_JOB_CRASHED:
		return 502;
	case LG_JOB_NO_SPACE:
	case LG_JOB_QUARANTINED:
	case LG_JOB_SHED:
	case LG_JOB_UNAVAILABLE:
		return 503;
	default:
		return 500;
	}
}

/* Copies the kind's short message or content type out of the metadata, bounded and limited to
 * visible ASCII (a message may hold spaces and newlines). Returns its length, 0 when none. */
static size_t
meta_text(const char *src, uint32_t len, size_t max, char *dst, int header)
{
	size_t n = len < max ? len : 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)src[i];

		if (ch > 0x7e || (ch < 0x20 && (header || (ch != '\n' && ch != '\t'))))
			return 0;
		dst[i] = (char)ch;
	}
	dst[n] = '\0';
	return n;
}

/* The X-Queue-Ms / X-Run-Ms header lines of an answer to a job that reached the pool, from
 * c->obs.queue_ns and c->obs.run_ns, then "Retry-After: 1" when retry: every offloaded answer
 * carries them, 200 or 502/503/504 (README, response headers). */
void
lg_offload_timing_headers(const struct lg_conn *c, char *buf, size_t cap, int retry)
{
	/* A request of a coalescing route that ran its own job says so (docs/CACHE.md). */
	snprintf(buf, cap, "X-Queue-Ms: %.3f\r\nX-Run-Ms: %.3f\r\n%s%s",
	    (double)c->obs.queue_ns / 1e6, (double)c->obs.run_ns / 1e6, retry ? LG_CONN_RETRY_AFTER : "",
	    LG_JOB(c)->bypass ? "X-Cache: bypass\r\n" : "");
}

/* Answers c with the out_len bytes after its slot's metadata page (they fit the output
 * region): status code, the kind's content type (else ctype_default), extra header lines. A
 * small body is copied and the slot given back first; a larger one is sent from the region,
 * the slot held until it is written. Returns as lg_conn_respond. */
static int
answer_region(struct lg_conn *c, int code, uint64_t out_len, const char *ctype_default,
    const char *extra)
{
	struct lg_arena *a = c->w->env->arena;
	const unsigned char *region = lg_arena_out(a, (uint32_t)LG_JOB(c)->slot);
	const struct lg_out_meta *meta = (const struct lg_out_meta *)region;
	char text[LG_FAIL_TEXT_CAP];
	const char *ctype = meta_text(meta->ctype, meta->ctype_len, sizeof(meta->ctype), text,
	    1) ? text : ctype_default;

	if (out_len > SMALL_ANSWER)
		return lg_conn_respond(c, code, ctype, extra, region + LG_OUT_META,
		    (size_t)out_len);
	/* A small answer is copied and the slot given back before the first byte is
	 * written, so a client that reads it and at once sends the next job finds the
	 * slot free (the connection copies bodies this small anyway). */
	char body[SMALL_ANSWER], ct[sizeof(text)];
	memcpy(body, region + LG_OUT_META, (size_t)out_len);
	snprintf(ct, sizeof(ct), "%s", ctype);
	lg_offload_release(c);
	return lg_conn_respond(c, code, ct, extra, body, (size_t)out_len);
}

/* The status of a job that ended OK: the kind's 2xx or (ABI 1.2) 3xx, else 200. */
static int
ok_code(const struct lg_out_meta *meta)
{
	return lg_answer_status_ok((int)meta->http_status, LAGLESS_OK) ? (int)meta->http_status :
	    200;
}

/* Answers c from its job that ended OK with out_len answer bytes: the kind's 2xx or 3xx (else
 * 200) and content type (else the route's). Returns as lg_conn_respond. */
static int
answer_ok(struct lg_conn *c, uint64_t out_len, const char *extra)
{
	const struct lg_out_meta *meta =
	    (const struct lg_out_meta *)lg_arena_out(c->w->env->arena, (uint32_t)LG_JOB(c)->slot);

	return answer_region(c, ok_code(meta), out_len, lg_job_ctype(c), extra);
}

/* The header fields the kind added to its answer (ABI 1.2), meta its own metadata or NULL (no
 * fields), st how the job ended: checked by kinds/answer.h into fields (cap bytes), "" when
 * none. Returns 0, or -1 when the answer must be a 502 instead (logged with the reason). */
static int
kind_fields(struct lg_conn *c, const struct lg_out_meta *meta, uint32_t st, char *fields,
    size_t cap)
{
	char why[192];
	int code;

	fields[0] = '\0';
	if (meta == NULL)
		return 0;
	code = st == LG_JOB_OK ? ok_code(meta) : lg_offload_failure_status(st, meta);
	if (lg_answer_fields(meta, code, fields, cap, why, sizeof(why)) >= 0)
		return 0;
	log_warn("%s job on slot %d: its %d answer refused: %s: 502",
	    lg_offload_kind_name(c->w, LG_JOB(c)->job.kind), LG_JOB(c)->slot, code, why);
	fields[0] = '\0';
	return -1;
}

/* Answers c with a 502 for a kind's answer that broke a rule of its fields (kind_fields). */
static int
answer_refused(struct lg_conn *c)
{
	char extra[128];

	lg_offload_release(c);
	lg_stats_add(&c->w->env->page->failed_error, 1);
	lg_offload_timing_headers(c, extra, sizeof(extra), 0);
	return lg_conn_error(c, 502, 0, extra);
}

/* Appends the kind's field lines to the head lines in extra (cap bytes; sized for both). */
static const char *
with_fields(char *extra, size_t cap, const char *fields)
{
	size_t n = strlen(extra);

	snprintf(extra + n, cap - n, "%s", fields);
	return extra;
}

/* Answers c from its job's result: st (enum lg_job_status), out_len answer bytes after the
 * metadata page of the output region. The slot stays held until the response is written when
 * the body is read from the output region. */
int
lg_offload_answer_result(struct lg_conn *c, uint32_t st, uint64_t out_len)
{
	struct lg_arena *a = c->w->env->arena;
	const unsigned char *region = lg_arena_out(a, (uint32_t)LG_JOB(c)->slot);
	const struct lg_out_meta *meta = (const struct lg_out_meta *)region;
	/* The metadata is the runner's only when the job ended by itself. */
	int own = st == LG_JOB_OK || st == LG_JOB_BAD_INPUT || st == LG_JOB_ERROR ||
	    st == LG_JOB_TOO_LARGE;
	char extra[128 + LAGLESS_ANSWER_FIELDS_BYTES], text[LG_FAIL_TEXT_CAP];
	char fields[LAGLESS_ANSWER_FIELDS_BYTES + 1];

	if (st == LG_JOB_OK && out_len > a->out_cap - LG_OUT_META)
		st = LG_JOB_ERROR;
	if (kind_fields(c, own && st != LG_JOB_TOO_LARGE ? meta : NULL, st, fields,
	    sizeof(fields)) == -1)
		return answer_refused(c);
	lg_offload_timing_headers(c, extra, sizeof(extra), 0);
	if (st == LG_JOB_OK)
		return answer_ok(c, out_len, with_fields(extra, sizeof(extra), fields));
	if (st == LG_JOB_SHED) { /* counted in the pool's queue-wait state */
		log_debug("%s job on slot %d shed after waiting %.1f ms: 503",
		    lg_offload_kind_name(c->w, LG_JOB(c)->job.kind), LG_JOB(c)->slot,
		    (double)c->obs.queue_ns / 1e6);
		lg_offload_release(c);
		lg_offload_timing_headers(c, extra, sizeof(extra), 1);
		return lg_conn_error(c, 503, 0, extra);
	}
	int code = lg_offload_failure_status(st, own ? meta : NULL);
	size_t n = st == LG_JOB_UNAVAILABLE ?
	    lg_offload_unavailable_text(c->w, LG_JOB(c)->job.kind, text, sizeof(text)) :
	    lg_offload_failure_text(c->w, LG_JOB(c)->slot, st, text, sizeof(text));

	struct lg_proc_page *p = c->w->env->page;

	lg_stats_add(st == LG_JOB_QUARANTINED ? &p->rejected_quarantine :
	    st == LG_JOB_UNAVAILABLE ? &p->rejected_module :
	    st == LG_JOB_NO_SPACE ? &p->rejected_memory :
	    st == LG_JOB_CRASHED ? &p->failed_crash : &p->failed_error, 1);
	/* A 4xx is the client's request refused by the kind: a client can send any number of
	 * them, so they are counted (lagless_jobs_client_errors_total), logged at debug only. */
	if (code >= 400 && code <= 499)
		lg_stats_add(&p->jobs_client_error, 1);
	LG_LOG_AT(code >= 400 && code <= 499 ? LG_LOG_DEBUG : LG_LOG_WARN,
	    "%s job on slot %d failed (status %u): %d%s%.*s",
	    lg_offload_kind_name(c->w, LG_JOB(c)->job.kind), LG_JOB(c)->slot, st, code,
	    n ? ": " : "", (int)(n ? n - 1 : 0), text);
	lg_offload_timing_headers(c, extra, sizeof(extra), code == 503 &&
	    !lg_answer_has_field(fields, "retry-after"));
	with_fields(extra, sizeof(extra), fields);
	/* The kind's whole error body (host->error_body, ABI 1.2), not only its short message;
	 * a large one is not mapped ahead as a 2xx is (map_output): the sends fault it in. */
	if (own && st != LG_JOB_TOO_LARGE && (meta->flags & LG_OUT_ERROR_BODY) &&
	    out_len <= a->out_cap - LG_OUT_META)
		return answer_region(c, code, out_len, "text/plain", extra);
	lg_offload_release(c);
	if (n == 0)
		return lg_conn_error(c, code, st == LG_JOB_CRASHED, extra);
	return lg_conn_respond(c, code, "text/plain", extra, text, n);
}

size_t
lg_offload_unavailable_text(const struct lg_worker *w, uint32_t kind, char *dst, size_t cap)
{
	const struct lg_registry *reg = w->env->cfg->reg;
	uint32_t mod = lg_registry_module_of(reg, kind);
	const struct lg_module_health *h;
	char why[64];
	int n;

	if (mod >= reg->nmodules || mod >= LG_MODULE_HEALTH)
		return 0;
	h = &w->env->arena->master->modules[mod];
	lg_stats_init_cause(atomic_load(&h->cause), why, sizeof(why));
	n = snprintf(dst, cap, "module %s is unavailable: its init %s; it is retried in the "
	    "background\n", reg->modules[mod].name, why);
	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

size_t
lg_offload_failure_text(struct lg_worker *w, int slot, uint32_t st, char *dst, size_t cap)
{
	const struct lg_out_meta *meta =
	    (const struct lg_out_meta *)lg_arena_out(w->env->arena, (uint32_t)slot);
	size_t n;

	if (cap > 0)
		dst[0] = '\0';
	/* The metadata is the runner's only when the job ended by itself. */
	if ((st != LG_JOB_BAD_INPUT && st != LG_JOB_ERROR && st != LG_JOB_TOO_LARGE) ||
	    cap < LG_FAIL_TEXT_CAP)
		return 0;
	n = meta_text(meta->msg, meta->msg_len, sizeof(meta->msg), dst, 0);
	while (n > 0 && dst[n - 1] == '\n')
		n--;
	if (n == 0)
		return 0;
	dst[n++] = '\n';
	dst[n] = '\0';
	return n;
}

int
lg_offload_render(struct lg_worker *w, int slot, const char *ctype_default, char *tmp,
    size_t cap, int *code, const char **ctype, const void **body, size_t *len)
{
	struct lg_arena *a = w->env->arena;
	const unsigned char *region = lg_arena_out(a, (uint32_t)slot);
	const struct lg_out_meta *meta = (const struct lg_out_meta *)region;
	uint64_t out_len = a->slots[slot].out_len;

	if (out_len > a->out_cap - LG_OUT_META)
		return -1;
	*code = ok_code(meta);
	if (meta->nfields > 0 || (meta->flags & LG_OUT_BAD_FIELD) || *code >= 300) {
		/* a stored answer is a status, a type and a body: fields or a 3xx cannot be shared */
		log_warn("slot %d: a coalesced answer with header fields or a 3xx is not shared: "
		    "500 (docs/MODULES.md, \"Answer header fields\")", slot);
		return -1;
	}
	*ctype = meta_text(meta->ctype, meta->ctype_len, sizeof(meta->ctype), tmp, 1) &&
	    cap > sizeof(meta->ctype) ? tmp : ctype_default;
	*body = region + LG_OUT_META;
	*len = (size_t)out_len;
	return 0;
}

int
lg_offload_release(struct lg_conn *c)
{
	struct lg_slot *s = &c->w->env->arena->slots[LG_JOB(c)->slot];
	int to;

	if (LG_WJOB(c->w)->pending[LG_JOB(c)->slot] == c)
		LG_WJOB(c->w)->pending[LG_JOB(c)->slot] = NULL;
	if ((to = lg_slot_release(s, LG_JOB(c)->gen)) == LG_SLOT_ABANDONED)
		log_debug("slot %d abandoned while running; the compute process frees it", LG_JOB(c)->slot);
	LG_JOB(c)->slot = -1;
	lg_conn_unhold(c, LG_CONN_HELD_BUFFER);
	return to;
}
