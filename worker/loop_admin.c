/* Which listener each connection of this loop worker came from (worker/loop_admin.h): asked
 * by the router (admin-only routes, lg_loop_admin_conn), set by the accept path (loop.c). */
#include "worker/loop_admin.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/loop.h"

static uint8_t *admin_mark;        /* per descriptor number: accepted on the admin listener */
static size_t admin_cap;

int
lg_loop_admin_conn(int fd)
{
	return fd >= 0 && (size_t)fd < admin_cap && admin_mark[fd];
}

/* Records which listener fd came from. Returns -1 when the mark cannot be kept (ENOMEM): the
 * caller closes fd rather than let an admin connection pass for a public one. */
int
lg_loop_mark_conn(int fd, int admin)
{
	if ((size_t)fd >= admin_cap) {
		size_t cap = (size_t)fd * 2 + 64;
		uint8_t *p = realloc(admin_mark, cap);

		if (p == NULL)
			return -1;
		memset(p + admin_cap, 0, cap - admin_cap);
		admin_mark = p;
		admin_cap = cap;
	}
	admin_mark[fd] = (uint8_t)admin;
	return 0;
}
