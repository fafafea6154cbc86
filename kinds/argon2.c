#include "kinds/argon2.h"

#include <argon2.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

int
lg_argon2_check(const struct lg_argon2_params *p, char *err, size_t err_cap)
{
	if (p->p < 1 || p->p > LG_ARGON2_MAX_P) {
		snprintf(err, err_cap, "argon2 lanes %u not in 1..%u", p->p, LG_ARGON2_MAX_P);
		return -1;
	}
	if (p->t < 1 || p->t > LG_ARGON2_MAX_T) {
		snprintf(err, err_cap, "argon2 passes %u not in 1..%u", p->t, LG_ARGON2_MAX_T);
		return -1;
	}
	if (p->m_kib < 8 * p->p || p->m_kib > LG_ARGON2_MAX_M_KIB) {
		snprintf(err, err_cap, "argon2 memory %u KiB not in %u..%u (at least 8 KiB a lane)",
		    p->m_kib, 8 * p->p, LG_ARGON2_MAX_M_KIB);
		return -1;
	}
	return 0;
}

int
lg_argon2_salt(unsigned char *salt, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom(salt + got, len - got, 0);

		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

int
lg_argon2_hash(const struct lg_argon2_params *p, const void *pw, size_t pw_len,
    const unsigned char *salt, size_t salt_len, char *out, size_t cap, size_t *out_len,
    char *err, size_t err_cap)
{
	size_t need;
	int r;

	*out_len = 0;
	if (lg_argon2_check(p, err, err_cap) == -1)
		return 400;
	if (salt_len < ARGON2_MIN_SALT_LENGTH || pw_len > ARGON2_MAX_PWD_LENGTH) {
		snprintf(err, err_cap, "argon2: salt or password length out of range");
		return 400;
	}
	/* argon2_encodedlen counts the terminating NUL; our '\n' takes its place. */
	need = argon2_encodedlen(p->t, p->m_kib, p->p, (uint32_t)salt_len, LG_ARGON2_HASH_LEN,
	    Argon2_id);
	if (need > cap) {
		snprintf(err, err_cap, "argon2: %zu output bytes needed, %zu available", need, cap);
		return 500;
	}
	r = argon2id_hash_encoded(p->t, p->m_kib, p->p, pw_len ? pw : "", pw_len, salt,
	    salt_len, LG_ARGON2_HASH_LEN, out, cap);
	if (r != ARGON2_OK) {
		snprintf(err, err_cap, "argon2: %s", argon2_error_message(r));
		return r == ARGON2_MEMORY_ALLOCATION_ERROR ? 500 : 400;
	}
	need = strlen(out);
	out[need] = '\n';
	*out_len = need + 1;
	return 0;
}

/* Reads the decimal after "<key>=" at *s, advancing past it. -1 when absent or above max. */
static int
phc_number(const char **s, const char *end, char key, uint32_t max, uint32_t *v)
{
	const char *q = *s;
	uint64_t x = 0;

	if (end - q < 3 || q[0] != key || q[1] != '=' || q[2] < '0' || q[2] > '9')
		return -1;
	for (q += 2; q < end && *q >= '0' && *q <= '9'; q++)
		if ((x = x * 10 + (uint64_t)(*q - '0')) > max)
			return -1;
	*v = (uint32_t)x;
	*s = q;
	return 0;
}

/* Parses "$argon2id$v=19$m=M,t=T,p=P$" at the start of the PHC string h (len bytes) and checks
 * M, T, P against max before libargon2 sees the string: argon2id_verify would otherwise
 * allocate whatever m the string names. */
static int
phc_params_ok(const struct lg_argon2_params *max, const char *h, size_t len, char *err,
    size_t err_cap)
{
	static const char prefix[] = "$argon2id$v=19$";
	const char *s = h + sizeof(prefix) - 1, *end = h + len;
	struct lg_argon2_params got;

	if (len < sizeof(prefix) - 1 || memcmp(h, prefix, sizeof(prefix) - 1) != 0) {
		snprintf(err, err_cap, "verify: the first line is not an argon2id v=19 PHC string");
		return -1;
	}
	if (phc_number(&s, end, 'm', max->m_kib, &got.m_kib) == -1 || s == end || *s++ != ',' ||
	    phc_number(&s, end, 't', max->t, &got.t) == -1 || s == end || *s++ != ',' ||
	    phc_number(&s, end, 'p', max->p, &got.p) == -1 || s == end || *s != '$') {
		snprintf(err, err_cap, "verify: hash parameters malformed or above this route's "
		    "limits (m=%u,t=%u,p=%u)", max->m_kib, max->t, max->p);
		return -1;
	}
	return 0;
}

int
lg_argon2_verify(const struct lg_argon2_params *max, const void *body, size_t len,
    int *match, char *err, size_t err_cap)
{
	const char *b = body, *nl = len ? memchr(b, '\n', len) : NULL;
	char phc[LG_ARGON2_PHC_MAX * 2];
	size_t hlen;
	int r;

	*match = 0;
	if (nl == NULL) {
		snprintf(err, err_cap, "verify: expected \"<PHC string>\\n<password>\"");
		return 400;
	}
	hlen = (size_t)(nl - b);
	if (hlen > 0 && b[hlen - 1] == '\r')
		hlen--;
	if (hlen >= sizeof(phc) || memchr(b, '\0', hlen) != NULL) {
		snprintf(err, err_cap, "verify: the PHC string is too long or holds a NUL byte");
		return 400;
	}
	if (phc_params_ok(max, b, hlen, err, err_cap) == -1)
		return 400;
	memcpy(phc, b, hlen);
	phc[hlen] = '\0';
	r = argon2id_verify(phc, nl + 1, len - (size_t)(nl - b) - 1);
	if (r == ARGON2_OK || r == ARGON2_VERIFY_MISMATCH) {
		*match = r == ARGON2_OK;
		return 0;
	}
	snprintf(err, err_cap, "verify: %s", argon2_error_message(r));
	return r == ARGON2_MEMORY_ALLOCATION_ERROR ? 500 : 400;
}
