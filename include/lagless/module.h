/* lagless/module.h: the stable C ABI between lagless and a job module (a shared object that
 * adds job kinds). C99, no lagless-internal type; a module links no lagless symbol.
 *
 * THE CONTRACT
 *
 * A module exports one data symbol, `lagless_module` (LAGLESS_MODULE_SYMBOL), a struct
 * lagless_module, most easily defined with LAGLESS_MODULE(...) or LAGLESS_MODULE_HOOKS(...)
 * below. lagless opens the file with dlopen(RTLD_NOW | RTLD_LOCAL) in the master before it
 * forks, reads the descriptor and refuses the module, naming the file and both values, when:
 *   - magic is not LAGLESS_MODULE_MAGIC;
 *   - abi_major differs from the host's LAGLESS_ABI_MAJOR;
 *   - abi_minor is newer than the host's LAGLESS_ABI_MINOR (the module may use fields the host
 *     does not fill);
 *   - size is smaller than the descriptor of ABI 1.0 or kind_size smaller than the kind of 1.0;
 *   - signature differs from the host's LAGLESS_SIGNATURE (pointer, size_t, long, int widths and
 *     byte order: a module built for another machine model);
 *   - nkinds or kind_size is over the host's bounds (1024 kinds, 4096 bytes), or the
 *     descriptor or the kinds[] array (nkinds * kind_size bytes) does not lie inside the
 *     module's loaded image;
 *   - one of its strings (signature, name, version, a kind's name or ctype, a declared
 *     parameter's name, default or choices) does not lie, NUL-terminated, inside that image,
 *     nor a declaration array (ABI 1.1);
 *   - a kind has no name or no run function, or its name clashes with another kind;
 *   - a kind's declared parameters (ABI 1.1) are malformed: a bad name, a name twice, an
 *     unknown type, min over max, an enum without choices, a default its own declaration
 *     refuses, a route key whose value does not fit the route struct at its offset.
 *
 * Compatibility rules (what lets either side grow without breaking the other):
 *   - Fields are only ever APPENDED to the structs of this header within one major version.
 *     Each struct a module hands over says its own size (lagless_module.size, .kind_size); the
 *     host reads only the fields inside that size and treats the rest as zero/NULL.
 *   - Each struct the host hands over (lagless_host, lagless_request, lagless_output) begins
 *     with its size and is never smaller than the module's build of it, because the host
 *     refuses a module of a newer minor: a module may use every field of its own header.
 *   - Enum values and constants below are never renumbered within a major.
 *
 * Life cycle of a module, in the host's processes:
 *   0. master, at dlopen, before the ABI check (before the descriptor is read): the constructors
 *      (__attribute__((constructor)), C++ static initialisers, those of libraries it links) run
 *      in the master, even for a module that is then refused. They must do nothing but
 *      initialise static data: no thread, file, socket, signal handler or library set-up (the
 *      master forks every process; do such work in init, after fork).
 *   1. master, at `lagless -t`, start-up and each SIGHUP, before any fork: dlopen, validate the
 *      descriptor, then call check(module config) and, for every route that uses one of its
 *      kinds, kind.check(route config). A failure is reported with the configuration file, line
 *      and key and fails -t / start-up, or leaves the running server untouched on SIGHUP. At a
 *      SIGHUP both run in a check process the master forks (so a slow check never holds the
 *      master's loop), not in the master, which then loads the same configuration without
 *      calling them: keep nothing from check for later (init receives the module config).
 *   2. every process that may run the module's kinds (compute processes; loop workers too when a
 *      route runs a kind where=loop), once after fork: init(module config, &state), which may
 *      walk the routes that use its kinds with host->route_at (ABI 1.2). It is also
 *      run once in a short-lived child at `lagless -t`, and in such a child to retry an init
 *      that failed or crashed (the module's routes answer 503 meanwhile; after a successful
 *      retry each process runs init again before its next job of the module).
 *   3. per job: kind.run(request, output), in a compute process (where=pool, the default) or
 *      inline on a loop worker (where=loop, for work of a few microseconds; timed, and one over
 *      its budget is named in the slow-callback warning and counted in the metrics).
 *   4. at a graceful process exit: exit(state). A process killed (deadline, crash) calls nothing.
 *   The host never dlclose()s a module a live process may still run; a reload loads changed
 *   files into the new generation of processes.
 *
 * What run may and may not do (docs/MODULES.md has the reasons):
 *   - It reads rq->input in place (input_len bytes in shared memory; do not write to it) and
 *     writes its answer into out->data (out->cap bytes at most), setting out->len. Everything it
 *     gets is valid only until it returns; keep no pointer to it.
 *   - No thread that outlives run, no signal handler, no fork without exec, no change to the
 *     process's signal mask, limits or working directory, no exit(): the process is shared by
 *     the next jobs and may be killed at any instant (deadline), losing only the current job.
 *     A kind that left its process unfit for the next job calls host->recycle (ABI 1.2).
 *   - Memory is limited per compute process (a host setting); past it malloc fails, which the
 *     kind should answer with LAGLESS_ERROR. Time is limited by the route's deadline: past it the
 *     client gets 504 and the process is killed. rq->deadline_ns lets a long kind stop early.
 *   - Writing past out->data + out->cap hits a guard page (the process dies, the client gets
 *     502); it can never reach another job's memory.
 *   - A crash (abort, SIGSEGV) costs this one request a 502; the process is replaced.
 *
 * Build: cc -shared -fPIC $(pkg-config --cflags lagless) -o upper.so upper.c
 */
