#include "kinds/host.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/query.h"
#include "common/value.h"
#include "kinds/answer.h"
#include "shm/layout.h"

/* What host->write, set_status, ... need beyond struct lagless_output (host_private). */
struct out_priv {
	struct lg_out_meta *meta;
};

static const char *current_module = "-";
static int recycle_asked; /* host->recycle in this process's current run (lg_host_call) */
static lg_host_routes_fn routes_fn; /* host->route_at while a module's init runs */
static const void *routes_ctx;

void
lg_host_set_routes(lg_host_routes_fn fn, const void *ctx)
{
	routes_fn = fn;
	routes_ctx = ctx;
}

static int
host_route_at(size_t i, const char **path, const char **kind, const struct lagless_conf **conf)
{
	return routes_fn != NULL ? routes_fn(routes_ctx, i, path, kind, conf) : -1;
}

void
lg_host_set_module(const char *name)
{
	current_module = name ? name : "-";
}

static void
host_vlog(int level, const char *fmt, va_list ap)
{
	char msg[900];

	if (level < LAGLESS_LOG_ERROR)
		level = LAGLESS_LOG_ERROR;
	if (level > LAGLESS_LOG_DEBUG)
		level = LAGLESS_LOG_DEBUG;
	if (lg_log_level < level)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	lg_log_write(level, current_module, "%s", msg);
}

static void
host_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	host_vlog(level, fmt, ap);
	va_end(ap);
}

static void *
host_alloc(struct lagless_output *out, size_t n)
{
	uintptr_t top = (uintptr_t)(out->data + out->cap), p;

	if (n > out->cap)
		return NULL;
	p = (top - n) & ~(uintptr_t)15; /* 16-byte aligned, below the previous allocation */
	if (p < (uintptr_t)(out->data + out->len))
		return NULL;
	out->cap = (size_t)(p - (uintptr_t)out->data);
	return (void *)p;
}

static int
host_write(struct lagless_output *out, const void *p, size_t n)
{
	if (n > out->cap || out->len > out->cap - n)
		return -1;
	memcpy(out->data + out->len, p, n);
	out->len += n;
	return 0;
}

static int
host_set_status(struct lagless_output *out, int code)
{
	struct out_priv *pv = out->host_private;

	if (!lg_answer_status_ok(code, -1))
		return -1;
	pv->meta->http_status = (uint32_t)code;
	return 0;
}

static int
host_set_ctype(struct lagless_output *out, const char *ctype)
{
	struct out_priv *pv = out->host_private;
	size_t n = strlen(ctype);

	if (n == 0 || n >= sizeof(pv->meta->ctype))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (ctype[i] < 0x20 || ctype[i] > 0x7e)
			return -1; /* no CR/LF: it goes into a header line */
	memcpy(pv->meta->ctype, ctype, n);
	pv->meta->ctype_len = (uint32_t)n;
	return 0;
}

