/* Thin wrappers: each kind reads its query through the host table and its route keys from
 * the route struct the host parsed from its declarations (rq->route), calls its core
 * (kinds/heavy.c, codec.c, argon2.c: plain functions with their own unit tests) on the input
 * in place, and writes the answer straight into the output region. Nothing here knows the
 * host's internals. */
#include "kinds/builtin.h"

#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "kinds/argon2.h"
#include "kinds/codec.h"
#include "kinds/heavy.h"

#define ERR_MAX 160

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Maps a core's status (0, 400, 413, 500) and message to the kind's answer. */
static int
answer(const struct lagless_request *rq, struct lagless_output *out, int st, const char *err)
{
	if (st == 0)
		return LAGLESS_OK;
	rq->host->set_message(out, "%s\n", err);
	if (st == 413)
		return LAGLESS_TOO_LARGE;
	return st == 400 ? LAGLESS_BAD_INPUT : LAGLESS_ERROR;
}

/* ---- heavy ---- */

/* The job's queue wait; 0 when it ran inline on a loop worker (it was never queued). */
static uint64_t
queue_ns(const struct lagless_request *rq)
{
	return rq->enqueue_ns == 0 || rq->start_ns < rq->enqueue_ns ? 0 :
	    rq->start_ns - rq->enqueue_ns;
}

static int
heavy_run(const struct lagless_request *rq, struct lagless_output *out)
{
	uint64_t n, x, t0;

	if (rq->host->query_uint(rq, "iterations", LG_HEAVY_DEFAULT_N, 0, LG_HEAVY_MAX_N,
	    &n) == -1) {
		rq->host->set_message(out, "iterations must be an integer in 0..%llu\n",
		    (unsigned long long)LG_HEAVY_MAX_N);
		return LAGLESS_BAD_INPUT;
	}
	t0 = now_ns();
	x = lg_heavy_loop(n);
	out->len = lg_heavy_json((char *)out->data, out->cap, n, x, queue_ns(rq), now_ns() - t0);
	return out->len ? LAGLESS_OK : LAGLESS_TOO_LARGE;
}

/* ---- compress, decompress ---- */

/* ?codec= (zstd when absent) and, for compress, ?level= within that codec's range. */
static int
codec_args(const struct lagless_request *rq, struct lagless_output *out, enum lg_codec *c,
    uint64_t *level)
{
	size_t len;
	const char *v = rq->host->query(rq, "codec", &len);

	*c = LG_CODEC_ZSTD;
	if (v != NULL && lg_codec_parse(v, len, c) == -1) {
		rq->host->set_message(out, "codec must be zstd or gzip\n");
		return -1;
	}
	if (level != NULL && rq->host->query_uint(rq, "level",
	    (uint64_t)lg_codec_level_default(*c), (uint64_t)lg_codec_level_min(*c),
	    (uint64_t)lg_codec_level_max(*c), level) == -1) {
		rq->host->set_message(out, "%s level must be an integer in %d..%d\n",
		    lg_codec_name(*c), lg_codec_level_min(*c), lg_codec_level_max(*c));
		return -1;
	}
	return 0;
}

static int
compress_run(const struct lagless_request *rq, struct lagless_output *out)
{
	enum lg_codec c;
	uint64_t level, n = 0;
	char err[ERR_MAX];
	int st;

	if (codec_args(rq, out, &c, &level) == -1)
		return LAGLESS_BAD_INPUT;
	st = lg_codec_compress(c, (int)level, rq->input, rq->input_len, out->data, out->cap, &n,
	    err, sizeof(err));
	out->len = (size_t)n;
	rq->host->set_ctype(out, lg_codec_ctype(c));
	return answer(rq, out, st, err);
}

/* Either codec's bound: the codec is a query parameter, which the host has not parsed yet. */
static uint64_t
compress_size(uint64_t input_len, const struct lagless_conf *conf)
{
	uint64_t z = lg_codec_compress_bound(LG_CODEC_ZSTD, input_len);
	uint64_t g = lg_codec_compress_bound(LG_CODEC_GZIP, input_len);

	return z > g ? z : g;
}

