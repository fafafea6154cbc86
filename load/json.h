/* lagless-load's report as one JSON object (RFC 8259) for machines: the run, each route with
 * its statuses and percentiles, the verdicts, per-second series of the run, and the server's
 * scrapes when the target is lagless (null otherwise). docs/LOAD.md lists the fields. */
#ifndef LL_LOAD_JSON_H
#define LL_LOAD_JSON_H

#include <stdio.h>

#include "load/report.h"

/* Writes the report r (judged) to f, through yajl's generator (load/jw.h). Returns 0, or -1
 * with a message in err (len bytes at most, NUL-terminated) when memory, the generator or
 * writing f failed. */
int ll_json_write(FILE *f, const struct ll_report *r, char *err, size_t len);

/* Per-second figures of one route from the run's samples, shared with the plot: for second
 * t in [0, nsec), count, 503s, errors, p50, p99 and max latency in ms. out holds nsec rows,
 * zeroed first. Returns 0, or -1 with errno ENOMEM. */
struct ll_second {
	unsigned count, n503, errors;
	double p50_ms, p99_ms, max_ms;
};
int ll_json_seconds(const struct ll_engine *e, unsigned route, unsigned nsec,
                    struct ll_second *out);

#endif
