/* A connection's buffers, leaves of the core that call nothing back (worker/core/conn.h): the
 * pool its struct lg_conn comes from, the input bytes a room takes (the body bytes that came
 * with a head), and the response bodies several connections share. */
#include <stdlib.h>
#include <string.h>

#include "worker/core/conn.h"
#include "worker/core/conn_int.h"

struct lg_pool *
lg_conn_pool(struct lg_worker *w)
{
	if (w->pool.size == 0) /* two kept blocks: sporadic traffic maps nothing */
		lg_pool_init(&w->pool, sizeof(struct lg_conn), 2);
	return &w->pool;
}

struct lg_pool *
lg_conn_rbuf_pool(struct lg_worker *w)
{
	if (w->rbufs.size == 0) /* two kept: a steady stream of requests maps nothing */
		lg_pool_init(&w->rbufs, LG_CONN_RBUF, 2);
	return &w->rbufs;
}

int
lg_conn_rbuf_need(struct lg_conn *c)
{
	if (c->rbuf == NULL && (c->rbuf = lg_pool_get(lg_conn_rbuf_pool(c->w))) == NULL)
		return -1;
	return 0;
}

void
lg_conn_rbuf_drop(struct lg_conn *c)
{
	if (c->rbuf != NULL && c->rlen == 0) {
		lg_pool_put(&c->w->rbufs, c->rbuf);
		c->rbuf = NULL;
	}
}

struct lg_body *
lg_body_new(size_t len)
{
	struct lg_body *b = malloc(sizeof(*b) + (len ? len : 1));

	if (b == NULL)
		return NULL;
	b->refs = 1;
	b->len = len;
	return b;
}

void
lg_body_unref(struct lg_body *b)
{
	if (b != NULL && --b->refs == 0)
		free(b);
}

void
lg_conn_expect_body(struct lg_conn *c)
{
	c->state = LG_CONN_BODY;
}

size_t
lg_conn_buffered(const struct lg_conn *c)
{
	return c->rlen;
}

void
lg_conn_take(struct lg_conn *c, void *dst, size_t n)
{
	if (n == 0)
		return; /* c may hold no buffer */
	memcpy(dst, c->rbuf, n);
	memmove(c->rbuf, c->rbuf + n, c->rlen - n);
	c->rlen -= n;
}
