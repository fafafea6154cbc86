/* thumbnail: an example job module outside the lagless core. One kind, "thumbnail": the body is
 * a JPEG, PNG or WebP image; the answer is the image shrunk to fit width x height (aspect ratio
 * kept), as JPEG or WebP. libvips does the work (shrink-on-load: a JPEG is decoded at a fraction
 * of its size when it can be).
 *
 *   ?width=W&height=H&format=jpeg|webp     each overrides the route's key of the same name
 *   [route /thumbnail]                     route keys and their defaults:
 *   width = 128, height = width, format = jpeg, quality = 80, max_pixels = 40000000
 *
 * Build (see the Makefile, target modules):
 *   cc -shared -fPIC $(pkg-config --cflags lagless vips) -o thumbnail.so thumbnail.c \
 *       $(pkg-config --libs vips)
 *
 * libvips is initialised in init, after fork, in each compute process, never in the master
 * (a library that starts threads must not be initialised before a fork). Its operation cache is
 * turned off, so nothing of one job stays in memory for the next, and its concurrency set to 1:
 * the pool already runs one job per CPU. libvips keeps its idle worker thread between jobs;
 * it runs no code outside run, and the process can still be killed at any instant. */
#include <stdio.h>
#include <string.h>
#include <vips/vips.h>

#include <lagless/module.h>

#define MAX_SIDE 16384u /* pixels, a thumbnail's width or height */

struct thumb_args {
	uint64_t width, height, quality, max_pixels;
	int webp;
};

static const char *const route_keys[] = { "width", "height", "format", "quality",
    "max_pixels" };

/* "jpeg" or "webp" (len bytes) into *webp. 0 or -1. */
static int
parse_format(const char *v, size_t len, int *webp)
{
	if (len == 4 && (memcmp(v, "jpeg", 4) == 0 || memcmp(v, "webp", 4) == 0)) {
		*webp = v[0] == 'w';
		return 0;
	}
	if (len == 3 && memcmp(v, "jpg", 3) == 0) {
		*webp = 0;
		return 0;
	}
	return -1;
}

/* The route's values (already checked by thumb_check), then the query's over them. */
static int
thumb_args(const struct lagless_request *rq, struct lagless_output *out, struct thumb_args *a)
{
	const struct lagless_host *h = rq->host;
	const char *f = h->conf_get(rq->conf, "format");
	uint64_t w, hh;
	size_t len;

	h->conf_uint(rq->conf, "width", 128, 1, MAX_SIDE, &w);
	h->conf_uint(rq->conf, "height", w, 1, MAX_SIDE, &hh);
	h->conf_uint(rq->conf, "quality", 80, 1, 100, &a->quality);
	h->conf_uint(rq->conf, "max_pixels", 40000000, 1, UINT64_MAX, &a->max_pixels);
	a->webp = 0;
	if (f != NULL)
		parse_format(f, strlen(f), &a->webp);
	if (h->query_uint(rq, "width", w, 1, MAX_SIDE, &a->width) == -1 ||
	    h->query_uint(rq, "height", h->query(rq, "width", &len) ? a->width : hh, 1, MAX_SIDE,
	    &a->height) == -1) {
		h->set_message(out, "width and height must be integers in 1..%u\n", MAX_SIDE);
		return -1;
	}
	if ((f = h->query(rq, "format", &len)) != NULL && parse_format(f, len, &a->webp) == -1) {
		h->set_message(out, "format must be jpeg or webp\n");
		return -1;
	}
	return 0;
}

/* Only the three formats this kind promises, whatever else the local libvips could load: its
 * other loaders (ImageMagick, PDF, SVG) are large parsers an upload should not reach. */
static int
loader_ok(const struct lagless_request *rq)
{
	static const char *const ok[] = { "VipsForeignLoadJpegBuffer",
	    "VipsForeignLoadPngBuffer", "VipsForeignLoadWebpBuffer" };
	const char *l = vips_foreign_find_load_buffer(rq->input, rq->input_len);

	vips_error_clear();
	for (size_t i = 0; l != NULL && i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strcmp(l, ok[i]) == 0)
			return 1;
	return 0;
}

/* Hands libvips' last error to the client as the 400 message and clears it. */
static int
vips_failed(const struct lagless_request *rq, struct lagless_output *out, const char *what)
{
	rq->host->set_message(out, "%s: %s", what, vips_error_buffer());
	vips_error_clear();
	return LAGLESS_BAD_INPUT;
}

