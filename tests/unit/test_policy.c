/* Unit tests for common/policy.c: the --coalesce rule parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/policy.h"

static void
test_full_rule(void **state)
{
	struct lg_policies ps;
	char err[160];

	assert_int_equal(lg_policy_parse("/heavy coalesce=on ttl=5000 stale=2000 negative-ttl=100 "
	    "query=iterations,x headers=Accept,X-Tenant credentials=key; /compress coalesce=off",
	    &ps, err, sizeof(err)), 0);
	assert_int_equal(ps.n, 2);
	const struct lg_policy *p = lg_policy_find(&ps, "/heavy", 6);
	assert_non_null(p);
	assert_int_equal(p->coalesce, 1);
	assert_true(p->ttl_ms == 5000 && p->stale_ms == 2000 && p->negative_ttl_ms == 100);
	assert_int_equal(p->nquery, 2);
	assert_string_equal(p->query[1], "x");
	assert_int_equal(p->nheaders, 2);
	assert_string_equal(p->headers[0], "accept"); /* header names are lower-cased */
	assert_string_equal(p->headers[1], "x-tenant");
	assert_int_equal(p->credentials_in_key, 1);
	p = lg_policy_find(&ps, "/compress", 9);
	assert_non_null(p);
	assert_int_equal(p->coalesce, 0);
	assert_int_equal(p->ttl_ms, 0);
	assert_int_equal(p->credentials_in_key, 0);
	assert_null(lg_policy_find(&ps, "/heav", 5));
	assert_int_equal(lg_policy_parse("", &ps, err, sizeof(err)), 0);
	assert_int_equal(ps.n, 0);
	assert_int_equal(lg_policy_parse(" ; /a ;", &ps, err, sizeof(err)), 0);
	assert_int_equal(ps.n, 1);
	assert_int_equal(ps.p[0].coalesce, 1); /* a bare path coalesces */
	assert_int_equal(ps.p[0].body_max, LG_POLICY_BODY_MAX); /* bodies up to 1 MiB are keyed */
}

static void
test_body_max(void **state)
{
	struct lg_policies ps;
	char err[160];

	assert_int_equal(lg_policy_parse("/a body-max=64K; /b body-max=0; /c body-max=64M; "
	    "/d body-max=1000", &ps, err, sizeof(err)), 0);
	assert_int_equal(ps.p[0].body_max, 65536);
	assert_int_equal(ps.p[1].body_max, 0); /* every request with a body runs alone */
	assert_int_equal(ps.p[2].body_max, LG_POLICY_BODY_MAX_MAX);
	assert_int_equal(ps.p[3].body_max, 1000);
	/* over the bound (G is the one grammar's suffix too, but 1G is over it), a unit it does
	 * not know, or no number */
	assert_int_equal(lg_policy_parse("/a body-max=65M", &ps, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "body-max=65M"));
	assert_int_equal(lg_policy_parse("/a body-max=1G", &ps, err, sizeof(err)), -1);
	assert_int_equal(lg_policy_parse("/a body-max=0G", &ps, err, sizeof(err)), 0);
	assert_int_equal(lg_policy_parse("/a body-max=K", &ps, err, sizeof(err)), -1);
	assert_int_equal(lg_policy_parse("/a body-max=1KB", &ps, err, sizeof(err)), -1);
}

