/* The loop worker's record of which listener each connection descriptor was accepted on (one
 * loop per process): the accept side. The router's question is lg_loop_admin_conn
 * (worker/loop.h). */
#ifndef LG_WORKER_LOOP_ADMIN_H
#define LG_WORKER_LOOP_ADMIN_H

/* Records whether fd (a descriptor just accepted) came from the admin listener (admin 1) or
 * another (0). Returns 0, or -1 when the mark cannot be kept (ENOMEM): the caller closes fd
 * rather than let an admin connection pass for a public one. */
int lg_loop_mark_conn(int fd, int admin);

#endif
