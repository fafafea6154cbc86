/* Fault-injection job kinds, served only with --enable-test-jobs: they make the process running
 * them die, hang or exhaust memory for real, so the supervision paths (502 on a crash, 504 and
 * the SIGTERM -> SIGKILL escalation on a hang, the memory limit on a hog) are tested against
 * the real binary instead of simulated. A built-in module ("lagless-test") through the same ABI
 * as a user's. Never enable them in production. */
#ifndef LG_KINDS_TESTJOBS_H
#define LG_KINDS_TESTJOBS_H

#include <lagless/module.h>

#include "kinds/builtin.h"

#define LG_TEST_ALLOC_CHUNK (1u << 20)

/* Kinds: test-crash (abort(3)), test-spin (loops forever; ?ignore_term=1 also ignores SIGTERM,
 * forcing the SIGKILL), test-alloc (touches anonymous memory 1 MiB at a time up to ?mib=N, or
 * without bound for 0; answers the MiB touched as 8 bytes, or 500 when mmap failed first). */
extern const struct lagless_module lg_test_module;

/* Their query parameters (kinds/builtin.h). */
extern const struct lg_kind_query lg_test_query[];

#endif
