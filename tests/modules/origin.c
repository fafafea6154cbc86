/* A test module: an origin that can go down, for the stale-if-error tests
 * (tests/regress/test_stale_if_error.py). Kind "fetch" answers the time it ran, or, while the
 * file named by the route key down_file exists, fails as the kind (500, "origin down"), fast:
 * the request is the same, only the origin's state changed. Built by `make` for the tests. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, access under -std=c99 */

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lagless/module.h>

static int
fetch(const struct lagless_request *rq, struct lagless_output *out)
{
	const char *down = rq->host->conf_get(rq->conf, "down_file");
	struct timespec ts;
	char buf[64];
	int n;

	if (down != NULL && access(down, F_OK) == 0) {
		rq->host->set_message(out, "origin down");
		return LAGLESS_ERROR;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	n = snprintf(buf, sizeof(buf), "fetched at %lld.%09ld\n", (long long)ts.tv_sec,
	    ts.tv_nsec);
	return rq->host->write(out, buf, (size_t)n) == 0 ? LAGLESS_OK : LAGLESS_TOO_LARGE;
}

LAGLESS_MODULE("origin", "1.0",
    LAGLESS_KIND("fetch", fetch, .ctype = "text/plain", .flags = LAGLESS_KIND_CACHEABLE));
