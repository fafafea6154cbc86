/* Unit tests for shm/slot.c: the job-slot state machine, on a real arena, and one test with
 * real processes racing on it (the arena is MAP_SHARED, so fork shares it as the server does). */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/arena.h"
#include "shm/slot.h"

#define NSLOTS 4
#define REGION (256u * 1024u)

static struct lg_arena arena;

static int
setup(void **state)
{
	if (lg_arena_create(&arena, NSLOTS, 2, REGION, REGION) == -1)
		return -1;
	*state = &arena;
	return 0;
}

static int
teardown(void **state)
{
	lg_arena_destroy(&arena);
	return 0;
}

static uint64_t
word(const struct lg_arena *a, int i)
{
	return atomic_load(&a->slots[i].word);
}

static enum lg_slot_state
state_of(const struct lg_arena *a, int i)
{
	return lg_slot_state(word(a, i));
}

/* Claims a slot and moves it to `to` along the normal path; returns its index. */
static int
make(struct lg_arena *a, uint32_t owner, enum lg_slot_state to, uint32_t *gen)
{
	int i = lg_slot_claim(a, owner, gen);
	struct lg_slot *s;

	assert_true(i >= 0);
	s = &a->slots[i];
	if (to == LG_SLOT_CLAIMED)
		return i;
	assert_int_equal(lg_slot_move(s, *gen, LG_SLOT_CLAIMED, LG_SLOT_QUEUED), 0);
	if (to == LG_SLOT_QUEUED)
		return i;
	assert_int_equal(lg_slot_start(s, *gen, 4242, 10), 0);
	if (to == LG_SLOT_RUNNING)
		return i;
	assert_int_equal(lg_slot_finish(s, *gen, to == LG_SLOT_DONE ? LG_JOB_OK : LG_JOB_ERROR,
	    20), 1);
	assert_int_equal(state_of(a, i), to);
	return i;
}

static void
test_word_fields(void **state)
{
	uint64_t w = lg_slot_word(UINT32_MAX, 0xffffff, LG_SLOT_RECLAIMING);

	assert_int_equal(lg_slot_gen(w), UINT32_MAX);
	assert_int_equal(lg_slot_owner(w), 0xffffff);
	assert_int_equal(lg_slot_state(w), LG_SLOT_RECLAIMING);
	w = lg_slot_word(7, LG_MAX_LOOPS - 1, LG_SLOT_QUEUED);
	assert_int_equal(lg_slot_gen(w), 7);
	assert_int_equal(lg_slot_owner(w), LG_MAX_LOOPS - 1);
	assert_int_equal(lg_slot_state(w), LG_SLOT_QUEUED);
}

static void
test_claim_until_eagain(void **state)
{
	struct lg_arena *a = *state;
	int seen[NSLOTS] = { 0 };
	uint32_t gen;
	int i;

	for (int n = 0; n < NSLOTS; n++) {
		i = lg_slot_claim(a, 3, &gen);
		assert_true(i >= 0 && i < NSLOTS);
		assert_int_equal(seen[i]++, 0);
		assert_int_equal(gen, 1);
		assert_int_equal(word(a, i), lg_slot_word(1, 3, LG_SLOT_CLAIMED));
	}
	/* The table is the bounded queue: a full table answers EAGAIN at once, every time. */
	for (int n = 0; n < 3; n++) {
		errno = 0;
		assert_int_equal(lg_slot_claim(a, 3, &gen), -1);
		assert_int_equal(errno, EAGAIN);
	}
	assert_int_equal(lg_slot_release(&a->slots[2], 1), LG_SLOT_FREE);
	assert_int_equal(lg_slot_claim(a, 5, &gen), 2);
	assert_int_equal(gen, 2);
}

static void
test_generation_bump(void **state)
{
	struct lg_arena *a = *state;
	uint32_t last[NSLOTS] = { 0 }, gen;

	for (int n = 0; n < 5 * NSLOTS; n++) {
		int i = lg_slot_claim(a, (uint32_t)n, &gen);

		assert_true(i >= 0);
		assert_int_equal(gen, last[i] + 1);
		assert_int_equal(lg_slot_gen(word(a, i)), gen);
		assert_int_equal(lg_slot_owner(word(a, i)), (uint32_t)n);
		last[i] = gen;
		assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_FREE);
		assert_int_equal(lg_slot_gen(word(a, i)), gen); /* release keeps the generation */
	}
}

static void
test_owner_in_word(void **state)
{
	struct lg_arena *a = *state;
	static const uint32_t owners[] = { 0, 1, 1000, LG_MAX_LOOPS - 1 };
	uint32_t gen;

	for (int n = 0; n < 4; n++) {
		int i = lg_slot_claim(a, owners[n], &gen);

		assert_true(i >= 0);
		assert_int_equal(lg_slot_owner(word(a, i)), owners[n]);
		assert_int_equal(lg_slot_state(word(a, i)), LG_SLOT_CLAIMED);
	}
}

