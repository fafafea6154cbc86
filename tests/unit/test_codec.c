/* Unit tests for kinds/codec.c: the /compress and /decompress cores.
 *
 * zstd output is checked with libzstd's one-shot decoder (ZSTD_decompress), and the gzip decoder
 * with what the gzip command wrote (two members embedded below); the integration tests check
 * both directions of both codecs against the `zstd` and `gzip` commands. Bombs are real:
 * streams 256 times larger than the limit, which must stop at the limit with the canaries
 * around the output intact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <malloc.h>
#include <string.h>
#include <zstd.h>

#include <cmocka.h>

#include "kinds/codec.h"

#define CANARY 0xA5
#define GUARD  64

/* printf 'hello hello hello\n' | gzip -n -9; printf 'second member' | gzip -n */
static const unsigned char gz1[] = {
	0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x48,
	0xcd, 0xc9, 0xc9, 0x57, 0xc8, 0x40, 0x90, 0x5c, 0x00, 0x3b, 0x7c, 0x8a,
	0xdf, 0x12, 0x00, 0x00, 0x00,
};
static const unsigned char gz2[] = {
	0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x2b, 0x4e,
	0x4d, 0xce, 0xcf, 0x4b, 0x51, 0xc8, 0x4d, 0xcd, 0x4d, 0x4a, 0x2d, 0x02,
	0x00, 0x24, 0x74, 0xfa, 0x9f, 0x0d, 0x00, 0x00, 0x00,
};

static unsigned char *
buf_alloc(size_t cap)
{
	unsigned char *b = malloc(cap + 2 * GUARD);

	assert_non_null(b);
	memset(b, CANARY, cap + 2 * GUARD);
	return b + GUARD;
}

static void
buf_free(unsigned char *b, size_t cap)
{
	for (size_t i = 0; i < GUARD; i++) {
		assert_int_equal(b[-1 - (ptrdiff_t)i], CANARY);
		assert_int_equal(b[cap + i], CANARY);
	}
	free(b - GUARD);
}

/* xorshift noise and text in alternate 4 KiB blocks: both the entropy coder and the match
 * finder have work. */
static unsigned char *
mixed_input(size_t len)
{
	static const char text[] = "The quick brown fox jumps over the lazy dog; ";
	unsigned char *b = malloc(len ? len : 1);
	uint64_t s = 0x9E3779B97F4A7C15ull;

	assert_non_null(b);
	for (size_t i = 0; i < len; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		b[i] = (i / 4096) % 2 ? (unsigned char)text[i % (sizeof(text) - 1)] : (unsigned char)s;
	}
	return b;
}

/* Compresses in with codec c at level into a bound-sized buffer, decompresses it back with a
 * limit of exactly len, and with the library's own decoder for zstd. */
static void
round_trip(enum lg_codec c, const unsigned char *in, size_t len, int level)
{
	size_t cap = (size_t)lg_codec_compress_bound(c, len);
	unsigned char *z = buf_alloc(cap), *back = buf_alloc(len);
	uint64_t zn = 0, n = 0;
	char err[128];

	assert_int_equal(lg_codec_compress(c, level, in, len, z, cap, &zn, err, sizeof(err)), 0);
	assert_true(zn > 0 && zn <= cap);
	assert_int_equal(lg_codec_decompress(c, z, zn, back, len, &n, err, sizeof(err)), 0);
	assert_int_equal(n, len);
	if (len)
		assert_memory_equal(back, in, len);
	if (c == LG_CODEC_ZSTD) {
		assert_int_equal(ZSTD_getFrameContentSize(z, zn), len);
		assert_int_equal(ZSTD_decompress(back, len, z, zn), len);
	} else {
		assert_int_equal(z[0], 0x1f); /* RFC 1952 section 2.3.1: ID1 ID2 CM=8 */
		assert_int_equal(z[1], 0x8b);
		assert_int_equal(z[2], 8);
	}
	/* One byte less room than the data: refused as too large, never written past. */
	if (len > 0)
		assert_int_equal(lg_codec_decompress(c, z, zn, back, len - 1, &n, err,
		    sizeof(err)), 413);
	buf_free(back, len);
	buf_free(z, cap);
}

