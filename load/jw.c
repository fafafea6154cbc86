/* The JSON writer over yajl's generator (load/jw.h). */
#include "load/jw.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "load/err.h"

static void
jw_print(void *ctx, const char *s, size_t len)
{
	fwrite(s, 1, len, (FILE *)ctx);
}

/* keeps the first failure; returns nonzero while none */
static int
jw_ok(struct ll_jw *w, yajl_gen_status st, const char *key)
{
	if (w->st == yajl_gen_status_ok && st != yajl_gen_status_ok) {
		w->st = st;
		w->where = key ? key : "value";
	}
	w->any = 1;
	return w->st == yajl_gen_status_ok;
}

static int
jw_key(struct ll_jw *w, const char *key)
{
	if (w->st != yajl_gen_status_ok)
		return 0;
	if (key == NULL)
		return 1;
	return jw_ok(w, yajl_gen_string(w->g, (const unsigned char *)key, strlen(key)), key);
}

int
ll_jw_start(struct ll_jw *w, FILE *f)
{
	w->f = f;
	w->depth = 0;
	w->any = 0;
	w->st = yajl_gen_status_ok;
	w->where = NULL;
	if ((w->g = yajl_gen_alloc(NULL)) == NULL ||
	    !yajl_gen_config(w->g, yajl_gen_print_callback, jw_print, (void *)f)) {
		if (w->g != NULL)
			yajl_gen_free(w->g);
		w->g = NULL;
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

static const char *
jw_status(yajl_gen_status st)
{
	switch (st) {
	case yajl_gen_keys_must_be_strings:  return "a key that is not a string";
	case yajl_max_depth_exceeded:        return "nested too deep";
	case yajl_gen_in_error_state:        return "generator already failed";
	case yajl_gen_generation_complete:   return "value after the end of the document";
	case yajl_gen_invalid_number:        return "not a number";
	case yajl_gen_invalid_string:        return "invalid UTF-8";
	default:                             return "generator failed";
	}
}

int
ll_jw_finish(struct ll_jw *w, char *err, size_t len)
{
	int rc = 0;

	if (w->st != yajl_gen_status_ok)
		rc = ll_fail(err, len, "JSON generator: %s at \"%s\"", jw_status(w->st), w->where);
	else if (w->depth != 0 || !w->any)
		rc = ll_fail(err, len, "JSON generator: the document is %s",
		             w->any ? "left unclosed" : "empty");
	yajl_gen_free(w->g);
	w->g = NULL;
	if (rc == 0 && (fputc('\n', w->f) == EOF || fflush(w->f) == EOF || ferror(w->f)))
		rc = ll_fail(err, len, "%s", strerror(errno ? errno : EIO));
	return rc;
}

void
ll_jw_map(struct ll_jw *w, const char *key)
{
	if (jw_key(w, key) && jw_ok(w, yajl_gen_map_open(w->g), key))
		w->depth++;
}

void
ll_jw_arr(struct ll_jw *w, const char *key)
{
	if (jw_key(w, key) && jw_ok(w, yajl_gen_array_open(w->g), key))
		w->depth++;
}

void
ll_jw_end_map(struct ll_jw *w)
{
	if (w->st == yajl_gen_status_ok && jw_ok(w, yajl_gen_map_close(w->g), "}"))
		w->depth--;
}

void
ll_jw_end_arr(struct ll_jw *w)
{
	if (w->st == yajl_gen_status_ok && jw_ok(w, yajl_gen_array_close(w->g), "]"))
		w->depth--;
}

void
ll_jw_str(struct ll_jw *w, const char *key, const char *s)
{
	if (jw_key(w, key))
		jw_ok(w, yajl_gen_string(w->g, (const unsigned char *)s, strlen(s)), key);
}

void
ll_jw_bool(struct ll_jw *w, const char *key, int b)
{
	if (jw_key(w, key))
		jw_ok(w, yajl_gen_bool(w->g, b != 0), key);
}

void
ll_jw_null(struct ll_jw *w, const char *key)
{
	if (jw_key(w, key))
		jw_ok(w, yajl_gen_null(w->g), key);
}

void
ll_jw_tri(struct ll_jw *w, const char *key, int v)
{
	if (v < 0)
		ll_jw_null(w, key);
	else
		ll_jw_bool(w, key, v > 0);
}

void
ll_jw_u64(struct ll_jw *w, const char *key, uint64_t v)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%" PRIu64, v);

	if (jw_key(w, key))
		jw_ok(w, yajl_gen_number(w->g, buf, (size_t)n), key);
}

void
ll_jw_num(struct ll_jw *w, const char *key, const char *fmt, double v)
{
	char buf[64];
	int n;

	if (!isfinite(v)) {
		ll_jw_null(w, key);
		return;
	}
	n = snprintf(buf, sizeof(buf), fmt, v);
	if (!jw_key(w, key))
		return;
	if (n < 0 || (size_t)n >= sizeof(buf))
		jw_ok(w, yajl_gen_invalid_number, key);
	else
		jw_ok(w, yajl_gen_number(w->g, buf, (size_t)n), key);
}

void
ll_jw_g6(struct ll_jw *w, const char *key, double v)
{
	ll_jw_num(w, key, "%.6g", v);
}