static void
test_happy_path(void **state)
{
	struct lg_arena *a = *state;
	struct lg_slot *s;
	uint32_t gen;
	int i;

	/* Leftovers of an earlier job must not leak into the next one. */
	for (int k = 0; k < NSLOTS; k++) {
		a->slots[k].status = LG_JOB_CRASHED;
		a->slots[k].job.in_len = a->slots[k].out_len = 99;
		a->slots[k].start_ns = a->slots[k].end_ns = 99;
		atomic_store(&a->slots[k].runner_pid, 99);
	}
	i = lg_slot_claim(a, 1, &gen);
	assert_true(i >= 0);
	s = &a->slots[i];
	assert_int_equal(s->status, LG_JOB_OK);
	assert_int_equal(s->job.in_len, 0);
	assert_int_equal(s->out_len, 0);
	assert_int_equal(s->start_ns, 0);
	assert_int_equal(s->end_ns, 0);
	assert_int_equal(atomic_load(&s->runner_pid), 0);
	assert_int_equal(lg_slot_move(s, gen, LG_SLOT_CLAIMED, LG_SLOT_QUEUED), 0);
	assert_int_equal(lg_slot_start(s, gen, 1234, 100), 0);
	assert_int_equal(word(a, i), lg_slot_word(gen, 1, LG_SLOT_RUNNING));
	assert_int_equal(atomic_load(&s->runner_pid), 1234);
	assert_int_equal(s->start_ns, 100);
	assert_int_equal(lg_slot_finish(s, gen, LG_JOB_OK, 250), 1);
	assert_int_equal(word(a, i), lg_slot_word(gen, 1, LG_SLOT_DONE));
	assert_int_equal(s->status, LG_JOB_OK);
	assert_int_equal(s->end_ns, 250);
	assert_int_equal(lg_slot_release(s, gen), LG_SLOT_FREE);
	assert_int_equal(word(a, i), lg_slot_word(gen, 1, LG_SLOT_FREE));
}

static void
test_move_errors(void **state)
{
	struct lg_arena *a = *state;
	uint32_t gen;
	int i = make(a, 1, LG_SLOT_CLAIMED, &gen);
	struct lg_slot *s = &a->slots[i];

	errno = 0;
	assert_int_equal(lg_slot_move(s, gen, LG_SLOT_QUEUED, LG_SLOT_RUNNING), -1);
	assert_int_equal(errno, EBUSY);
	errno = 0;
	assert_int_equal(lg_slot_start(s, gen, 1, 1), -1); /* not queued yet */
	assert_int_equal(errno, EBUSY);
	errno = 0;
	assert_int_equal(lg_slot_move(s, gen + 1, LG_SLOT_CLAIMED, LG_SLOT_QUEUED), -1);
	assert_int_equal(errno, ESTALE);
	assert_int_equal(state_of(a, i), LG_SLOT_CLAIMED);
}

/* Client gone while queued: the owner releases, and the compute process that later reads the
 * header cannot start it, so the job never runs. */
static void
test_cancel_queued(void **state)
{
	struct lg_arena *a = *state;
	uint32_t gen, gen2;
	int i = make(a, 2, LG_SLOT_QUEUED, &gen), j;

	assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_FREE);
	errno = 0;
	assert_int_equal(lg_slot_start(&a->slots[i], gen, 77, 1), -1);
	assert_true(errno == EBUSY || errno == ESTALE);
	assert_int_equal(state_of(a, i), LG_SLOT_FREE);
	assert_int_equal(atomic_load(&a->slots[i].runner_pid), 0);
	/* Even once the slot is reused and queued again, the old header stays dead. */
	for (int n = 0; n < NSLOTS; n++) {
		j = make(a, 3, LG_SLOT_QUEUED, &gen2);
		if (j == i)
			break;
	}
	assert_int_equal(j, i);
	errno = 0;
	assert_int_equal(lg_slot_start(&a->slots[i], gen, 77, 1), -1);
	assert_int_equal(errno, ESTALE);
	assert_int_equal(lg_slot_start(&a->slots[i], gen2, 78, 1), 0);
}

