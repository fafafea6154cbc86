#include "worker/core/keptfields.h"

#include <string.h>

#include "kinds/registry.h"

static const char *const own[] = {
	"x-forwarded-for", "x-request-id", "user-agent", "authorization", "proxy-authorization",
	"cookie", "content-type", "content-encoding",
};

int
lg_keptfields_build(struct lg_http_keep *k, const struct lg_registry *reg)
{
	memset(k, 0, sizeof(*k));
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (lg_http_keep_add(k, own[i]) == -1)
			return -1;
	for (uint32_t r = 0; reg != NULL && r < reg->nroutes; r++) {
		const struct lg_route_def *d = &reg->routes[r];

		for (unsigned i = 0; i < d->nfields; i++)
			if (lg_http_keep_add(k, d->fields[i]) == -1)
				return -1;
		for (unsigned i = 0; d->has_coal && i < d->coal.nheaders; i++)
			if (lg_http_keep_add(k, d->coal.headers[i]) == -1)
				return -1;
	}
	return 0;
}
