/* A test module with a constructor and a descriptor of another ABI major: shows that dlopen
 * runs the constructor in the master before the ABI check refuses the module. The constructor
 * writes the file named by LAGLESS_TEST_CTOR_MARK (test-only; a real module's constructors may
 * only initialise static data). */
#include <stdio.h>
#include <stdlib.h>

#include <lagless/module.h>

__attribute__((constructor)) static void
mark(void)
{
	const char *p = getenv("LAGLESS_TEST_CTOR_MARK");
	FILE *f = p != NULL ? fopen(p, "w") : NULL;

	if (f != NULL)
		fclose(f);
}

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
	(uint32_t)sizeof(struct lagless_kind), 1, LAGLESS_SIGNATURE, "ctor_badabi", "1", kinds,
	NULL, NULL, NULL,
};
