/* The channel headers: one msgpack array of unsigned integers per message (shm/wire.h).
 *
 * Encoding goes through a msgpack_packer whose write callback appends to the caller's buffer,
 * so a loop worker builds a header without touching the heap.
 *
 * Decoding reads the top-level array header by hand and hands msgpack_unpack_next one element
 * at a time, instead of one call over the whole datagram. The reason is msgpack-c's allocation
 * pattern: on reading an array or map header that declares n entries it allocates n objects in
 * its zone at once, before it knows whether the bytes are there. The 5-byte datagram
 * "dd 01 00 00 00" then costs a 384 MiB allocation, and "dd ff ff ff ff" asks for ~96 GiB, which
 * glibc refuses but an ASan build aborts on. Here the top-level array is never given to the
 * unpacker and a nested container is refused from its first byte, so the unpacker only ever
 * decodes scalars; for integers it allocates nothing, so decoding a good header is heap-free too.
 *
 * Byte values cited below come from the msgpack specification,
 * https://github.com/msgpack/msgpack/blob/master/spec.md ("Formats").
 */
#include "shm/wire.h"

#include <errno.h>
#include <msgpack.h>
#include <stddef.h>
#include <string.h>

#include "shm/slot.h"

/* One positional field after version and type: where it lives in struct lg_msg and its width.
 * Encoder and decoder share these tables, so the order is written down exactly once. */
struct field {
	size_t off;     /* offsetof(struct lg_msg, ...) */
	int wide;       /* 1: uint64_t field; 0: uint32_t, larger values are refused */
};

#define F32(name) { offsetof(struct lg_msg, name), 0 }
#define F64(name) { offsetof(struct lg_msg, name), 1 }
#define NELEM(x)  (sizeof(x) / sizeof((x)[0]))

static const struct field job_fields[] = { F32(job.slot), F32(job.gen) };
static const struct field done_fields[] = { F32(done.slot), F32(done.gen) };
static const struct field kill_fields[] = { F32(kill.slot), F32(kill.gen) };
static const struct field retire_fields[] = { F32(retire.seq) };
static const struct field wake_fields[] = {
	F32(wake.flight), F32(wake.flight_gen), F32(wake.http_status), F32(wake.cache_idx),
	F64(wake.cache_word), F64(wake.queue_ns), F64(wake.run_ns),
};
static const struct field unwanted_fields[] = { F32(unwanted.flight), F32(unwanted.flight_gen) };
static const struct field upwake_fields[] = { F32(upwake.upstream) };

/* Every byte of each payload struct is a field of its table (4 per F32, 8 per F64): a field
 * added to a struct and forgotten here does not compile. */
_Static_assert(sizeof(struct lg_msg_job) == 2 * 4 && sizeof(struct lg_msg_done) == 2 * 4 &&
    sizeof(struct lg_msg_kill) == 2 * 4 && sizeof(struct lg_msg_retire) == 4 &&
    sizeof(struct lg_msg_wake) == 4 * 4 + 3 * 8 && sizeof(struct lg_msg_unwanted) == 2 * 4 &&
    sizeof(struct lg_msg_upwake) == 4,
    "a payload field missing from its table");

#define HEAD 2 /* version and type precede the fields */

/* The longest possible encoding in any msgpack format choice (array 32 header, then every
 * element as a 9-byte uint 64), so even a peer that does not pick the shortest forms fits. */
_Static_assert(5 + (HEAD + NELEM(wake_fields)) * 9 <= LG_WIRE_MAX, "LG_WIRE_MAX too small");

static const struct field *
fields_of(uint32_t type, size_t *n)
{
	switch (type) {
	case LG_MSG_JOB:
		*n = NELEM(job_fields);
		return job_fields;
	case LG_MSG_DONE:
		*n = NELEM(done_fields);
		return done_fields;
	case LG_MSG_KILL:
		*n = NELEM(kill_fields);
		return kill_fields;
	case LG_MSG_UNWANTED:
		*n = NELEM(unwanted_fields);
		return unwanted_fields;
	case LG_MSG_RETIRE:
		*n = NELEM(retire_fields);
		return retire_fields;
	case LG_MSG_WAKE:
		*n = NELEM(wake_fields);
		return wake_fields;
	case LG_MSG_UPWAKE:
		*n = NELEM(upwake_fields);
		return upwake_fields;
	}
	return NULL;
}

static uint64_t
get(const struct lg_msg *m, const struct field *f)
{
	const char *p = (const char *)m + f->off;

	return f->wide ? *(const uint64_t *)p : *(const uint32_t *)p;
}

static void
put(struct lg_msg *m, const struct field *f, uint64_t v)
{
	char *p = (char *)m + f->off;

	if (f->wide)
		*(uint64_t *)p = v;
	else
		*(uint32_t *)p = (uint32_t)v;
}

/* The caller's fixed buffer, filled by the packer. */
struct sink {
	char *buf;
	size_t cap;
	size_t len;
};

/* msgpack_packer write callback: a non-zero return makes the msgpack_pack_* call fail, which
 * is how "buffer full" reaches lg_wire_encode. Nothing is written past cap. */
static int
sink_write(void *data, const char *p, size_t n)
{
	struct sink *s = data;

	if (n > s->cap - s->len)
		return -1;
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	return 0;
}

