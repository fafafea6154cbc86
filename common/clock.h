/* Monotonic time in nanoseconds. CLOCK_MONOTONIC is system-wide, so values taken in different
 * processes compare directly (clock_gettime(2)). */
#ifndef LG_COMMON_CLOCK_H
#define LG_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t
lg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define LG_NS_PER_MS 1000000ull

#endif
