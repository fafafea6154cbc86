/* A differential oracle for the request parser (http/frame.c through http/http.c), for tests
 * only: nothing of the server links it. Each input is read twice, by lg_http (the server's one
 * parser) and by nodejs http-parser 2.9.4 (Debian, lenient: HTTP_PARSER_STRICT=0), and the two
 * readings are compared message by message: where both complete a message they must agree on
 * where it ends, its method, HTTP version, target, framing (Content-Length n, chunked, none),
 * the values of the kept header fields and the body's payload bytes.
 *
 * Where http-parser completes a message the server refuses, that is expected (the server is the
 * strict one, docs/HTTP.md). The reverse, the server completing a message http-parser refuses
 * or frames otherwise, is a disagreement unless it is one of the known readings of http-parser
 * 2.9.4 listed in http_oracle.c (explained()); everything else fails. http-parser is shown
 * every HTAB of the input outside what the server read as body payload as an SP: it refuses
 * HTAB as OWS after a Content-Length or a chunk size and misreads it after "chunked" or a
 * Connection option (RFC 9110 section 5.6.3 makes HTAB and SP the same there).
 *
 * Two files, because http/method.h and <http_parser.h> name the same methods: http_oracle.c
 * runs lg_http, http_oracle_hp.c runs http-parser, and they share only this header. */
#ifndef LG_TESTS_HTTP_ORACLE_H
#define LG_TESTS_HTTP_ORACLE_H

#include <stddef.h>
#include <stdint.h>

struct lg_http_limits;

#define ORC_MSGS 32

/* One reading of an input. */
struct orc_reading {
	unsigned nmsg;                 /* messages completed */
	int verdict;                   /* after them: 0 pending, -1 refused (error), 1 stopped */
	int status;                    /* the server's refusal status, or http-parser's errno */
	const char *why;               /* static text */
	size_t err_at;                 /* http-parser: input offset of its error */
	struct orc_msg {
		size_t end;            /* input offset just past the message */
		char method[24];
		unsigned minor;
		int connect;           /* method CONNECT */
		uint64_t content_length; /* UINT64_MAX: none */
		int chunked;
		int fields_short;      /* the server did not keep every kept field (no compare) */
		char *desc;            /* target, kept fields, body: the bytes compared, malloc'd */
		size_t desc_len;
	} msg[ORC_MSGS];
	/* server only: which input bytes it read as body payload (1 per byte), malloc'd */
	unsigned char *payload;
};

/* Appends len bytes to a desc buffer (aborts on ENOMEM). */
void orc_put(struct orc_msg *m, const void *p, size_t len);

/* The server's reading of data[0..size) with the limits lim (lim->keep names the fields
 * compared). */
void orc_read_lagless(struct orc_reading *rd, const unsigned char *data, size_t size,
    const struct lg_http_limits *lim);

/* http-parser's reading of data[0..size), the kept fields being those named in keep[0..nkeep)
 * (lower case), its target's path shown normalized as the server's is (keep_slashes as in the
 * server's limits, http/path.h). */
void orc_read_hp(struct orc_reading *rd, const unsigned char *data, size_t size,
    const char (*keep)[64], unsigned nkeep, int keep_slashes);

void orc_free(struct orc_reading *rd);

/* Messages both readers completed and were compared, over every lg_oracle_check so far. */
extern unsigned long lg_oracle_compared;

/* Reads data both ways and compares. Returns 0 when they agree, 1 with a description in
 * why[0..cap) when they do not. */
int lg_oracle_check(const unsigned char *data, size_t size, const struct lg_http_limits *lim,
    char *why, size_t cap);

#endif
