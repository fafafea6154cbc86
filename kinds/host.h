/* The host side of the module ABI (include/lagless/module.h): the function table handed to
 * every kind, the configuration view (struct lagless_conf), the request view that travels with
 * a job at the start of its input region, the answer's metadata at the start of its output
 * region, and the call of one kind's run with all of that set up. Used by the loop (encoding the
 * view, reading the metadata, running where=loop kinds), the compute processes (running jobs)
 * and the master (check hooks). Depends on common/ only. */
#ifndef LG_KINDS_HOST_H
#define LG_KINDS_HOST_H

#include <stddef.h>
#include <stdint.h>

#include <lagless/module.h>

/* One configuration key of a [route] or [module] section, with the line it came from. */
struct lg_kv {
	char *key;
	char *value;
	int line;
};

/* The host's definition of the ABI's opaque configuration type: n key/value pairs. */
struct lagless_conf {
	const struct lg_kv *kv;
	unsigned n;
};

/* The function table, filled at compile time (size, ABI version and every function). */
extern const struct lagless_host lg_host;

/* The request view, serialized at the start of a job's input region by the loop and read in
 * place by the runner: a header, then method, path, query and each field's name and value, each
 * NUL-terminated; the body follows at header.len (a multiple of 64). */
#define LG_VIEW_MAGIC 0x5657474cu /* "LGWV" */
#define LG_VIEW_ALIGN 64u

struct lg_view_hdr {
	uint32_t magic;
	uint32_t len;                              /* bytes of the whole view, body offset */
	uint32_t method_len, path_len, query_len;
	uint32_t nfields;
	uint32_t flen[LAGLESS_MAX_FIELDS][2];      /* name and value lengths */
};

/* A decoded view: pointers into the region it was decoded from. */
struct lg_view {
	const char *method, *path, *query;
	size_t method_len, path_len, query_len;
	struct lagless_field fields[LAGLESS_MAX_FIELDS];
	size_t nfields;
	size_t len;                                /* body offset in the region */
};

/* The largest view of a request whose head is at most max_head bytes (every string of the view
 * comes from the head): what the input region holds beyond the body limit. */
#define LG_VIEW_BOUND(max_head) (sizeof(struct lg_view_hdr) + (max_head) + 256u)

/* Bytes the view of these strings takes (header and padding included), the body offset. */
size_t lg_view_size(const struct lg_view *v);

/* Writes view v into dst (cap bytes). Returns its length (lg_view_size(v)), or 0 when it does
 * not fit or has more than LAGLESS_MAX_FIELDS fields. */
size_t lg_view_encode(unsigned char *dst, size_t cap, const struct lg_view *v);

/* Decodes the view at src (cap bytes of region, written by another process: nothing trusted).
 * Every length is checked against cap and every string must end in its NUL. Returns 0, or -1
 * (magic, lengths). */
int lg_view_decode(const unsigned char *src, size_t cap, struct lg_view *v);

/* The answer's metadata, written by the runner at the start of the output region; the body
 * follows at LG_OUT_META. The loop reads it after the job is DONE or FAILED, bounding every
 * length itself. */
#define LG_OUT_META 4096u

struct lg_out_meta {
	uint32_t http_status;       /* 0: the default for the status (200, 400, 413, 500) */
	uint32_t ctype_len;         /* 0: the route's or the kind's content type */
	uint32_t msg_len;           /* 0: the default text */
	uint32_t flags;             /* LG_OUT_ERROR_BODY */
	char ctype[128];
	char msg[256];
	/* ABI 1.2, host->add_field: nfields "name: value" CRLF lines, fields_len bytes of
	 * fields[]; checked again by the loop (kinds/answer.h) before one byte is sent. */
	uint32_t nfields;
	uint32_t fields_len;
	char fields[LAGLESS_ANSWER_FIELDS_BYTES];
	char bad[128];              /* LG_OUT_BAD_FIELD: why, NUL-terminated */
};

/* lg_out_meta.flags: the kind called host->error_body (ABI 1.2), so the body after the
 * metadata (the slot's out_len bytes) is that of its 4xx or 500 answer, with ctype. */
#define LG_OUT_ERROR_BODY 0x1u
/* The kind added a field that breaks a rule of host->add_field (reason in bad): 502. */
#define LG_OUT_BAD_FIELD 0x2u

_Static_assert(sizeof(struct lg_out_meta) <= LG_OUT_META, "the answer's metadata page");

/* Fills the request a kind's run is given (struct lagless_request) from view v and the body
 * (in_len bytes at in): its size and host table, method, path, raw query, fields and input. The
 * caller sets the rest (conf, state, kind_data, the times, route, query_args). */
void lg_host_request(struct lagless_request *rq, const struct lg_view *v,
    const unsigned char *in, size_t in_len);

/* Runs one job: clears the metadata page at the start of region (region_cap bytes, more than
 * LG_OUT_META; the answer after it), calls run(rq) under module's name (its log lines) and
 * checks what it returned (a status outside the ABI's, or out->len over out->cap, is an error).
 * Returns an enum lg_job_status (shm/layout.h) and the body length in *out_len: that of the
 * answer for LG_JOB_OK, of the error body for LG_JOB_BAD_INPUT or LG_JOB_ERROR when the kind
 * called error_body (LG_OUT_ERROR_BODY), else 0. */
int lg_host_call(lagless_run_fn run, const char *module, const struct lagless_request *rq,
    unsigned char *region, size_t region_cap, uint64_t *out_len);

/* 1 when the kind of the last lg_host_call in this process called host->recycle (ABI 1.2): a
 * compute process then exits after that job, as for max_jobs (cpupool/compute.c). */
int lg_host_recycle_asked(void);

/* host->route_at's source (ABI 1.2): the i-th route using a kind of the module whose init is
 * running, its path, kind name and config, as the registry knows them (ctx is the
 * registry's). Returns 0, or -1 past the last. */
typedef int (*lg_host_routes_fn)(const void *ctx, size_t i, const char **path,
    const char **kind, const struct lagless_conf **conf);

/* Sets what host->route_at reads while a module's init runs; (NULL, NULL) after it, when
 * route_at answers -1. */
void lg_host_set_routes(lg_host_routes_fn fn, const void *ctx);

/* The module name host->log prefixes, for hooks called outside lg_host_call (check, init);
 * static storage or the registry's. */
void lg_host_set_module(const char *name);

/* Looks up key in conf (NULL when absent). */
const char *lg_conf_get(const struct lagless_conf *conf, const char *key);

#endif
