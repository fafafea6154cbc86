/* The inline handlers' part of the loop worker (worker/route/inline.c): the buffer /metrics and
 * /status are rendered into, embedded in struct lg_worker as w->render (allocated
 * at start by lg_inline_start). A small header of its own because worker/route/inline.h includes
 * worker/core/conn.h. */
#ifndef LG_WORKER_INLINE_STATE_H
#define LG_WORKER_INLINE_STATE_H

#include <stddef.h>

struct lg_worker_render {
	char *buf;                    /* cap bytes */
	size_t cap;
	int busy;                     /* a response is still being written from it */
};

/* A response body p was written or dropped: when p is the render buffer, the buffer is free for
 * the next rendering and 1 is returned; else 0 (p is the caller's to free). */
static inline int
lg_render_give_back(struct lg_worker_render *r, const char *p)
{
	if (p != r->buf)
		return 0;
	r->busy = 0;
	return 1;
}

#endif
