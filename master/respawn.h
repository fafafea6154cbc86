/* Child deaths and respawn (master/ only, master/respawn.c). */
#ifndef LG_MASTER_RESPAWN_H
#define LG_MASTER_RESPAWN_H

struct master;
struct lg_gen;

/* SIGCHLD: reaps every child that has exited (waitpid(2), WNOHANG; as PID 1 also orphans
 * reparented to the master and module probes; an app process goes to lg_app_reaped, master/app.h).
 * For a row of a generation: marks its proc page
 * DOWN, kills what its jobs left in its process group, fails the job a compute process was
 * running (502, or 503 after an OOM kill) or reclaims the slots, flights and cache entries of a
 * loop worker, counts the restart and schedules the respawn (c->respawn_at) after a back-off.
 * A role that dies within a second of starting CRASH_LOOP_LIMIT times in a row sets
 * m->exit_code to 1 and calls m->stop(m, 2). */
void lg_respawn_reap(struct master *m);

/* Forks a process for every row of g that is not parked (lg_gen_spawn), handing each the
 * master's listen socket and signalfd to close. */
void lg_respawn_spawn_all(struct master *m, struct lg_gen *g);

#endif