/* Deadline or client gone while running: the slot waits for the compute process to finish. */
static void
test_abandon_running(void **state)
{
	struct lg_arena *a = *state;
	uint32_t gen;
	int i = make(a, 1, LG_SLOT_RUNNING, &gen);
	struct lg_slot *s = &a->slots[i];

	assert_int_equal(lg_slot_release(s, gen), LG_SLOT_ABANDONED);
	errno = 0;
	assert_int_equal(lg_slot_release(s, gen), -1);
	assert_int_equal(errno, ESTALE);
	assert_int_equal(lg_slot_finish(s, gen, LG_JOB_OK, 5), 0); /* freed, nobody to tell */
	assert_int_equal(word(a, i), lg_slot_word(gen, 1, LG_SLOT_FREE));
	errno = 0;
	assert_int_equal(lg_slot_finish(s, gen, LG_JOB_OK, 5), -1);
	assert_int_equal(errno, ESTALE);
	/* The master finishing for a compute process that died while abandoned: same result. */
	i = make(a, 1, LG_SLOT_RUNNING, &gen);
	assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_ABANDONED);
	assert_int_equal(lg_slot_finish(&a->slots[i], gen, LG_JOB_CRASHED, 5), 0);
	assert_int_equal(state_of(a, i), LG_SLOT_FREE);
}

static void
test_finish_failed(void **state)
{
	struct lg_arena *a = *state;
	static const enum lg_job_status bad[] = { LG_JOB_BAD_INPUT, LG_JOB_ERROR, LG_JOB_CRASHED };

	for (int k = 0; k < 3; k++) {
		uint32_t gen;
		int i = make(a, 1, LG_SLOT_RUNNING, &gen);

		assert_int_equal(lg_slot_finish(&a->slots[i], gen, bad[k], 9), 1);
		assert_int_equal(state_of(a, i), LG_SLOT_FAILED);
		assert_int_equal(a->slots[i].status, bad[k]);
		assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_FREE);
	}
}

static void
expect_estale(int rc)
{
	assert_int_equal(rc, -1);
	assert_int_equal(errno, ESTALE);
	errno = 0;
}

static void
test_stale_generation(void **state)
{
	struct lg_arena *a = *state;
	uint32_t gen;
	int i = make(a, 1, LG_SLOT_CLAIMED, &gen);
	struct lg_slot *s = &a->slots[i];

	expect_estale(lg_slot_release(s, gen - 1));
	expect_estale(lg_slot_release(s, gen + 1));
	expect_estale(lg_slot_move(s, gen - 1, LG_SLOT_CLAIMED, LG_SLOT_QUEUED));
	assert_int_equal(lg_slot_move(s, gen, LG_SLOT_CLAIMED, LG_SLOT_QUEUED), 0);
	expect_estale(lg_slot_finish(s, gen, LG_JOB_OK, 1)); /* QUEUED cannot finish */
	expect_estale(lg_slot_start(s, gen - 1, 1, 1));
	assert_int_equal(lg_slot_start(s, gen, 1, 1), 0);
	expect_estale(lg_slot_finish(s, gen - 1, LG_JOB_OK, 1));
	expect_estale(lg_slot_release(s, gen - 1));
	assert_int_equal(state_of(a, i), LG_SLOT_RUNNING);
	assert_int_equal(lg_slot_finish(s, gen, LG_JOB_OK, 1), 1);
	expect_estale(lg_slot_finish(s, gen, LG_JOB_OK, 1)); /* DONE cannot finish again */
	assert_int_equal(lg_slot_release(s, gen), LG_SLOT_FREE);
	expect_estale(lg_slot_release(s, gen));              /* already FREE */
	assert_int_equal(state_of(a, i), LG_SLOT_FREE);
}