static void
test_round_trips(void **state)
{
	size_t big = 3u << 20;
	unsigned char *in = mixed_input(big);

	for (int c = LG_CODEC_ZSTD; c <= LG_CODEC_GZIP; c++) {
		int levels[] = { lg_codec_level_min(c), lg_codec_level_default(c),
		    lg_codec_level_max(c) };

		round_trip(c, (const unsigned char *)"", 0, levels[1]);
		round_trip(c, (const unsigned char *)"a", 1, levels[1]);
		for (size_t l = 0; l < 3; l++)
			round_trip(c, in, 100000, levels[l]);
		round_trip(c, in, big, levels[0]);
	}
	free(in);
}

static void
test_gzip_members_from_the_command(void **state)
{
	unsigned char both[sizeof(gz1) + sizeof(gz2)], *out = buf_alloc(64);
	uint64_t n = 0;
	char err[128];

	assert_int_equal(lg_codec_decompress(LG_CODEC_GZIP, gz1, sizeof(gz1), out, 64, &n, err,
	    sizeof(err)), 0);
	assert_int_equal(n, 18);
	assert_memory_equal(out, "hello hello hello\n", 18);
	memcpy(both, gz1, sizeof(gz1));
	memcpy(both + sizeof(gz1), gz2, sizeof(gz2));
	assert_int_equal(lg_codec_decompress(LG_CODEC_GZIP, both, sizeof(both), out, 64, &n, err,
	    sizeof(err)), 0);
	assert_int_equal(n, 31);
	assert_memory_equal(out, "hello hello hello\nsecond member", 31);
	/* Exactly the size fits; one byte less is a 413 with the limit filled. */
	assert_int_equal(lg_codec_decompress(LG_CODEC_GZIP, both, sizeof(both), out, 31, &n, err,
	    sizeof(err)), 0);
	assert_int_equal(lg_codec_decompress(LG_CODEC_GZIP, both, sizeof(both), out, 30, &n, err,
	    sizeof(err)), 413);
	assert_int_equal(n, 30);
	buf_free(out, 64);
}

static void
test_zstd_frames_concatenated(void **state)
{
	unsigned char z[256], *out = buf_alloc(64);
	size_t a = ZSTD_compress(z, sizeof(z), "first ", 6, 3);
	size_t b = ZSTD_compress(z + a, sizeof(z) - a, "second", 6, 19);
	uint64_t n = 0;
	char err[128];

	assert_false(ZSTD_isError(a) || ZSTD_isError(b));
	assert_int_equal(lg_codec_decompress(LG_CODEC_ZSTD, z, a + b, out, 64, &n, err,
	    sizeof(err)), 0);
	assert_int_equal(n, 12);
	assert_memory_equal(out, "first second", 12);
	buf_free(out, 64);
}

