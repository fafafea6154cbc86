/* A test module whose init misbehaves (tests/regress/test_module_init_crash.py): the [module
 * initfault] key `init` says how (abort, exit: _exit(3), fail: return -1, ok), and while the file
 * named by `ok_when` exists init succeeds instead, so a test can let a retry succeed. Its kind
 * `hello` answers "hello". Built by `make` for the tests, against include/ only. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lagless/module.h>

static int
hello(const struct lagless_request *rq, struct lagless_output *out)
{
	return rq->host->write(out, "hello\n", 6) == 0 ? LAGLESS_OK : LAGLESS_TOO_LARGE;
}

static int
init(const struct lagless_host *h, const struct lagless_conf *conf, void **state)
{
	const char *how = h->conf_get(conf, "init"), *ok = h->conf_get(conf, "ok_when");

	(void)state;
	if (how == NULL || strcmp(how, "ok") == 0 || (ok != NULL && access(ok, F_OK) == 0))
		return 0;
	if (strcmp(how, "abort") == 0)
		abort();
	if (strcmp(how, "exit") == 0)
		_exit(3);
	return -1;
}

LAGLESS_MODULE_HOOKS("initfault", "1.0", (.init = init),
    LAGLESS_KIND("hello", hello, .ctype = "text/plain",
        .where = LAGLESS_WHERE_POOL | LAGLESS_WHERE_LOOP));