static void
test_reclaim_owner(void **state)
{
	static const enum lg_slot_state mine[] = { LG_SLOT_CLAIMED, LG_SLOT_QUEUED,
		LG_SLOT_RUNNING, LG_SLOT_DONE, LG_SLOT_FAILED, LG_SLOT_CLAIMED };
	struct lg_arena a;
	uint32_t gen[8], g;
	int idx[8];
	uint64_t other[2];

	assert_int_equal(lg_arena_create(&a, 8, 2, LG_PAGE, LG_PAGE), 0);
	for (int k = 0; k < 6; k++)
		idx[k] = make(&a, 1, mine[k], &gen[k]);
	/* The last one is released already: FREE, but still carrying owner 1 in its word. */
	assert_int_equal(lg_slot_release(&a.slots[idx[5]], gen[5]), LG_SLOT_FREE);
	idx[6] = make(&a, 2, LG_SLOT_CLAIMED, &gen[6]);
	idx[7] = make(&a, 2, LG_SLOT_RUNNING, &gen[7]);
	other[0] = word(&a, idx[6]);
	other[1] = word(&a, idx[7]);

	assert_int_equal(lg_slot_reclaim_owner(&a, 1), 5);
	assert_int_equal(state_of(&a, idx[0]), LG_SLOT_FREE);
	assert_int_equal(state_of(&a, idx[1]), LG_SLOT_FREE);
	assert_int_equal(state_of(&a, idx[2]), LG_SLOT_ABANDONED);
	assert_int_equal(state_of(&a, idx[3]), LG_SLOT_FREE);
	assert_int_equal(state_of(&a, idx[4]), LG_SLOT_FREE);
	assert_int_equal(state_of(&a, idx[5]), LG_SLOT_FREE);
	assert_int_equal(word(&a, idx[6]), other[0]);
	assert_int_equal(word(&a, idx[7]), other[1]);
	/* The cancelled queued job never starts; the running one is freed by its finisher. */
	assert_int_equal(lg_slot_start(&a.slots[idx[1]], gen[1], 1, 1), -1);
	assert_int_equal(lg_slot_finish(&a.slots[idx[2]], gen[2], LG_JOB_OK, 1), 0);
	assert_int_equal(state_of(&a, idx[2]), LG_SLOT_FREE);
	assert_int_equal(lg_slot_reclaim_owner(&a, 1), 0);   /* idempotent */
	assert_int_equal(lg_slot_reclaim_owner(&a, 3), 0);   /* owned nothing */
	assert_int_equal(lg_slot_reclaim_owner(&a, 2), 2);
	for (int k = 0; k < 6; k++)
		assert_true(lg_slot_claim(&a, 0, &g) >= 0);  /* all of owner 1's slots reusable */
	lg_arena_destroy(&a);
}

static uint64_t
blocks(int fd)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	return (uint64_t)st.st_blocks;
}

/* Claims slot want itself (claims rotate through the table), freeing the others it passes. */
static void
claim_this(struct lg_arena *a, int want, uint32_t *gen)
{
	for (uint32_t n = 0; n <= a->nslots; n++) {
		int i = lg_slot_claim(a, 1, gen);

		assert_true(i >= 0);
		if (i == want)
			return;
		assert_int_equal(lg_slot_release(&a->slots[i], *gen), LG_SLOT_FREE);
	}
	fail_msg("slot %d was never handed out", want);
}

/* Regression (tests/regress/test_trim_busy_slot_refused.py): a slot claimed again between two
 * trim passes must not be punched, or a claim arriving during the punch finds it RECLAIMING
 * and the client gets 503 below capacity. It is punched once it stays free for a whole pass. */
static void
test_trim_skips_a_slot_reused_since_the_last_pass(void **state)
{
	struct lg_arena *a = *state;
	uint32_t gen;
	int i = make(a, 1, LG_SLOT_CLAIMED, &gen);

	memset(lg_arena_in(a, i), 0x55, LG_PAGE);
	a->slots[i].touched = LG_PAGE;
	assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_FREE);
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, LG_PAGE), 0); /* noted */

	/* Reused between the passes: claimed, dirtied, freed again. */
	claim_this(a, i, &gen);
	a->slots[i].touched = LG_PAGE;
	assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_FREE);
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, LG_PAGE), 0);
	assert_int_equal(lg_arena_in(a, i)[0], 0x55);

	/* Busy during a pass: noted again only once it is free. */
	claim_this(a, i, &gen);
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, LG_PAGE), 0);
	a->slots[i].touched = LG_PAGE;
	assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_FREE);
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, LG_PAGE), 0);
	assert_int_equal(lg_arena_in(a, i)[0], 0x55);

	/* Idle for a whole pass: punched, and FREE again at the same generation. */
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, LG_PAGE), 1);
	assert_int_equal(lg_arena_in(a, i)[0], 0);
	assert_int_equal(word(a, i), lg_slot_word(gen, 1, LG_SLOT_FREE));
}

static void
test_trim(void **state)
{
	struct lg_arena *a = *state;
	uint32_t gen, gen2;
	int i = make(a, 1, LG_SLOT_CLAIMED, &gen), busy;
	uint64_t before;

	memset(lg_arena_in(a, i), 0x77, a->in_cap);
	a->slots[i].touched = a->in_cap;
	assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_FREE);
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, a->in_cap + 1), 0); /* below threshold */
	assert_int_equal(lg_arena_in(a, i)[0], 0x77);

	busy = make(a, 2, LG_SLOT_RUNNING, &gen2);
	memset(lg_arena_out(a, busy), 0x66, a->out_cap);
	a->slots[busy].touched = a->out_cap;

	before = blocks(a->fd);
	/* The first pass only notes that the slot is free; the next one punches it. */
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, LG_PAGE), 0);
	assert_int_equal(blocks(a->fd), before);
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, LG_PAGE), 1);
	assert_true(blocks(a->fd) + a->in_cap / 512 <= before);
	assert_int_equal(word(a, i), lg_slot_word(gen, 1, LG_SLOT_FREE)); /* FREE, same gen */
	assert_int_equal(a->slots[i].touched, 0);
	for (uint64_t k = 0; k < a->in_cap; k += LG_PAGE)
		assert_int_equal(lg_arena_in(a, i)[k], 0);
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, LG_PAGE), 0); /* nothing dirty now */

	/* A busy slot is never punched, whatever it dirtied. */
	assert_int_equal(lg_slot_trim(a, (uint32_t)busy, 0), 0);
	assert_int_equal(state_of(a, busy), LG_SLOT_RUNNING);
	assert_int_equal(lg_arena_out(a, busy)[a->out_cap - 1], 0x66);
	assert_int_equal(a->slots[busy].touched, a->out_cap);
}