static void
test_errors_name_the_fault(void **state)
{
	struct lg_policies ps;
	char err[160];
	static const char *bad[] = {
		"heavy ttl=1", "/h ttl=x", "/h ttl=-1", "/h coalesce=maybe", "/h unknown=1",
		"/h ttl", "/h credentials=share", "/h query=a,,b", "/h query=a=b", "/a; /a",
		"/h query=1,2,3,4,5,6,7,8,9", "/h ttl=5000 ttl=6000",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(lg_policy_parse(bad[i], &ps, err, sizeof(err)), -1);
		assert_true(strlen(err) > 0);
	}
	assert_int_equal(lg_policy_parse("/h ttl=x", &ps, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ttl=x"));
	/* a word given twice is refused, as a file key is, instead of the last one winning */
	assert_int_equal(lg_policy_parse("/h ttl=5000 stale=1 ttl=6000", &ps, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "\"ttl\" given twice"));
	assert_int_equal(lg_policy_parse("/1;/2;/3;/4;/5;/6;/7;/8;/9", &ps, err, sizeof(err)), -1);
}

/* The [route] section spelling of the same settings (master/site.c gives each key here). */
static void
test_route_keys(void **state)
{
	struct lg_policy p;
	const char *why = NULL;

	lg_policy_init(&p, "/thumb");
	assert_string_equal(p.path, "/thumb");
	assert_int_equal(p.coalesce, 1);
	assert_int_equal(p.body_max, LG_POLICY_BODY_MAX);
	assert_int_equal(lg_policy_route_key(&p, "ttl_ms", "5000", &why), 1);
	assert_int_equal(lg_policy_route_key(&p, "stale_ms", "2000", &why), 1);
	assert_int_equal(lg_policy_route_key(&p, "negative_ttl_ms", "100", &why), 1);
	assert_int_equal(lg_policy_route_key(&p, "key_query", "w, h", &why), 1);
	assert_int_equal(lg_policy_route_key(&p, "key_headers", "Accept,\tX-Tenant", &why), 1);
	assert_int_equal(lg_policy_route_key(&p, "credentials", "key", &why), 1);
	assert_int_equal(lg_policy_route_key(&p, "key_body_max", "8M", &why), 1);
	assert_int_equal(lg_policy_route_key(&p, "coalesce", "off", &why), 1);
	assert_int_equal(p.cluster, 0); /* local by default */
	assert_int_equal(lg_policy_route_key(&p, "scope", "cluster", &why), 1);
	assert_int_equal(p.cluster, 1);
	assert_int_equal(lg_policy_route_key(&p, "scope", "everywhere", &why), -1);
	assert_string_equal(why, "expected local or cluster");
	assert_true(p.ttl_ms == 5000 && p.stale_ms == 2000 && p.negative_ttl_ms == 100);
	assert_int_equal(p.nquery, 2);
	assert_string_equal(p.query[1], "h");
	assert_int_equal(p.nheaders, 2);
	assert_string_equal(p.headers[1], "x-tenant");
	assert_int_equal(p.credentials_in_key, 1);
	assert_int_equal(p.body_max, 8u << 20);
	assert_int_equal(p.coalesce, 0);
	/* one boolean vocabulary (common/value.h): true was refused here while accepted by the
	 * server's own keys */
	assert_int_equal(lg_policy_route_key(&p, "coalesce", "true", &why), 1);
	assert_int_equal(p.coalesce, 1);
	assert_int_equal(lg_policy_route_key(&p, "coalesce", "No", &why), 1);
	assert_int_equal(p.coalesce, 0);
	assert_int_equal(lg_policy_route_key(&p, "coalesce", "maybe", &why), -1);
	assert_non_null(strstr(why, "yes, no, true, false, on, off, 1 or 0"));
	/* not a coalescing key: the caller's (a kind's key, or the route's own) */
	assert_int_equal(lg_policy_route_key(&p, "ttl", "5", &why), 0);
	assert_int_equal(lg_policy_route_key(&p, "deadline_ms", "5", &why), 0);
	assert_false(lg_policy_is_route_key("ttl"));
	assert_true(lg_policy_is_route_key("key_body_max"));
	/* a bad value says what was expected */
	assert_int_equal(lg_policy_route_key(&p, "ttl_ms", "soon", &why), -1);
	assert_non_null(strstr(why, "milliseconds"));
	assert_int_equal(lg_policy_route_key(&p, "credentials", "share", &why), -1);
	assert_non_null(strstr(why, "bypass or key"));
	assert_int_equal(lg_policy_route_key(&p, "key_query", "a,,b", &why), -1);
}

/* What the route adds to a rule's key (master/site.c): names once each, header fields
 * lower-cased, bounded; whether the rule named its query parameters at all; -t's description. */
static void
test_key_names_and_description(void **state)
{
	struct lg_policy p;
	const char *why;
	char d[512] = "";

	lg_policy_init(&p, "/c");
	assert_int_equal(p.query_set, 0);
	assert_int_equal(lg_policy_route_key(&p, "key_query", "", &why), 1);
	assert_int_equal(p.query_set, 1); /* named, and empty: the kind reads none */
	assert_int_equal(p.nquery, 0);
	assert_int_equal(lg_policy_add_name(&p, 0, "codec,x", 5), 0);
	assert_int_equal(lg_policy_add_name(&p, 0, "codec", 5), 0);
	assert_int_equal(lg_policy_add_name(&p, 0, "level", 5), 0);
	assert_int_equal(p.nquery, 2);
	assert_int_equal(lg_policy_add_name(&p, 1, "X-User", 6), 0);
	assert_string_equal(p.headers[0], "x-user");
	assert_int_equal(lg_policy_add_name(&p, 1, "x-user", 6), 0);
	assert_int_equal(p.nheaders, 1);
	assert_int_equal(lg_policy_add_name(&p, 1, "", 0), -1);
	assert_int_equal(lg_policy_add_name(&p, 1, d, LG_POLICY_NAME), -1);
	lg_policy_describe(&p, d, sizeof(d));
	assert_non_null(strstr(d, "method (HEAD as GET), path, query codec,level, headers x-user"));
	assert_non_null(strstr(d, "proxy-authorization or cookie: bypass"));
	for (unsigned i = 1; i < LG_POLICY_KEY_NAMES; i++) {
		char n[8];

		snprintf(n, sizeof(n), "h%u", i);
		assert_int_equal(lg_policy_add_name(&p, 1, n, strlen(n)), 0);
	}
	assert_int_equal(lg_policy_add_name(&p, 1, "full", 4), -1);
	lg_policy_describe(&p, d, 40); /* cut to fit, terminated */
	assert_int_equal(strlen(d), 39);
}

/* scope=cluster in a --coalesce rule (issue 22); the default is local. */
static void
test_scope_word(void **state)
{
	struct lg_policies ps;
	char err[200];

	assert_int_equal(lg_policy_parse("/a scope=cluster ttl=5; /b ttl=5; /c scope=local", &ps,
	    err, sizeof(err)), 0);
	assert_int_equal(ps.p[0].cluster, 1);
	assert_int_equal(ps.p[1].cluster, 0);
	assert_int_equal(ps.p[2].cluster, 0);
	assert_int_equal(lg_policy_parse("/a scope=global", &ps, err, sizeof(err)), -1);
}

/* path_share: a whole percent 0..100, 0 (no bound) unless given; given is remembered, so an
 * upstream route's default (master/site.c) does not override it. */
static void
test_path_share(void **state)
{
	struct lg_policies ps;
	struct lg_policy p;
	const char *why = NULL;
	char err[200];

	assert_int_equal(lg_policy_parse("/a path-share=10 ttl=5; /b ttl=5; /c path-share=0", &ps,
	    err, sizeof(err)), 0);
	assert_int_equal(ps.p[0].path_share, 10);
	assert_int_equal(ps.p[0].path_share_set, 1);
	assert_int_equal(ps.p[1].path_share, 0);
	assert_int_equal(ps.p[1].path_share_set, 0);
	assert_int_equal(ps.p[2].path_share_set, 1);
	assert_int_equal(lg_policy_parse("/a path-share=101", &ps, err, sizeof(err)), -1);
	assert_int_equal(lg_policy_parse("/a path-share=5%", &ps, err, sizeof(err)), -1);
	lg_policy_init(&p, "/x");
	assert_int_equal(lg_policy_route_key(&p, "path_share", "100", &why), 1);
	assert_int_equal(p.path_share, 100);
	assert_int_equal(lg_policy_route_key(&p, "path_share", "-1", &why), -1);
	assert_non_null(strstr(why, "0 (no bound) to 100"));
	assert_int_equal(lg_policy_is_route_key("path_share"), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_rule),
		cmocka_unit_test(test_body_max),
		cmocka_unit_test(test_route_keys),
		cmocka_unit_test(test_errors_name_the_fault),
		cmocka_unit_test(test_key_names_and_description),
		cmocka_unit_test(test_scope_word),
		cmocka_unit_test(test_path_share),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
