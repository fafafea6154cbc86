/* Request schedules of an open-loop generator: when each request of a route is due, whatever
 * the server does. Constant rate (request n at start + n / rate) or Poisson arrivals
 * (exponential gaps of mean 1 / rate, from a seeded generator so a run can be repeated).
 *
 * Latency is measured from these scheduled times, not from when a request could be sent, so a
 * server that stalls is charged for every request due during the stall (Gil Tene, "How NOT to
 * measure latency": coordinated omission). */
#ifndef LL_LOAD_SCHED_H
#define LL_LOAD_SCHED_H

#include <stdint.h>

enum ll_arrival {
	LL_ARRIVAL_CONSTANT = 0,
	LL_ARRIVAL_POISSON = 1,
};

/* A rate as written on the command line: "500", "500/s", "500/1s", "30/m", "100/500ms"
 * (requests per period as vegeta writes them, > 0 and at most 10^7 per second) or "2x" (a
 * multiple, > 0 and at most 1000, of the route's measured capacity). */
struct ll_rate {
	double value;
	int relative;   /* 1: value multiplies the capacity */
};

struct ll_sched {
	enum ll_arrival arrival;
	double rate;          /* requests per second, > 0 */
	uint64_t start_ns;    /* CLOCK_MONOTONIC */
	uint64_t n;           /* requests handed out so far */
	uint64_t next_ns;     /* when request n is due */
	uint64_t rng;         /* splitmix64 state */
	double acc_s;         /* Poisson: seconds from start to next_ns, kept in double */
};

/* Parses s into r. Returns 0, or -1 with errno EINVAL (empty, not a number, trailing text,
 * zero, negative, or out of the ranges above). */
int ll_sched_parse_rate(const char *s, struct ll_rate *r);

/* Parses "constant" or "poisson". Returns 0, or -1 with errno EINVAL. */
int ll_sched_parse_arrival(const char *s, enum ll_arrival *a);

/* Starts a schedule of rate requests per second (> 0) from start_ns. The first request is due
 * at start_ns (constant) or one exponential gap after it (Poisson). seed picks the Poisson
 * sequence (the same seed, the same times). */
void ll_sched_init(struct ll_sched *s, enum ll_arrival arrival, double rate, uint64_t start_ns,
                   uint64_t seed);

/* When the next request is due (ns, CLOCK_MONOTONIC), without taking it; UINT64_MAX when it
 * is too far away to be represented (a rate so low the request is never due). */
uint64_t ll_sched_peek(const struct ll_sched *s);

/* Takes the next request: returns its due time and moves on to the one after. Constant times
 * are computed from n, so they never drift however many are taken. */
uint64_t ll_sched_take(struct ll_sched *s);

/* A uniform double in (0, 1] from the splitmix64 state *x (Steele, Lea, Flood 2014). */
double ll_sched_uniform(uint64_t *x);

#endif
