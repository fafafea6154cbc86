/* The python module's two processes, when its interpreter is an executable (interpreter = PATH,
 * docs/MODULES.md "Which interpreter"): the compute process runs lagless's job loop and the
 * module's hooks (relay.c); the python3 executable it starts runs the user's code (serve.c)
 * with the very interpreter code a `python3` command line runs. They talk over one
 * SOCK_SEQPACKET socket pair (unix(7): each message whole, in order); the job's memory is not
 * sent but mapped by both (the shared-memory file behind it is passed once, SCM_RIGHTS).
 * This header is the message format both sides agree on; it includes no Python header. */
#ifndef LG_PYMOD_RELAY_H
#define LG_PYMOD_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <lagless/module.h>

#define LG_PYR_MAX 65536 /* bytes of the largest message, head included */

enum lg_pyr_op {
	/* compute process -> python3 */
	LG_PYR_CONF = 1,   /* the module's keys: strings key, value, key, value ... */
	LG_PYR_ROUTE,      /* one python.call route, a = its index: strings path, kind, then
	                    * key, value ... of its keys */
	LG_PYR_START,      /* every CONF and ROUTE sent: set up (lg_python_setup); answered
	                    * READY or FAIL */
	LG_PYR_MAP,        /* a = map id, len = bytes; one file descriptor (SCM_RIGHTS) to map
	                    * shared, replacing an earlier map of that id */
	LG_PYR_STDERR,     /* one file descriptor (SCM_RIGHTS): the compute process's standard
	                    * error, reopened since (SIGUSR1, a rotated error log): dup2'd on 2 */
	LG_PYR_READONLY,   /* a = map id: struct lg_pyr_range[] of it to map read-only, as the
	                    * compute process maps them (the job inputs: shm/arena.h) */
	LG_PYR_JOB,        /* struct lg_pyr_job, then strings method, path, query, then name,
	                    * value of each header field */
	LG_PYR_REPLY,      /* a = what the host call the python3 side asked for returned */
	/* python3 -> compute process; len is always the answer's out->len at that moment */
	LG_PYR_READY,      /* set up */
	LG_PYR_FAIL,       /* could not set up: string why */
	LG_PYR_LOG,        /* a = level: string line */
	LG_PYR_STATUS,     /* host->set_status(out, a): answered REPLY */
	LG_PYR_CTYPE,      /* host->set_ctype(out, string): answered REPLY */
	LG_PYR_MESSAGE,    /* host->set_message(out, "%s", string) */
	LG_PYR_ERROR_BODY, /* host->error_body(out) */
	LG_PYR_FIELD,      /* host->add_field(out, string name, string value) */
	LG_PYR_RECYCLE,    /* host->recycle(out) */
	LG_PYR_DONE,       /* the job ended: a = the enum lagless_status run returned */
};

struct lg_pyr_head {
	uint32_t op;  /* enum lg_pyr_op */
	int32_t a;
	uint64_t len;
};

/* The job's memory as the python3 side finds it: map ids of LG_PYR_MAP and byte offsets in
 * them; the request's times as struct lagless_request has them. */
struct lg_pyr_job {
	uint32_t route;     /* index of the route among the ROUTE messages */
	uint32_t in_map, out_map;
	uint32_t nfields;
	uint64_t in_off, in_len, out_off, out_cap;
	uint64_t deadline_ns, enqueue_ns, start_ns;
};

struct lg_pyr_range {
	uint64_t off, len; /* bytes of the map */
};

/* Strings in a message: each a uint32_t length, its bytes and a NUL (so a reader may use it
 * in place). lg_pyr_put appends s (n bytes) at buf + *used, cap bytes in all: 0, or -1 when
 * it does not fit. lg_pyr_get reads the next string at buf + *at (len bytes in all) into *s
 * and *n: 0, or -1 past the end or for a malformed length. */
int lg_pyr_put(unsigned char *buf, size_t cap, size_t *used, const void *s, size_t n);
int lg_pyr_get(const unsigned char *buf, size_t len, size_t *at, const char **s, size_t *n);

/* The compute process's side (relay.c). */

/* In a compute process's init: starts interpreter (an executable path) with python-exec.so
 * (carried inside this module), hands it the module's keys conf and the python.call routes
 * (h->route_at), and waits until it has set up (lg_python_setup: preload, preload_routes),
 * relaying its log lines meanwhile. Returns 0, or -1 with a message in err (python3 could not
 * start, or its setup failed: that is the message). */
int lg_relay_start(const struct lagless_host *h, const struct lagless_conf *conf,
    const char *interpreter, char *err, size_t errlen);

/* One job, run by python3 with rq's body and out's region mapped in place; the host calls it
 * asks for are made on out as they come. Returns the enum lagless_status its run returned.
 * Does not return when python3 dies during the job: this process then dies the same way. */
int lg_relay_run(const struct lagless_request *rq, struct lagless_output *out);

/* The import check's child (python.c, check_child), when the calls run in an executable:
 * becomes interpreter with python-exec.so, which imports spec with python_path (':'
 * separated, may be NULL) as a compute process would and writes the reason ("" when it
 * imported) and a NUL to fd, then exits. Never returns. */
void lg_relay_check(const char *interpreter, int fd, pid_t parent, const char *spec,
    const char *python_path) __attribute__((noreturn));

/* A graceful exit: closes the socket, so python3 reads its end and exits. */
void lg_relay_stop(void);

#endif
