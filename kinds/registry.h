/* The registry: the one place that knows which job kinds and which routes exist. Built by the
 * master from the built-in modules, the modules the configuration loads ([module] sections)
 * and the routes it declares ([route] sections, or the default routes), before any fork; every
 * process reads its inherited copy and none changes it. A reload builds a new registry for the
 * new generation and never frees one a live process may use.
 *
 * A kind is a struct lagless_kind of a module (include/lagless/module.h), built-in kinds
 * exactly like loaded ones, so adding one is a row in a module's kind array. Kind ids (1..) are
 * what job headers carry; 0 is no kind. A route is either a loop handler (a name the router
 * knows: ping, health, ready, metrics, status, test-block) or a kind.
 *
 * Implemented by kinds/registry.c (the modules and kinds), kinds/routetab.c (the routes and
 * lagless -t), kinds/registry_up.c (the upstreams) and kinds/run.c (a process's modules and
 * running one job). */
#ifndef LG_KINDS_REGISTRY_H
#define LG_KINDS_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/policy.h"
#include "http/method.h"
#include "kinds/host.h"

#define LG_NAME_MAX  64   /* module and kind names */
#define LG_PATH_MAX  256  /* route paths, module files */
/* Bounds on what a module descriptor may claim, checked before kinds[] is read: a lying
 * nkinds or kind_size (kind_size = 1<<30) must be refused, not followed off the image. */
/* Modules in one registry, the built-in ones included (each has a health row in the master
 * page: shm/layout.h LG_MODULE_HEALTH). */
#define LG_MODULES_MAX          32u
#define LG_MODULE_NKINDS_MAX    1024u
#define LG_MODULE_KIND_SIZE_MAX 4096u

/* Route methods: a set of http/method.h's methods, a bit per method (LG_HTTP_METHOD_BIT); any
 * method that list knows may be routed. The ones named here are the defaults'. */
#define LG_M_GET     LG_HTTP_METHOD_BIT(HTTP_GET)
#define LG_M_HEAD    LG_HTTP_METHOD_BIT(HTTP_HEAD)
#define LG_M_POST    LG_HTTP_METHOD_BIT(HTTP_POST)
#define LG_M_PUT     LG_HTTP_METHOD_BIT(HTTP_PUT)
#define LG_M_DELETE  LG_HTTP_METHOD_BIT(HTTP_DELETE)
#define LG_M_PATCH   LG_HTTP_METHOD_BIT(HTTP_PATCH)
#define LG_M_OPTIONS LG_HTTP_METHOD_BIT(HTTP_OPTIONS)
/* What a route to an upstream serves without `methods =`: every method a proxy forwards to an
 * app, OPTIONS included (a CORS preflight is the app's to answer); not CONNECT (a tunnel,
 * which lagless does not offer) nor TRACE (it would echo the client's credentials back:
 * RFC 9110 section 9.3.8). docs/HTTP.md. */
#define LG_M_UPSTREAM_DEFAULT (LG_M_GET | LG_M_HEAD | LG_M_POST | LG_M_PUT | LG_M_DELETE | \
	LG_M_PATCH | LG_M_OPTIONS)

struct lg_module {
	char name[LG_NAME_MAX];
	char version[LG_NAME_MAX];
	char path[LG_PATH_MAX];     /* the configured file; "" for a built-in module */
	uint64_t content;           /* XXH3-64 of the file's bytes (master/modules.c); 0 built in */
	struct lagless_module desc; /* the module's descriptor, zero-extended to the host's size */
	void *handle;               /* dlopen handle (never closed while a process may use it) */
	struct lagless_conf conf;   /* its [module] section's keys (path excluded) */
	void *state;                /* per process: what init stored */
	int ready;                  /* per process: init ran and succeeded (or there is none) */
	int test_only;              /* its kinds are served only with --enable-test-jobs */
};

struct lg_kind {
	char name[2 * LG_NAME_MAX]; /* "heavy" for a built-in kind, else "module.kind" */
	struct lagless_kind desc;   /* the descriptor, zero-extended to the host's size */
	uint32_t module;            /* index into the registry's modules */
	uint32_t id;                /* its index in kinds[] */
	const char *query;          /* the query parameters its run reads, a comma list ("" for
	                             * none; kinds/builtin.h), NULL when unknown (a module kind
	                             * that declares none); static storage or qnames */
	/* ABI 1.1 declarations (kinds/params.h), copied from the module at the host's stride
	 * (heap, freed with the registry); NULL and 0 for a kind that declares none. */
	struct lagless_param *qparams;
	uint32_t nqparams;
	struct lagless_param *rparams;
	uint32_t nrparams;
	uint32_t route_size;        /* bytes of its route struct; 0: it takes no declared keys */
	uint32_t query_size;        /* ABI 1.2: bytes of its query struct (rq->query_args); 0:
	                             * its query arguments are not parsed for it */
	char *qnames;               /* the comma list of qparams' names (query points to it) */
};

