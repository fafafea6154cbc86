/* Unit tests for kinds/builtin.c: the built-in kinds through their descriptors, exactly as the
 * host calls them, with a small host table of this test's own (the contract of
 * include/lagless/module.h, not the server's implementation): query and configuration lookups,
 * and an output that records the content type, the message and the bytes written. The cores'
 * own behaviour is tested in test_argon2, test_codec and test_heavy; here, that each wrapper
 * reads its arguments, reaches its core and maps the answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include <cmocka.h>

#include "common/query.h"

#include "kinds/builtin.h"

struct lagless_conf {
	size_t n;
	const char *key[8], *value[8];
};

static char last_ctype[128], last_message[256];

static void
t_log(int level, const char *fmt, ...)
{
}

static int
t_write(struct lagless_output *out, const void *p, size_t n)
{
	if (n > out->cap - out->len)
		return -1;
	memcpy(out->data + out->len, p, n);
	out->len += n;
	return 0;
}

static int
t_status(struct lagless_output *out, int code)
{
	return 0;
}

static int
t_ctype(struct lagless_output *out, const char *ctype)
{
	snprintf(last_ctype, sizeof(last_ctype), "%s", ctype);
	return 0;
}

static int
t_message(struct lagless_output *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_message, sizeof(last_message), fmt, ap);
	va_end(ap);
	return 0;
}

static const char *
t_query(const struct lagless_request *rq, const char *name, size_t *len)
{
	return lg_query_param(rq->query, rq->query_len, name, len);
}

static int
parse_uint(const char *v, size_t len, uint64_t min, uint64_t max, uint64_t *out)
{
	char buf[32], *end;
	unsigned long long x;

	if (len == 0 || len >= sizeof(buf) || v[0] < '0' || v[0] > '9')
		return -1;
	memcpy(buf, v, len);
	buf[len] = '\0';
	x = strtoull(buf, &end, 10);
	if (*end == 'K')
		x <<= 10, end++;
	else if (*end == 'M')
		x <<= 20, end++;
	if (*end != '\0' || x < min || x > max)
		return -1;
	*out = x;
	return 0;
}

static int
t_query_uint(const struct lagless_request *rq, const char *name, uint64_t def, uint64_t min,
    uint64_t max, uint64_t *out)
{
	size_t len;
	const char *v = t_query(rq, name, &len);

	if (v == NULL) {
		*out = def;
		return 0;
	}
	return parse_uint(v, len, min, max, out);
}

static const char *
t_conf_get(const struct lagless_conf *c, const char *key)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->key[i], key) == 0)
			return c->value[i];
	return NULL;
}

static int
t_conf_at(const struct lagless_conf *c, size_t i, const char **key, const char **value)
{
	if (i >= c->n)
		return -1;
	*key = c->key[i];
	*value = c->value[i];
	return 0;
}

static int
t_conf_uint(const struct lagless_conf *c, const char *key, uint64_t def, uint64_t min,
    uint64_t max, uint64_t *out)
{
	const char *v = t_conf_get(c, key);

	if (v == NULL) {
		*out = def;
		return 0;
	}
	return parse_uint(v, strlen(v), min, max, out);
}

static const struct lagless_host host = {
	.size = sizeof(host), .abi_major = LAGLESS_ABI_MAJOR, .abi_minor = LAGLESS_ABI_MINOR,
	.log = t_log, .write = t_write, .set_status = t_status, .set_ctype = t_ctype,
	.set_message = t_message, .query = t_query, .query_uint = t_query_uint,
	.conf_get = t_conf_get, .conf_at = t_conf_at, .conf_uint = t_conf_uint,
};

static const struct lagless_kind *
kind(const char *name)
{
	const struct lagless_module *m = &lg_builtin_module;

	for (uint32_t i = 0; i < m->nkinds; i++)
		if (strcmp(m->kinds[i].name, name) == 0)
			return &m->kinds[i];
	fail_msg("no built-in kind %s", name);
	return NULL;
}

static struct lagless_output out;
static unsigned char region[1 << 20];

/* Runs kind name on input with query q and route struct rt (what the host parsed from the
 * route's declared keys; NULL: as if there were none) into a fresh 1 MiB output. */
static int
run(const char *name, const char *q, const void *in, size_t in_len, const void *rt)
{
	static const struct lagless_conf none;
	const struct lagless_kind *k = kind(name);
	struct lagless_request rq = {
		.size = sizeof(rq), .host = &host, .method = "POST", .method_len = 4,
		.path = "/x", .path_len = 2, .query = q, .query_len = strlen(q),
		.input = in, .input_len = in_len, .conf = &none, .kind_data = k->data,
		.enqueue_ns = 1000000, .start_ns = 3500000, .route = rt,
	};

	last_ctype[0] = last_message[0] = '\0';
	out = (struct lagless_output){ .size = sizeof(out), .data = region, .cap = sizeof(region) };
	return k->run(&rq, &out);
}

static void
test_descriptor(void **state)
{
	const struct lagless_module *m = &lg_builtin_module;
	static const char *const names[] = { "heavy", "compress", "decompress", "hash", "verify" };

	assert_int_equal(m->magic, LAGLESS_MODULE_MAGIC);
	assert_int_equal(m->abi_major, LAGLESS_ABI_MAJOR);
	assert_int_equal(m->size, sizeof(struct lagless_module));
	assert_int_equal(m->kind_size, sizeof(struct lagless_kind));
	assert_string_equal(m->signature, LAGLESS_SIGNATURE);
	assert_string_equal(m->name, "lagless");
	assert_int_equal(m->nkinds, 5);
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(m->kinds[i].name, names[i]);
		assert_non_null(m->kinds[i].run);
		/* route keys are declarations (test_params), no check hook parses them */
		assert_null(m->kinds[i].check);
		assert_true(m->kinds[i].route_size > 0);
		assert_int_equal(m->kinds[i].nroute_params, i < 2 ? 0 : i == 2 ? 1 : 3);
	}
}