static int
decompress_run(const struct lagless_request *rq, struct lagless_output *out)
{
	const struct lg_decompress_route *rt = rq->route;
	enum lg_codec c;
	uint64_t limit, n = 0;
	char err[ERR_MAX];
	int st;

	if (codec_args(rq, out, &c, NULL) == -1)
		return LAGLESS_BAD_INPUT;
	/* The route's bound (parsed at start-up), never more than the output region. */
	limit = rt != NULL && rt->max_output != 0 ? rt->max_output : out->cap;
	if (limit > out->cap)
		limit = out->cap;
	st = lg_codec_decompress(c, rq->input, rq->input_len, out->data, limit, &n, err,
	    sizeof(err));
	out->len = (size_t)n;
	return answer(rq, out, st, err);
}

static uint64_t
decompress_size(uint64_t input_len, const struct lagless_conf *conf)
{
	return 0; /* up to the route's max_output or the whole region: no bound of its own */
}

/* ---- hash, verify ---- */

/* The argon2 parameters of a route struct; those of the defaults below when there is none (a
 * caller that did not go through the registry). */
static struct lg_argon2_params
argon2_params(const struct lg_argon2_route *rt, const struct lg_argon2_route *def)
{
	if (rt == NULL)
		rt = def;
	return (struct lg_argon2_params){ (uint32_t)rt->m_kib, (uint32_t)rt->t,
	    (uint32_t)rt->p };
}

/* The declared defaults of hash (OWASP, kinds/argon2.h) and verify: what /verify accepts in
 * a stored hash unless the route says otherwise, generous enough for hashes made elsewhere
 * with stronger settings, bounded so a crafted one cannot ask for more than 256 MiB. */
static const struct lg_argon2_route hash_default = { LG_ARGON2_DEFAULT_M_KIB,
    LG_ARGON2_DEFAULT_T, LG_ARGON2_DEFAULT_P };
static const struct lg_argon2_route verify_default = { 262144, 16, 8 };

static int
hash_run(const struct lagless_request *rq, struct lagless_output *out)
{
	struct lg_argon2_params p = argon2_params(rq->route, &hash_default);
	unsigned char salt[LG_ARGON2_SALT_LEN];
	char err[ERR_MAX];
	size_t n = 0;
	int st;

	if (lg_argon2_salt(salt, sizeof(salt)) == -1)
		return answer(rq, out, 500, "getrandom failed");
	st = lg_argon2_hash(&p, rq->input, rq->input_len, salt, sizeof(salt), (char *)out->data,
	    out->cap, &n, err, sizeof(err));
	out->len = n;
	return answer(rq, out, st, err);
}

static int
verify_run(const struct lagless_request *rq, struct lagless_output *out)
{
	static const char yes[] = "{\"match\":true}\n", no[] = "{\"match\":false}\n";
	struct lg_argon2_params max = argon2_params(rq->route, &verify_default);
	char err[ERR_MAX];
	int st, match = 0;

	st = lg_argon2_verify(&max, rq->input, rq->input_len, &match, err, sizeof(err));
	if (st != 0)
		return answer(rq, out, st, err);
	if (rq->host->write(out, match ? yes : no, match ? sizeof(yes) - 1 : sizeof(no) - 1) == -1)
		return LAGLESS_TOO_LARGE;
	return LAGLESS_OK;
}

int
lg_builtin_route_check(const struct lagless_kind *k, const void *route, const char **key,
    char *err, size_t cap)
{
	const struct lg_argon2_route *rt = route;

	if (k->run != hash_run || rt == NULL || rt->m_kib >= 8 * rt->p)
		return 0;
	*key = "memory_kib";
	snprintf(err, cap, "memory_kib: %llu is under 8 KiB a lane of lanes = %llu (expected at "
	    "least %llu)", (unsigned long long)rt->m_kib, (unsigned long long)rt->p,
	    (unsigned long long)(8 * rt->p));
	return -1;
}

/* The query arguments each run reads, declared (ABI 1.1): the loop refuses a bad one with 400
 * before the job is queued; run still reads them itself (and checks what depends on more
 * than one, like a level in the chosen codec's range). */
