/* Unit tests for http/frame.c, the strict framing check: a table of heads and bodies with the
 * verdict each must get, fed whole and one byte at a time (bytes the check did not take are
 * presented again, as a connection's buffer does). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/frame.h"

static const struct lg_http_limits lim = { 1024, 64, 8, 0, NULL, 0 };

/* Runs the check over msg in pieces of `piece` bytes; returns its status (0 when the message
 * ended cleanly), and the body framing and declared length through the pointers. */
static int
run(const char *msg, size_t piece, enum lg_frame_body *body, uint64_t *cl)
{
	struct lg_frame f;
	size_t len = strlen(msg), off = 0, avail = 0;

	lg_frame_init(&f, &lim, NULL, NULL);
	while (f.status == 0 && !lg_frame_msg_done(&f)) {
		avail = len - avail < piece ? len : avail + piece;
		size_t n;
		if (!lg_frame_head_done(&f) && f.head_bytes == 0) {
			long r = lg_frame_request_line(&f, msg + off, avail - off);
			n = r > 0 ? (size_t)r : 0;
		} else if (!lg_frame_head_done(&f)) {
			n = lg_frame_head(&f, msg + off, avail - off);
		} else {
			n = lg_frame_body(&f, msg + off, avail - off);
		}
		off += n;
		if (avail == len && n == 0 && f.status == 0 && !lg_frame_msg_done(&f))
			return -1; /* incomplete */
	}
	*body = f.body;
	*cl = f.content_length;
	return f.status;
}