/* A slot's memory charge goes back with its pages; while more than half the budget is
 * charged, a free slot holding a charge is punched at the first pass (issue 18: refused claims
 * kept bumping the first free slots' generation, so their charge was never given back). */
static void
test_trim_gives_back_the_charge(void **state)
{
	struct lg_arena *a = *state;
	uint32_t gen;
	int i = make(a, 1, LG_SLOT_CLAIMED, &gen);

	atomic_store(&a->master->shm_budget, 4 * a->in_cap);
	assert_int_equal(lg_arena_charge_in(a, (uint32_t)i, LG_PAGE), 0);
	memset(lg_arena_in(a, i), 0x44, LG_PAGE);
	assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_FREE);
	/* a quarter of the budget: the usual rule, noted first, punched at the next pass even
	 * though it dirtied less than min_bytes (it holds a charge) */
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, a->in_cap), 0);
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, a->in_cap), 1);
	assert_int_equal(atomic_load(&a->master->shm_charged), 0);
	assert_int_equal(a->slots[i].charged, 0);
	assert_int_equal(lg_arena_in(a, i)[0], 0);

	/* more than half the budget charged: punched at the first pass that sees it free */
	claim_this(a, i, &gen);
	assert_int_equal(lg_arena_charge_in(a, (uint32_t)i, a->in_cap), 0);
	assert_int_equal(lg_arena_charge_out(a, (uint32_t)i, a->out_cap), 0);
	atomic_store(&a->master->shm_budget, a->in_cap + a->out_cap);
	assert_true(atomic_load(&a->master->shm_charged) > (a->in_cap + a->out_cap) / 2);
	assert_int_equal(lg_slot_release(&a->slots[i], gen), LG_SLOT_FREE);
	assert_int_equal(lg_slot_trim(a, (uint32_t)i, a->in_cap), 1);
	assert_int_equal(atomic_load(&a->master->shm_charged), 0);
	atomic_store(&a->master->shm_budget, UINT64_MAX);
}

static void
test_census(void **state)
{
	struct lg_arena *a = *state;
	uint32_t c[8], gen[3];
	int i[3];

	lg_slot_census(a, c);
	assert_int_equal(c[LG_SLOT_FREE], NSLOTS);
	i[0] = make(a, 1, LG_SLOT_QUEUED, &gen[0]);
	i[1] = make(a, 1, LG_SLOT_RUNNING, &gen[1]);
	i[2] = make(a, 1, LG_SLOT_FAILED, &gen[2]);
	lg_slot_census(a, c);
	assert_int_equal(c[LG_SLOT_FREE], NSLOTS - 3);
	assert_int_equal(c[LG_SLOT_QUEUED], 1);
	assert_int_equal(c[LG_SLOT_RUNNING], 1);
	assert_int_equal(c[LG_SLOT_FAILED], 1);
	assert_int_equal(lg_slot_release(&a->slots[i[1]], gen[1]), LG_SLOT_ABANDONED);
	assert_int_equal(lg_slot_release(&a->slots[i[0]], gen[0]), LG_SLOT_FREE);
	lg_slot_census(a, c);
	assert_int_equal(c[LG_SLOT_FREE], NSLOTS - 2);
	assert_int_equal(c[LG_SLOT_QUEUED], 0);
	assert_int_equal(c[LG_SLOT_RUNNING], 0);
	assert_int_equal(c[LG_SLOT_ABANDONED], 1);
	assert_int_equal(c[LG_SLOT_FAILED], 1);
	assert_int_equal(c[LG_SLOT_CLAIMED] + c[LG_SLOT_DONE] + c[LG_SLOT_RECLAIMING], 0);
}

/* Several processes race on a table with fewer slots than processes. Each holder bumps a
 * counter in the slot's input region on entry and drops it before the slot can be reused, so
 * two holders of one slot at once would see a count above one. A child exits with a code
 * naming the first broken rule. */
#define CHILDREN 4
#define CYCLES   5000
#define RACE_SLOTS 2