static const char *const codecs[] = { "zstd", "gzip", NULL };
static const struct lagless_param heavy_query[] = {
	LAGLESS_PARAM("iterations", UINT, .max = LG_HEAVY_MAX_N, .def = "60000000"),
};
static const struct lagless_param compress_query[] = {
	LAGLESS_PARAM("codec", ENUM, .choices = codecs, .def = "zstd"),
	LAGLESS_PARAM("level", UINT, .min = 1, .max = 19),
};
static const struct lagless_param decompress_query[] = {
	LAGLESS_PARAM("codec", ENUM, .choices = codecs, .def = "zstd"),
};
_Static_assert(LG_HEAVY_DEFAULT_N == 60000000ull, "heavy's declared default");

/* The route keys each kind takes, declared (ABI 1.1): the host parses them once per route
 * into the kind's route struct and refuses a bad value or any other key at lagless -t with
 * the file, line and key. heavy and compress take none (their arguments are the query's):
 * a route struct without keys makes every key of their sections such an error. */
#define ARGON2_KEY(name, field, lo, hi, d) \
	LAGLESS_PARAM(name, UINT, .min = (lo), .max = (hi), .def = (d), \
	    .offset = offsetof(struct lg_argon2_route, field))
static const struct lagless_param decompress_keys[] = {
	LAGLESS_PARAM("max_output", SIZE, .min = 1,
	    .offset = offsetof(struct lg_decompress_route, max_output)),
};
static const struct lagless_param hash_keys[] = {
	ARGON2_KEY("memory_kib", m_kib, 8, LG_ARGON2_MAX_M_KIB, "19456"),
	ARGON2_KEY("iterations", t, 1, LG_ARGON2_MAX_T, "2"),
	ARGON2_KEY("lanes", p, 1, LG_ARGON2_MAX_P, "1"),
};
static const struct lagless_param verify_keys[] = {
	ARGON2_KEY("max_memory_kib", m_kib, 8, LG_ARGON2_MAX_M_KIB, "262144"),
	ARGON2_KEY("max_iterations", t, 1, LG_ARGON2_MAX_T, "16"),
	ARGON2_KEY("max_lanes", p, 1, LG_ARGON2_MAX_P, "8"),
};
_Static_assert(LG_ARGON2_DEFAULT_M_KIB == 19456u && LG_ARGON2_DEFAULT_T == 2u &&
    LG_ARGON2_DEFAULT_P == 1u, "hash's declared defaults");

#define QUERY(arr) .param_size = sizeof(struct lagless_param), LAGLESS_QUERY(arr)
#define ROUTE(arr, type) .param_size = sizeof(struct lagless_param), LAGLESS_ROUTE(arr, type)
#define NO_KEYS .route_size = sizeof(int)

static const struct lagless_kind kinds[] = {
	{ .name = "heavy", .run = heavy_run, .ctype = "application/json",
	  .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP, .flags = LAGLESS_KIND_CACHEABLE,
	  .max_output = LG_HEAVY_JSON_MAX, NO_KEYS, QUERY(heavy_query) },
	{ .name = "compress", .run = compress_run, .ctype = "application/zstd",
	  .flags = LAGLESS_KIND_CACHEABLE, .output_size = compress_size, NO_KEYS,
	  QUERY(compress_query) },
	{ .name = "decompress", .run = decompress_run, .ctype = "application/octet-stream",
	  .flags = LAGLESS_KIND_CACHEABLE, .output_size = decompress_size,
	  QUERY(decompress_query), LAGLESS_ROUTE(decompress_keys, struct lg_decompress_route) },
	{ .name = "hash", .run = hash_run, .ctype = "text/plain",
	  .max_output = LG_ARGON2_PHC_MAX, ROUTE(hash_keys, struct lg_argon2_route) },
	{ .name = "verify", .run = verify_run, .ctype = "application/json",
	  .max_output = 32, ROUTE(verify_keys, struct lg_argon2_route) },
};

/* What the runs above that declare no query arguments read (none). */
const struct lg_kind_query lg_builtin_query[] = {
	{ "hash", "" }, { "verify", "" }, { NULL, NULL },
};

