/* The router's ops for a route that may coalesce (worker/flight/coalesce.h): a request parked on a
 * flight, or one whose key waits for its body, goes to single-flight; any other to the offload
 * path below it (worker/job/offload.h), which knows nothing of flights. */
#include "worker/flight/coalesce.h"

#include "worker/job/offload.h"

int
lg_coal_body_done(struct lg_conn *c)
{
	/* A coalescing route's request with a body: its key holds the body's hash, so it is
	 * decided only now that the body is complete in the transit buffer. */
	if (LG_FLIGHT(c)->coal && !lg_job_runs_inline(c))
		return lg_coal_dispatch(c, NULL);
	return lg_offload_queue(c);
}

int
lg_coal_job_timeout(struct lg_conn *c)
{
	if (LG_FLIGHT(c)->fl != NULL)
		return lg_coal_deadline(c);
	return lg_offload_deadline(c);
}

void
lg_coal_conn_gone(struct lg_conn *c)
{
	if (LG_FLIGHT(c)->fl != NULL) {
		lg_coal_gone(c); /* parked on a flight: a body's transit buffer is given back there */
		return;
	}
	lg_offload_client_gone(c);
}