static void
test_heavy(void **state)
{
	assert_int_equal(run("heavy", "iterations=1000000", NULL, 0, NULL), LAGLESS_OK);
	assert_true(out.len > 0 && out.data[out.len - 1] == '\n');
	/* queue_ms is the request's start_ns - enqueue_ns: 2.5 ms. */
	assert_non_null(strstr((char *)out.data,
	    "{\"iterations\":1000000,\"result\":42,\"queue_ms\":2.500,\"run_ms\":"));
	assert_int_equal(run("heavy", "iterations=x", NULL, 0, NULL), LAGLESS_BAD_INPUT);
	assert_non_null(strstr(last_message, "iterations"));
	assert_int_equal(run("heavy", "iterations=1000000000001", NULL, 0, NULL),
	    LAGLESS_BAD_INPUT);
}

static void
test_compress(void **state)
{
	static const char text[] = "compress me compress me compress me compress me";
	unsigned char back[256];
	uLongf n = sizeof(back);
	z_stream z = { 0 };

	assert_int_equal(run("compress", "", text, sizeof(text), NULL), LAGLESS_OK);
	assert_string_equal(last_ctype, "application/zstd");
	assert_int_equal(ZSTD_decompress(back, sizeof(back), out.data, out.len), sizeof(text));
	assert_memory_equal(back, text, sizeof(text));

	assert_int_equal(run("compress", "level=9&codec=gzip", text, sizeof(text), NULL),
	    LAGLESS_OK);
	assert_string_equal(last_ctype, "application/gzip");
	assert_int_equal(inflateInit2(&z, 31), Z_OK);
	z.next_in = out.data;
	z.avail_in = (uInt)out.len;
	z.next_out = back;
	z.avail_out = (uInt)n;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	assert_int_equal(z.total_out, sizeof(text));
	inflateEnd(&z);
	assert_memory_equal(back, text, sizeof(text));

	assert_int_equal(run("compress", "codec=brotli", text, 4, NULL), LAGLESS_BAD_INPUT);
	assert_non_null(strstr(last_message, "zstd or gzip"));
	assert_int_equal(run("compress", "codec=gzip&level=10", text, 4, NULL), LAGLESS_BAD_INPUT);
	assert_non_null(strstr(last_message, "1..9"));
	assert_int_equal(run("compress", "level=19", text, 4, NULL), LAGLESS_OK);
	assert_true(kind("compress")->output_size(1 << 20, NULL) >= ZSTD_compressBound(1 << 20));
	assert_true(kind("compress")->output_size(0, NULL) >= compressBound(0) + 12);
}

static void
test_decompress(void **state)
{
	static unsigned char zeros[300000], packed[4096];
	size_t zn = ZSTD_compress(packed, sizeof(packed), zeros, sizeof(zeros), 3);
	struct lg_decompress_route small = { 200000 };

	assert_false(ZSTD_isError(zn));
	assert_int_equal(run("decompress", "", packed, zn, NULL), LAGLESS_OK);
	assert_int_equal(out.len, sizeof(zeros));
	assert_int_equal(run("decompress", "codec=zstd", packed, zn, &small), LAGLESS_TOO_LARGE);
	assert_non_null(strstr(last_message, "exceeds 200000"));
	assert_int_equal(run("decompress", "codec=gzip", packed, zn, NULL), LAGLESS_BAD_INPUT);
	/* No route bound: the output region is the limit. */
	assert_int_equal(kind("decompress")->output_size(123, NULL), 0);
}

static void
test_hash_and_verify(void **state)
{
	struct lg_argon2_route light = { 64, 1, 2 }, strict = { 32, 16, 8 };
	char body[256];
	size_t n;

	assert_int_equal(run("hash", "", "secret", 6, &light), LAGLESS_OK);
	assert_memory_equal(out.data, "$argon2id$v=19$m=64,t=1,p=2$", 28);
	assert_int_equal(out.data[out.len - 1], '\n');
	memcpy(body, out.data, out.len);
	memcpy(body + out.len, "secret", 6);
	n = out.len + 6;
	assert_int_equal(run("verify", "", body, n, NULL), LAGLESS_OK);
	assert_memory_equal(out.data, "{\"match\":true}\n", out.len);
	assert_int_equal(run("verify", "", body, n - 1, NULL), LAGLESS_OK);
	assert_memory_equal(out.data, "{\"match\":false}\n", out.len);
	assert_int_equal(run("verify", "", body, n, &strict), LAGLESS_BAD_INPUT);
	assert_non_null(strstr(last_message, "limits"));

	assert_int_equal(run("hash", "", "pw", 2, NULL), LAGLESS_OK);
	assert_memory_equal(out.data, "$argon2id$v=19$m=19456,t=2,p=1$", 31);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_descriptor),
		cmocka_unit_test(test_heavy),
		cmocka_unit_test(test_compress),
		cmocka_unit_test(test_decompress),
		cmocka_unit_test(test_hash_and_verify),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
