/* Unit tests for master/iniline.c: a line longer than inih's buffer becomes a stand-in and its
 * value comes back whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/iniline.h"

#define SIZE 200 /* Debian's INI_MAX_LINE */

static char line[4096];

/* line = head, n bytes of 'v', tail */
static const char *
make(const char *head, size_t n, const char *tail)
{
	size_t h = strlen(head);

	memcpy(line, head, h);
	memset(line + h, 'v', n);
	strcpy(line + h + n, tail);
	return line;
}

static void
test_value_comes_back(void **state)
{
	struct lg_iniline l = { 0 };
	char buf[SIZE], *joined;
	const char *why = NULL;

	(void)state;
	/* inih's cut: an inline " ;" comment, blanks around the value and the CR LF */
	assert_ptr_equal(lg_iniline_shorten(&l, make("command =\t ", 500, "  ; note\r\n"), 3, buf,
	    SIZE, &why), buf);
	assert_true(strlen(buf) < SIZE - 1);
	assert_int_equal(strncmp(buf, "command =", 9), 0);
	assert_int_equal(l.line, 3);
	assert_int_equal(strlen(l.val), 500);
	buf[strcspn(buf, "\n")] = '\0'; /* inih's rstrip */
	/* inih strips "command" and hands the marker: the value comes back */
	const char *v = lg_iniline_value(&l, 3, buf + 10, &joined);
	assert_ptr_equal(v, l.val);
	assert_null(joined);
	/* another line, or a value without the marker, is its own */
	assert_string_equal(lg_iniline_value(&l, 4, buf + 10, &joined), buf + 10);
	assert_string_equal(lg_iniline_value(&l, 3, "plain", &joined), "plain");
	/* a ';' without a blank before it is the value's; ':' is inih's delimiter too */
	lg_iniline_shorten(&l, make("k: a;", 300, "\n"), 5, buf, SIZE, &why);
	assert_int_equal(strlen(l.val), 302);
	assert_int_equal(strncmp(l.val, "a;v", 3), 0);
	/* an indented line inih takes for a continuation: "k = " joined to the value */
	lg_iniline_shorten(&l, make("   X = ", 300, "\n"), 6, buf, SIZE, &why);
	char stand[SIZE];
	strcpy(stand, buf + 3);
	stand[strcspn(stand, "\n")] = '\0';
	v = lg_iniline_value(&l, 6, stand, &joined);
	assert_non_null(joined);
	assert_int_equal(strncmp(v, "X = vvv", 7), 0);
	assert_int_equal(strlen(v), 4 + 300);
	free(joined);
	lg_iniline_free(&l);
	assert_null(l.val);
}

static void
test_only_a_value_may_be_long(void **state)
{
	struct lg_iniline l = { 0 };
	char buf[SIZE];
	const char *why = NULL;

	(void)state;
	/* a comment, after a byte order mark on line 1 too, is one */
	assert_ptr_equal(lg_iniline_shorten(&l, make("\xEF\xBB\xBF  # ", 300, "\n"), 1, buf, SIZE,
	    &why), buf);
	assert_string_equal(buf, ";\n");
	assert_null(lg_iniline_shorten(&l, make("[route /", 300, "]\n"), 2, buf, SIZE, &why));
	assert_non_null(strstr(why, "section header"));
	assert_null(lg_iniline_shorten(&l, make("key ", 300, "\n"), 2, buf, SIZE, &why));
	assert_non_null(strstr(why, "not 'key = value'"));
	/* an inline comment before any '=' leaves no key = value */
	assert_null(lg_iniline_shorten(&l, make("key ;", 300, " = 1\n"), 2, buf, SIZE, &why));
	assert_non_null(strstr(why, "not 'key = value'"));
	assert_null(lg_iniline_shorten(&l, make("", 300, " = 1\n"), 2, buf, SIZE, &why));
	assert_non_null(strstr(why, "a key over"));
	assert_null(l.val);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_value_comes_back),
		cmocka_unit_test(test_only_a_value_may_be_long),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