int
lg_wire_encode(const struct lg_msg *m, char *buf, size_t cap)
{
	struct sink s = { buf, cap, 0 };
	msgpack_packer pk;
	const struct field *f;
	size_t n;
	int err;

	if ((f = fields_of(m->type, &n)) == NULL) {
		errno = EINVAL;
		return -1;
	}
	msgpack_packer_init(&pk, &s, sink_write);
	/* msgpack_pack_uint* choose the shortest format for each value, as the spec asks of
	 * serializers; that keeps every header within LG_WIRE_MAX with room to spare. */
	err = msgpack_pack_array(&pk, HEAD + n) != 0 ||
	    msgpack_pack_uint32(&pk, LG_WIRE_VERSION) != 0 ||
	    msgpack_pack_uint32(&pk, m->type) != 0;
	for (size_t i = 0; i < n && !err; i++)
		err = msgpack_pack_uint64(&pk, get(m, &f[i])) != 0;
	if (err) {
		errno = ENOSPC;
		return -1;
	}
	return (int)s.len;
}

/* Reads the array header at the start of p into *n ("array format family": fixarray
 * 1001xxxx, array 16 0xdc + big-endian uint16, array 32 0xdd + big-endian uint32).
 * Returns the header's length, or 0 when p does not start with a complete array header. */
static size_t
array_header(const unsigned char *p, size_t len, uint64_t *n)
{
	if (len >= 1 && (p[0] & 0xf0) == 0x90) {
		*n = p[0] & 0x0f;
		return 1;
	}
	if (len >= 3 && p[0] == 0xdc) {
		*n = (uint64_t)p[1] << 8 | p[2];
		return 3;
	}
	if (len >= 5 && p[0] == 0xdd) {
		*n = (uint64_t)p[1] << 24 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 8 | p[4];
		return 5;
	}
	return 0;
}

/* First byte of a map or array: fixmap 0x80-0x8f, fixarray 0x90-0x9f, array 16/32 0xdc/0xdd,
 * map 16/32 0xde/0xdf. None is a valid element, and unpacking one would allocate (see top). */
static int
is_container(unsigned char b)
{
	return (b >= 0x80 && b <= 0x9f) || (b >= 0xdc && b <= 0xdf);
}

/* Decodes the element at buf + *off, which must be a non-negative msgpack Integer, into *v and
 * advances *off past it. Returns 0, or -1 when it is truncated, a container or another type. */
static int
next_uint(const char *buf, size_t len, size_t *off, uint64_t *v)
{
	msgpack_unpacked u;
	int rc = -1;

	if (*off >= len || is_container((unsigned char)buf[*off]))
		return -1;
	msgpack_unpacked_init(&u);
	/* msgpack-c reports every Integer >= 0 as POSITIVE_INTEGER whether it came as uint N or
	 * int N: the spec has one Integer type whose formats are interchangeable. Negative
	 * integers, floats, nil, bool, str, bin and ext are all other object types. */
	if (msgpack_unpack_next(&u, buf, len, off) == MSGPACK_UNPACK_SUCCESS &&
	    u.data.type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		*v = u.data.via.u64;
		rc = 0;
	}
	/* A str or bin element makes the unpacker create a zone; free it on every outcome. */
	msgpack_unpacked_destroy(&u);
	return rc;
}

/* Version and type come first so that a header of another wire version is reported as such
 * (EPROTO) whatever its shape, and an unknown type as EINVAL, before the count is judged. */
int
lg_wire_decode(const char *buf, size_t len, struct lg_msg *m)
{
	const struct field *f;
	struct lg_msg out;
	uint64_t count, version, type, v;
	size_t off, n;

	if ((off = array_header((const unsigned char *)buf, len, &count)) == 0 || count < 1 ||
	    next_uint(buf, len, &off, &version) == -1)
		goto bad;
	if (version != LG_WIRE_VERSION) {
		errno = EPROTO;
		return -1;
	}
	if (count < HEAD || next_uint(buf, len, &off, &type) == -1)
		goto bad;
	if (type > UINT32_MAX || (f = fields_of((uint32_t)type, &n)) == NULL) {
		errno = EINVAL;
		return -1;
	}
	if (count != HEAD + n)
		goto bad;
	memset(&out, 0, sizeof(out));
	out.type = (uint32_t)type;
	for (size_t i = 0; i < n; i++) {
		if (next_uint(buf, len, &off, &v) == -1 || (!f[i].wide && v > UINT32_MAX))
			goto bad;
		put(&out, &f[i], v);
	}
	if (off != len) /* one datagram is exactly one header: trailing bytes are an error */
		goto bad;
	memcpy(m, &out, sizeof(out)); /* padding and the rest of the union too: all zero */
	return 0;
bad:
	errno = EBADMSG;
	return -1;
}

int
lg_wire_check_job(const struct lg_msg *m, const struct lg_arena *a)
{
	/* The header names a slot and nothing else: its record is read from our own arena
	 * once the slot is ours (shm/slot.h lg_slot_job_read), never taken from the sender. */
	if (m->type != LG_MSG_JOB || m->job.slot >= a->nslots) {
		errno = ERANGE;
		return -1;
	}
	if (lg_slot_gen(atomic_load(&a->slots[m->job.slot].word)) != m->job.gen) {
		errno = ESTALE;
		return -1;
	}
	return 0;
}