#ifndef LAGLESS_MODULE_H
#define LAGLESS_MODULE_H

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LAGLESS_ABI_MAJOR 1
#define LAGLESS_ABI_MINOR 2
#define LAGLESS_MODULE_MAGIC  0x4c474d44u   /* "LGMD" */
#define LAGLESS_MODULE_SYMBOL "lagless_module"

/* The machine model a module was built for, as nginx's NGX_MODULE_SIGNATURE records it: widths
 * of pointer, size_t, long and int, and byte order. A module whose string differs is refused. */
#if UINTPTR_MAX == 0xffffffffffffffffu
#define LAGLESS_SIG_P_ "p8"
#elif UINTPTR_MAX == 0xffffffffu
#define LAGLESS_SIG_P_ "p4"
#else
#define LAGLESS_SIG_P_ "p?"
#endif
#if SIZE_MAX == 0xffffffffffffffffu
#define LAGLESS_SIG_Z_ "z8"
#elif SIZE_MAX == 0xffffffffu
#define LAGLESS_SIG_Z_ "z4"
#else
#define LAGLESS_SIG_Z_ "z?"
#endif
#if LONG_MAX == 0x7fffffffffffffffl
#define LAGLESS_SIG_L_ "l8"
#else
#define LAGLESS_SIG_L_ "l4"
#endif
#if INT_MAX == 0x7fffffff
#define LAGLESS_SIG_I_ "i4"
#else
#define LAGLESS_SIG_I_ "i?"
#endif
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define LAGLESS_SIG_E_ "be"
#else
#define LAGLESS_SIG_E_ "le"
#endif
#define LAGLESS_SIGNATURE \
	"lagless1:" LAGLESS_SIG_P_ "," LAGLESS_SIG_Z_ "," LAGLESS_SIG_L_ "," LAGLESS_SIG_I_ "," \
	LAGLESS_SIG_E_

/* What run returns. The host maps it to the HTTP answer. */
enum lagless_status {
	LAGLESS_OK = 0,         /* out->len bytes of out->data are the body; status 200 unless
	                         * set_status chose another 2xx (or, ABI 1.2, a 3xx) */
	LAGLESS_BAD_INPUT = 1,  /* the request is wrong: 400 (or the 4xx given to set_status), body
	                         * the short message given to set_message, or (ABI 1.2) the
	                         * out->len bytes of out->data after host->error_body */
	LAGLESS_ERROR = 2,      /* the kind failed (allocation, library error): 500 (ABI 1.2: or
	                         * the 501-504 given to set_status), body as for
	                         * LAGLESS_BAD_INPUT */
	LAGLESS_TOO_LARGE = 3,  /* the answer would not fit out->cap, or the input is over a limit
	                         * of the kind (a decompression bomb): 413 */
};

