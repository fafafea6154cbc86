/* A test module built for another ABI major: the host must refuse it, naming both versions. */
#include <lagless/module.h>

static int
run(const struct lagless_request *rq, struct lagless_output *out)
{
	(void)rq;
	(void)out;
	return LAGLESS_OK;
}

static const struct lagless_kind kinds[] = { LAGLESS_KIND("k", run) };

extern LAGLESS_EXPORT const struct lagless_module lagless_module;
LAGLESS_EXPORT const struct lagless_module lagless_module = {
	LAGLESS_MODULE_MAGIC, LAGLESS_ABI_MAJOR + 1, 0, (uint32_t)sizeof(struct lagless_module),
	(uint32_t)sizeof(struct lagless_kind), 1, LAGLESS_SIGNATURE, "badabi", "1", kinds,
	NULL, NULL, NULL,
};
