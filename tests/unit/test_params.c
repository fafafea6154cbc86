/* Unit tests for kinds/params.c (module ABI 1.1 declared parameters) and the registry's checks
 * of a kind's declarations: the table walk the loop worker runs on a request's query, and the
 * once-per-route parse of route keys into the kind's route struct. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kinds/builtin.h"
#include "kinds/params.h"
#include "kinds/registry.h"
#include "shm/layout.h"

static const char *const fmts[] = { "jpeg", "webp", NULL };

struct rc {
	uint64_t width, max;
	int webp, fast;
	const char *label;
};

static const struct lagless_param q[] = {
	LAGLESS_PARAM("n", UINT, .min = 1, .max = 100, .def = "10"),
	LAGLESS_PARAM("sz", SIZE, .max = 1u << 20),
	LAGLESS_PARAM("fast", BOOL),
	LAGLESS_PARAM("fmt", ENUM, .choices = fmts),
	LAGLESS_PARAM("tag", STRING, .min = 1, .max = 4),
};

static const struct lagless_param keys[] = {
	LAGLESS_PARAM("width", UINT, .min = 1, .max = 16384, .def = "128",
	    .offset = offsetof(struct rc, width)),
	LAGLESS_PARAM("max", SIZE, .offset = offsetof(struct rc, max)),
	LAGLESS_PARAM("format", ENUM, .choices = fmts, .def = "jpeg",
	    .offset = offsetof(struct rc, webp)),
	LAGLESS_PARAM("fast", BOOL, .def = "no", .offset = offsetof(struct rc, fast)),
	LAGLESS_PARAM("label", STRING, .offset = offsetof(struct rc, label)),
};
#define N(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

/* The loop's check of a kind with no query struct (ABI 1.1): lg_params_parse_query without a
 * destination, its fault worded as the 400 words it. */
static int
qcheck(const char *query, char *err, size_t cap)
{
	char strs[2048];
	uint32_t fault = 0;
	int rc = lg_params_parse_query(q, N(q), query, strlen(query), NULL, 0, strs, sizeof(strs),
	    &fault);

	if (rc == -1)
		lg_params_query_why(q, N(q), fault, err, cap);
	return rc;
}

static void
test_query_accepts(void **state)
{
	char err[256] = "";

	(void)state;
	assert_int_equal(qcheck("", err, sizeof(err)), 0);
	assert_int_equal(qcheck("n=1&sz=64k&fast=on&fmt=webp&tag=abcd", err, sizeof(err)), 0);
	assert_int_equal(qcheck("n=%31%30%30", err, sizeof(err)), 0);       /* "100" */
	assert_int_equal(qcheck("other=zzz&n=5", err, sizeof(err)), 0);    /* undeclared: passed */
	assert_int_equal(qcheck("N=abc", err, sizeof(err)), 0);            /* names are exact */
}

static void
test_query_refuses(void **state)
{
	static const struct {
		const char *query, *word;
	} bad[] = {
		{ "n=abc", "n: expected a whole number" }, { "n=0", "n:" }, { "n=101", "from 1 to 100" },
		{ "n=-1", "n:" }, { "n=1%", "n:" }, { "n=%41", "n:" }, { "n=", "n:" },
		{ "sz=2M", "sz:" }, { "sz=1q", "sz:" }, { "fast=maybe", "fast:" },
		{ "fmt=png", "fmt: expected one of jpeg, webp" }, { "tag=", "tag:" },
		{ "tag=abcde", "tag: expected 1 to 4 bytes" }, { "tag=a%00", "tag:" },
		{ "n=99999999999999999999999", "n:" },
	};
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(qcheck(bad[i].query, err, sizeof(err)), -1);
		if (strstr(err, bad[i].word) == NULL)
			fail_msg("%s: reason \"%s\" lacks \"%s\"", bad[i].query, err, bad[i].word);
	}
	/* a long value is refused, not overrun */
	char longq[2048] = "n=";
	memset(longq + 2, '1', sizeof(longq) - 3);
	longq[sizeof(longq) - 1] = '\0';
	assert_int_equal(qcheck(longq, err, sizeof(err)), -1);
}

