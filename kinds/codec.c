#include "kinds/codec.h"

#include <stdio.h>
#include <string.h>
#define ZLIB_CONST /* next_in is const: zlib never writes the input */
#include <zlib.h>
/* ZSTD_d_stableOutBuffer is in the "experimental" part of zstd.h: a parameter value of the
 * stable ZSTD_DCtx_setParameter, no symbol of the static library. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

/* zlib counts in uInt (32 bits): feed it at most this much input or output space per call. */
#define ZCHUNK ((uint64_t)1 << 30)
/* deflateInit2/inflateInit2 windowBits: 15 (32 KiB window) + 16 selects the gzip wrapper. */
#define GZIP_WBITS (15 + 16)
/* RFC 1952 section 2.3.1: the gzip header is 10 bytes (no optional fields) and the trailer 8. */
#define GZIP_WRAP  18

int
lg_codec_parse(const char *name, size_t len, enum lg_codec *c)
{
	if (len == 4 && memcmp(name, "zstd", 4) == 0)
		*c = LG_CODEC_ZSTD;
	else if (len == 4 && memcmp(name, "gzip", 4) == 0)
		*c = LG_CODEC_GZIP;
	else
		return -1;
	return 0;
}

const char *
lg_codec_name(enum lg_codec c)
{
	return c == LG_CODEC_GZIP ? "gzip" : "zstd";
}

const char *
lg_codec_ctype(enum lg_codec c)
{
	return c == LG_CODEC_GZIP ? "application/gzip" : "application/zstd";
}

int
lg_codec_level_min(enum lg_codec c)
{
	return 1;
}

int
lg_codec_level_max(enum lg_codec c)
{
	return c == LG_CODEC_GZIP ? 9 : 19;
}

int
lg_codec_level_default(enum lg_codec c)
{
	return c == LG_CODEC_GZIP ? 6 : 3;
}

uint64_t
lg_codec_compress_bound(enum lg_codec c, uint64_t len)
{
	if (c == LG_CODEC_ZSTD)
		return ZSTD_compressBound((size_t)len);
	/* zlib's compressBound is deflateBound for the default window and memLevel with the
	 * 6-byte zlib wrapper; gzip's wrapper is at most GZIP_WRAP. zlib.h: the bound holds for
	 * Z_NO_FLUSH calls followed by Z_FINISH, as gzip_compress makes them. */
	return compressBound((uLong)len) + GZIP_WRAP;
}

static int
zstd_compress(int level, const unsigned char *in, uint64_t in_len, unsigned char *out,
    uint64_t cap, uint64_t *out_len, char *err, size_t err_cap)
{
	/* One context per process, reused across jobs: creating it costs more than compressing
	 * a small body. Freed by process exit. */
	static ZSTD_CCtx *cctx;
	size_t n;

	if (cctx == NULL && (cctx = ZSTD_createCCtx()) == NULL) {
		snprintf(err, err_cap, "zstd: cannot create a compression context");
		return 500;
	}
	n = ZSTD_compressCCtx(cctx, out, cap, in_len ? in : (const void *)"", in_len, level);
	if (ZSTD_isError(n)) {
		snprintf(err, err_cap, "zstd: %s", ZSTD_getErrorName(n));
		return ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall ? 413 : 500;
	}
	*out_len = n;
	return 0;
}

