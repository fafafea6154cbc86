/* A test module: kinds that misbehave the ways a user's code can (tests/integration/
 * test_modules.py), plus one that echoes the request view. Built by `make` for the tests. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lagless/module.h>

static int inited; /* set by init in each process: echo shows it ran after fork */

static int
crash(const struct lagless_request *rq, struct lagless_output *out)
{
	(void)rq;
	(void)out;
	abort();
}

static int
segv(const struct lagless_request *rq, struct lagless_output *out)
{
	volatile int *p = NULL;

	(void)rq;
	(void)out;
	return *p;
}

static int
spin(const struct lagless_request *rq, struct lagless_output *out)
{
	volatile unsigned long x = 0;

	(void)rq;
	(void)out;
	for (;;)
		x++;
	return LAGLESS_OK;
}

/* Allocates 16 MiB blocks (touched) until malloc fails, then answers an error. */
static int
hog(const struct lagless_request *rq, struct lagless_output *out)
{
	void **blocks = NULL;
	size_t n = 0;

	for (;;) {
		void **nb = realloc(blocks, (n + 1) * sizeof(*blocks));
		void *p;

		if (nb == NULL)
			break;
		blocks = nb;
		if ((p = malloc(16u << 20)) == NULL)
			break;
		memset(p, 1, 16u << 20);
		blocks[n++] = p;
	}
	rq->host->set_message(out, "out of memory after %zu MiB", n * 16);
	while (n > 0)
		free(blocks[--n]);
	free(blocks);
	return LAGLESS_ERROR;
}

/* Writes sequentially past the end of its output region. */
static int
overrun(const struct lagless_request *rq, struct lagless_output *out)
{
	volatile unsigned char *p = out->data;

	(void)rq;
	for (size_t i = 0; i < out->cap + 8192; i++)
		p[i] = 0xee;
	out->len = 0;
	return LAGLESS_OK;
}

/* A 4xx whose body is a JSON document of n bytes (n >= 16), {"detail":"xxx...x"}, through
 * host->error_body (ABI 1.2); or, with msg = 1, a set_message text of n bytes (cut to 255). */
static int
refuse_long(const struct lagless_request *rq, struct lagless_output *out, uint64_t n, int msg)
{
	const struct lagless_host *h = rq->host;

	if (msg) {
		h->set_message(out, "%0*d", (int)n, 0);
		return LAGLESS_BAD_INPUT;
	}
	if (n < 16 || n > out->cap)
		return LAGLESS_TOO_LARGE;
	memcpy(out->data, "{\"detail\":\"", 11);
	memset(out->data + 11, 'x', n - 13);
	memcpy(out->data + n - 2, "\"}", 2);
	out->len = n;
	h->set_ctype(out, "application/json");
	h->error_body(out);
	return LAGLESS_BAD_INPUT;
}

/* The request view as text: method, path, query, each listed field, the route's key "greeting"
 * and whether init ran; ?status=N answers a 4xx with a message, or a 2xx with that text;
 * ?status=4xx&json=N a 4xx with a JSON body of N bytes, ?status=4xx&msg=N one with a message
 * of N bytes. */
static int
echo(const struct lagless_request *rq, struct lagless_output *out)
{
	const char *g = rq->host->conf_get(rq->conf, "greeting");
	uint64_t status, json, msg;
	int n;

	if (rq->host->query_uint(rq, "status", 0, 0, 499, &status) == -1 ||
	    rq->host->query_uint(rq, "json", 0, 0, 1u << 20, &json) == -1 ||
	    rq->host->query_uint(rq, "msg", 0, 0, 4096, &msg) == -1)
		return LAGLESS_BAD_INPUT;
	if (status >= 400) {
		rq->host->set_status(out, (int)status);
		if (json || msg)
			return refuse_long(rq, out, json ? json : msg, json == 0);
		rq->host->set_message(out, "refused with %d", (int)status);
		return LAGLESS_BAD_INPUT;
	}
	if (status >= 200 && rq->host->set_status(out, (int)status) == -1)
		return LAGLESS_BAD_INPUT; /* a 2xx answered with the echo as its body (204, 205) */
	n = snprintf((char *)out->data, out->cap, "%s %s ?%s body=%zu greeting=%s init=%d\n",
	    rq->method, rq->path, rq->query, rq->input_len, g ? g : "-", inited);
	if (n < 0 || (size_t)n >= out->cap)
		return LAGLESS_TOO_LARGE;
	out->len = (size_t)n;
	for (size_t i = 0; i < rq->nfields; i++) {
		char line[256];
		int m = snprintf(line, sizeof(line), "%s: %s\n", rq->fields[i].name,
		    rq->fields[i].value);

		if (m < 0 || rq->host->write(out, line, (size_t)m) == -1)
			return LAGLESS_TOO_LARGE;
	}
	rq->host->set_ctype(out, "text/x-echo");
	return LAGLESS_OK;
}