static void
test_declarations_checked(void **state)
{
	static const char *const none[] = { NULL };
	struct {
		struct lagless_param p;
		const char *word;
	} bad[] = {
		{ LAGLESS_PARAM("Bad", UINT), "valid name" },
		{ LAGLESS_PARAM("x", UINT, .min = 5, .max = 4), "min over max" },
		{ { .name = "x", .type = 9 }, "unknown type" },
		{ LAGLESS_PARAM("x", ENUM), "without choices" },
		{ LAGLESS_PARAM("x", ENUM, .choices = none), "without choices" },
		{ LAGLESS_PARAM("x", UINT, .max = 9, .def = "10"), "x: expected" },
		{ LAGLESS_PARAM("x", BOOL, .def = "maybe"), "x:" },
		{ LAGLESS_PARAM("x", UINT, .offset = 12), "offset" },      /* not 8-aligned */
		{ LAGLESS_PARAM("x", UINT, .offset = 16), "offset" },      /* past 16 bytes */
	};
	const struct lagless_param twice[] = { LAGLESS_PARAM("a", BOOL), LAGLESS_PARAM("a", UINT) };
	char err[256];

	(void)state;
	assert_int_equal(lg_params_valid(q, N(q), 0, 0, err, sizeof(err)), 0);
	assert_int_equal(lg_params_valid(keys, N(keys), 1, sizeof(struct rc), err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(lg_params_valid(&bad[i].p, 1, 1, 16, err, sizeof(err)), -1);
		if (strstr(err, bad[i].word) == NULL)
			fail_msg("case %zu: reason \"%s\" lacks \"%s\"", i, err, bad[i].word);
	}
	assert_int_equal(lg_params_valid(twice, 2, 0, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "twice"));
}

static void
test_route_keys(void **state)
{
	struct lg_kv kv[] = { { "width", "640", 3 }, { "max", "16M", 4 }, { "format", "webp", 5 },
	    { "label", "hi", 6 } };
	struct lagless_conf conf = { kv, 4 };
	struct rc rc;
	char err[512];
	int line = -1;

	(void)state;
	assert_int_equal(lg_params_parse_route(keys, N(keys), &conf, &rc, sizeof(rc), &line, err,
	    sizeof(err)), 0);
	assert_true(rc.width == 640 && rc.max == 16u << 20 && rc.webp == 1 && rc.fast == 0);
	assert_string_equal(rc.label, "hi");
	/* absent keys take the declared defaults, or zero */
	conf.n = 0;
	assert_int_equal(lg_params_parse_route(keys, N(keys), &conf, &rc, sizeof(rc), &line, err,
	    sizeof(err)), 0);
	assert_true(rc.width == 128 && rc.max == 0 && rc.webp == 0 && rc.label == NULL);
	assert_int_equal(lg_params_parse_route(keys, N(keys), NULL, &rc, sizeof(rc), &line, err,
	    sizeof(err)), 0);
	/* a bad value names its key and line */
	kv[1].value = "16X";
	conf.n = 4;
	assert_int_equal(lg_params_parse_route(keys, N(keys), &conf, &rc, sizeof(rc), &line, err,
	    sizeof(err)), -1);
	assert_int_equal(line, 4);
	assert_non_null(strstr(err, "max:"));
	/* an undeclared key is refused with what the kind takes */
	kv[1] = (struct lg_kv){ "max_lem", "1K", 9 };
	assert_int_equal(lg_params_parse_route(keys, N(keys), &conf, &rc, sizeof(rc), &line, err,
	    sizeof(err)), -1);
	assert_int_equal(line, 9);
	assert_non_null(strstr(err, "max_lem: unknown key"));
	assert_non_null(strstr(err, "width,max,format,fast,label"));
}

static int
run_ok(const struct lagless_request *rq, struct lagless_output *out)
{
	(void)rq;
	(void)out;
	return LAGLESS_OK;
}

/* A 1.1 module's declarations reach the kind's row (query names too: a coalescing key takes
 * them); a bad declaration refuses the module, naming the kind; a 1.0-sized kind has none. */
static void
test_registry_takes_declarations(void **state)
{
	static const struct lagless_param badq[] = { LAGLESS_PARAM("n", UINT, .max = 1,
	    .def = "2") };
	static struct lagless_kind kinds[] = {
		LAGLESS_KIND("k", run_ok, LAGLESS_QUERY(q), LAGLESS_ROUTE(keys, struct rc)),
	};
	static struct lagless_module m = { LAGLESS_MODULE_MAGIC, LAGLESS_ABI_MAJOR,
	    LAGLESS_ABI_MINOR, sizeof(struct lagless_module), sizeof(struct lagless_kind), 1,
	    LAGLESS_SIGNATURE, "decl", "1", kinds, NULL, NULL, NULL };
	struct lg_registry *r = calloc(1, sizeof(*r));
	char err[512];
	int dummy;

	(void)state;
	assert_int_equal(lg_registry_init(r, err, sizeof(err)), 0);
	assert_int_equal(lg_registry_add_module(r, &m, "decl.so", &dummy, NULL, err, sizeof(err)),
	    0);
	const struct lg_kind *k = lg_registry_find(r, "decl.k");
	assert_non_null(k);
	assert_int_equal(k->nqparams, N(q));
	assert_int_equal(k->nrparams, N(keys));
	assert_int_equal(k->route_size, sizeof(struct rc));
	assert_string_equal(k->query, "n,sz,fast,fmt,tag");
	/* the built-in heavy declares iterations */
	k = lg_registry_find(r, "heavy");
	assert_true(k != NULL && k->nqparams == 1);
	assert_string_equal(k->query, "iterations");
	lg_registry_free(r);

	r = calloc(1, sizeof(*r));
	assert_int_equal(lg_registry_init(r, err, sizeof(err)), 0);
	kinds[0].query_params = badq;
	kinds[0].nquery_params = 1;
	assert_int_equal(lg_registry_add_module(r, &m, "decl.so", &dummy, NULL, err, sizeof(err)),
	    -1);
	assert_non_null(strstr(err, "kind k"));
	assert_non_null(strstr(err, "n: expected"));
	/* the same kind read at the 1.0 stride: the declarations are beyond it, so none */
	m.kind_size = (uint32_t)(offsetof(struct lagless_kind, data) + sizeof(void *));
	m.name = "decl10";
	assert_int_equal(lg_registry_add_module(r, &m, "decl10.so", &dummy, NULL, err,
	    sizeof(err)), 0);
	k = lg_registry_find(r, "decl10.k");
	assert_true(k != NULL && k->nqparams == 0 && k->qparams == NULL && k->route_size == 0);
	assert_null(k->query);
	lg_registry_free(r);
}

/* The built-in kinds' route keys are declarations like a module's: a bad value or any other
 * key is refused at the route naming its line and key, as is hash's memory under 8 KiB a lane
 * (the line of memory_kib); a good route gets its struct, defaults where keys are absent. */
/* ABI 1.2: declared query arguments parsed into the kind's query struct, decoded, defaults for
 * the absent ones, strings in the scratch the caller gives. */
struct qa {
	uint64_t n, sz;
	int fast, fmt;
	const char *tag;
};

static const struct lagless_param qa_decl[] = {
	LAGLESS_PARAM("n", UINT, .min = 1, .max = 100, .def = "10", .offset = offsetof(struct qa, n)),
	LAGLESS_PARAM("sz", SIZE, .max = 1u << 20, .offset = offsetof(struct qa, sz)),
	LAGLESS_PARAM("fast", BOOL, .def = "yes", .offset = offsetof(struct qa, fast)),
	LAGLESS_PARAM("fmt", ENUM, .choices = fmts, .offset = offsetof(struct qa, fmt)),
	LAGLESS_PARAM("tag", STRING, .min = 1, .max = 8, .offset = offsetof(struct qa, tag)),
};

static int
qparse(const char *query, struct qa *out, char *strs, size_t strcap, char *err, size_t cap)
{
	uint32_t fault = 0;
	int rc = lg_params_parse_query(qa_decl, N(qa_decl), query, strlen(query), out,
	    sizeof(*out), strs, strcap, &fault);

	if (rc == -1)
		lg_params_query_why(qa_decl, N(qa_decl), fault, err, cap);
	return rc;
}

static void
test_query_args_parsed(void **state)
{
	struct qa a;
	char strs[64], err[256] = "";
	const char *query = "n=%34%32&sz=2k&fast=off&fmt=webp&tag=a%20b&other=x";

	(void)state;
	assert_int_equal(lg_params_valid(qa_decl, N(qa_decl), 1, sizeof(struct qa), err,
	    sizeof(err)), 0);
	assert_int_equal(qparse(query, &a, strs, strlen(query) + N(qa_decl) + 1, err,
	    sizeof(err)), 0);
	assert_int_equal(a.n, 42);
	assert_int_equal(a.sz, 2048);
	assert_int_equal(a.fast, 0);
	assert_int_equal(a.fmt, 1);
	assert_string_equal(a.tag, "a b");
	memset(&a, 0x55, sizeof(a));
	assert_int_equal(qparse("", &a, strs, 1 + N(qa_decl), err, sizeof(err)), 0);
	assert_int_equal(a.n, 10);                  /* defaults, else zero */
	assert_int_equal(a.sz, 0);
	assert_int_equal(a.fast, 1);
	assert_int_equal(a.fmt, 0);
	assert_null(a.tag);
	assert_int_equal(qparse("n=0", &a, strs, sizeof(strs), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "n: expected"));
	assert_int_equal(qparse("tag=%zz", &a, strs, sizeof(strs), err, sizeof(err)), -1);
	assert_int_equal(qparse("tag=a%00b", &a, strs, sizeof(strs), err, sizeof(err)), -1);
	assert_int_equal(qparse("tag=abc", &a, strs, 2, err, sizeof(err)), -1); /* no room */
	/* an offset that does not hold its value in the struct is refused at load */
	assert_int_equal(lg_params_valid(qa_decl, N(qa_decl), 1, 8, err, sizeof(err)), -1);
}

/* The loop's one parse travels in the job's slot: its string values made offsets (pack), the
 * block copied elsewhere (another process maps the slot at another address) and placed back;
 * an offset outside the strings, or a string without its NUL there, is refused. A refusal is
 * worded from the fault alone, the same words whatever the value. */
static void
test_query_args_travel(void **state)
{
	unsigned char block[sizeof(struct qa) + 64], copy[sizeof(block)];
	struct qa a;
	char err[256] = "", err2[256] = "";
	const char *query = "tag=a%20b&n=7";
	size_t strs = strlen(query) + N(qa_decl) + 1;
	uint32_t fault = 0, fault2 = 0;
	uintptr_t off;

	(void)state;
	assert_int_equal(lg_params_parse_query(qa_decl, N(qa_decl), query, strlen(query), block,
	    sizeof(struct qa), (char *)block + sizeof(struct qa), strs, &fault), 0);
	assert_int_equal(lg_params_query_pack(qa_decl, N(qa_decl), block,
	    (char *)block + sizeof(struct qa), strs, 1), 0);
	memcpy(copy, block, sizeof(block));
	memset(block, 0, sizeof(block));
	assert_int_equal(lg_params_query_pack(qa_decl, N(qa_decl), copy,
	    (char *)copy + sizeof(struct qa), strs, 0), 0);
	memcpy(&a, copy, sizeof(a));
	assert_int_equal(a.n, 7);
	assert_ptr_equal(a.tag, (char *)copy + sizeof(struct qa) + 2); /* after n's "7" */
	assert_string_equal(a.tag, "a b");
	/* an offset past the strings */
	off = strs + 1;
	memcpy(copy + offsetof(struct qa, tag), &off, sizeof(off));
	assert_int_equal(lg_params_query_pack(qa_decl, N(qa_decl), copy,
	    (char *)copy + sizeof(struct qa), strs, 0), -1);
	memcpy(&a, copy, sizeof(a));
	assert_null(a.tag);
	/* refusals: the argument and its rule, whatever the value */
	assert_int_equal(qparse("n=0", &a, (char *)block, sizeof(block), err, sizeof(err)), -1);
	assert_int_equal(qparse("n=abc", &a, (char *)block, sizeof(block), err2, sizeof(err2)),
	    -1);
	assert_string_equal(err, "n: expected a whole number from 1 to 100");
	assert_string_equal(err2, err);
	assert_int_equal(lg_params_parse_query(qa_decl, N(qa_decl), "tag=a%00", 8, &a, sizeof(a),
	    (char *)block, sizeof(block), &fault2), -1);
	lg_params_query_why(qa_decl, N(qa_decl), fault2, err, sizeof(err));
	assert_string_equal(err, "tag: contains a NUL byte");
	assert_int_equal(qparse("fmt=png", &a, (char *)block, sizeof(block), err, sizeof(err)), -1);
	assert_string_equal(err, "fmt: expected one of jpeg, webp");
	assert_int_equal(qparse("tag=abcdefghij", &a, (char *)block, sizeof(block), err,
	    sizeof(err)), -1);
	assert_string_equal(err, "tag: expected 1 to 8 bytes");
}

/* What the kind was given as rq->query_args, written as its answer. */
static int
run_qa(const struct lagless_request *rq, struct lagless_output *out)
{
	const struct qa *a = rq->query_args;
	char line[128];
	int n;

	if (a == NULL)
		return LAGLESS_ERROR;
	n = snprintf(line, sizeof(line), "n=%llu tag=%s", (unsigned long long)a->n,
	    a->tag ? a->tag : "-");
	return rq->host->write(out, line, (size_t)n) == 0 ? LAGLESS_OK : LAGLESS_ERROR;
}

/* Writes the view of raw query raw at in, and the loop's parse of query parsed after it when
 * parsed is not NULL (as worker/job/offload.c does), into job record j. */
static void
job_input(unsigned char *in, size_t cap, const char *raw, const char *parsed, struct lg_job *j)
{
	struct lg_view v = { .method = "GET", .method_len = 3, .path = "/qa", .path_len = 3,
	    .query = raw, .query_len = strlen(raw) };
	size_t vlen = lg_view_encode(in, cap, &v);
	size_t strs = parsed ? strlen(parsed) + N(qa_decl) + 1 : 0;
	uint32_t fault;

	assert_true(vlen > 0);
	j->body_off = (uint32_t)vlen;
	j->args_off = j->args_len = 0;
	if (parsed == NULL)
		return;
	j->args_off = (uint32_t)vlen;
	j->args_len = (uint32_t)(sizeof(struct qa) + strs);
	assert_int_equal(lg_params_parse_query(qa_decl, N(qa_decl), parsed, strlen(parsed),
	    in + vlen, sizeof(struct qa), (char *)in + vlen + sizeof(struct qa), strs, &fault), 0);
	assert_int_equal(lg_params_query_pack(qa_decl, N(qa_decl), in + vlen,
	    (char *)in + vlen + sizeof(struct qa), strs, 1), 0);
	j->body_off = (uint32_t)((vlen + j->args_len + 63) & ~(size_t)63);
}

/* Both run paths hand the kind the loop's parse of its query as the job's record carries it
 * (its values, not a second parse of the view's raw query); a record without one (the loop
 * could not keep it) is parsed from the view; a record whose arguments do not hold together
 * is an error, not a crash. */
static void
test_run_takes_parsed_query(void **state)
{
	static struct lagless_kind kinds[] = {
		LAGLESS_KIND("qa", run_qa, LAGLESS_QUERY_ARGS(qa_decl, struct qa)),
	};
	static struct lagless_module m = { LAGLESS_MODULE_MAGIC, LAGLESS_ABI_MAJOR,
	    LAGLESS_ABI_MINOR, sizeof(struct lagless_module), sizeof(struct lagless_kind), 1,
	    LAGLESS_SIGNATURE, "qm", "1", kinds, NULL, NULL, NULL };
	struct lg_registry *r = calloc(1, sizeof(*r));
	struct lg_route_def rt = { .path = "/qa", .methods = 1, .where = LAGLESS_WHERE_POOL };
	static unsigned char in[4096], out[LG_OUT_META + 4096];
	struct lg_job j = { 0 };
	uint64_t len;
	char err[512];
	int dummy;

	(void)state;
	assert_int_equal(lg_registry_init(r, err, sizeof(err)), 0);
	assert_int_equal(lg_registry_add_module(r, &m, "qm.so", &dummy, NULL, err, sizeof(err)),
	    0);
	rt.kind = lg_registry_find(r, "qm.qa")->id;
	assert_int_equal(lg_registry_add_route(r, &rt, err, sizeof(err)), 0);
	lg_registry_init_process(r, 0, NULL);
	j.kind = rt.kind;
	j.route = r->nroutes - 1;
	job_input(in, sizeof(in), "n=5&tag=raw", "n=42&tag=rec", &j);
	assert_int_equal(lg_registry_run(r, &j, in, sizeof(in), out, sizeof(out), 0, 0, &len),
	    LG_JOB_OK);
	assert_int_equal(len, strlen("n=42 tag=rec"));
	assert_memory_equal(out + LG_OUT_META, "n=42 tag=rec", len);
	job_input(in, sizeof(in), "n=5&tag=raw", NULL, &j);
	assert_int_equal(lg_registry_run(r, &j, in, sizeof(in), out, sizeof(out), 0, 0, &len),
	    LG_JOB_OK);
	assert_memory_equal(out + LG_OUT_META, "n=5 tag=raw", len);
	job_input(in, sizeof(in), "n=500", NULL, &j);
	assert_int_equal(lg_registry_run(r, &j, in, sizeof(in), out, sizeof(out), 0, 0, &len),
	    LG_JOB_BAD_INPUT);
	assert_string_equal(((struct lg_out_meta *)out)->msg,
	    "n: expected a whole number from 1 to 100\n");
	job_input(in, sizeof(in), "", "tag=rec", &j);
	j.args_len = sizeof(struct qa) - 1; /* shorter than the kind's struct */
	assert_int_equal(lg_registry_run(r, &j, in, sizeof(in), out, sizeof(out), 0, 0, &len),
	    LG_JOB_ERROR);
	lg_registry_free(r);
}

static void
test_builtin_route_keys(void **state)
{
	static const struct {
		const char *kind, *key, *value, *key2, *value2, *says;
	} bad[] = {
		{ "heavy", "iterations", "5", NULL, NULL, "iterations: unknown key" },
		{ "compress", "codec", "gzip", NULL, NULL, "(it takes: none)" },
		{ "decompress", "max_output", "lots", NULL, NULL, "max_output: expected" },
		{ "decompress", "max_output", "0", NULL, NULL, "max_output: expected" },
		{ "decompress", "max_outptu", "1M", NULL, NULL, "(it takes: max_output)" },
		{ "hash", "memory_kib", "4", NULL, NULL, "from 8 to 4194304" },
		{ "hash", "lanes", "65", NULL, NULL, "lanes: expected a whole number from 1 to 64" },
		{ "hash", "iterations", "0", NULL, NULL, "from 1 to 1000" },
		{ "hash", "max_lanes", "2", NULL, NULL, "memory_kib,iterations,lanes" },
		{ "hash", "memory_kib", "8", "lanes", "2", "under 8 KiB a lane" },
		{ "verify", "max_memory_kib", "8G", NULL, NULL, "max_memory_kib: expected" },
		{ "verify", "lanes", "2", NULL, NULL, "lanes: unknown key" },
	};
	struct lg_registry *r = calloc(1, sizeof(*r));
	struct lg_route_def rt = { .path = "/k", .methods = LG_M_GET, .where = LAGLESS_WHERE_POOL };
	const struct lg_argon2_route *a;
	struct lg_kv *kv;
	char err[512], want[128];

	(void)state;
	assert_int_equal(lg_registry_init(r, err, sizeof(err)), 0);
	for (size_t i = 0; i < N(bad); i++) {
		struct lg_kv two[2] = { { (char *)bad[i].key, (char *)bad[i].value, 7 },
		    { (char *)bad[i].key2, (char *)bad[i].value2, 8 } };

		rt.kind = lg_registry_find(r, bad[i].kind)->id;
		rt.conf = (struct lagless_conf){ two, bad[i].key2 ? 2 : 1 };
		err[0] = '\0';
		assert_int_equal(lg_registry_add_route(r, &rt, err, sizeof(err)), -1);
		snprintf(want, sizeof(want), "kind %s: line 7: key %s", bad[i].kind, bad[i].key);
		if (strstr(err, want) == NULL || strstr(err, bad[i].says) == NULL)
			fail_msg("%s %s=%s: \"%s\"", bad[i].kind, bad[i].key, bad[i].value, err);
	}
	/* the registry owns a route's kv array from here on */
	assert_non_null(kv = calloc(2, sizeof(*kv)));
	kv[0] = (struct lg_kv){ "memory_kib", "64", 3 };
	kv[1] = (struct lg_kv){ "lanes", "2", 4 };
	rt.kind = lg_registry_find(r, "hash")->id;
	rt.conf = (struct lagless_conf){ kv, 2 };
	assert_int_equal(lg_registry_add_route(r, &rt, err, sizeof(err)), 0);
	a = r->routes[r->nroutes - 1].kconf;
	assert_true(a->m_kib == 64 && a->t == 2 && a->p == 2);
	rt.kind = lg_registry_find(r, "verify")->id;
	rt.conf = (struct lagless_conf){ NULL, 0 };
	rt.path[1] = 'v';
	assert_int_equal(lg_registry_add_route(r, &rt, err, sizeof(err)), 0);
	a = r->routes[r->nroutes - 1].kconf;
	assert_true(a->m_kib == 262144 && a->t == 16 && a->p == 8);
	lg_registry_free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_accepts),
		cmocka_unit_test(test_query_refuses),
		cmocka_unit_test(test_declarations_checked),
		cmocka_unit_test(test_route_keys),
		cmocka_unit_test(test_registry_takes_declarations),
		cmocka_unit_test(test_builtin_route_keys),
		cmocka_unit_test(test_query_args_parsed),
		cmocka_unit_test(test_query_args_travel),
		cmocka_unit_test(test_run_takes_parsed_query),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