/* Log levels for host->log, most severe first. */
enum lagless_log_level {
	LAGLESS_LOG_ERROR = 0,
	LAGLESS_LOG_WARN = 1,
	LAGLESS_LOG_INFO = 2,
	LAGLESS_LOG_DEBUG = 3,
};

/* Where a kind may run (lagless_kind.where is a set of these bits; 0 means POOL only). The
 * route chooses one of the allowed places (where = pool|loop in the configuration). */
#define LAGLESS_WHERE_POOL 0x1u  /* a compute process: isolated, killable at the deadline */
#define LAGLESS_WHERE_LOOP 0x2u  /* inline on the loop worker: microseconds of work only */

/* lagless_kind.flags */
#define LAGLESS_KIND_CACHEABLE 0x1u /* the answer is a pure function of the input, the raw
                                     * query, the listed header fields and the route config:
                                     * the host may cache it or share one run among identical
                                     * concurrent requests */

/* Configuration keys of a [module name] section (module check/init) or of a [route /path]
 * section (the route's kind config: every key the host does not know itself). Opaque; read it
 * with host->conf_get / conf_at / conf_uint. Valid for the life of the process. */
struct lagless_conf;

/* One request header field the route lists (fields = a, b in its section). name is the field
 * name as the route lists it (lower case); value is the field value with surrounding white space
 * removed. Both are also NUL-terminated. A field the client did not send is absent. */
