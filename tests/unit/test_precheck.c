/* Unit tests for master/precheck.c: the digest a reload's check process and the master's second
 * reading of the configuration compare (lg_precheck_digest). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kinds/registry.h"
#include "master/appconf.h"
#include "master/options.h"
#include "master/precheck.h"

static char path[64];

/* The digest of the configuration text (as the file of -c), or 0 when it is refused. */
static uint64_t
digest_of(const char *text)
{
	char *argv[] = { "lagless", "-c", path, NULL }, err[512];
	struct lg_config cfg;
	struct lg_command cmd;
	FILE *f = fopen(path, "w");
	uint64_t d;

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	if (lg_options_load(3, argv, &cfg, &cmd, err, sizeof(err)) == -1) {
		print_message("refused: %s\n", err);
		return 0;
	}
	d = lg_precheck_digest(cfg.reg);
	lg_registry_free(cfg.reg);
	lg_appconf_free(cfg.master.apps);
	return d;
}

static void
test_same_reading_same_digest(void **state)
{
	const char *conf = "[route /d]\nkind = decompress\nmax_output = 1M\n";
	uint64_t a = digest_of(conf);

	(void)state;
	assert_true(a != 0);
	assert_true(digest_of(conf) == a);
	/* a setting the hooks do not see leaves it: the master applies its own reading */
	assert_true(digest_of("max_body = 1M\n\n[route /d]\nkind = decompress\nmax_output = 1M\n")
	    == digest_of("max_body = 2M\n\n[route /d]\nkind = decompress\nmax_output = 1M\n"));
}

/* What the check hooks see (a kind's keys, the route, where it was written) changes it. */
static void
test_route_changes_change_it(void **state)
{
	const char *base = "[route /d]\nkind = decompress\nmax_output = 1M\n";
	uint64_t a = digest_of(base);

	(void)state;
	assert_true(a != 0);
	assert_true(digest_of("[route /d]\nkind = decompress\nmax_output = 2M\n") != a);
	assert_true(digest_of("[route /e]\nkind = decompress\nmax_output = 1M\n") != a);
	assert_true(digest_of("[route /d]\nkind = heavy\n") != a);
	assert_true(digest_of("\n[route /d]\nkind = decompress\nmax_output = 1M\n") != a);
	assert_true(digest_of("[route /d]\nkind = decompress\nmax_output = 1M\n"
	    "[route /i]\nkind = heavy\n") != a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_reading_same_digest),
		cmocka_unit_test(test_route_changes_change_it),
	};
	int fd, rc;

	alarm(10);
	snprintf(path, sizeof(path), "/tmp/lagless-precheck-XXXXXX");
	if ((fd = mkstemp(path)) == -1)
		return 1;
	close(fd);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(path);
	return rc;
}
