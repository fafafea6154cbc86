/* The module-overhead benchmark's client (bench/bench_module.py):
 *   modcall direct SO KIND BYTES N      calls the kind's run function N times in this process
 *   modcall http PORT PATH BYTES N      sends N POSTs of BYTES on one keep-alive connection
 * Prints the median and the minimum time of one call or request, in nanoseconds, as
 * "median_ns=... min_ns=...". The body is BYTES of 'a'..'z'. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <lagless/module.h>

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void
report(uint64_t *t, size_t n)
{
	qsort(t, n, sizeof(*t), cmp);
	printf("median_ns=%llu min_ns=%llu\n", (unsigned long long)t[n / 2],
	    (unsigned long long)t[0]);
}

static int
direct(const char *so, const char *kind, size_t bytes, size_t n, unsigned char *body)
{
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	const struct lagless_module *m = h ? dlsym(h, LAGLESS_MODULE_SYMBOL) : NULL;
	const struct lagless_kind *k = NULL;
	static const struct lagless_host host = { .size = sizeof(host) };
	uint64_t *t = calloc(n, sizeof(*t));
	unsigned char *out = malloc(bytes + 4096);

	for (uint32_t i = 0; m && i < m->nkinds; i++) {
		const struct lagless_kind *c = (const void *)((const char *)m->kinds +
		    (size_t)i * m->kind_size);
		if (strcmp(c->name, kind) == 0)
			k = c;
	}
	if (k == NULL || t == NULL || out == NULL) {
		fprintf(stderr, "modcall: no kind %s in %s: %s\n", kind, so, h ? "" : dlerror());
		return 2;
	}
	for (size_t i = 0; i < n; i++) {
		struct lagless_request rq = { .size = sizeof(rq), .host = &host, .method = "POST",
		    .path = "/", .query = "", .input = body, .input_len = bytes };
		struct lagless_output o = { .size = sizeof(o), .data = out, .cap = bytes + 4096 };
		uint64_t t0 = now_ns();

		if (k->run(&rq, &o) != LAGLESS_OK || o.len != bytes)
			return 1;
		t[i] = now_ns() - t0;
	}
	report(t, n);
	return 0;
}

/* Reads one response (head, then Content-Length bytes) into buf. Returns 0 or -1. */
static int
read_response(int fd, char *buf, size_t cap, size_t *body_len)
{
	size_t got = 0, need = 0, head = 0;

	for (;;) {
		ssize_t r = read(fd, buf + got, cap - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
		if (head == 0) {
			char *e = memmem(buf, got, "\r\n\r\n", 4);
			char *cl;

			if (e == NULL)
				continue;
			head = (size_t)(e - buf) + 4;
			if (strncmp(buf, "HTTP/1.1 200", 12) != 0 ||
			    (cl = memmem(buf, head, "Content-Length: ", 16)) == NULL)
				return -1;
			need = head + strtoull(cl + 16, NULL, 10);
		}
		if (got >= need) {
			*body_len = need - head;
			return 0;
		}
		if (got == cap)
			return -1;
	}
}

static int
http(int port, const char *path, size_t bytes, size_t n, unsigned char *body)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	size_t cap = bytes + 65536, blen;
	char *buf = malloc(cap), head[256];
	uint64_t *t = calloc(n, sizeof(*t));

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (buf == NULL || t == NULL || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
		perror("modcall: connect");
		return 2;
	}
	int hl = snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %zu"
	    "\r\n\r\n", path, bytes);
	for (size_t i = 0; i < n; i++) {
		uint64_t t0 = now_ns();

		if (write(fd, head, (size_t)hl) != hl)
			return 1;
		for (size_t off = 0; off < bytes;) {
			ssize_t w = write(fd, body + off, bytes - off);

			if (w <= 0)
				return 1;
			off += (size_t)w;
		}
		if (read_response(fd, buf, cap, &blen) == -1 || blen != bytes) {
			fprintf(stderr, "modcall: bad response\n");
			return 1;
		}
		t[i] = now_ns() - t0;
	}
	report(t, n);
	return 0;
}

int
main(int argc, char **argv)
{
	size_t bytes, n;
	unsigned char *body;

	if (argc != 6) {
		fprintf(stderr, "usage: modcall direct SO KIND BYTES N | http PORT PATH BYTES N\n");
		return 2;
	}
	bytes = strtoull(argv[4], NULL, 10);
	n = strtoull(argv[5], NULL, 10);
	if ((body = malloc(bytes ? bytes : 1)) == NULL || n == 0)
		return 2;
	for (size_t i = 0; i < bytes; i++)
		body[i] = (unsigned char)('a' + i % 26);
	if (strcmp(argv[1], "direct") == 0)
		return direct(argv[2], argv[3], bytes, n, body);
	return http(atoi(argv[2]), argv[3], bytes, n, body);
}
