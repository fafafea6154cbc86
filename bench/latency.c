/* bench/latency: a small, honest latency client for the benchmarks.
 *
 * Sends `count` sequential HTTP/1.1 requests to 127.0.0.1:port (one in flight at a time), on
 * one keep-alive connection or, with --fresh, on a new connection each (the connect is not
 * timed), and writes one line per request to --out: "<status> <nanoseconds>", where the time
 * runs from just before write(2) of the request to the last byte of the response
 * (CLOCK_MONOTONIC). Status 0 means the request failed (reset, timeout, malformed answer).
 * Bounded in count and in time (--max-seconds); a single request waits at most 5 s.
 * --interval-us paces the requests on a fixed schedule (one starts every interval; after a
 * late one the schedule restarts from now rather than bursting to catch up), so a run spans a known stretch of time and the server
 * is idle between requests as under real traffic; 0 sends them back to back.
 *
 * It is C rather than Python so that the measuring side adds microseconds, not the
 * interpreter's scheduling noise, to the figures; --cpu pins it (sched_setaffinity(2)).
 *
 * usage: latency --port P [--path /ping] [--count N] [--max-seconds S] [--fresh]
 *                [--interval-us N] [--cpu N] --out FILE
 * Prints one summary line on stdout: "sent=N ok=N failed=N elapsed_s=X". Exits 0 when every
 * request got an answer (any status), 1 when some failed, 2 on bad usage. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REQ_TIMEOUT_MS 5000
#define BUF_SIZE       65536

struct opts {
	int port;
	const char *path;
	long count;
	double max_seconds;
	int fresh;
	long interval_us;
	int cpu;
	const char *out;
};

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Opens a TCP connection to 127.0.0.1:port with Nagle off (a request is one small write).
 * Returns the descriptor or -1 with errno set. */
static int
dial(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd == -1)
		return -1;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1) {
		close(fd);
		return -1;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Reads at least one byte into buf[*len..cap), waiting at most until deadline (ns).
 * Returns bytes read, 0 on EOF, -1 on error or timeout. */
static ssize_t
read_some(int fd, char *buf, size_t *len, size_t cap, uint64_t deadline)
{
	for (;;) {
		uint64_t now = now_ns();
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (now >= deadline || *len >= cap)
			return -1;
		int r = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t n = read(fd, buf + *len, cap - *len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n > 0)
			*len += (size_t)n;
		return n;
	}
}

/* Finds header `name` (case-insensitive, RFC 9110 section 5.1) in the head [buf, end) and
 * returns a pointer to its value, or NULL. */
static const char *
find_header(const char *buf, const char *end, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = buf; p < end; ) {
		const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);

		if (eol == NULL)
			break;
		if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			p += nl + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			return p;
		}
		p = eol + 2;
	}
	return NULL;
}

/* Reads one response with a Content-Length body (lagless and nginx always send one).
 * Returns the status code and sets *close_after when the server said Connection: close;
 * returns 0 on any failure. */
static int
read_response(int fd, char *buf, int *close_after)
{
	uint64_t deadline = now_ns() + (uint64_t)REQ_TIMEOUT_MS * 1000000u;
	size_t len = 0;
	char *eoh;

	while ((eoh = memmem(buf, len, "\r\n\r\n", 4)) == NULL)
		if (read_some(fd, buf, &len, BUF_SIZE - 1, deadline) <= 0)
			return 0;
	buf[len] = '\0';
	int status = 0;
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || status < 100 || status > 599)
		return 0;
	const char *cl = find_header(buf, eoh + 2, "Content-Length");
	const char *conn = find_header(buf, eoh + 2, "Connection");
	*close_after = conn != NULL && strncasecmp(conn, "close", 5) == 0;
	if (cl == NULL)
		return 0;
	size_t body = strtoul(cl, NULL, 10), have = len - (size_t)(eoh + 4 - buf);
	while (have < body) {
		size_t l = 0;
		ssize_t n = read_some(fd, buf, &l, BUF_SIZE, deadline);

		if (n <= 0)
			return 0;
		have += (size_t)n;
	}
	return have == body ? status : 0; /* extra bytes: not a sequential exchange */
}

