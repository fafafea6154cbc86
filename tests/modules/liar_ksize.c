/* A test module whose descriptor lies (nkinds 1, kind_size (uint32_t)1 << 30 over a one-kind array): the
 * host must refuse it, naming the file, without reading past the module's image. */
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
	LAGLESS_MODULE_MAGIC, LAGLESS_ABI_MAJOR, LAGLESS_ABI_MINOR,
	(uint32_t)sizeof(struct lagless_module), (uint32_t)1 << 30, 1, LAGLESS_SIGNATURE, "liar_ksize", "1",
	kinds, NULL, NULL, NULL,
};