struct lagless_field {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

struct lagless_host;

/* The request view a kind gets. Every pointer is valid only until run returns. Every string is
 * NUL-terminated as well as counted. */
struct lagless_request {
	size_t size;                       /* sizeof(struct lagless_request) of the host */
	const struct lagless_host *host;   /* the function table, also given to check/init */
	const char *method;                /* "GET", "POST", ... */
	size_t method_len;
	const char *path;                  /* the request path, without the query: "/upper" */
	size_t path_len;
	const char *query;                 /* raw query after '?', not decoded; "" when none */
	size_t query_len;
	const unsigned char *input;        /* the request body, in place (shared memory; read only) */
	size_t input_len;                  /* bytes; never over the route's max_body */
	const struct lagless_field *fields; /* the route's listed header fields the client sent */
	size_t nfields;                    /* at most LAGLESS_MAX_FIELDS */
	const struct lagless_conf *conf;   /* the route's kind config keys */
	void *state;                       /* what the module's init stored, or NULL */
	const void *kind_data;             /* the kind descriptor's data pointer */
	uint64_t deadline_ns;              /* CLOCK_MONOTONIC past which the client gets 504 */
	uint64_t enqueue_ns;               /* CLOCK_MONOTONIC when the job was queued */
	uint64_t start_ns;                 /* CLOCK_MONOTONIC when this process started it (the
	                                    * queue wait is start_ns - enqueue_ns) */
	/* ---- ABI 1.1 ---- */
	const void *route;                 /* the route's keys parsed by the host into the kind's
	                                    * route struct (lagless_kind.route_params), NULL when
	                                    * the kind declares none */
	/* ---- ABI 1.2 ---- */
	const void *query_args;            /* the declared query arguments parsed by the host into
	                                    * the kind's query struct (lagless_kind.query_size),
	                                    * NULL when that size is 0; STRING values are
	                                    * percent-decoded and NUL-terminated; all valid until
	                                    * run returns */
};

#define LAGLESS_MAX_FIELDS 16          /* header fields a route may list */

/* The output region of the job. The kind writes up to cap bytes at data and sets len (or
 * appends with host->write, which keeps len). Anything over cap is never sent; writing past
 * data + cap faults on a guard page. */
struct lagless_output {
	size_t size;                       /* sizeof(struct lagless_output) of the host */
	unsigned char *data;               /* the job's output region (shared memory) */
	size_t cap;                        /* bytes the kind may write at data; host->alloc lowers it */
	size_t len;                        /* bytes of answer at data, set by the kind */
	void *host_private;                /* the host's; never touch */
};

/* The host's function table. Functions taking rq or out are valid only inside run, with the
 * rq/out run was given; the others in every hook. */
struct lagless_host {
	size_t size;                       /* sizeof(struct lagless_host) of the host */
	uint32_t abi_major, abi_minor;     /* the host's LAGLESS_ABI_MAJOR / MINOR */
	/* One log line on the host's error log, prefixed with the module's name, at level (enum
	 * lagless_log_level); lines under the configured level are dropped. printf format. */
	void (*log)(int level, const char *fmt, ...)
#if defined(__GNUC__)
	    __attribute__((format(printf, 2, 3)))
#endif
	    ;
	/* n bytes of scratch memory, 16-byte aligned, valid until run returns; taken from the top
	 * of the job's output region, so out->cap shrinks by at least n. NULL when it does not fit.
	 * Never free it. */
	void *(*alloc)(struct lagless_output *out, size_t n);
	/* Appends n bytes at out->data + out->len. Returns 0, or -1 (nothing written) when it would
	 * pass out->cap. */
	int (*write)(struct lagless_output *out, const void *p, size_t n);
	/* The HTTP status of the answer: a 2xx with LAGLESS_OK, a 4xx with LAGLESS_BAD_INPUT;
	 * since ABI 1.2 also a 3xx with LAGLESS_OK (300-303, 307, 308; 301, 302, 303, 307 and 308
	 * with a Location field, add_field) and 501-504 with LAGLESS_ERROR (a runtime's own
	 * gateway answers). A status that does not match what run returns is ignored (the
	 * default of that return is sent). Returns 0, or -1 for any other code. */
	int (*set_status)(struct lagless_output *out, int http_status);
	/* The Content-Type of this answer, over the route's and the kind's (copied; at most 127
	 * bytes of visible ASCII). Returns 0 or -1. */
	int (*set_ctype)(struct lagless_output *out, const char *ctype);
	/* A short message (at most 255 bytes after formatting, cut there with a warning on the
	 * error log) sent as the body of a 4xx or 500 answer instead of the default text, and
	 * named in the server's log line of the failure. For a longer body or another content
	 * type, see error_body (ABI 1.2). Returns 0. */
	int (*set_message)(struct lagless_output *out, const char *fmt, ...)
#if defined(__GNUC__)
	    __attribute__((format(printf, 2, 3)))
#endif
	    ;
	/* The raw (not percent-decoded) value of query parameter name, its length in *len; NULL
	 * when absent. Not NUL-terminated. */
	const char *(*query)(const struct lagless_request *rq, const char *name, size_t *len);
	/* Query parameter name as a decimal integer in [min, max], def when absent: 0 into *out,
	 * or -1 when present but not such an integer (answer LAGLESS_BAD_INPUT). Percent-encoded
	 * digits are decoded first ("%31%30" is 10; RFC 3986 section 6.2.2.2). */
	int (*query_uint)(const struct lagless_request *rq, const char *name, uint64_t def,
	    uint64_t min, uint64_t max, uint64_t *out);
	/* The value of a listed header field (name case-insensitive), its length in *len; NULL
	 * when the client did not send it or the route does not list it. */
	const char *(*header)(const struct lagless_request *rq, const char *name, size_t *len);
	/* The value of configuration key (NUL-terminated), NULL when absent. */
	const char *(*conf_get)(const struct lagless_conf *conf, const char *key);
	/* The i-th key/value pair of conf (to refuse unknown keys in check). Returns 0, or -1 past
	 * the last. */
	int (*conf_at)(const struct lagless_conf *conf, size_t i, const char **key,
	    const char **value);
	/* Key as an unsigned integer in [min, max] (suffixes K, M, G = 1024^n accepted), def when
	 * absent. Returns 0, or -1 when present but invalid. */
	int (*conf_uint)(const struct lagless_conf *conf, const char *key, uint64_t def,
	    uint64_t min, uint64_t max, uint64_t *out);
	/* ---- ABI 1.1 ---- */
	/* log with a va_list (a module's own printf-like wrapper, a library's log callback). */
	void (*vlog)(int level, const char *fmt, va_list ap)
#if defined(__GNUC__)
	    __attribute__((format(printf, 2, 0)))
#endif
	    ;
	/* ---- ABI 1.2 ---- */
	/* Makes the answer's bytes (out->len at out->data, written as for LAGLESS_OK) the body of
	 * the 4xx or 500 that run then returns (LAGLESS_BAD_INPUT, LAGLESS_ERROR), whole, with the
	 * Content-Type given to set_ctype (text/plain when none): a JSON error document, say. The
	 * bound is out->cap, as for any answer. Without it such an answer's body is set_message's
	 * text, as before 1.2; with it that text only names the failure in the server's log.
	 * It has no effect on the other statuses. Returns 0. */
	int (*error_body)(struct lagless_output *out);
	/* Adds a response header field to this answer, whatever its status (name_len and
	 * value_len bytes, copied; neither needs a NUL). The host checks it here and again when it
	 * builds the response:
	 *   - name a token (RFC 9110 section 5.1); value visible ASCII, SP and HTAB, without
	 *     leading or trailing white space (section 5.5): so no CR, LF or NUL in either;
	 *   - no hop-by-hop field (section 7.6.1: Connection, Keep-Alive, Proxy-Connection, TE,
	 *     Transfer-Encoding, Upgrade; and Trailer, the framing's), none of the fields the
	 *     host writes itself (Content-Length, Content-Type: use set_ctype; Date, Server,
	 *     X-Queue-Ms, X-Run-Ms, X-Request-Id, X-Cache);
	 *   - at most LAGLESS_MAX_ANSWER_FIELDS fields, LAGLESS_ANSWER_FIELDS_BYTES bytes of
	 *     "name: value" CRLF lines in all.
	 * Returns 0, or -1 when the field breaks a rule: the answer is then a 502, whatever run
	 * returns, logged with the reason (a field dropped in silence, a Location or a
	 * Set-Cookie, would be a wrong answer). Names are sent as given; a name twice is sent
	 * twice (Set-Cookie). A 301, 302, 303, 307 or 308 needs a Location field (RFC 9110
	 * section 10.2.2), else it is a 502 too. */
	int (*add_field)(struct lagless_output *out, const char *name, size_t name_len,
	    const char *value, size_t value_len);
	/* Asks that the compute process running this job exit cleanly once its answer is handed
	 * over, before it takes another job; the master starts a fresh one at once, as for a
	 * pool's max_jobs (a planned exit: no crash counted, no quarantine, no back-off). The
	 * answer is sent as usual. For a kind that knows its process is no longer fit for
	 * another job: a runtime whose user code kept a reference to job memory, leaked, or
	 * changed process-wide state. No effect where=loop (a loop worker is not recycled for a
	 * kind) nor under lagless --run-kind, which runs one job anyway. Returns 0. */
	int (*recycle)(struct lagless_output *out);
	/* In the module's init only: the i-th route (from 0, in configuration order) whose kind is
	 * one of this module's, so init can prepare what those routes need (import their code,
	 * open their files) before the first job instead of at it. *path is the route's path
	 * ("/thumbnail"; "/img/" + "*" for a prefix route as written), *kind the kind's name
	 * without the module's ("call"), *conf the route's kind config keys (the rq->conf its
	 * jobs get: the same pointer). All valid for the life of the process. Returns 0, or -1
	 * past the last route or outside init. A route of the configuration may still run in
	 * another pool than this process's: init is told every route, as it runs in every pool. */
	int (*route_at)(size_t i, const char **path, const char **kind,
	    const struct lagless_conf **conf);
};

#define LAGLESS_MAX_ANSWER_FIELDS 16     /* response header fields an answer may add */
#define LAGLESS_ANSWER_FIELDS_BYTES 1024 /* bytes of their "name: value" CRLF lines */

/* ABI 1.1: one declared parameter of a kind, a query argument or a route key
 * (lagless_kind.query_params, .route_params), as nginx's ngx_command_t declares a directive.
 * Values are read with the host's one grammar (docs/MODULES.md "Values"):
 *   UINT    a whole number (decimal digits; a query argument may be percent-encoded) in
 *           [min, max]; stored as uint64_t
 *   SIZE    a whole number with an optional k/K, m/M, g/G suffix (2^10, 2^20, 2^30) in
 *           [min, max] bytes; uint64_t
 *   BOOL    yes/no, true/false, on/off, 1/0 in any case; int (1 or 0)
 *   STRING  any text of min..max bytes; const char * (NUL-terminated, valid for the life of
 *           the process)
 *   ENUM    one of choices[] (a NULL-terminated list); int, the index of the choice
 * max 0 is no upper bound (UINT, SIZE, STRING); min and max are inclusive.
 * def is the default, written in the same grammar ("128", "16M", "yes", "jpeg"); NULL: the
 * value is zero (NULL for a STRING) when absent, for the kind to give its own meaning.
 * offset is where the value goes in the kind's route struct (offsetof; route keys only). */
enum lagless_param_type {
	LAGLESS_PARAM_UINT = 1,
	LAGLESS_PARAM_SIZE = 2,
	LAGLESS_PARAM_BOOL = 3,
	LAGLESS_PARAM_STRING = 4,
	LAGLESS_PARAM_ENUM = 5,
};

struct lagless_param {
	const char *name;           /* [a-z0-9_-]+ */
	uint32_t type;              /* enum lagless_param_type */
	uint64_t min, max;          /* UINT, SIZE: the range; STRING: the length range */
	const char *def;            /* the default, as text; NULL: zero */
	const char *const *choices; /* ENUM: the accepted words, NULL-terminated */
	uint32_t offset;            /* route keys: byte offset of the value in the route struct */
};

/* A declaration: LAGLESS_PARAM("width", UINT, .min = 1, .max = 4096, .def = "128"), the type
 * without its LAGLESS_PARAM_ prefix, then designated initializers of struct lagless_param. */
#define LAGLESS_PARAM(pname, ...) { .name = (pname), .type = LAGLESS_PARAM_##__VA_ARGS__ }

/* run: the job. Returns an enum lagless_status. */
typedef int (*lagless_run_fn)(const struct lagless_request *rq, struct lagless_output *out);

/* One job kind. Only name and run are required. */
struct lagless_kind {
	const char *name;       /* [a-z0-9_-]+, unique in the module; routes say module.name */
	lagless_run_fn run;
	const char *ctype;      /* default Content-Type of a LAGLESS_OK answer; NULL:
	                         * application/octet-stream (a route's content_type overrides) */
	uint32_t where;         /* LAGLESS_WHERE_* bits allowed; 0 = POOL only */
	uint32_t flags;         /* LAGLESS_KIND_* */
	uint64_t max_output;    /* bytes this kind ever writes; 0 = no own bound */
	/* Optional: the most output bytes for input_len bytes of input under this route config
	 * (e.g. ZSTD_compressBound). The host backs that much of the output region before run and
	 * answers 413 without running the job when it is over the region's capacity. */
	uint64_t (*output_size)(uint64_t input_len, const struct lagless_conf *conf);
	/* Optional, master side, before fork: checks the route config keys of a route that uses
	 * this kind. Returns 0, or -1 with a message in err (errlen bytes, NUL-terminated) that the
	 * host prints with the file, line and route; a message that begins with one of the keys
	 * ("level: ...", "callable = ...") is printed with that key's line. */
	int (*check)(const struct lagless_host *host, const struct lagless_conf *route_conf,
	    char *err, size_t errlen);
	const void *data;       /* handed to run as rq->kind_data (lets one run serve kinds) */
	/* ---- ABI 1.1 (a kind of a 1.0 module reads as all zero here) ---- */
	/* The query arguments run reads. The loop worker checks a request's query against them
	 * before the job takes a queue slot: a malformed or out-of-range argument is a 400 at
	 * once, with a short reason, whatever the pool's state. An argument not declared here is
	 * passed through unchecked. Also the names a coalescing key takes (docs/CACHE.md). */
	const struct lagless_param *query_params;
	uint32_t nquery_params; /* entries of query_params */
	/* The route keys the kind takes. The host refuses any other key of the route's section,
	 * parses these once at start-up / lagless -t / reload (errors name the file, line and
	 * key) into a zeroed struct of route_size bytes per route, which run gets as rq->route.
	 * check, if any, still runs after it (for rules between keys). */
	const struct lagless_param *route_params;
	uint32_t nroute_params; /* entries of route_params */
	uint32_t route_size;    /* bytes of the kind's route struct */
	uint32_t param_size;    /* sizeof(struct lagless_param) as built (LAGLESS_KIND sets it):
	                         * the stride of both arrays */
	/* ---- ABI 1.2 (a kind of 1.0 or 1.1 reads as zero here) ---- */
	/* Bytes of the kind's query struct (at most 4096), 0 for none. When set, each declared
	 * query argument has an offset in it (as a route key in the route struct), and the host
	 * parses a request's arguments into a zeroed struct of this size for every run
	 * (rq->query_args): a present one percent-decoded (RFC 3986 section 2.1) and read with
	 * the one grammar, an absent one from its default (zero when none). The loop worker has
	 * already refused a malformed one with 400, so run reads values, not text.
	 * LAGLESS_QUERY_ARGS sets it with the declarations. */
	uint32_t query_size;
};

/* The module descriptor, the exported symbol. The first four fields keep their place in every
 * ABI major so the host can always read enough to refuse a mismatch. */
struct lagless_module {
	uint32_t magic;         /* LAGLESS_MODULE_MAGIC */
	uint32_t abi_major;     /* LAGLESS_ABI_MAJOR the module was built with */
	uint32_t abi_minor;     /* LAGLESS_ABI_MINOR the module was built with */
	uint32_t size;          /* sizeof(struct lagless_module) as the module was built */
	uint32_t kind_size;     /* sizeof(struct lagless_kind) as the module was built: the
	                         * stride of kinds[] */
	uint32_t nkinds;
	const char *signature;  /* LAGLESS_SIGNATURE */
	const char *name;       /* [a-z0-9_-]+, the [module name] of the configuration */
	const char *version;    /* free text, shown by lagless -t and /status */
	const struct lagless_kind *kinds; /* nkinds entries of kind_size bytes */
	/* Optional, master side, before fork (so lagless -t reports it): checks the [module]
	 * section's keys. Returns 0, or -1 with a message in err (one that begins with one of the
	 * keys is printed with that key's line, as a kind's check). */
	int (*check)(const struct lagless_host *host, const struct lagless_conf *conf, char *err,
	    size_t errlen);
	/* Optional, once per process after fork, before its first job: may set *state (handed to
	 * every run as rq->state). Returns 0, or -1 (logged once; the module's routes then answer
	 * 503 until a retry in a child succeeds; a crash here is treated the same). */
	int (*init)(const struct lagless_host *host, const struct lagless_conf *conf, void **state);
	/* Optional, at a graceful process exit. */
	void (*exit)(const struct lagless_host *host, void *state);
};

#if defined(__GNUC__)
#define LAGLESS_EXPORT __attribute__((visibility("default")))
#else
#define LAGLESS_EXPORT
#endif

/* One kind: LAGLESS_KIND("upper", upper_run, .ctype = "text/plain", .where = ...). */
#define LAGLESS_KIND(kname, ...) \
	{ .name = (kname), .run = __VA_ARGS__, .param_size = (uint32_t)sizeof(struct lagless_param) }

/* A kind's declared parameters from an array of LAGLESS_PARAM(...), inside LAGLESS_KIND:
 *   LAGLESS_KIND("k", run, LAGLESS_QUERY(k_query), LAGLESS_ROUTE(k_keys, struct k_route)) */
#define LAGLESS_NELEM_(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))
#define LAGLESS_QUERY(arr) .query_params = (arr), .nquery_params = LAGLESS_NELEM_(arr)
/* ABI 1.2: the declared query arguments parsed into a struct of type (each LAGLESS_PARAM with
 * .offset = offsetof(type, field)), handed to run as rq->query_args:
 *   LAGLESS_KIND("k", run, LAGLESS_QUERY_ARGS(k_query, struct k_args)) */
#define LAGLESS_QUERY_ARGS(arr, type) \
	LAGLESS_QUERY(arr), .query_size = (uint32_t)sizeof(type)
#define LAGLESS_ROUTE(arr, type) \
	.route_params = (arr), .nroute_params = LAGLESS_NELEM_(arr), \
	.route_size = (uint32_t)sizeof(type)

#define LAGLESS_UNPAREN_(...) __VA_ARGS__

/* LAGLESS_MODULE_HOOKS takes the hooks in either of two forms, told apart by the preprocessor
 * (the parenthesised one since ABI 1.1; the positional one of 1.0 compiles again since 1.2):
 *   - a parenthesised list of designated initializers of struct lagless_module, () for none:
 *       LAGLESS_MODULE_HOOKS("thumbnail", "1.1.0", (.init = thumb_init, .exit = thumb_exit),
 *           LAGLESS_KIND("thumbnail", thumb_run, .ctype = "image/jpeg"));
 *   - ABI 1.0's three positional hooks check, init, exit, each a function's name, its address
 *     (&f), NULL or 0:
 *       LAGLESS_MODULE_HOOKS("thumbnail", "1.0.0", NULL, thumb_init, thumb_exit, kinds...);
 * The test: the third argument is the new form when it begins with '(' and what is inside
 * that parenthesis does not (NULL is ((void *)0) in C, which begins with "(("). A positional
 * hook written as a cast, (lagless_init_fn)0, is outside both forms: write NULL. */
#define LAGLESS_PICK2_(a, b, ...) b
#define LAGLESS_2ND_(...) LAGLESS_PICK2_(__VA_ARGS__)
#define LAGLESS_PROBE_(...) ~, 1, ~
/* 1 when the (expanded) tokens begin with '(', else 0. */
#define LAGLESS_OPENS_(...) LAGLESS_2ND_(LAGLESS_PROBE_ __VA_ARGS__, 0, ~)
#define LAGLESS_FIRST_(a, ...) a
#define LAGLESS_HEAD_(...) LAGLESS_FIRST_(__VA_ARGS__)
#define LAGLESS_CAT_(a, b) LAGLESS_CAT2_(a, b)
#define LAGLESS_CAT2_(a, b) a##b
#define LAGLESS_INNER_OPENS_1(x) LAGLESS_OPENS_(LAGLESS_HEAD_(LAGLESS_UNPAREN_ x, ~))
#define LAGLESS_INNER_OPENS_0(x) 0
/* Form 10 (opens, inside does not): the list; 11 (NULL), 00 (a name, 0, &f): positional. */
#define LAGLESS_HOOKS_FORM_(x) \
	LAGLESS_CAT_(LAGLESS_OPENS_(x), LAGLESS_CAT_(LAGLESS_INNER_OPENS_, LAGLESS_OPENS_(x))(x))
#define LAGLESS_HOOKS_10(mname, mversion, hooks, ...) \
	LAGLESS_MODULE_DEF_(mname, mversion, (LAGLESS_UNPAREN_ hooks), __VA_ARGS__)
#define LAGLESS_HOOKS_11(mname, mversion, check_fn, init_fn, exit_fn, ...) \
	LAGLESS_MODULE_DEF_(mname, mversion, \
	    (.check = (check_fn), .init = (init_fn), .exit = (exit_fn)), __VA_ARGS__)
#define LAGLESS_HOOKS_00 LAGLESS_HOOKS_11

#define LAGLESS_MODULE_HOOKS(mname, mversion, ...)                                           \
	LAGLESS_CAT_(LAGLESS_HOOKS_, LAGLESS_HOOKS_FORM_(LAGLESS_FIRST_(__VA_ARGS__, ~)))    \
	(mname, mversion, __VA_ARGS__)

/* The descriptor itself; hooks is a parenthesised list of designated initializers. */
#define LAGLESS_MODULE_DEF_(mname, mversion, hooks, ...)                                     \
	static const struct lagless_kind lagless_module_kinds_[] = { __VA_ARGS__ };          \
	extern LAGLESS_EXPORT const struct lagless_module lagless_module;                   \
	LAGLESS_EXPORT const struct lagless_module lagless_module = {                       \
		.magic = LAGLESS_MODULE_MAGIC, .abi_major = LAGLESS_ABI_MAJOR,               \
		.abi_minor = LAGLESS_ABI_MINOR, .size = (uint32_t)sizeof(struct lagless_module), \
		.kind_size = (uint32_t)sizeof(struct lagless_kind),                          \
		.nkinds = LAGLESS_NELEM_(lagless_module_kinds_),                             \
		.signature = LAGLESS_SIGNATURE, .name = (mname), .version = (mversion),      \
		.kinds = lagless_module_kinds_, LAGLESS_UNPAREN_ hooks }

/* The module descriptor without hooks:
 *   LAGLESS_MODULE("upper", "1.0.0", LAGLESS_KIND("upper", upper, .ctype = "text/plain")); */
#define LAGLESS_MODULE(mname, mversion, ...) \
	LAGLESS_MODULE_DEF_(mname, mversion, (), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
