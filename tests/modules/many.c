/* A test module of 64 kinds (many.k00 .. many.k63) that all answer their own name: enough kinds
 * that /metrics must be sized from the registry (tests/regress/test_metrics_sized_from_registry.py).
 * Built by `make` for the tests, against include/ only. */
#include <stdio.h>
#include <string.h>

#include <lagless/module.h>

static int
name(const struct lagless_request *rq, struct lagless_output *out)
{
	const char *k = rq->kind_data;
	int n = snprintf((char *)out->data, out->cap, "%s\n", k);

	if (n < 0 || (size_t)n >= out->cap)
		return LAGLESS_TOO_LARGE;
	out->len = (size_t)n;
	return LAGLESS_OK;
}

#define K(n) LAGLESS_KIND("k" #n, name, .ctype = "text/plain", .data = "k" #n, \
	.where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP)
#define K8(d) K(d##0), K(d##1), K(d##2), K(d##3), K(d##4), K(d##5), K(d##6), K(d##7)

LAGLESS_MODULE("many", "1.0",
    K8(0), K8(1), K8(2), K8(3), K8(4), K8(5), K8(6), K8(7));
