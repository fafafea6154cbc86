/* The inline handlers' part of the loop worker (worker/inline.c): the buffer /metrics and
 * /status are rendered into, embedded in struct lg_worker as w->render (loop.c sizes and
 * allocates it at start). A small header of its own because worker/inline.h includes
 * worker/conn.h. */
#ifndef LG_WORKER_INLINE_STATE_H
#define LG_WORKER_INLINE_STATE_H

#include <stddef.h>

struct lg_worker_render {
	char *buf;                    /* cap bytes */
	size_t cap;
	int busy;                     /* a response is still being written from it */
};

#endif