/* An app lagless fronts ([upstream NAME] section, master/site_up.c; docs/OPERATIONS.md "In
 * front of your app"): its servers, resolved by the master at start-up, and the limits of the
 * requests sent to it. Counts are server-wide (max_conns, queue: shm/upstream.h) or per loop
 * worker and server (keepalive). */
#define LG_UP_SERVERS 8
struct lg_upstream_server {
	char addr[LG_PATH_MAX];          /* as configured: unix:/path, ADDR:PORT, [v6]:PORT */
	struct sockaddr_storage sa;      /* resolved */
	socklen_t salen;
};

struct lg_upstream_def {
	char name[LG_NAME_MAX];
	struct lg_upstream_server servers[LG_UP_SERVERS];
	unsigned nservers;
	uint32_t max_conns;              /* requests in flight to it, the whole server */
	uint32_t queue;                  /* requests waiting beyond them, the whole server */
	uint32_t keepalive;              /* idle connections kept per loop worker and server */
	uint64_t connect_timeout_ms, first_byte_timeout_ms, idle_timeout_ms;
	uint64_t tunnel_idle_timeout_ms; /* a tunnel (after a 101) with no byte either way: closed */
	uint64_t max_requests;           /* per app connection, then closed */
	uint64_t queue_wait_target_ms;   /* admission by queue wait (CoDel, shm/codel.h); 0 = off */
	uint64_t queue_wait_interval_ms; /* its interval (at least the target) */
	uint32_t client_share;           /* percent of max_conns one client address may hold in
	                                  * flight and queued (nginx's limit_conn); 0 = off */
	uint32_t client_limit_status;    /* 503 or 429 past it */
	uint32_t eject_after;            /* failures in a row that eject a server; 0: never */
	uint64_t eject_ms;               /* the base back-off of an ejected server */
	uint32_t eject_max_percent;      /* of the servers out at once (one always stays in) */
	uint32_t retry_budget_percent;   /* retries on another server in flight, of in flight */
	uint32_t retry_budget_min;       /* ... and at least this many (shm/upeject.h) */
	char host[LG_PATH_MAX];          /* the Host sent; "" = the client's */
	char app[LG_NAME_MAX];           /* the [app NAME] whose processes are its servers (taken
	                                  * at each generation's creation, process k server k, sent
	                                  * to only while the page's ready_mask bit k is set), or "" */
	char file[LG_PATH_MAX];          /* where it was declared */
	int line;
};

struct lg_route_def {
	char path[LG_PATH_MAX];
	int prefix;                 /* the path was given ending in "*": a prefix match */
	uint64_t methods;           /* LG_M_* (http/method.h's bits); GET implies HEAD */
	char handler[LG_NAME_MAX];  /* a loop handler's name, "" for a kind */
	uint32_t kind;              /* kind id, 0 for a handler */
	uint32_t where;             /* LAGLESS_WHERE_POOL or LAGLESS_WHERE_LOOP */
	uint64_t deadline_ms;       /* of its jobs, queue wait included */
	uint64_t max_body;          /* bytes */
	char ctype[128];            /* "" = the kind's */
	char fields[LAGLESS_MAX_FIELDS][LG_NAME_MAX]; /* header fields the kind sees (lower case) */
	unsigned nfields;
	int test_only;              /* only with --enable-test-jobs */
	uint32_t pool;              /* index in cfg->jobs.pools of the pool that runs its jobs; 0 default */
	uint8_t pool_named;         /* its [route] section said pool = (a pool's routes list may not
	                             * name it for another pool) */
	struct lagless_conf conf;   /* the kind's keys */
	void *kconf;                /* those keys parsed into the kind's route struct (route_size
	                             * bytes, heap, the registry's) when it declares them, or NULL */
	int has_coal;               /* coal is its single-flight and cache rule (docs/CACHE.md) */
	struct lg_policy coal;      /* from its section's coalescing keys or a --coalesce rule */
	int coal_line;              /* line of its first coalescing key, 0 for a rule */
	char file[LG_PATH_MAX];     /* where it was declared ("" for a default route) */
	int line;
	uint32_t upstream;          /* 1 + index in the registry's upstreams of the app it proxies
	                             * to; 0: a kind or a handler route */
	int request_buffering;      /* upstream routes: the body is received whole into a transit
	                             * buffer before the request takes a place (request_buffering =
	                             * on), else streamed (0) */
	uint32_t max_conns, queue;  /* upstream routes: its bulkhead, requests in flight and
	                             * waiting for this route, the whole server (max_conns 0: none,
	                             * the upstream's own bounds alone) */
	uint32_t bulkhead;          /* 1 + its bulkhead's index (lg_registry_bulkheads), 0: none */
	uint32_t retry_on;          /* upstream routes: LG_RETRY_* bits, what sends an idempotent
	                             * request once to another server (HAProxy's retry-on) */
};

