/* build/tests/resp_replay: the response parser (http/resp.h) over files of upstream bytes, as
 * a proxy reads one connection: heads, bodies and the next answer while the connection
 * persists, the end of each file not taken as a close (as llhttp's tests do not).
 *   usage: resp_replay FILE...     a FILE named *.head answers HEAD requests
 * Prints one JSON line per file: the messages completed (interim heads included), the status
 * of each head read, the refusal's reason ("ok": none), whether the input ended inside a
 * message ("partial"), and the bytes left after an answer that ends the connection ("rest").
 * Run by tests/integration/test_corpus_llhttp_responses.py; exits 2 on an unreadable file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/resp.h"

#define STATUSES 16

struct replay {
	unsigned messages, nstatus;
	int status[STATUSES];
	int partial;
	size_t rest;
};

/* Reads one answer's body from data[*off..len); returns 1 when the message is done. */
static int
body(struct lg_resp *r, const char *data, size_t len, size_t *off)
{
	while (!lg_resp_done(r) && *off < len) {
		const char *d;
		size_t dl;
		long n = lg_resp_body(r, data + *off, len - *off, &d, &dl);

		if (n < 0)
			return 0;
		*off += (size_t)n;
	}
	return lg_resp_done(r);
}

static void
replay(struct lg_resp *r, const char *data, size_t len, int head, struct replay *out)
{
	size_t off = 0;

	lg_resp_start(r, head);
	while (r->err == LG_RESP_OK) {
		long n = lg_resp_head(r, data + off, len - off);

		if (n == LG_RESP_PARTIAL)
			out->partial = off < len;
		if (n < 0)
			return;
		off += (size_t)n;
		if (out->nstatus < STATUSES)
			out->status[out->nstatus++] = r->status;
		if (r->interim) {
			out->messages++;
			continue;
		}
		if (!body(r, data, len, &off)) {
			out->partial = r->err == LG_RESP_OK;
			return;
		}
		out->messages++;
		if (!r->keep_alive || off == len) {
			out->rest = len - off;
			return;
		}
		lg_resp_start(r, head);
	}
}

int
main(int argc, char **argv)
{
	static const struct lg_resp_limits lim = { 16384, 100 };
	static struct lg_resp_field fields[100];
	static char data[1 << 20];

	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		struct replay out = { 0 };
		struct lg_resp r;
		size_t n, nl = strlen(argv[i]);

		if (f == NULL) {
			perror(argv[i]);
			return 2;
		}
		n = fread(data, 1, sizeof(data), f);
		fclose(f);
		lg_resp_init(&r, &lim, fields);
		replay(&r, data, n, nl > 5 && strcmp(argv[i] + nl - 5, ".head") == 0, &out);
		printf("{\"file\": \"%s\", \"messages\": %u, \"statuses\": [", argv[i], out.messages);
		for (unsigned s = 0; s < out.nstatus; s++)
			printf("%s%d", s ? ", " : "", out.status[s]);
		printf("], \"err\": \"%s\", \"partial\": %d, \"rest\": %zu}\n",
		    lg_resp_strerror(r.err), out.partial, out.rest);
	}
	return 0;
}