/* Input that is not one complete stream of the codec is a 400, never a 413 or a crash. */
static void
test_bad_input(void **state)
{
	unsigned char z[256], *out = buf_alloc(64), junk[sizeof(gz1) + 3];
	size_t zn = ZSTD_compress(z, sizeof(z), "some data some data", 19, 3);
	uint64_t n;
	char err[128];

	memcpy(junk, gz1, sizeof(gz1));
	memcpy(junk + sizeof(gz1), "xyz", 3);
	for (int c = LG_CODEC_ZSTD; c <= LG_CODEC_GZIP; c++) {
		const unsigned char *good = c == LG_CODEC_ZSTD ? z : gz1;
		size_t good_len = c == LG_CODEC_ZSTD ? zn : sizeof(gz1);

		assert_int_equal(lg_codec_decompress(c, NULL, 0, out, 64, &n, err, sizeof(err)),
		    400);
		for (size_t cut = 1; cut < good_len; cut++)
			assert_int_equal(lg_codec_decompress(c, good, cut, out, 64, &n, err,
			    sizeof(err)), 400);
		assert_int_equal(lg_codec_decompress(c, (const unsigned char *)"plain text", 10,
		    out, 64, &n, err, sizeof(err)), 400);
		/* The other codec's data. */
		assert_int_equal(lg_codec_decompress(c, c == LG_CODEC_ZSTD ? gz1 : z,
		    c == LG_CODEC_ZSTD ? sizeof(gz1) : zn, out, 64, &n, err, sizeof(err)), 400);
	}
	assert_int_equal(lg_codec_decompress(LG_CODEC_GZIP, junk, sizeof(junk), out, 64, &n, err,
	    sizeof(err)), 400);
	assert_non_null(strstr(err, "trailing garbage"));
	memcpy(z + zn, "xyz", 3);
	assert_int_equal(lg_codec_decompress(LG_CODEC_ZSTD, z, zn + 3, out, 64, &n, err,
	    sizeof(err)), 400);
	/* A corrupted byte inside the gzip data: CRC or deflate error. */
	memcpy(junk, gz1, sizeof(gz1));
	junk[14] ^= 0x55;
	assert_int_equal(lg_codec_decompress(LG_CODEC_GZIP, junk, sizeof(gz1), out, 64, &n, err,
	    sizeof(err)), 400);
	buf_free(out, 64);
}

/* 256 MiB of zeros compress to a few kilobytes; decoding stops at the 1 MiB limit. */
static void
test_bombs_stop_at_the_limit(void **state)
{
	const size_t chunk = 1u << 20, total = 256u << 20, limit = 1u << 20;
	unsigned char *zeros = calloc(1, chunk), *z, *out = buf_alloc(limit);
	uint64_t zn = 0, n = 0;
	char err[128];

	assert_non_null(zeros);
	for (int c = LG_CODEC_ZSTD; c <= LG_CODEC_GZIP; c++) {
		size_t cap = (size_t)lg_codec_compress_bound(c, total) / 64;

		/* One stream of `total` bytes, built from the 1 MiB chunk. */
		z = malloc(cap);
		assert_non_null(z);
		if (c == LG_CODEC_ZSTD) {
			ZSTD_CCtx *cc = ZSTD_createCCtx();
			ZSTD_outBuffer ob = { z, cap, 0 };

			for (size_t i = 0; i < total / chunk; i++) {
				ZSTD_inBuffer ib = { zeros, chunk, 0 };
				int last = i + 1 == total / chunk;
				size_t r;

				do
					r = ZSTD_compressStream2(cc, &ob, &ib,
					    last ? ZSTD_e_end : ZSTD_e_continue);
				while (!ZSTD_isError(r) && (last ? r != 0 : ib.pos < ib.size));
				assert_false(ZSTD_isError(r));
			}
			ZSTD_freeCCtx(cc);
			zn = ob.pos;
		} else {
			unsigned char *all = calloc(1, total);

			assert_non_null(all);
			assert_int_equal(lg_codec_compress(c, 9, all, total, z, cap, &zn, err,
			    sizeof(err)), 0);
			free(all);
		}
		assert_true(zn < total / 512);
		assert_int_equal(lg_codec_decompress(c, z, zn, out, limit, &n, err, sizeof(err)),
		    413);
		assert_true(n <= limit); /* zstd does not report how far it got before failing */
		assert_non_null(strstr(err, "exceeds"));
		free(z);
	}
	free(zeros);
	buf_free(out, limit);
}

/* A zstd frame written by hand (RFC 8878 section 3.1.1): no content size, a window descriptor
 * of 2^30 bytes, then `blocks` RLE blocks of 128 KiB of 'z' (4 bytes each). */