/* retry_on's bits ([route] retry_on = connect-failure 502 503, or none). */
#define LG_RETRY_CONNECT 1u /* a connect failed or timed out (nothing was sent) */
#define LG_RETRY_502     2u /* the app answered 502 */
#define LG_RETRY_503     4u /* the app answered 503 */

struct lg_registry {
	struct lg_module *modules;
	uint32_t nmodules;
	struct lg_kind *kinds;      /* kinds[0] is unused: id 0 is no kind */
	uint32_t nkinds;            /* including kinds[0] */
	struct lg_route_def *routes;
	uint32_t nroutes;
	struct lg_upstream_def *upstreams; /* [upstream NAME] sections (heap, the registry's) */
	uint32_t nupstreams;
	void *src;                  /* what the configuration strings live in, freed with it */
	void (*src_free)(void *src);
};

/* Frees r (heap, from whoever built it), its tables, the conf arrays and src. Module handles
 * stay open (their code may still run in another process). NULL is ignored. */
void lg_registry_free(struct lg_registry *r);

/* When set, lg_registry_add_module and lg_registry_add_route skip the modules' check hooks
 * (module.check, kind.check; everything else is checked): set only by the master around a
 * reload's second reading of a configuration whose hooks already passed in the reload's check
 * process (master/precheck.h), so a slow hook (a Python import check) never runs in the
 * master's loop. */
extern int lg_registry_skip_hooks;

/* Creates an empty registry holding the built-in modules (the kinds shipped with lagless and the
 * fault-injection kinds). Returns 0, or -1 with a message in err (cap bytes). */
int lg_registry_init(struct lg_registry *r, char *err, size_t cap);

/* Checks a module descriptor read from path (its ABI, size, signature, names, kinds; see
 * module.h) and adds it with its kinds, calling its check hook with conf. The registry takes
 * conf's kv array over (freed with it, or at once when the module is refused). Returns 0, or -1 with a message naming path and, for an
 * ABI mismatch, both values ("module compiled with ABI 2.0, lagless has 1.0"). */
int lg_registry_add_module(struct lg_registry *r, const struct lagless_module *m,
    const char *path, void *handle, const struct lagless_conf *conf, char *err, size_t cap);

/* The kind named name ("heavy", "upper.upper"), or NULL. */
const struct lg_kind *lg_registry_find(const struct lg_registry *r, const char *name);

/* The kind of id, or NULL for 0 and ids out of range. */
const struct lg_kind *lg_registry_kind(const struct lg_registry *r, uint32_t id);

/* Adds a route (copied). Refuses a path already routed with an overlapping method set, a kind
 * route whose where the kind does not allow, parses the route's keys into the kind's route
 * struct when it declares them (ABI 1.1; an undeclared or invalid key is refused, the message
 * naming the key and its line), and calls the kind's check hook with the route's keys. The
 * registry owns rt->kconf from then on. Returns 0, or -1 with a message in err. */
int lg_registry_add_route(struct lg_registry *r, const struct lg_route_def *rt, char *err,
    size_t cap);

/* The routes lagless serves without configuration, for every default route not already
 * declared (by path): the loop handlers, the built-in kinds' routes, and the /test/ routes
 * (test_only). deadline_ms and max_body are the server-wide settings. inline_heavy makes /heavy
 * run on the loop. Returns 0 or -1 with err. */
int lg_registry_default_routes(struct lg_registry *r, uint64_t deadline_ms, uint64_t max_body,
    int inline_heavy, char *err, size_t cap);

/* 1 when path is one of the default routes lg_registry_default_routes adds (the /test/ ones
 * included), else 0: what `off = yes` can remove. */
int lg_registry_is_default(const char *path);

/* Removes the route of path (declared with `off = yes`). Returns 0, or -1 when none. */
int lg_registry_remove_route(struct lg_registry *r, const char *path);

/* Adds upstream u (copied). Refuses a second one of the same name. Returns 0, or -1 with a
 * message in err. */
int lg_registry_add_upstream(struct lg_registry *r, const struct lg_upstream_def *u, char *err,
    size_t cap);