static int
host_set_message(struct lagless_output *out, const char *fmt, ...)
{
	struct out_priv *pv = out->host_private;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(pv->meta->msg, sizeof(pv->meta->msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	/* A cut message was a silently broken answer (issue 39): say so, and what to use. */
	if ((size_t)n >= sizeof(pv->meta->msg))
		host_log(LAGLESS_LOG_WARN, "set_message: a %d-byte message cut to %zu bytes (a "
		    "longer error body: host->error_body, docs/MODULES.md)", n,
		    sizeof(pv->meta->msg) - 1);
	pv->meta->msg_len = (uint32_t)((size_t)n < sizeof(pv->meta->msg) ? (size_t)n :
	    sizeof(pv->meta->msg) - 1);
	return 0;
}

static int
host_error_body(struct lagless_output *out)
{
	struct out_priv *pv = out->host_private;

	pv->meta->flags |= LG_OUT_ERROR_BODY;
	return 0;
}

/* A field that breaks a rule is refused here and makes the answer a 502 (lg_answer_fields in
 * the loop); the compute process's log names it too, with the module. */
static int
host_add_field(struct lagless_output *out, const char *name, size_t name_len,
    const char *value, size_t value_len)
{
	struct out_priv *pv = out->host_private;
	int first = !(pv->meta->flags & LG_OUT_BAD_FIELD);

	if (lg_answer_field_add(pv->meta, name, name_len, value, value_len) == 0)
		return 0;
	if (first)
		host_log(LAGLESS_LOG_WARN, "add_field refused, the answer will be a 502: %s",
		    pv->meta->bad);
	return -1;
}

static int
host_recycle(struct lagless_output *out)
{
	(void)out;
	if (!recycle_asked)
		host_log(LAGLESS_LOG_INFO, "recycle: this process exits after this answer");
	recycle_asked = 1;
	return 0;
}

int
lg_host_recycle_asked(void)
{
	return recycle_asked;
}

static const char *
host_query(const struct lagless_request *rq, const char *name, size_t *len)
{
	return lg_query_param(rq->query, rq->query_len, name, len);
}

/* A query argument: a whole number of the one grammar (common/value.h), no suffix. */
static int
query_number(const char *v, size_t len, uint64_t min, uint64_t max, uint64_t *out)
{
	char num[32];

	if (len >= sizeof(num))
		return -1;
	memcpy(num, v, len);
	num[len] = '\0';
	return lg_value_uint(num, min, max, out, NULL, 0);
}

static int
host_query_uint(const struct lagless_request *rq, const char *name, uint64_t def, uint64_t min,
    uint64_t max, uint64_t *out)
{
	size_t len;
	const char *v = host_query(rq, name, &len);

	char dec[24];
	long n;

	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (memchr(v, '%', len) == NULL)
		return query_number(v, len, min, max, out);
	/* "%31%30" is "10" (RFC 3986 section 6.2.2.2): decoded, then the same rule */
	if ((n = lg_query_decode(v, len, dec, sizeof(dec))) < 0)
		return -1;
	return query_number(dec, (size_t)n, min, max, out);
}

static const char *
host_header(const struct lagless_request *rq, const char *name, size_t *len)
{
	for (size_t i = 0; i < rq->nfields; i++)
		if (strcasecmp(rq->fields[i].name, name) == 0) {
			*len = rq->fields[i].value_len;
			return rq->fields[i].value;
		}
	return NULL;
}

const char *
lg_conf_get(const struct lagless_conf *conf, const char *key)
{
	if (conf == NULL)
		return NULL;
	for (unsigned i = 0; i < conf->n; i++)
		if (strcmp(conf->kv[i].key, key) == 0)
			return conf->kv[i].value;
	return NULL;
}

static int
host_conf_at(const struct lagless_conf *conf, size_t i, const char **key, const char **value)
{
	if (conf == NULL || i >= conf->n)
		return -1;
	*key = conf->kv[i].key;
	*value = conf->kv[i].value;
	return 0;
}

static int
host_conf_uint(const struct lagless_conf *conf, const char *key, uint64_t def, uint64_t min,
    uint64_t max, uint64_t *out)
{
	const char *v = lg_conf_get(conf, key);

	if (v == NULL) {
		*out = def;
		return 0;
	}
	/* a module's key is a size of the one grammar: K/M/G suffixes as everywhere */
	return lg_value_size(v, min, max, out, NULL, 0);
}

const struct lagless_host lg_host = {
	.size = sizeof(struct lagless_host),
	.abi_major = LAGLESS_ABI_MAJOR,
	.abi_minor = LAGLESS_ABI_MINOR,
	.log = host_log,
	.alloc = host_alloc,
	.write = host_write,
	.set_status = host_set_status,
	.set_ctype = host_set_ctype,
	.set_message = host_set_message,
	.query = host_query,
	.query_uint = host_query_uint,
	.header = host_header,
	.conf_get = lg_conf_get,
	.conf_at = host_conf_at,
	.conf_uint = host_conf_uint,
	.vlog = host_vlog,
	.error_body = host_error_body,
	.add_field = host_add_field,
	.recycle = host_recycle,
	.route_at = host_route_at,
};

static size_t
align_up(size_t n)
{
	return (n + LG_VIEW_ALIGN - 1) & ~(size_t)(LG_VIEW_ALIGN - 1);
}

size_t
lg_view_size(const struct lg_view *v)
{
	size_t n = sizeof(struct lg_view_hdr) + v->method_len + 1 + v->path_len + 1 +
	    v->query_len + 1;

	for (size_t i = 0; i < v->nfields; i++)
		n += v->fields[i].name_len + 1 + v->fields[i].value_len + 1;
	return align_up(n);
}

static unsigned char *
put(unsigned char *p, const char *s, size_t n)
{
	if (n)
		memcpy(p, s, n);
	p[n] = '\0';
	return p + n + 1;
}

size_t
lg_view_encode(unsigned char *dst, size_t cap, const struct lg_view *v)
{
	struct lg_view_hdr h = { .magic = LG_VIEW_MAGIC };
	size_t len = lg_view_size(v);
	unsigned char *p = dst + sizeof(h);

	if (v->nfields > LAGLESS_MAX_FIELDS || len > cap || len > UINT32_MAX)
		return 0;
	h.len = (uint32_t)len;
	h.method_len = (uint32_t)v->method_len;
	h.path_len = (uint32_t)v->path_len;
	h.query_len = (uint32_t)v->query_len;
	h.nfields = (uint32_t)v->nfields;
	p = put(p, v->method, v->method_len);
	p = put(p, v->path, v->path_len);
	p = put(p, v->query, v->query_len);
	for (size_t i = 0; i < v->nfields; i++) {
		h.flen[i][0] = (uint32_t)v->fields[i].name_len;
		h.flen[i][1] = (uint32_t)v->fields[i].value_len;
		p = put(p, v->fields[i].name, v->fields[i].name_len);
		p = put(p, v->fields[i].value, v->fields[i].value_len);
	}
	memcpy(dst, &h, sizeof(h));
	return len;
}

/* Takes a string of n bytes plus its NUL at *off, within end. */
static const char *
take(const unsigned char *src, size_t *off, size_t end, uint32_t n)
{
	const char *s = (const char *)src + *off;

	if (n >= end || *off > end - n - 1 || s[n] != '\0')
		return NULL;
	*off += (size_t)n + 1;
	return s;
}

int
lg_view_decode(const unsigned char *src, size_t cap, struct lg_view *v)
{
	struct lg_view_hdr h;
	size_t off = sizeof(h);

	if (cap < sizeof(h))
		return -1;
	memcpy(&h, src, sizeof(h));
	if (h.magic != LG_VIEW_MAGIC || h.len > cap || h.len < sizeof(h) ||
	    h.nfields > LAGLESS_MAX_FIELDS)
		return -1;
	memset(v, 0, sizeof(*v));
	if ((v->method = take(src, &off, h.len, h.method_len)) == NULL ||
	    (v->path = take(src, &off, h.len, h.path_len)) == NULL ||
	    (v->query = take(src, &off, h.len, h.query_len)) == NULL)
		return -1;
	v->method_len = h.method_len;
	v->path_len = h.path_len;
	v->query_len = h.query_len;
	for (uint32_t i = 0; i < h.nfields; i++) {
		struct lagless_field *f = &v->fields[i];

		if ((f->name = take(src, &off, h.len, h.flen[i][0])) == NULL ||
		    (f->value = take(src, &off, h.len, h.flen[i][1])) == NULL)
			return -1;
		f->name_len = h.flen[i][0];
		f->value_len = h.flen[i][1];
	}
	v->nfields = h.nfields;
	v->len = h.len;
	return 0;
}

void
lg_host_request(struct lagless_request *rq, const struct lg_view *v, const unsigned char *in,
    size_t in_len)
{
	*rq = (struct lagless_request){
		.size = sizeof(*rq), .host = &lg_host,
		.method = v->method, .method_len = v->method_len,
		.path = v->path, .path_len = v->path_len,
		.query = v->query, .query_len = v->query_len,
		.input = in_len ? in : (const unsigned char *)"", .input_len = in_len,
		.fields = v->fields, .nfields = v->nfields,
	};
}

int
lg_host_call(lagless_run_fn run, const char *module, const struct lagless_request *rq,
    unsigned char *region, size_t region_cap, uint64_t *out_len)
{
	struct lg_out_meta *meta = (struct lg_out_meta *)region;
	struct out_priv pv = { meta };
	struct lagless_output out = {
		.size = sizeof(out), .data = region + LG_OUT_META,
		.cap = region_cap - LG_OUT_META, .len = 0, .host_private = &pv,
	};
	size_t cap0 = out.cap;
	int st;

	memset(meta, 0, sizeof(*meta));
	*out_len = 0;
	recycle_asked = 0;
	lg_host_set_module(module);
	st = run(rq, &out);
	lg_host_set_module(NULL);
	if (out.cap > cap0 || out.len > out.cap) {
		log_warn("kind of module %s answered %zu bytes in a %zu-byte output: error",
		    module, out.len, out.cap);
		return LG_JOB_ERROR;
	}
	switch (st) {
	case LAGLESS_OK:
		*out_len = out.len;
		return LG_JOB_OK;
	case LAGLESS_BAD_INPUT:
	case LAGLESS_ERROR:
		if (meta->flags & LG_OUT_ERROR_BODY)
			*out_len = out.len; /* the whole body of the 4xx or 500 */
		return st == LAGLESS_ERROR ? LG_JOB_ERROR : LG_JOB_BAD_INPUT;
	case LAGLESS_TOO_LARGE:
		return LG_JOB_TOO_LARGE;
	default:
		log_warn("kind of module %s returned %d, not a lagless_status: error", module, st);
		return LG_JOB_ERROR;
	}
}