static void
test_table(void **state)
{
	static const struct {
		const char *msg;
		int status;
		enum lg_frame_body body;
	} cases[] = {
		{ "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		/* a plain target skips the per-character check: the same verdicts either way */
		{ "GET /a%20b HTTP/1.1\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET /a\"b HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET /a{b HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n"
		  "Host: a\r\n\r\n", 0, LG_FRAME_NONE },  /* 64 bytes: the limit */
		{ "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n"
		  "Host: a\r\n\r\n", 414, 0 },
		/* whole field lines take a fast path, split ones the byte loop: the same verdicts */
		{ "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a\tb\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a \r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: [::1] \r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: [::1 ]\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a%41.b:1\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: a%4\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a:8 0\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nX-A: v\x7f\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nX-A: 12345678\x01\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nX-A: 1234567\x7f" "9\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nX-A: \x80\xff\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		/* the control-byte search goes eight bytes at a time: one after obs-text words, an
		 * HTAB inside, a CR not followed by LF and a bare LF are each found where they are */
		{ "GET / HTTP/1.1\r\nX-A: \xff\xfe\xfd\xfc\x80\x81\x82\x83\x7f\r\nHost: a\r\n\r\n",
		  400, 0 },
		{ "GET / HTTP/1.1\r\nX-A: \xff\xfe\xfd\xfc\x80\x81\x82\x83\x84\r\nHost: a\r\n\r\n",
		  0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nX-A: abcdefgh\tijklmnop\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nX-A: abcdefghij\rklm\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nX-A: abcdefghij\nklm\r\nHost: a\r\n\r\n", 400, 0 },
		/* Host's name is matched as one word, in any case; its port four digits at a time */
		{ "GET / HTTP/1.1\r\nhOsT: a:80\r\nHOST: b\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHosu: a\r\n\r\n", 400, 0 }, /* no Host */
		{ "GET / HTTP/1.1\r\nHost: a.b.c.d.e:123456789\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: a.b.c.d.e:1234567x\r\n\r\n", 400, 0 },
		/* request lines the one-pass read does not take go through the rules in order */
		{ "GET /a HTTP/1.2\r\nHost: a\r\n\r\n", 505, 0 },
		{ "GET /a HTTP/2.0\r\nHost: a\r\n\r\n", 505, 0 },
		{ "GET /a HTTP/1.1 \r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET /a\rb HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET /a HTTP/1.1\n\r\nHost: a\r\n\r\n", 400, 0 },
		{ "FOO /a HTTP/1.1\r\nHost: a\r\n\r\n", 501, 0 },
		{ "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET http://a/b HTTP/1.1\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET http:/b HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nX-A: a\rb\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nX-A: a\nHost: a\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHOST: a\r\nhost: b\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nhOsT: a\r\nConnection: x, close\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encodingx: chunked\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continuE\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue-x\r\n\r\n", 417, 0 },
		{ "\r\nGET / HTTP/1.0\r\n\r\n", 0, LG_FRAME_NONE },
		{ "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", 0, LG_FRAME_LENGTH },
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
		  "3;x=\"y\"\r\nabc\r\n0\r\nT: 1\r\n\r\n", 0, LG_FRAME_CHUNKED },
		{ "GET http://a:80/x HTTP/1.1\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET http://a HTTP/1.1\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE }, /* empty path */
		{ "GET http://a:1?q HTTP/1.1\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET http:// HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET http://?q HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\t3\t\r\n\r\nabc", 0, LG_FRAME_LENGTH },
		{ "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\t4\r\n\r\n", 400, 0 },
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n", 0,
		  LG_FRAME_CHUNKED },
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\t;x\r\na\r\n"
		  "0\r\n\r\n", 0, LG_FRAME_CHUNKED },
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ,chunked\r\n\r\n", 400, 0 },
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked,\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\n\r\n", 400, 0 },                       /* no Host */
		{ "CONNECT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx", 400, 0 },
		{ "CONNECT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 400, 0 },
		{ "CONNECT / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", 0, LG_FRAME_LENGTH },
		{ "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\nHost: a\r\n\r\n", 400, 0 },               /* bare LF */
		{ "GET / HTTP/1.1\rX", 400, 0 },          /* bare CR, no LF yet: refused at once */
		{ "GET / HTTP/1.1\rHost: a\r\r", 400, 0 },
		/* a CR past the line's limit: too long first, however the bytes arrive (fuzz_http) */
		{ "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\rX",
		  414, 0 },
		{ "GET /\rHTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a:8080\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: a:\r\n\r\n", 0, LG_FRAME_NONE },  /* port = *DIGIT */
		{ "GET / HTTP/1.1\r\nHost:\r\n\r\n", 0, LG_FRAME_NONE },    /* empty: valid */
		{ "GET / HTTP/1.1\r\nHost: a:abc\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a]\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", 400, 0 },   /* "%" HEXDIG HEXDIG */
		{ "GET / HTTP/1.1\r\nHost: a%4\r\n\r\n", 400, 0 },
		{ "GET / HTTP/1.1\r\nHost: a%41:80\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: [zz]\r\n\r\n", 400, 0 },   /* no IPv6 address */
		{ "GET / HTTP/1.1\r\nHost: [v1.a:b]\r\n\r\n", 0, LG_FRAME_NONE }, /* IPvFuture */
		{ "GET / HTTP/1.1\r\nHost: [v.a]\r\n\r\n", 400, 0 },
		/* an absolute-form authority is read as Host (RFC 9112 section 3.2.2) */
		{ "GET http://a:80:90/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET http://[::1/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET http://a]/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET http://[::1]x/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET http://a:x/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET http://[::1]:80/ HTTP/1.1\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET https://a%41?q HTTP/1.1\r\nHost: a\r\n\r\n", 0, LG_FRAME_NONE },
		{ "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n", 400, 0 }, /* obs-fold */
		{ "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		  400, 0 },
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400, 0 },
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, 0 },
		{ "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, 0 },
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
		  "10000000000000000\r\n", 400, 0 },                         /* overflow */
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;\na\r\n", 400, 0 },
		/* a chunk extension without a name (RFC 9112 7.1.1; llhttp's "No extension after
		 * semicolon"): refused, as the response side refuses it */
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2;\r\naa\r\n0\r\n\r\n",
		  400, 0 },
		{ "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2; \t=x\r\naa\r\n",
		  400, 0 },
		{ "GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", 400, 0 },
		{ "GET / HTTP/3.0\r\nHost: a\r\n\r\n", 505, 0 },
		{ "FOO / HTTP/1.1\r\nHost: a\r\n\r\n", 501, 0 },
		{ "GET / HTTP/1.1\r\nHost: a\r\nExpect: nope\r\n\r\n", 417, 0 },
		{ "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n"
		  "Host: a\r\n\r\n", 414, 0 },
		{ "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\n"
		  "G: 1\r\nH: 1\r\n\r\n", 431, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t piece = 1; piece <= 4096; piece *= 4096) {
			enum lg_frame_body body = 0;
			uint64_t cl = 0;
			int st = run(cases[i].msg, piece, &body, &cl);

			if (st != cases[i].status)
				fail_msg("case %zu piece %zu: status %d, want %d", i, piece, st,
				    cases[i].status);
			if (st == 0)
				assert_int_equal(body, cases[i].body);
		}
	}
}

/* A chunk that would pass max_body is refused when its size line is read (413), so the check
 * never waits for data it will refuse; chunks up to the limit pass. */
static void
test_chunked_body_limit(void **state)
{
	static const struct lg_http_limits small = { 1024, 64, 8, 10, NULL, 0 };
	static const char head[] = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
	struct { const char *chunks; int status; } cases[] = {
		{ "a\r\n0123456789\r\n0\r\n\r\n", 0 },             /* exactly the limit */
		{ "b\r\n", 413 },                                  /* one chunk over it */
		{ "5\r\n01234\r\n6\r\n", 413 },                   /* the sum over it */
		{ "8000000000000\r\n", 413 },                      /* far over, no overflow */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lg_frame f;
		char msg[256];
		size_t off, len = (size_t)snprintf(msg, sizeof(msg), "%s%s", head, cases[i].chunks);
		long r;

		lg_frame_init(&f, &small, NULL, NULL);
		r = lg_frame_request_line(&f, msg, len);
		assert_true(r > 0);
		off = (size_t)r;
		off += lg_frame_head(&f, msg + off, len - off);
		assert_true(lg_frame_head_done(&f));
		while (off < len && f.status == 0) {
			size_t n = lg_frame_body(&f, msg + off, len - off);

			if (n == 0)
				break;
			off += n;
		}
		if (f.status != cases[i].status)
			fail_msg("case %zu: status %d, want %d", i, f.status, cases[i].status);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_chunked_body_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
