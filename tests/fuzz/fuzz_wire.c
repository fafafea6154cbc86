/* libFuzzer harness for the msgpack header decoder (shm/wire.c lg_wire_decode): any datagram
 * either decodes to a header that re-encodes to a datagram decoding to the same header, or is
 * refused with errno set; nothing is read past len. A decoded header equals the one decoded
 * from its re-encoding, field by field of its type's payload and as bytes (decode zeroes the
 * rest of the struct). A JOB header that decodes is also run through lg_wire_check_job against
 * a small real arena, and when it passes, its slot record through lg_slot_job_read. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shm/arena.h"
#include "shm/slot.h"
#include "shm/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct lg_arena arena;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lg_msg m, again;
	char *buf = malloc(size ? size : 1); /* exact size: ASan sees any over-read */
	char enc[LG_WIRE_MAX], enc2[LG_WIRE_MAX];
	int n, n2;

	if (arena.base == NULL && lg_arena_create(&arena, 4, 2, 4096, 4096) == -1)
		abort();
	memcpy(buf, data, size);
	errno = 0;
	if (lg_wire_decode(buf, size, &m) == -1) {
		if (errno == 0)
			abort(); /* a refusal always says why */
		free(buf);
		return 0;
	}
	free(buf);
	n = lg_wire_encode(&m, enc, sizeof(enc));
	if (n < 0 || lg_wire_decode(enc, (size_t)n, &again) == -1)
		abort(); /* a decoded header must encode to something that decodes */
	n2 = lg_wire_encode(&again, enc2, sizeof(enc2));
	if (n2 != n || memcmp(enc, enc2, (size_t)n) != 0)
		abort(); /* decode and encode disagree */
	if (memcmp(&m, &again, sizeof(m)) != 0)
		abort(); /* the round trip lost or changed a field */
	if (m.type == LG_MSG_JOB && lg_wire_check_job(&m, &arena) == 0) {
		struct lg_job j;
		uint32_t owner;

		if (m.job.slot >= arena.nslots)
			abort(); /* the check let an out-of-range slot through */
		/* Never started here (FREE): the record is not ours to read. */
		if (lg_slot_job_read(&arena, m.job.slot, m.job.gen, 2, &j, &owner) != -1 || errno != ESTALE)
			abort();
	}
	return 0;
}
