/* upper: the worked example of docs/MODULES.md. Two job kinds, "upper" and "lower", that change
 * the case of the ASCII letters of the request body and answer the result as text/plain.
 *
 *   cc -shared -fPIC $(pkg-config --cflags lagless) -o upper.so upper.c
 *
 * It shows every part a module usually needs: reading the input in place, writing into the
 * bounded output region, a query parameter, a route configuration key checked before the
 * server starts, one run function serving two kinds through .data, and the status codes. */
#include <stdio.h>
#include <string.h>

#include <lagless/module.h>

/* ?skip=N leaves the first N bytes as they are (at most the input length). */
static int
change_case(const struct lagless_request *rq, struct lagless_output *out)
{
	const struct lagless_host *h = rq->host;
	int to_upper = *(const int *)rq->kind_data;
	uint64_t skip, max_len;

	if (h->query_uint(rq, "skip", 0, 0, rq->input_len, &skip) == -1) {
		h->set_message(out, "skip must be an integer in 0..%zu\n", rq->input_len);
		return LAGLESS_BAD_INPUT;                       /* 400 with that message */
	}
	/* The route's own limit (checked at lagless -t by upper_check below). */
	h->conf_uint(rq->conf, "max_len", out->cap, 1, UINT64_MAX, &max_len);
	if (rq->input_len > out->cap || rq->input_len > max_len)
		return LAGLESS_TOO_LARGE;                       /* 413 */
	for (size_t i = 0; i < rq->input_len; i++) {
		unsigned char c = rq->input[i];                 /* read in place: no copy */

		if (i >= skip && to_upper && c >= 'a' && c <= 'z')
			c = (unsigned char)(c - 'a' + 'A');
		else if (i >= skip && !to_upper && c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		out->data[i] = c;                               /* straight into shared memory */
	}
	out->len = rq->input_len;
	return LAGLESS_OK;                                      /* 200, the kind's ctype */
}

/* Master side, before fork: refuse what the kind would not understand, so a typo fails
 * `lagless -t` with the file and line instead of surprising the first request. */
static int
upper_check(const struct lagless_host *h, const struct lagless_conf *conf, char *err,
    size_t errlen)
{
	const char *key, *value;
	uint64_t v;

	for (size_t i = 0; h->conf_at(conf, i, &key, &value) == 0; i++)
		if (strcmp(key, "max_len") != 0) {
			snprintf(err, errlen, "unknown key %s (upper knows max_len)", key);
			return -1;
		}
	if (h->conf_uint(conf, "max_len", 1, 1, UINT64_MAX, &v) == -1) {
		snprintf(err, errlen, "max_len must be a byte count (K, M, G suffixes)");
		return -1;
	}
	return 0;
}

static const int up = 1, down = 0;

LAGLESS_MODULE("upper", "1.0.0",
    LAGLESS_KIND("upper", change_case, .ctype = "text/plain", .check = upper_check,
        .data = &up, .flags = LAGLESS_KIND_CACHEABLE,
        .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP),
    LAGLESS_KIND("lower", change_case, .ctype = "text/plain", .check = upper_check,
        .data = &down, .flags = LAGLESS_KIND_CACHEABLE,
        .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP));
