/* What http/frame.c and http/reqline.c share: the parser's states and the helpers both use.
 * Internal to http/; the interface is http/frame.h. */
#ifndef LG_HTTP_FRAME_RULES_H
#define LG_HTTP_FRAME_RULES_H

#include "http/chars.h"
#include "http/frame.h"

enum {
	S_RL,          /* request line pending */
	S_LINE,        /* start of a field line, or of the CRLF ending the section */
	S_NAME,        /* field name */
	S_VALUE,       /* field value */
	S_VALUE_LF,    /* CR seen at the end of a field line */
	S_END_LF,      /* CR seen at the start of a line: the section ends */
	S_HEAD_DONE,   /* everything below is a body state */
	S_LENGTH,      /* Content-Length bytes */
	S_CSIZE0,      /* first hex digit of a chunk size */
	S_CSIZE,       /* chunk size */
	S_CBWS,        /* whitespace after a chunk size: only ';' may follow */
	S_CEXT_NAME,   /* after a ';': BWS, then a chunk-ext-name's first tchar */
	S_CEXT,        /* chunk extensions up to CR */
	S_CSIZE_LF,    /* CR seen after a chunk-size line */
	S_CDATA,       /* chunk data */
	S_CDATA_CR,    /* CRLF after chunk data */
	S_CDATA_LF,
	S_TLINE,       /* trailer section: S_LINE .. S_END_LF again with trailer set */
	S_MSG_DONE,
};

/* The fields whose values decide framing, routing, persistence or the 100 Continue. */
enum { FLD_OTHER, FLD_CL, FLD_TE, FLD_HOST, FLD_EXPECT, FLD_CONN };

#define TRAILER 0x100  /* or-ed into the line states while reading the trailer section */

/* The character classes (tchar, field-value, request-target: RFC 9110 sections 5.6.2 and 5.5,
 * RFC 3986 section 2) are read with lg_ch() from http/chars.h. */

/* Sets f->status and f->why (static text) and returns -1: a rule failed. Cold, so the
 * compiler moves every refusal's path out of the lines a valid request runs. */
__attribute__((cold)) int lg_frame_fail(struct lg_frame *f, int status, const char *why);

static inline int
fail(struct lg_frame *f, int status, const char *why)
{
	return lg_frame_fail(f, status, why);
}

#endif
