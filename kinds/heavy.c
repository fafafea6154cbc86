#include "kinds/heavy.h"

#include <inttypes.h>
#include <stdio.h>

uint64_t
lg_heavy_loop(uint64_t n)
{
	uint64_t x = 0;

	for (uint64_t i = 0; i < n; i++)
		x = (x + i * 7) % 1000003;
	return x;
}

size_t
lg_heavy_json(char *out, size_t cap, uint64_t n, uint64_t x, uint64_t queue_ns,
    uint64_t run_ns)
{
	int len = snprintf(out, cap, "{\"iterations\":%" PRIu64 ",\"result\":%" PRIu64
	    ",\"queue_ms\":%.3f,\"run_ms\":%.3f}\n", n, x, (double)queue_ns / 1e6,
	    (double)run_ns / 1e6);

	return len < 0 || (size_t)len >= cap ? 0 : (size_t)len;
}
