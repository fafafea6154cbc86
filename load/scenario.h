/* Scenario files of lagless-load (--scenario FILE, load/scenarios/): a documented experiment
 * a user runs as it is against any server. One directive a line, '#' starts a comment:
 *
 *   --rate /ping=100           options, as on the command line (words split at blanks, 'single'
 *   -d 10s                     or "double" quotes keep blanks); body=@F and keys=@F paths are
 *                              relative to the scenario file
 *   expect VERDICT STATE[|STATE]   the verdict the experiment expects: VERDICT a JSON key
 *                              (cheap_stays_cheap, ...), STATE pass, fail or n/a
 *   server ARGS...             the lagless arguments the experiment was written for (for
 *                              bench/run.py and the reader; lagless-load does not start servers)
 *
 * The options go before the command line's, so the command line adds routes and overrides
 * single values. */
#ifndef LL_LOAD_SCENARIO_H
#define LL_LOAD_SCENARIO_H

#include <stdio.h>

#include "load/report.h"

struct ll_jw;  /* load/jw.h */

#define LL_SCENARIO_WORDS 256
#define LL_SCENARIO_EXPECT 8

struct ll_expect {
	enum ll_promise p;
	unsigned states;             /* bit (state + 1) for each accepted ll_verdict_state */
	int met;                     /* after ll_scenario_check */
};

struct ll_scenario {
	const char *file;
	char *words[LL_SCENARIO_WORDS];  /* malloc'd, owned */
	unsigned nwords;
	struct ll_expect expect[LL_SCENARIO_EXPECT];
	unsigned nexpect;
};

/* Reads file into sc (zeroed first; ll_scenario_free releases it). Returns 0, or -1 with a
 * message in err naming the file and line (unreadable, an unclosed quote, an unknown verdict
 * or state, too many words or expectations). */
int ll_scenario_load(struct ll_scenario *sc, const char *file, char *err, size_t errlen);

/* argv with the scenario's words put after argv[0], and any --scenario FILE (or
 * --scenario=FILE) taken out: a new malloc'd array of *argc + 1 pointers into argv and sc
 * (free() only the array). NULL on ENOMEM. */
char **ll_scenario_argv(const struct ll_scenario *sc, int *argc, char **argv);

/* The FILE of the first --scenario in argv, or NULL. */
const char *ll_scenario_find(int argc, char **argv);

/* Sets each expectation's met from r's verdicts. Returns 1 when every one was met. */
int ll_scenario_check(struct ll_scenario *sc, const struct ll_report *r);

/* One line per expectation: wanted, got, met or NOT MET. */
void ll_scenario_text(FILE *f, const struct ll_scenario *sc, const struct ll_report *r);

/* "scenario":{...} for the JSON document, into w's object open. */
void ll_scenario_json(struct ll_jw *w, const struct ll_scenario *sc, const struct ll_report *r);

void ll_scenario_free(struct ll_scenario *sc);

#endif