static size_t
rle_frame(unsigned char *f, size_t blocks)
{
	size_t n = 0;

	memcpy(f, "\x28\xb5\x2f\xfd", 4);
	n = 4;
	f[n++] = 0x00;            /* frame header descriptor: no FCS, no checksum, no dict */
	f[n++] = (30 - 10) << 3;  /* window descriptor: exponent 20, mantissa 0 = 2^30 */
	for (size_t i = 0; i < blocks; i++) {
		uint32_t h = (128u << 10) << 3 | 1u << 1 | (i + 1 == blocks); /* RLE, size, last */

		f[n++] = (unsigned char)h;
		f[n++] = (unsigned char)(h >> 8);
		f[n++] = (unsigned char)(h >> 16);
		f[n++] = 'z';
	}
	return n;
}

/* A frame may declare a 1 GiB window: it decodes, and a bomb of them stops at the limit,
 * without the decoder allocating that window (the output buffer is its window). */
static void
test_zstd_large_window(void **state)
{
	static unsigned char f[6 + 4 * 2048];
	unsigned char *out = buf_alloc(1u << 20);
	size_t fn = rle_frame(f, 3);
	uint64_t n = 0;
	char err[128];

	assert_int_equal(lg_codec_decompress(LG_CODEC_ZSTD, f, fn, out, 1u << 20, &n, err,
	    sizeof(err)), 0);
	assert_int_equal(n, 3 * (128u << 10));
	for (size_t i = 0; i < n; i++)
		assert_int_equal(out[i], 'z');
	fn = rle_frame(f, 2048); /* 256 MiB from 8 KiB */
	assert_int_equal(lg_codec_decompress(LG_CODEC_ZSTD, f, fn, out, 1u << 20, &n, err,
	    sizeof(err)), 413);
	/* glibc's count of bytes in mmapped chunks (where a 1 GiB window would be): the reused
	 * decoder context holds no window. (0 under ASan, which has its own allocator.) */
	assert_true(mallinfo2().hblkhd < (64u << 20));
	buf_free(out, 1u << 20);
}

static void
test_compress_limits(void **state)
{
	unsigned char *in = mixed_input(65536), *out = buf_alloc(1000);
	uint64_t n = 99;
	char err[128];

	for (int c = LG_CODEC_ZSTD; c <= LG_CODEC_GZIP; c++) {
		assert_int_equal(lg_codec_compress(c, 0, in, 10, out, 1000, &n, err, sizeof(err)),
		    400);
		assert_int_equal(lg_codec_compress(c, lg_codec_level_max(c) + 1, in, 10, out, 1000,
		    &n, err, sizeof(err)), 400);
		assert_int_equal(n, 0);
		/* Noise does not shrink: it cannot fit 1000 bytes. */
		assert_int_equal(lg_codec_compress(c, 1, in, 4096, out, 1000, &n, err,
		    sizeof(err)), 413);
		assert_true(lg_codec_compress_bound(c, 4096) > 4096);
	}
	free(in);
	buf_free(out, 1000);
}

static void
test_names(void **state)
{
	enum lg_codec c = LG_CODEC_GZIP;

	assert_int_equal(lg_codec_parse("zstd", 4, &c), 0);
	assert_int_equal(c, LG_CODEC_ZSTD);
	assert_int_equal(lg_codec_parse("gzip", 4, &c), 0);
	assert_int_equal(c, LG_CODEC_GZIP);
	assert_int_equal(lg_codec_parse("gzi", 3, &c), -1);
	assert_int_equal(lg_codec_parse("gzipx", 5, &c), -1);
	assert_int_equal(lg_codec_parse("", 0, &c), -1);
	assert_string_equal(lg_codec_ctype(LG_CODEC_ZSTD), "application/zstd");
	assert_string_equal(lg_codec_ctype(LG_CODEC_GZIP), "application/gzip");
	assert_string_equal(lg_codec_name(LG_CODEC_GZIP), "gzip");
	assert_int_equal(lg_codec_level_default(LG_CODEC_ZSTD), 3);
	assert_int_equal(lg_codec_level_default(LG_CODEC_GZIP), 6);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_gzip_members_from_the_command),
		cmocka_unit_test(test_zstd_frames_concatenated),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_bombs_stop_at_the_limit),
		cmocka_unit_test(test_zstd_large_window),
		cmocka_unit_test(test_compress_limits),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
