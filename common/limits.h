/* Fixed limits and numbers every room shares (types only, no dependency): the one place where
 * the pool limit, the process role numbers and the slot-state count are written down. shm/
 * lays its pages out by them, master/ and stats/ index by them, common/config.h bounds the
 * configuration by them. */
#ifndef LG_COMMON_LIMITS_H
#define LG_COMMON_LIMITS_H

/* Pools a configuration may declare, the default one included: the pool pages of the master
 * page (shm/layout.h), the job channels (shm/channel.h), the sizing and resize tables. */
#define LG_MAX_POOLS 8

/* A limit as a string literal, for messages: LG_LIMIT_STR(LG_MAX_POOLS) is "8". */
#define LG_LIMIT_STR_(x) #x
#define LG_LIMIT_STR(x)  LG_LIMIT_STR_(x)

/* A value quoted in a message, cut to LG_CLIP_MAX bytes and "..." so that the reason after it
 * still fits: printf("'%.*s%s': %s", LG_CLIP(v), why); v a C string (<string.h>). */
#define LG_CLIP_MAX 120
#define LG_CLIP(v) (int)(strlen(v) > LG_CLIP_MAX ? LG_CLIP_MAX : strlen(v)), (v), \
	(strlen(v) > LG_CLIP_MAX ? "..." : "")

/* A child process's role: struct lg_proc_page role, master/gen.h struct lg_child, the master
 * page's restarts[role - 1]. 0 is no role (an unused proc page). */
enum lg_role { LG_ROLE_LOOP = 1, LG_ROLE_COMPUTE = 2 };
#define LG_ROLES 2 /* roles a restart is counted for: loop and compute */

/* Values of the slot word's state (shm/layout.h enum lg_slot_state, FREE .. RECLAIMING): the
 * size of a census (shm/slot.h lg_slot_census) and of its name table. */
#define LG_SLOT_STATES 8

#endif