/* In slot 0's output region, which the cycles never touch. */
struct race {
	_Atomic uint32_t ready;  /* children at the start line */
	_Atomic uint64_t full;   /* claims that found the table full (EAGAIN) */
};

struct holder {
	_Atomic uint32_t count;  /* processes holding the slot right now */
	uint32_t last_gen;       /* generation of the previous holder */
};

static int
one_cycle(struct lg_arena *a, uint32_t owner, int path, struct race *race)
{
	struct lg_slot *s;
	struct holder *h;
	uint32_t gen;
	int i, r = 0;

	while ((i = lg_slot_claim(a, owner, &gen)) == -1) {
		if (errno != EAGAIN)
			return 10;
		atomic_fetch_add(&race->full, 1);
		sched_yield();
	}
	s = &a->slots[i];
	h = (struct holder *)lg_arena_in(a, (uint32_t)i);
	if (atomic_fetch_add(&h->count, 1) != 0)
		return 11;
	if (gen != h->last_gen + 1 || word(a, i) != lg_slot_word(gen, owner, LG_SLOT_CLAIMED))
		return 12;
	h->last_gen = gen;
	/* Give the CPU away while holding the slot, so that even on one CPU the others run
	 * here and find the table full, instead of each child finishing inside its time slice. */
	sched_yield();
	if (lg_slot_move(s, gen, LG_SLOT_CLAIMED, LG_SLOT_QUEUED) == -1)
		return 13;
	if (path != 1 && lg_slot_start(s, gen, (int32_t)getpid(), 1) == -1)
		return 14;
	/* The count drops just before the transition that lets another process claim it. */
	switch (path) {
	case 0: /* answered */
		r = lg_slot_finish(s, gen, LG_JOB_OK, 2) != 1;
		atomic_fetch_sub(&h->count, 1);
		r |= lg_slot_release(s, gen) != LG_SLOT_FREE;
		break;
	case 1: /* cancelled while queued: must never start afterwards */
		atomic_fetch_sub(&h->count, 1);
		r = lg_slot_release(s, gen) != LG_SLOT_FREE || lg_slot_start(s, gen, 1, 1) != -1;
		break;
	case 2: /* abandoned while running: the finisher frees it */
		r = lg_slot_release(s, gen) != LG_SLOT_ABANDONED;
		atomic_fetch_sub(&h->count, 1);
		r |= lg_slot_finish(s, gen, LG_JOB_OK, 2) != 0;
		break;
	default: /* failed */
		r = lg_slot_finish(s, gen, LG_JOB_ERROR, 2) != 1;
		atomic_fetch_sub(&h->count, 1);
		r |= lg_slot_release(s, gen) != LG_SLOT_FREE;
		break;
	}
	return r ? 20 + path : 0;
}

