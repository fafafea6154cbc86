/* The master's state (master/ only): the answers every part of it shares. */
#include "master/state.h"

#include <stdio.h>
#include <string.h>

#include "master/gen.h"
#include "master/notify.h"

/* The generation that answers for the server: the newest ready one not retiring. */
struct lg_gen *
lg_master_serving(struct master *m)
{
	for (struct lg_gen *g = m->gens; g != NULL; g = g->next)
		if (g->ready && !g->retiring)
			return g;
	return m->gens;
}

void
lg_master_send_status(struct master *m, int ready)
{
	char status[640];
	size_t n;

	lg_gen_status_line(lg_master_serving(m), status, sizeof(status));
	if (m->reload_error[0] && (n = strlen(status)) < sizeof(status))
		snprintf(status + n, sizeof(status) - n, "; last reload refused: %s",
		    m->reload_error);
	if (ready)
		lg_notify_ready(status);
	else
		lg_notify_status(status);
}
