/* A test module with two kinds of one name: refused at load. */
#include <lagless/module.h>

static int
run(const struct lagless_request *rq, struct lagless_output *out)
{
	(void)rq;
	(void)out;
	return LAGLESS_OK;
}

LAGLESS_MODULE("clash", "1", LAGLESS_KIND("twice", run), LAGLESS_KIND("twice", run));