static int
thumb_run(const struct lagless_request *rq, struct lagless_output *out)
{
	struct thumb_args a;
	VipsImage *head, *thumb = NULL;
	void *buf = NULL;
	size_t len = 0;
	int r;

	if (thumb_args(rq, out, &a) == -1)
		return LAGLESS_BAD_INPUT;
	if (!loader_ok(rq)) {
		rq->host->set_message(out, "not a JPEG, PNG or WebP image\n");
		return LAGLESS_BAD_INPUT;
	}
	/* The header only (libvips decodes lazily): refuse an image whose pixel count would
	 * decode into more memory than the route allows before any pixel is decoded. */
	if ((head = vips_image_new_from_buffer(rq->input, rq->input_len, "", NULL)) == NULL)
		return vips_failed(rq, out, "cannot read the image header");
	uint64_t px = (uint64_t)vips_image_get_width(head) * (uint64_t)vips_image_get_height(head);
	g_object_unref(head);
	if (px > a.max_pixels) {
		rq->host->set_message(out, "image has %llu pixels, this route takes at most %llu\n",
		    (unsigned long long)px, (unsigned long long)a.max_pixels);
		return LAGLESS_TOO_LARGE;
	}
	if (vips_thumbnail_buffer((void *)rq->input, rq->input_len, &thumb, (int)a.width,
	    "height", (int)a.height, NULL) != 0)
		return vips_failed(rq, out, "cannot decode the image");
	r = a.webp ? vips_webpsave_buffer(thumb, &buf, &len, "Q", (int)a.quality, "strip", TRUE,
	    NULL) : vips_jpegsave_buffer(thumb, &buf, &len, "Q", (int)a.quality, "strip", TRUE,
	    NULL);
	g_object_unref(thumb);
	if (r != 0) {
		vips_error_clear();
		rq->host->set_message(out, "cannot encode the thumbnail\n");
		return LAGLESS_ERROR;
	}
	r = rq->host->write(out, buf, len);
	g_free(buf);
	if (r == -1)
		return LAGLESS_TOO_LARGE;
	rq->host->set_ctype(out, a.webp ? "image/webp" : "image/jpeg");
	return LAGLESS_OK;
}

static int
thumb_check(const struct lagless_host *h, const struct lagless_conf *conf, char *err,
    size_t errlen)
{
	const char *key, *value, *f = h->conf_get(conf, "format");
	uint64_t v;
	int webp;

	for (size_t i = 0; h->conf_at(conf, i, &key, &value) == 0; i++) {
		size_t j = 0;

		while (j < sizeof(route_keys) / sizeof(route_keys[0]) && strcmp(key, route_keys[j]))
			j++;
		if (j == sizeof(route_keys) / sizeof(route_keys[0])) {
			snprintf(err, errlen, "unknown key %s (thumbnail knows width, height, "
			    "format, quality, max_pixels)", key);
			return -1;
		}
	}
	if (h->conf_uint(conf, "width", 1, 1, MAX_SIDE, &v) == -1 ||
	    h->conf_uint(conf, "height", 1, 1, MAX_SIDE, &v) == -1) {
		snprintf(err, errlen, "width and height must be in 1..%u", MAX_SIDE);
		return -1;
	}
	if (h->conf_uint(conf, "quality", 80, 1, 100, &v) == -1 ||
	    h->conf_uint(conf, "max_pixels", 1, 1, UINT64_MAX, &v) == -1) {
		snprintf(err, errlen, "quality must be in 1..100, max_pixels a positive count");
		return -1;
	}
	if (f != NULL && parse_format(f, strlen(f), &webp) == -1) {
		snprintf(err, errlen, "format must be jpeg or webp");
		return -1;
	}
	return 0;
}

static int
thumb_init(const struct lagless_host *h, const struct lagless_conf *conf, void **state)
{
	if (VIPS_INIT("lagless-thumbnail") != 0) {
		h->log(LAGLESS_LOG_ERROR, "vips_init: %s", vips_error_buffer());
		return -1;
	}
	vips_concurrency_set(1);
	vips_cache_set_max(0);
	return 0;
}

static void
thumb_exit(const struct lagless_host *h, void *state)
{
	vips_shutdown();
}

LAGLESS_MODULE_HOOKS("thumbnail", "1.0.0", (.init = thumb_init, .exit = thumb_exit),
    LAGLESS_KIND("thumbnail", thumb_run, .ctype = "image/jpeg", .check = thumb_check));
