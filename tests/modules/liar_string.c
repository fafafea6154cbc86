/* A test module whose descriptor is in its image but one string pointer (the kind's declared
 * parameter default) is not: the host must refuse it, naming the file, before any string of
 * it is read. */
#include <lagless/module.h>

static int
run(const struct lagless_request *rq, struct lagless_output *out)
{
	(void)rq;
	(void)out;
	return LAGLESS_OK;
}

static const struct lagless_param query[] = {
	LAGLESS_PARAM("n", UINT, .def = (const char *)(uintptr_t)4096),
};

LAGLESS_MODULE("liar_string", "1", LAGLESS_KIND("k", run, LAGLESS_QUERY(query)));