static int
gzip_compress(int level, const unsigned char *in, uint64_t in_len, unsigned char *out,
    uint64_t cap, uint64_t *out_len, char *err, size_t err_cap)
{
	z_stream z = { 0 };
	uint64_t in_pos = 0, out_pos = 0;
	int r;

	if (deflateInit2(&z, level, Z_DEFLATED, GZIP_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		snprintf(err, err_cap, "gzip: cannot create a compression stream");
		return 500;
	}
	do {
		uint64_t ri = in_len - in_pos, ro = cap - out_pos;

		z.next_in = in + in_pos;
		z.avail_in = (uInt)(ri < ZCHUNK ? ri : ZCHUNK);
		z.next_out = out + out_pos;
		z.avail_out = (uInt)(ro < ZCHUNK ? ro : ZCHUNK);
		uInt ai = z.avail_in, ao = z.avail_out;
		r = deflate(&z, in_pos + ai == in_len ? Z_FINISH : Z_NO_FLUSH);
		in_pos += ai - z.avail_in;
		out_pos += ao - z.avail_out;
		if (r != Z_STREAM_END && r != Z_OK)
			break; /* Z_BUF_ERROR: no progress possible, the output is full */
	} while (r != Z_STREAM_END);
	deflateEnd(&z);
	if (r != Z_STREAM_END) {
		snprintf(err, err_cap, "gzip: output does not fit %llu bytes",
		    (unsigned long long)cap);
		return 413;
	}
	*out_len = out_pos;
	return 0;
}

int
lg_codec_compress(enum lg_codec c, int level, const unsigned char *in, uint64_t in_len,
    unsigned char *out, uint64_t cap, uint64_t *out_len, char *err, size_t err_cap)
{
	*out_len = 0;
	if (level < lg_codec_level_min(c) || level > lg_codec_level_max(c)) {
		snprintf(err, err_cap, "%s level %d not in %d..%d", lg_codec_name(c), level,
		    lg_codec_level_min(c), lg_codec_level_max(c));
		return 400;
	}
	return c == LG_CODEC_GZIP ? gzip_compress(level, in, in_len, out, cap, out_len, err,
	    err_cap) : zstd_compress(level, in, in_len, out, cap, out_len, err, err_cap);
}

/* Streams every frame of in into out[0..limit). The output is one stable buffer
 * (ZSTD_d_stableOutBuffer), so the decoder uses it as its window and allocates none of its own:
 * a frame declaring a 2 GiB window costs nothing more than a small one, and nothing of a job
 * stays allocated in the reused context after it. A full output with more to write is zstd's
 * dstSize_tooSmall (413); a call that moves neither input nor output means the input ended
 * inside a frame (400). */
static int
zstd_decompress(const unsigned char *in, uint64_t in_len, unsigned char *out, uint64_t limit,
    uint64_t *out_len, char *err, size_t err_cap)
{
	static ZSTD_DCtx *dctx;
	ZSTD_inBuffer ib = { in_len ? in : (const void *)"", in_len, 0 };
	ZSTD_outBuffer ob = { out, limit, 0 };

	if (dctx == NULL && (dctx = ZSTD_createDCtx()) != NULL &&
	    (ZSTD_isError(ZSTD_DCtx_setParameter(dctx, ZSTD_d_stableOutBuffer, 1)) ||
	    ZSTD_isError(ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, ZSTD_WINDOWLOG_MAX)))) {
		ZSTD_freeDCtx(dctx);
		dctx = NULL;
	}
	if (dctx == NULL) {
		snprintf(err, err_cap, "zstd: cannot create a decompression context");
		return 500;
	}
	ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
	for (;;) {
		size_t ipos = ib.pos, opos = ob.pos;
		size_t r = ZSTD_decompressStream(dctx, &ob, &ib);

		*out_len = ob.pos;
		if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall)
			break;
		if (ZSTD_isError(r)) {
			snprintf(err, err_cap, "zstd: %s", ZSTD_getErrorName(r));
			return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? 500 : 400;
		}
		if (r == 0 && ib.pos == ib.size && ib.size > 0)
			return 0; /* the last frame is complete and nothing follows it */
		if (ib.pos == ipos && ob.pos == opos) {
			if (ob.pos < ob.size) {
				snprintf(err, err_cap, "zstd: truncated or empty input");
				return 400;
			}
			break;
		}
	}
	snprintf(err, err_cap, "zstd: decompressed data exceeds %llu bytes",
	    (unsigned long long)limit);
	return 413;
}

/* One inflate call with at most ZCHUNK of input and output; advances *ip and *op. */
static int
inflate_step(z_stream *z, const unsigned char *in, uint64_t in_len, uint64_t *ip,
    unsigned char *out, uint64_t limit, uint64_t *op)
{
	uint64_t ri = in_len - *ip, ro = limit - *op;
	int r;

	z->next_in = in + *ip;
	z->avail_in = (uInt)(ri < ZCHUNK ? ri : ZCHUNK);
	z->next_out = out + *op;
	z->avail_out = (uInt)(ro < ZCHUNK ? ro : ZCHUNK);
	uInt ai = z->avail_in, ao = z->avail_out;
	r = inflate(z, Z_NO_FLUSH);
	*ip += ai - z->avail_in;
	*op += ao - z->avail_out;
	return r;
}

static int
gzip_decompress(const unsigned char *in, uint64_t in_len, unsigned char *out, uint64_t limit,
    uint64_t *out_len, char *err, size_t err_cap)
{
	z_stream z = { 0 };
	uint64_t ip = 0, op = 0;
	int r, status = 400;

	if (inflateInit2(&z, GZIP_WBITS) != Z_OK) {
		snprintf(err, err_cap, "gzip: cannot create a decompression stream");
		return 500;
	}
	for (;;) {
		uint64_t ip0 = ip, op0 = op;

		r = inflate_step(&z, in, in_len, &ip, out, limit, &op);
		if (r == Z_STREAM_END) {
			if (ip == in_len) {
				status = 0;
				break;
			}
			/* gzip(1) reads concatenated members as one stream (RFC 1952 section
			 * 2.2); anything else after a member is garbage. */
			if (in_len - ip < 2 || in[ip] != 0x1f || in[ip + 1] != 0x8b) {
				snprintf(err, err_cap, "gzip: trailing garbage after the data");
				break;
			}
			inflateReset(&z);
			continue;
		}
		if (r == Z_MEM_ERROR) {
			snprintf(err, err_cap, "gzip: out of memory");
			status = 500;
			break;
		}
		if (r == Z_OK && (ip != ip0 || op != op0))
			continue;
		if (r == Z_OK || r == Z_BUF_ERROR) {
			if (op == limit) {
				snprintf(err, err_cap, "gzip: decompressed data exceeds %llu bytes",
				    (unsigned long long)limit);
				status = 413;
			} else {
				snprintf(err, err_cap, "gzip: truncated or empty input");
			}
			break;
		}
		snprintf(err, err_cap, "gzip: %s", z.msg ? z.msg : "invalid data");
		break;
	}
	inflateEnd(&z);
	*out_len = op;
	return status;
}

int
lg_codec_decompress(enum lg_codec c, const unsigned char *in, uint64_t in_len,
    unsigned char *out, uint64_t limit, uint64_t *out_len, char *err, size_t err_cap)
{
	*out_len = 0;
	return c == LG_CODEC_GZIP ? gzip_decompress(in, in_len, out, limit, out_len, err,
	    err_cap) : zstd_decompress(in, in_len, out, limit, out_len, err, err_cap);
}
