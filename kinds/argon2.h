/* Password hashing for the /hash and /verify kinds: argon2id (RFC 9106) through libargon2, the
 * reference implementation the `argon2` command-line tool is built on.
 *
 * Pure functions of their arguments (the salt is passed in; lg_argon2_salt draws one), so they
 * are tested without a server. They write only into the caller's bounded buffer; libargon2
 * allocates the m_kib working memory itself with malloc and frees it before returning. */
#ifndef LG_KINDS_ARGON2_H
#define LG_KINDS_ARGON2_H

#include <stddef.h>
#include <stdint.h>

/* OWASP Password Storage Cheat Sheet, "Argon2id": "a minimum configuration of 19 MiB of
 * memory, an iteration count of 2, and 1 degree of parallelism". RFC 9106 section 4 gives
 * 16 bytes of salt and a 256-bit tag. */
#define LG_ARGON2_DEFAULT_M_KIB 19456u
#define LG_ARGON2_DEFAULT_T     2u
#define LG_ARGON2_DEFAULT_P     1u
#define LG_ARGON2_SALT_LEN      16u
#define LG_ARGON2_HASH_LEN      32u
/* Bounds a route's configuration may set (and what /verify accepts in a stored hash): 4 GiB,
 * 1000 passes, 64 lanes (libargon2 runs one thread per lane). */
#define LG_ARGON2_MAX_M_KIB     4194304u
#define LG_ARGON2_MAX_T         1000u
#define LG_ARGON2_MAX_P         64u
/* Longest PHC string lg_argon2_hash writes for any allowed parameters, with its '\n'. */
#define LG_ARGON2_PHC_MAX       128u

struct lg_argon2_params {
	uint32_t m_kib;    /* memory per hash, KiB; at least 8 * p (libargon2) */
	uint32_t t;        /* passes over the memory */
	uint32_t p;        /* lanes (threads while one hash runs) */
};

/* Checks p against the bounds above and libargon2's m >= 8 * p. Returns 0, or -1 with a short
 * reason in err (err_cap bytes, NUL-terminated). */
int lg_argon2_check(const struct lg_argon2_params *p, char *err, size_t err_cap);

/* Fills salt with len random bytes from getrandom(2) (blocking only before the kernel's pool
 * is initialised, never afterwards). Returns 0, or -1 with errno. */
int lg_argon2_salt(unsigned char *salt, size_t len);

/* Hashes pw (pw_len bytes, any content, may be empty) with argon2id, version 0x13, the given
 * parameters and salt (salt_len >= 8 bytes), a LG_ARGON2_HASH_LEN-byte tag, and writes the
 * PHC string "$argon2id$v=19$m=..,t=..,p=..$<salt b64>$<hash b64>" followed by '\n' into out
 * (cap bytes; LG_ARGON2_PHC_MAX always suffices for a 16-byte salt), its length in *out_len.
 * Returns 0, 400 for parameters out of range, or 500 (out of memory, cap too small); err gets
 * a short message for a non-zero return. */
int lg_argon2_hash(const struct lg_argon2_params *p, const void *pw, size_t pw_len,
    const unsigned char *salt, size_t salt_len, char *out, size_t cap, size_t *out_len,
    char *err, size_t err_cap);

/* /verify: body is "<PHC string>\n<password>" — the first line (a trailing '\r' dropped) is an
 * argon2id PHC string as /hash answers it, every byte after the first '\n' is the password,
 * verbatim. The stored hash's own parameters are used, but refused with 400 above `max`
 * (m_kib, t, p), so a crafted hash cannot make this process allocate gigabytes. The tag is
 * compared in constant time by libargon2 (argon2id_verify). Sets *match to 1 or 0 and returns
 * 0, or returns 400 (malformed body or hash, parameters above max) or 500 (out of memory),
 * with a short message in err. */
int lg_argon2_verify(const struct lg_argon2_params *max, const void *body, size_t len,
    int *match, char *err, size_t err_cap);

#endif