static int
parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "path", required_argument, NULL, 'u' },
		{ "count", required_argument, NULL, 'n' },
		{ "max-seconds", required_argument, NULL, 's' },
		{ "fresh", no_argument, NULL, 'f' },
		{ "interval-us", required_argument, NULL, 'i' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "out", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	*o = (struct opts){ .path = "/ping", .count = 3000, .max_seconds = 30, .cpu = -1 };
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'p': o->port = atoi(optarg); break;
		case 'u': o->path = optarg; break;
		case 'n': o->count = atol(optarg); break;
		case 's': o->max_seconds = atof(optarg); break;
		case 'f': o->fresh = 1; break;
		case 'i': o->interval_us = atol(optarg); break;
		case 'c': o->cpu = atoi(optarg); break;
		case 'o': o->out = optarg; break;
		default: return -1;
		}
	}
	if (o->port <= 0 || o->port > 65535 || o->count <= 0 || o->count > 10000000 ||
	    o->max_seconds <= 0 || o->interval_us < 0 || o->interval_us > 10000000 ||
	    o->out == NULL || strlen(o->path) > 1024)
		return -1;
	return 0;
}

static void
pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) == -1)
		fprintf(stderr, "latency: sched_setaffinity(%d): %s (not pinned)\n", cpu,
		    strerror(errno));
}

/* One timed exchange on *fd (dialled first when -1). Returns the status (0: failed) and
 * stores the elapsed time in *ns; closes *fd when the connection cannot be reused. */
static int
exchange(const struct opts *o, int *fd, const char *req, size_t req_len, char *buf,
    uint64_t *ns)
{
	int close_after = 1, status = 0;

	if (*fd == -1 && (*fd = dial(o->port)) == -1)
		return 0;
	uint64_t t0 = now_ns();
	if (write(*fd, req, req_len) == (ssize_t)req_len)
		status = read_response(*fd, buf, &close_after);
	*ns = now_ns() - t0;
	if (status == 0 || close_after || o->fresh) {
		close(*fd);
		*fd = -1;
	}
	return status;
}

int
main(int argc, char **argv)
{
	struct opts o;
	char req[1200];
	static char buf[BUF_SIZE];
	long sent = 0, ok = 0;
	int fd = -1;

	if (parse_opts(argc, argv, &o) == -1) {
		fprintf(stderr, "usage: latency --port P [--path /ping] [--count N] "
		    "[--max-seconds S] [--fresh] [--interval-us N] [--cpu N] --out FILE\n");
		return 2;
	}
	if (o.cpu >= 0)
		pin(o.cpu);
	FILE *out = fopen(o.out, "w");
	if (out == NULL) {
		fprintf(stderr, "latency: %s: %s\n", o.out, strerror(errno));
		return 2;
	}
	int req_len = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n",
	    o.path, o.port, o.fresh ? "Connection: close\r\n" : "");
	uint64_t start = now_ns(), stop = start + (uint64_t)(o.max_seconds * 1e9);
	for (uint64_t next = start; sent < o.count && now_ns() < stop; sent++) {
		uint64_t ns = 0;

		if (o.interval_us > 0) {
			struct timespec at = { .tv_sec = (time_t)(next / 1000000000u),
			    .tv_nsec = (long)(next % 1000000000u) };

			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
				;
			next += (uint64_t)o.interval_us * 1000u;
			if (next < now_ns()) /* late: no catch-up burst */
				next = now_ns();
		}
		int status = exchange(&o, &fd, req, (size_t)req_len, buf, &ns);

		ok += status != 0;
		fprintf(out, "%d %llu\n", status, (unsigned long long)ns);
	}
	if (fd != -1)
		close(fd);
	fclose(out);
	printf("sent=%ld ok=%ld failed=%ld elapsed_s=%.3f\n", sent, ok, sent - ok,
	    (double)(now_ns() - start) / 1e9);
	return ok == sent ? 0 : 1;
}
