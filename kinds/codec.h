/* Compression for the /compress and /decompress kinds: zstd (libzstd) and gzip (zlib, RFC 1952
 * members of RFC 1951 deflate data), the formats the `zstd` and `gzip` commands read and write.
 *
 * Both directions write only into the caller's bounded buffer. Decompression streams into it
 * and stops at the limit: a decompression bomb costs at most `limit` output bytes plus the
 * codec's own bounded state (zstd: one block's input buffer, 128 KiB, since the output buffer
 * serves as its window; zlib: a 32 KiB window), never memory in proportion to its ratio or to
 * the window a frame declares. */
#ifndef LG_KINDS_CODEC_H
#define LG_KINDS_CODEC_H

#include <stddef.h>
#include <stdint.h>

enum lg_codec { LG_CODEC_ZSTD = 0, LG_CODEC_GZIP = 1 };

/* Parses a codec name ("zstd", "gzip"; len bytes, not NUL-terminated) into *c. 0 or -1. */
int lg_codec_parse(const char *name, size_t len, enum lg_codec *c);

/* "zstd" or "gzip"; the response content type ("application/zstd", RFC 8878 section 7.1,
 * "application/gzip", RFC 6713). Static storage. */
const char *lg_codec_name(enum lg_codec c);
const char *lg_codec_ctype(enum lg_codec c);

/* Compression levels: zstd 1..19 (the ultra levels 20..22 need far more memory per job),
 * default 3 (the zstd command's); gzip 1..9, default 6 (the gzip command's). */
int lg_codec_level_min(enum lg_codec c);
int lg_codec_level_max(enum lg_codec c);
int lg_codec_level_default(enum lg_codec c);

/* Largest output lg_codec_compress can produce for len input bytes (ZSTD_compressBound, or
 * deflateBound plus the gzip header and trailer): what to back in the output region. */
uint64_t lg_codec_compress_bound(enum lg_codec c, uint64_t len);

/* Compresses in (in_len bytes, may be 0) at level into out (cap bytes), *out_len the bytes
 * written: one zstd frame with its content size, or one gzip member (mtime 0, no name).
 * Returns 0, 400 for a level out of range, 413 when the output does not fit cap, 500 when the
 * codec fails (out of memory); err gets a short message for a non-zero return. */
int lg_codec_compress(enum lg_codec c, int level, const unsigned char *in, uint64_t in_len,
    unsigned char *out, uint64_t cap, uint64_t *out_len, char *err, size_t err_cap);

/* Decompresses in (one or more concatenated zstd frames or gzip members, as the commands
 * accept them) into out, writing at most limit bytes, *out_len the bytes written. Returns 0;
 * 413 when the decompressed data would exceed limit (decoding stops there); 400 for data that
 * is not a complete, valid stream of the codec (empty, truncated, corrupt, trailing garbage);
 * 500 for an internal failure (out of memory). err gets a short message for a non-zero
 * return. */
int lg_codec_decompress(enum lg_codec c, const unsigned char *in, uint64_t in_len,
    unsigned char *out, uint64_t limit, uint64_t *out_len, char *err, size_t err_cap);

#endif
