/* upper: the worked example of docs/MODULES.md. Two job kinds, "upper" and "lower", that change
 * the case of the ASCII letters of the request body and answer the result as text/plain.
 *
 *   cc -shared -fPIC $(pkg-config --cflags lagless) -o upper.so upper.c
 *
 * It shows every part a module usually needs: reading the input in place, writing into the
 * bounded output region, a declared query parameter, a declared route configuration key the
 * host parses before the server starts, one run function serving two kinds through .data,
 * and the status codes. */
#include <stddef.h>

#include <lagless/module.h>

/* The route's keys as the host parses them, once, at start-up and lagless -t (ABI 1.1): the
 * kind declares them below and gets this struct as rq->route. */
struct upper_route {
	uint64_t max_len;   /* bytes; 0 (absent): the output region's capacity */
};

static const struct lagless_param route_keys[] = {
	LAGLESS_PARAM("max_len", SIZE, .min = 1, .offset = offsetof(struct upper_route, max_len)),
};

/* ?skip=N: declared, so a malformed N is a 400 from the host before the job is even queued. */
static const struct lagless_param query_args[] = {
	LAGLESS_PARAM("skip", UINT, .def = "0"),
};

/* ?skip=N leaves the first N bytes as they are (at most the input length). */
static int
change_case(const struct lagless_request *rq, struct lagless_output *out)
{
	const struct lagless_host *h = rq->host;
	const struct upper_route *rt = rq->route;
	int to_upper = *(const int *)rq->kind_data;
	uint64_t skip;

	if (h->query_uint(rq, "skip", 0, 0, rq->input_len, &skip) == -1) {
		h->set_message(out, "skip must be an integer in 0..%zu\n", rq->input_len);
		return LAGLESS_BAD_INPUT;                       /* 400 with that message */
	}
	if (rq->input_len > out->cap || (rt->max_len && rq->input_len > rt->max_len))
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

static const int up = 1, down = 0;

/* The route keys and query arguments are data: the host refuses an unknown or malformed key
 * at lagless -t with the file, line and key, so no check hook is needed. */
LAGLESS_MODULE("upper", "1.1.0",
    LAGLESS_KIND("upper", change_case, .ctype = "text/plain", .data = &up,
        .flags = LAGLESS_KIND_CACHEABLE, .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP,
        LAGLESS_QUERY(query_args), LAGLESS_ROUTE(route_keys, struct upper_route)),
    LAGLESS_KIND("lower", change_case, .ctype = "text/plain", .data = &down,
        .flags = LAGLESS_KIND_CACHEABLE, .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP,
        LAGLESS_QUERY(query_args), LAGLESS_ROUTE(route_keys, struct upper_route)));
