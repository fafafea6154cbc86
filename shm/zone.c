#include "shm/zone.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

int
lg_zone_map(const char *name, uint64_t size, uint64_t backed, int *fd, unsigned char **base)
{
	void *p;
	int saved;

	*base = NULL;
	if ((*fd = memfd_create(name, MFD_CLOEXEC)) == -1)
		return -1;
	if (ftruncate(*fd, (off_t)size) == -1)
		goto fail;
	if (backed > 0 && fallocate(*fd, 0, 0, (off_t)backed) == -1)
		goto fail;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	*base = p;
	return 0;
fail:
	saved = errno;
	close(*fd);
	*fd = -1;
	errno = saved;
	return -1;
}

void
lg_zone_unmap(void *base, uint64_t size, int fd)
{
	munmap(base, size);
	close(fd);
}
