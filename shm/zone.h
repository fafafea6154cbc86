/* A shared-memory zone: a memfd mapped MAP_SHARED, inherited by every process forked after it
 * is made. The arena, the single-flight table and the cache are each one. */
#ifndef LG_SHM_ZONE_H
#define LG_SHM_ZONE_H

#include <stdint.h>

/* Makes a zone of size bytes (> 0): a memfd named name (memfd_create(2), MFD_CLOEXEC; the name
 * shows in /proc/PID/maps), its first `backed` bytes allocated now (fallocate(2): a page fault
 * past a memory cgroup's limit would otherwise kill or block the process that touches it; 0:
 * none), the whole of it mapped shared, read-write. Stores the descriptor in *fd and the
 * mapping in *base; the caller unmaps and closes them. Returns 0, or -1 with errno from
 * memfd_create, ftruncate, fallocate or mmap (ENOMEM, ENOSPC, EMFILE...), *fd -1 and *base
 * NULL: nothing is left open. */
int lg_zone_map(const char *name, uint64_t size, uint64_t backed, int *fd, unsigned char **base);

/* Unmaps a zone (base, size bytes, as lg_zone_map made it) and closes fd. The caller clears
 * its own fields. */
void lg_zone_unmap(void *base, uint64_t size, int fd);

#endif