/* Adds field name: value (NUL-terminated both) through host->add_field (ABI 1.2). */
static int
field(struct lagless_output *out, const struct lagless_host *h, const char *name,
    const char *value)
{
	return h->add_field(out, name, strlen(name), value, strlen(value));
}

/* Answers with header fields and statuses (ABI 1.2): ?case= redirect (302 + Location),
 * nolocation (301 without one), auth (401 + WWW-Authenticate), gateway (503 + Retry-After),
 * timeout (504), cookies (200 + two Set-Cookie), and fields that break a rule: hop (Connection),
 * crlf (CR LF in a value), nul (a NUL in a value), clen (Content-Length), many (17 fields);
 * recycle answers 200 and asks for its process to be replaced after it (host->recycle).
 * The body says whether add_field refused ("refused=1"). */
static int
answer(const struct lagless_request *rq, struct lagless_output *out)
{
	const struct lagless_host *h = rq->host;
	size_t n;
	const char *c = h->query(rq, "case", &n);
	char cs[16] = "";
	int st = LAGLESS_OK, code = 200, refused = 0;

	if (c != NULL && n < sizeof(cs))
		memcpy(cs, c, n);
	if (strcmp(cs, "redirect") == 0) {
		code = 302;
		refused |= field(out, h, "Location", "/elsewhere?x=1");
	} else if (strcmp(cs, "nolocation") == 0) {
		code = 301;
	} else if (strcmp(cs, "auth") == 0) {
		code = 401, st = LAGLESS_BAD_INPUT;
		refused |= field(out, h, "WWW-Authenticate", "Bearer realm=\"api\"");
	} else if (strcmp(cs, "gateway") == 0) {
		code = 503, st = LAGLESS_ERROR;
		refused |= field(out, h, "Retry-After", "7");
	} else if (strcmp(cs, "timeout") == 0) {
		code = 504, st = LAGLESS_ERROR;
	} else if (strcmp(cs, "cookies") == 0) {
		refused |= field(out, h, "Set-Cookie", "a=1; Path=/");
		refused |= field(out, h, "set-cookie", "b=2");
	} else if (strcmp(cs, "hop") == 0) {
		refused |= field(out, h, "Connection", "close");
	} else if (strcmp(cs, "crlf") == 0) {
		refused |= field(out, h, "X-A", "a\r\nX-Injected: 1");
	} else if (strcmp(cs, "nul") == 0) {
		refused |= h->add_field(out, "X-A", 3, "a\0b", 3);
	} else if (strcmp(cs, "clen") == 0) {
		refused |= field(out, h, "content-length", "1");
	} else if (strcmp(cs, "recycle") == 0) {
		h->recycle(out); /* ABI 1.2: this process is replaced after this answer */
	} else if (strcmp(cs, "many") == 0) {
		for (int i = 0; i < 17; i++)
			refused |= field(out, h, "X-Many", "v");
	}
	if (h->set_status(out, code) == -1)
		return LAGLESS_ERROR;
	int len = snprintf((char *)out->data, out->cap, "%s refused=%d\n", cs, refused != 0);
	if (len < 0 || (size_t)len >= out->cap)
		return LAGLESS_TOO_LARGE;
	out->len = (size_t)len;
	h->set_message(out, "%s", cs);
	return st;
}

