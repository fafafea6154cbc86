/* A module of ABI 1.0, built against the frozen 1.0 header (tests/modules/abi1_0/, the
 * Makefile's abi10_% rule): a host of a newer minor must keep loading and running it unchanged.
 * It uses the 1.0 positional LAGLESS_MODULE_HOOKS, a query argument it parses itself (no
 * declaration: the host passes it through) and a route key its check hook reads. */
#include <stdio.h>
#include <string.h>

#include <lagless/module.h>

static int inited;

static int
init(const struct lagless_host *h, const struct lagless_conf *conf, void **state)
{
	(void)h;
	(void)conf;
	*state = &inited;
	return 0;
}

/* ?skip=N leaves N bytes as they are; route key prefix is put before the answer. */
static int
run(const struct lagless_request *rq, struct lagless_output *out)
{
	const struct lagless_host *h = rq->host;
	const char *pre = h->conf_get(rq->conf, "prefix");
	uint64_t skip;

	if (h->query_uint(rq, "skip", 0, 0, rq->input_len, &skip) == -1) {
		h->set_message(out, "abi10: skip must be an integer in 0..%zu\n", rq->input_len);
		return LAGLESS_BAD_INPUT;
	}
	if (rq->state != &inited || (pre && h->write(out, pre, strlen(pre)) == -1))
		return LAGLESS_ERROR;
	for (size_t i = 0; i < rq->input_len; i++) {
		unsigned char c = rq->input[i];

		if (i >= skip && c >= 'a' && c <= 'z')
			c = (unsigned char)(c - 'a' + 'A');
		if (h->write(out, &c, 1) == -1)
			return LAGLESS_TOO_LARGE;
	}
	return LAGLESS_OK;
}

static int
check(const struct lagless_host *h, const struct lagless_conf *conf, char *err, size_t errlen)
{
	const char *k, *v;

	for (size_t i = 0; h->conf_at(conf, i, &k, &v) == 0; i++)
		if (strcmp(k, "prefix") != 0) {
			snprintf(err, errlen, "unknown key %s (abi10 knows prefix)", k);
			return -1;
		}
	return 0;
}

LAGLESS_MODULE_HOOKS("abi10", "1.0.0", NULL, init, NULL,
    LAGLESS_KIND("upper", run, .ctype = "text/plain", .check = check,
        .flags = LAGLESS_KIND_CACHEABLE, .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP));