/* Numbers the upstream routes that carry a bulkhead (max_conns > 0) in route order: sets each
 * one's `bulkhead` (1-based) and returns how many. The master calls it before creating the
 * admission records (record nupstreams + bulkhead - 1 is route's: shm/upstream.h); a loop reads
 * the numbers it inherited. */
uint32_t lg_registry_bulkheads(struct lg_registry *r);

/* The requests one client address may have in flight and queued at upstream u: client_share
 * percent of max_conns, at least 1; 0 when client_share is off. */
uint32_t lg_upstream_client_limit(const struct lg_upstream_def *u);

/* The index in r->upstreams of the one named name, or -1. */
int lg_registry_find_upstream(const struct lg_registry *r, const char *name);

/* Prints each upstream with its settings, servers and routes (lagless -t) to f. */
void lg_registry_print_upstreams(const struct lg_registry *r, void *f);

/* Prints the routes table (lagless -t) to f, then each upstream with its routes. */
void lg_registry_print(const struct lg_registry *r, void *f);

struct lg_module_health;

/* What a process shares about its modules' init (shm/layout.h): the master page's module rows
 * (LG_MODULE_HEALTH, by module index) and its proc page's in_init word. */
struct lg_init_guard {
	struct lg_module_health *health;  /* NULL: nothing shared (--run-kind) */
	_Atomic uint32_t *in_init;        /* 1 + module index while its init runs, else 0 */
};

/* Per process, after fork: runs the init hook of every module (state kept in the registry
 * row), except those g says failed. A failure marks the module's row failed (its routes answer
 * 503; logged once, by the process that marks it) or, without g, is logged and the module's
 * jobs answer 500. loop_only: only the modules with a route where=loop (a loop worker runs no
 * other kind). g may be NULL. */
void lg_registry_init_process(struct lg_registry *r, int loop_only,
    const struct lg_init_guard *g);

/* Before running a job of kind: 1 when its module may run it in this process, after running
 * its init now if it was skipped or failed here and g's row says it works again (a probe
 * succeeded); 0 when g's row marks it failed (the answer is 503, LG_JOB_UNAVAILABLE). */
int lg_registry_usable(struct lg_registry *r, uint32_t kind, const struct lg_init_guard *g);

/* Runs module mod's init alone (a probe, in a child forked for it: master/modprobe.c).
 * Returns 0, or -1 when it failed. */
int lg_registry_init_one(struct lg_registry *r, uint32_t mod);

/* The module index of kind, UINT32_MAX for none. */
uint32_t lg_registry_module_of(const struct lg_registry *r, uint32_t kind);

/* Runs every module's exit hook (graceful process exit). */
void lg_registry_exit_process(struct lg_registry *r);

/* Bytes of the output region (metadata page included) to back before running kind on in_len
 * input bytes under route: its output_size for that input, else its max_output, else in_len
 * plus 1 MiB (a kind that declares no bound may write more; those pages are faulted in as it
 * writes, and a failure to allocate one costs its own process: 502), at most region_cap. Returns 0 with *need, or -1 when the kind's bound is over the
 * region (the answer is then 413 without running it). */
int lg_registry_out_need(const struct lg_registry *r, uint32_t kind, uint32_t route,
    uint64_t in_len, uint64_t region_cap, uint64_t *need);

struct lg_job;

/* Runs job j (its record, shm/layout.h struct lg_job) wherever it runs: a compute process, a
 * loop worker for where=loop. in: its input region (in_cap bytes: the request view, the
 * parsed query arguments, the body at j->body_off), out: its output region (out_cap bytes,
 * metadata page then answer; what lg_registry_out_need said is backed, the rest faults in),
 * start_ns when it started (CLOCK_MONOTONIC), test_jobs --enable-test-jobs (the fault kinds may
 * run). Checks the kind and route ids (the route must name the kind), the request view
 * (kinds/host.h, nothing trusted) and that the body fits after it, hands the kind its route's
 * keys and the loop's parse of its query (rq->route, rq->query_args), then lg_host_call. The
 * metadata page is cleared first, so the loop never reads a previous job's. Returns an enum
 * lg_job_status and the answer's length in *out_len. */
int lg_registry_run(const struct lg_registry *r, const struct lg_job *j, const unsigned char *in,
    uint64_t in_cap, unsigned char *out, uint64_t out_cap, uint64_t start_ns, int test_jobs,
    uint64_t *out_len);

/* Route methods from "GET, POST" (any method of http/method.h; case-sensitive tokens, ',' or
 * ' ' separated): lg_http_methods_parse's set, with HEAD added to GET (RFC 9110 section
 * 9.3.2). Returns 0 for an unknown or empty list. */
uint64_t lg_registry_methods(const char *list);

#endif