/* ABI 1.2: declared query arguments handed over parsed (rq->query_args). */
struct qargs {
	uint64_t n;
	const char *name;
	int fast, fmt;
};

static const char *const fmts[] = { "jpeg", "webp", NULL };

static const struct lagless_param qargs_decl[] = {
	LAGLESS_PARAM("n", UINT, .min = 1, .max = 100, .def = "7",
	    .offset = offsetof(struct qargs, n)),
	LAGLESS_PARAM("name", STRING, .max = 16, .offset = offsetof(struct qargs, name)),
	LAGLESS_PARAM("fast", BOOL, .offset = offsetof(struct qargs, fast)),
	LAGLESS_PARAM("fmt", ENUM, .choices = fmts, .offset = offsetof(struct qargs, fmt)),
};

/* The parsed arguments as text: "n=42 name=a b fast=1 fmt=1". */
static int
qargs(const struct lagless_request *rq, struct lagless_output *out)
{
	const struct qargs *a = rq->query_args;
	int n;

	if (a == NULL)
		return LAGLESS_ERROR;
	n = snprintf((char *)out->data, out->cap, "n=%llu name=%s fast=%d fmt=%d\n",
	    (unsigned long long)a->n, a->name ? a->name : "-", a->fast, a->fmt);
	if (n < 0 || (size_t)n >= out->cap)
		return LAGLESS_TOO_LARGE;
	out->len = (size_t)n;
	return LAGLESS_OK;
}

/* [module faults] keys: only "level" is known. */
static int
check(const struct lagless_host *h, const struct lagless_conf *conf, char *err, size_t errlen)
{
	const char *k, *v;

	for (size_t i = 0; h->conf_at(conf, i, &k, &v) == 0; i++)
		if (strcmp(k, "level") != 0) {
			snprintf(err, errlen, "unknown key %s", k);
			return -1;
		}
	return 0;
}

/* route keys of echo: only "greeting" */
static int
echo_check(const struct lagless_host *h, const struct lagless_conf *conf, char *err,
    size_t errlen)
{
	const char *k, *v;

	for (size_t i = 0; h->conf_at(conf, i, &k, &v) == 0; i++)
		if (strcmp(k, "greeting") != 0) {
			snprintf(err, errlen, "echo knows no key %s", k);
			return -1;
		}
	return 0;
}

/* A module's own printf-like log wrapper, through host->vlog (ABI 1.1). */
static void
say(const struct lagless_host *h, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	h->vlog(LAGLESS_LOG_INFO, fmt, ap);
	va_end(ap);
}

static int
init(const struct lagless_host *h, const struct lagless_conf *conf, void **state)
{
	(void)conf;
	(void)state;
	inited = 1;
	say(h, "faults module %s", "initialised");
	/* ABI 1.2: init is told the routes that use this module's kinds */
	const char *path, *kind;
	const struct lagless_conf *rconf;
	for (size_t i = 0; h->route_at(i, &path, &kind, &rconf) == 0; i++) {
		const char *g = h->conf_get(rconf, "greeting");

		say(h, "init sees route %s (%s%s%s)", path, kind, g ? ", greeting " : "",
		    g ? g : "");
	}
	return 0;
}

LAGLESS_MODULE_HOOKS("faults", "1.0", (.check = check, .init = init),
    LAGLESS_KIND("crash", crash),
    LAGLESS_KIND("segv", segv),
    LAGLESS_KIND("spin", spin),
    LAGLESS_KIND("hog", hog),
    LAGLESS_KIND("overrun", overrun),
    LAGLESS_KIND("echo", echo, .ctype = "text/plain", .check = echo_check,
        .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP),
    LAGLESS_KIND("answer", answer, .ctype = "text/plain", .flags = LAGLESS_KIND_CACHEABLE,
        .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP),
    LAGLESS_KIND("qargs", qargs, .ctype = "text/plain",
        .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP,
        LAGLESS_QUERY_ARGS(qargs_decl, struct qargs)));
