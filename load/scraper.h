/* Where lagless-load reads the server's own view: GET /metrics of the target, or of each
 * replica behind it (--metrics URL,...). Behind a load balancer the target's /metrics answers
 * from whichever replica the balancer picks, and subtracting one replica's counters from
 * another's gives negative means and spikes that are not there; given every replica's URL,
 * each scrape asks them all and sums their texts into one (load/scrape.h, ll_scrape_add), so
 * that two scrapes are of the same servers and may be subtracted.
 *
 * A probe asks every source in turn before or after a phase; during a run phase a timer asks
 * them all every period on keep-alive connections of their own, and once every answer is in,
 * their sum is kept as one of the engine's points (ll_engine_add_point). */
#ifndef LL_LOAD_SCRAPER_H
#define LL_LOAD_SCRAPER_H

#include <ev.h>
#include <stdint.h>
#include <sys/socket.h>

#include "load/conn.h"
#include "load/engine.h"
#include "load/scrape.h"

struct ll_scraper;

struct ll_msource {                    /* one /metrics URL */
	struct ll_scraper *owner;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char *head;                        /* its GET, owned */
	char *buf;                         /* its body, owned, LL_SCRAPER_BODY bytes */
	struct ll_lconn conn;
	int open;                          /* conn is open (the periodic scrapes') */
	struct ll_lreq req;
	struct ll_scrape m;                /* its last answer */
	int ok;                            /* that answer was a whole 200 of Prometheus text */
};

struct ll_scraper {
	struct ll_engine *e;
	unsigned n;                        /* sources, at least 1 once set up */
	int given;                         /* from --metrics (else the target's own /metrics) */
	struct ll_msource src[LL_SCRAPE_SERVERS];
	ev_timer timer;
	int running;
	unsigned waiting;                  /* answers still due of the scrape in flight */
	uint64_t sent_ns, end_ns;          /* its first send and last answer */
	struct ll_scrape sum;
};

#define LL_SCRAPER_BODY (4u << 20)

/* Sets s up for engine e: urls NULL for the target's own /metrics (its address, Host and -H
 * headers), or "http://HOST[:PORT]/PATH,..." (up to LL_SCRAPE_SERVERS, each resolved now,
 * path /metrics when none is given). Returns 0, or -1 with a message in err (not such a URL,
 * too many, a host that does not resolve, out of memory). ll_scraper_free releases s. */
int ll_scraper_init(struct ll_scraper *s, struct ll_engine *e, const char *urls, char *err,
                    size_t errlen);

void ll_scraper_free(struct ll_scraper *s);

/* Asks every source once, in turn, on e's loop (nothing else may run on it), and sums their
 * answers into out (zeroed first). Returns 1 when every source answered lagless /metrics, 0
 * when one answered otherwise, -1 when one could not be reached or did not answer in time. */
int ll_scraper_probe(struct ll_scraper *s, struct ll_scrape *out);

/* Starts scraping every period_s seconds on e's loop, the first at once: for the run phase
 * that ll_engine_run is about to run. A scrape is skipped while the previous one is out. */
void ll_scraper_start(struct ll_scraper *s, double period_s);

/* Stops the timer and closes the connections (a scrape still out is dropped). */
void ll_scraper_stop(struct ll_scraper *s);

#endif
