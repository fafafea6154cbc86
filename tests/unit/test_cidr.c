/* common/cidr.c: parsing of trusted-proxy ranges and matching of peer addresses. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "common/cidr.h"

static int
match(const struct lg_cidr *r, int n, const char *addr)
{
	unsigned char bin[16];
	int fam = inet_pton(AF_INET, addr, bin) == 1 ? AF_INET : AF_INET6;

	assert_int_equal(inet_pton(fam, addr, bin), 1);
	return lg_cidr_match(r, n, fam, bin);
}

static void
test_parse_and_match(void **state)
{
	struct lg_cidr r[LG_CIDR_MAX];
	int n = lg_cidr_parse("10.0.0.0/8, 192.168.1.7 ::1\tfd00::/8 172.16.0.0/12", r);

	assert_int_equal(n, 5);
	assert_true(match(r, n, "10.200.3.4"));
	assert_false(match(r, n, "11.0.0.1"));
	assert_true(match(r, n, "192.168.1.7"));
	assert_false(match(r, n, "192.168.1.8"));
	assert_true(match(r, n, "::1"));
	assert_false(match(r, n, "::2"));
	assert_true(match(r, n, "fdab::1"));
	assert_false(match(r, n, "fe80::1"));
	assert_true(match(r, n, "172.31.255.255"));
	assert_false(match(r, n, "172.32.0.0"));
	assert_true(match(r, n, "::ffff:10.1.2.3")); /* IPv4-mapped matches the IPv4 range */
	assert_int_equal(lg_cidr_parse("", r), 0);
	assert_int_equal(lg_cidr_parse("0.0.0.0/0", r), 1);
	assert_true(match(r, 1, "8.8.8.8"));
}

static void
test_bad_lists(void **state)
{
	struct lg_cidr r[LG_CIDR_MAX];
	const char *bad[] = { "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0/8", "host", "1.2.3.4/x",
	    "1.2.3.4/8/9" };
	char many[1024] = "";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		assert_int_equal(lg_cidr_parse(bad[i], r), -1);
		assert_int_equal(errno, EINVAL);
	}
	for (int i = 0; i < LG_CIDR_MAX + 1; i++)
		strcat(many, "127.0.0.1 ");
	assert_int_equal(lg_cidr_parse(many, r), -1);
	assert_int_equal(errno, E2BIG);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_and_match),
		cmocka_unit_test(test_bad_lists),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
