/* The ABI's smallest module: one kind that upper-cases its input. Built by the tests with
 * -std=c99 -pedantic against the installed header (pkg-config), so the header stays C99. */
#include <ctype.h>

#include <lagless/module.h>

static int
upper(const struct lagless_request *rq, struct lagless_output *out)
{
	if (rq->input_len > out->cap)
		return LAGLESS_TOO_LARGE;
	for (size_t i = 0; i < rq->input_len; i++)
		out->data[i] = (unsigned char)toupper(rq->input[i]);
	out->len = rq->input_len;
	return LAGLESS_OK;
}

LAGLESS_MODULE("upper", "1.0.0", LAGLESS_KIND("upper", upper, .ctype = "text/plain",
    .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP));