static void
test_processes_race(void **state)
{
	struct lg_arena a;
	pid_t pids[CHILDREN];
	uint32_t c[8];
	uint64_t claims = 0;
	struct race *race;

	assert_int_equal(lg_arena_create(&a, RACE_SLOTS, 0, LG_PAGE, LG_PAGE), 0);
	race = (struct race *)lg_arena_out(&a, 0);
	alarm(5); /* watchdog: a livelock kills the run instead of hanging it (it takes ~50 ms) */
	for (int k = 0; k < CHILDREN; k++) {
		pids[k] = fork();
		assert_true(pids[k] >= 0);
		if (pids[k] == 0) {
			alarm(4);
			/* Start together, or the first child may be done before the last is forked. */
			atomic_fetch_add(&race->ready, 1);
			while (atomic_load(&race->ready) < CHILDREN)
				sched_yield();
			for (int n = 0; n < CYCLES; n++) {
				int rc = one_cycle(&a, (uint32_t)k, (n + k) % 4, race);

				if (rc != 0)
					_exit(rc);
			}
			_exit(0);
		}
	}
	for (int k = 0; k < CHILDREN; k++) {
		int status;

		assert_int_equal(waitpid(pids[k], &status, 0), pids[k]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	alarm(0);
	lg_slot_census(&a, c);
	assert_int_equal(c[LG_SLOT_FREE], RACE_SLOTS);
	/* Every claim bumped exactly one generation by one: no claim was lost or doubled. */
	for (uint32_t i = 0; i < RACE_SLOTS; i++) {
		struct holder *h = (struct holder *)lg_arena_in(&a, i);

		assert_int_equal(atomic_load(&h->count), 0);
		assert_int_equal(h->last_gen, lg_slot_gen(word(&a, (int)i)));
		claims += lg_slot_gen(word(&a, (int)i));
	}
	assert_int_equal(claims, (uint64_t)CHILDREN * CYCLES);
	print_message("race: %d processes, %d slots, %llu claims found the table full\n",
	    CHILDREN, RACE_SLOTS, (unsigned long long)atomic_load(&race->full));
	lg_arena_destroy(&a);
}

/* The master narrows or widens admission for a live resize (master page slot_limit): job
 * slots are taken below the limit only, and a job admitted above it keeps counting until it
 * ends; the transit buffers are not narrowed (slow clients must not shrink to C + Q again). */
static void
test_slot_limit(void **state)
{
	struct lg_arena *a = *state;
	struct lg_jobslots js;
	uint32_t g[NSLOTS];
	int i[NSLOTS];

	a->master->npools = 1;
	a->master->pools[0].first_slot = 0;
	a->master->pools[0].nslots = NSLOTS;
	for (int k = 0; k < NSLOTS; k++) {
		i[k] = lg_slot_claim(a, 0, &g[k]);
		assert_true(i[k] >= 0);
		assert_int_equal(lg_slot_move(&a->slots[i[k]], g[k], LG_SLOT_CLAIMED,
		    LG_SLOT_QUEUED), 0);
	}
	atomic_store(&a->master->pools[0].slot_limit, 2); /* every buffer was claimable */
	js = lg_jobslots_of(a, 0);
	assert_int_equal(lg_jobslot_open(&js, a), 2);
	assert_int_equal(lg_jobslot_take(&js, a, (uint32_t)i[0], g[0]), 0);
	assert_int_equal(lg_jobslot_take(&js, a, (uint32_t)i[1], g[1]), 0);
	errno = 0;
	assert_int_equal(lg_jobslot_take(&js, a, (uint32_t)i[2], g[2]), -1);
	assert_int_equal(errno, EAGAIN);
	/* widen: a third job is admitted */
	atomic_store(&a->master->pools[0].slot_limit, NSLOTS);
	assert_int_equal(lg_jobslot_take(&js, a, (uint32_t)i[2], g[2]), 0);
	/* narrow below the jobs in flight: nothing new until enough of them end */
	atomic_store(&a->master->pools[0].slot_limit, 2);
	assert_int_equal(lg_jobslot_in_use(&js, a), 3);
	assert_int_equal(lg_jobslot_take(&js, a, (uint32_t)i[3], g[3]), -1);
	assert_int_equal(lg_slot_release(&a->slots[i[0]], g[0]), LG_SLOT_FREE);
	assert_int_equal(lg_jobslot_take(&js, a, (uint32_t)i[3], g[3]), -1);
	assert_int_equal(lg_slot_release(&a->slots[i[1]], g[1]), LG_SLOT_FREE);
	assert_int_equal(lg_jobslot_take(&js, a, (uint32_t)i[3], g[3]), 0);
	/* a limit above the table means the whole table; 0 means every job slot */
	atomic_store(&a->master->pools[0].slot_limit, NSLOTS + 5);
	assert_int_equal(lg_jobslot_open(&js, a), NSLOTS);
	atomic_store(&a->master->pools[0].slot_limit, 0);
	assert_int_equal(lg_jobslot_open(&js, a), NSLOTS);
	a->master->npools = 0;
}

/* Pools own disjoint parts of the table: one that is full refuses its own claims only, and
 * never takes another's slot; the census and the queue floor see each pool alone. */
static void
test_pools_never_borrow(void **state)
{
	struct lg_arena *a = *state;
	struct lg_pool_page *pp = a->master->pools;
	struct lg_slot_pool sp1 = { .arena = a, .pool = 1 };
	uint32_t g, n[8];
	int i;

	a->master->npools = 2;
	pp[0].first_slot = 0, pp[0].nslots = 1;
	pp[1].first_slot = 1, pp[1].nslots = NSLOTS - 1;
	atomic_store(&pp[0].slot_limit, 1);
	atomic_store(&pp[1].slot_limit, 2);
	assert_int_equal(lg_slot_claim_pool(a, 0, 0, &g), 0);
	assert_int_equal(lg_slot_claim_pool(a, 0, 0, &g), -1);	/* pool 0 full ... */
	i = lg_slot_claim_pool(a, 1, 0, &g);			/* ... pool 1 is not */
	assert_true(i == 1 || i == 2);
	assert_int_equal(lg_slot_move(&a->slots[i], g, LG_SLOT_CLAIMED, LG_SLOT_QUEUED), 0);
	a->slots[i].job.enqueue_ns = 1000;
	assert_true(lg_slot_claim_pool(a, 1, 0, &g) >= 1);
	assert_true(lg_slot_claim_pool(a, 1, 0, &g) >= 1);	/* buffers: all 3 of its part */
	assert_int_equal(lg_slot_claim_pool(a, 1, 0, &g), -1);
	lg_slot_census_pool(a, 0, n);
	assert_int_equal(n[LG_SLOT_CLAIMED], 1);
	assert_int_equal(n[LG_SLOT_QUEUED], 0);
	lg_slot_census_pool(a, 1, n);
	assert_int_equal(n[LG_SLOT_CLAIMED] + n[LG_SLOT_QUEUED] + n[LG_SLOT_FREE], 3);
	assert_int_equal(n[LG_SLOT_QUEUED], 1);
	lg_slot_census(a, n);
	assert_int_equal(n[LG_SLOT_CLAIMED], 3);
	assert_true(lg_slot_queued_floor(&sp1, 1500) == 500);
	sp1.pool = 0;
	assert_true(lg_slot_queued_floor(&sp1, 1500) == 0);
	a->master->npools = 0;
}

/* Claims a slot and moves it to QUEUED; returns its index, its generation in *gen. */
static uint32_t
queued(struct lg_arena *a, uint32_t *gen)
{
	int i = lg_slot_claim(a, 0, gen);

	assert_true(i >= 0);
	assert_int_equal(lg_slot_move(&a->slots[i], *gen, LG_SLOT_CLAIMED, LG_SLOT_QUEUED), 0);
	return (uint32_t)i;
}

/* Job slots are separate from transit buffers: with 4 buffers and 2 job slots, an upload
 * holds a buffer but no job slot; two queued jobs take both job slots; a job that ends (finish,
 * cancel, abandoned then finished) gives its slot back without anyone writing the token, so
 * a process killed right after the transition leaks nothing. */
static void
test_job_slots_apart_from_buffers(void **state)
{
	struct lg_arena *a = *state;
	uint32_t g0, g1, g2, up, i0, i1, i2;

	lg_arena_set_job_slots(a, 2);
	assert_int_equal(a->jobs.cap, 2);
	a->jobs.limit = NULL;
	assert_true(lg_slot_claim(a, 0, &up) >= 0); /* an upload: a buffer, no job slot */
	assert_int_equal(lg_jobslot_in_use(&a->jobs, a), 0);
	i0 = queued(a, &g0);
	assert_int_equal(lg_jobslot_take(&a->jobs, a, i0, g0), 0);
	i1 = queued(a, &g1);
	assert_int_equal(lg_jobslot_take(&a->jobs, a, i1, g1), 0);
	assert_int_equal(lg_jobslot_in_use(&a->jobs, a), 2);
	i2 = queued(a, &g2);
	assert_int_equal(lg_jobslot_take(&a->jobs, a, i2, g2), -1);
	assert_int_equal(errno, EAGAIN);
	/* i0 runs and finishes: DONE still holds its buffer (the result), not a job slot */
	assert_int_equal(lg_slot_start(&a->slots[i0], g0, 1, 10), 0);
	assert_int_equal(lg_jobslot_in_use(&a->jobs, a), 2);
	assert_int_equal(lg_slot_finish(&a->slots[i0], g0, LG_JOB_OK, 20), 1);
	assert_int_equal(lg_jobslot_in_use(&a->jobs, a), 1);
	assert_int_equal(lg_jobslot_take(&a->jobs, a, i2, g2), 0);
	/* i1 cancelled while queued, i2 abandoned while running: only the running one still
	 * holds a job slot, until it finishes */
	assert_int_equal(lg_slot_release(&a->slots[i1], g1), LG_SLOT_FREE);
	assert_int_equal(lg_slot_start(&a->slots[i2], g2, 1, 30), 0);
	assert_int_equal(lg_slot_release(&a->slots[i2], g2), LG_SLOT_ABANDONED);
	assert_int_equal(lg_jobslot_in_use(&a->jobs, a), 1);
	assert_int_equal(lg_slot_finish(&a->slots[i2], g2, LG_JOB_OK, 40), 0);
	assert_int_equal(lg_jobslot_in_use(&a->jobs, a), 0);
	lg_arena_set_job_slots(a, 99); /* clamped to the buffers */
	assert_int_equal(a->jobs.cap, NSLOTS);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_word_fields),
		T(test_claim_until_eagain),
		T(test_generation_bump),
		T(test_owner_in_word),
		T(test_happy_path),
		T(test_move_errors),
		T(test_cancel_queued),
		T(test_abandon_running),
		T(test_finish_failed),
		T(test_stale_generation),
		cmocka_unit_test(test_reclaim_owner),
		T(test_slot_limit),
		T(test_pools_never_borrow),
		T(test_trim),
		T(test_trim_gives_back_the_charge),
		T(test_trim_skips_a_slot_reused_since_the_last_pass),
		T(test_census),
		T(test_job_slots_apart_from_buffers),
		cmocka_unit_test(test_processes_race),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