const struct lagless_module lg_builtin_module = {
	.magic = LAGLESS_MODULE_MAGIC, .abi_major = LAGLESS_ABI_MAJOR,
	.abi_minor = LAGLESS_ABI_MINOR, .size = sizeof(struct lagless_module),
	.kind_size = sizeof(struct lagless_kind), .nkinds = sizeof(kinds) / sizeof(kinds[0]),
	.signature = LAGLESS_SIGNATURE, .name = "lagless", .version = "built-in",
	.kinds = kinds,
};

const char lg_builtin_example[] =
    "\n; Routes. Without [route] sections lagless serves its default routes: /ping, /health,\n"
    "; /ready, /metrics and /status on the loop workers, and the built-in kinds below in the\n"
    "; compute pool (demo_routes = no leaves those out). A [route /path] section adds or\n"
    "; replaces one; its server keys are methods, kind (a job kind) or handler (one of the\n"
    "; loop's own answers: ping, health, ready, metrics, status, e.g. [route /healthz] with\n"
    "; handler = health), where, deadline_ms, max_body, fields, content_type, pool and off\n"
    "; (= yes removes the route), the coalescing keys below, and every other key goes to the\n"
    "; kind.\n"
    ";\n"
    "; Single-flight and result cache of a route that runs a kind (docs/CACHE.md; the same\n"
    "; settings as a coalesce rule above), shown in [route /heavy] below. Any of these keys\n"
    "; gives the route a rule; the others keep these defaults. Only a kind that declares its\n"
    "; answers cacheable may have one (heavy, compress, decompress; not hash or verify).\n"
    ";\n"
    "; The built-in kinds' keys and defaults:\n"
    ";\n"
    ";[route /heavy]\n;methods = GET\n;kind = heavy\n"
    "; concurrent requests for one key share one job\n;coalesce = on\n"
    "; keep a successful answer this long (0: coalescing only)\n;ttl_ms = 0\n"
    "; after the TTL, answer the old value while one background job refreshes it\n;stale_ms = 0\n"
    "; keep a kind's own error (4xx, 500) this long; 502, 503, 504 are never kept\n"
    ";negative_ttl_ms = 0\n"
    "; query parameters and request headers in the key besides those the kind reads (heavy:\n"
    "; iterations; compress: codec, level; decompress: codec; a module's kind: those it\n"
    "; declares) and the route's fields; a module kind that declares none (module ABI 1.0)\n"
    "; must list its own here (default none; for example:)\n"
    ";key_query = iterations\n;key_headers = accept\n"
    "; Authorization, Proxy-Authorization or Cookie: never shared (bypass), or shared with\n"
    "; the same values (key)\n"
    ";credentials = bypass\n"
    "; largest request body hashed into the key (with its Content-Type); longer runs alone\n"
    ";key_body_max = 1M\n"
    "; percent of the cache's entries one path's answers may hold (0: no bound; an upstream\n"
    "; route's default is 25); past it, a new key's answer is served, not stored\n"
    ";path_share = 0\n"
    ";\n"
    ";[route /compress]\n;methods = POST\n;kind = compress\n"
    ";\n"
    ";[route /decompress]\n;methods = POST\n;kind = decompress\n"
    "; largest decompressed answer (K, M, G suffixes); past it 413, and decoding stops there;\n"
    "; default: the whole output region (max_output)\n"
    ";max_output = 16M\n"
    ";\n"
    ";[route /hash]\n;methods = POST\n;kind = hash\n"
    "; argon2id cost: memory per hash in KiB, passes, lanes (threads); the defaults are the\n"
    "; minimum of the OWASP Password Storage Cheat Sheet\n"
    ";memory_kib = 19456\n;iterations = 2\n;lanes = 1\n"
    ";\n"
    ";[route /verify]\n;methods = POST\n;kind = verify\n"
    "; a stored hash asking for more than these is refused (400) before any memory is taken\n"
    ";max_memory_kib = 262144\n;max_iterations = 16\n;max_lanes = 8\n";
