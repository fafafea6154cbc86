/* thumbnail: an example job module outside the lagless core. One kind, "thumbnail": the body is
 * a JPEG, PNG or WebP image; the answer is the image shrunk to fit width x height (aspect ratio
 * kept; a smaller image is never enlarged), as JPEG or WebP. libvips does the work (shrink-on-load: a JPEG is decoded at a fraction
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
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <vips/vips.h>

#include <lagless/module.h>

#define MAX_SIDE 16384u /* pixels, a thumbnail's width or height */
#define MAX_SIDE_S "16384"

/* The route's keys, parsed once by the host at start-up / lagless -t (ABI 1.1) from the
 * declarations below: run gets them as rq->route, never parses them itself. */
struct thumb_route {
	uint64_t width, height;     /* height 0: the width */
	uint64_t quality, max_pixels;
	int format;                 /* index in formats[]: jpeg, webp, jpg */
};

static const char *const formats[] = { "jpeg", "webp", "jpg", NULL };

static const struct lagless_param route_keys[] = {
	LAGLESS_PARAM("width", UINT, .min = 1, .max = MAX_SIDE, .def = "128",
	    .offset = offsetof(struct thumb_route, width)),
	LAGLESS_PARAM("height", UINT, .min = 1, .max = MAX_SIDE,
	    .offset = offsetof(struct thumb_route, height)),
	LAGLESS_PARAM("format", ENUM, .choices = formats, .def = "jpeg",
	    .offset = offsetof(struct thumb_route, format)),
	LAGLESS_PARAM("quality", UINT, .min = 1, .max = 100, .def = "80",
	    .offset = offsetof(struct thumb_route, quality)),
	LAGLESS_PARAM("max_pixels", SIZE, .min = 1, .def = "40000000",
	    .offset = offsetof(struct thumb_route, max_pixels)),
};

/* The query arguments, checked by the host before the job is queued (a bad one is a 400 at
 * once); run reads them knowing they are valid. */
static const struct lagless_param query_args[] = {
	LAGLESS_PARAM("width", UINT, .min = 1, .max = MAX_SIDE),
	LAGLESS_PARAM("height", UINT, .min = 1, .max = MAX_SIDE),
	LAGLESS_PARAM("format", ENUM, .choices = formats),
};

struct thumb_args {
	uint64_t width, height, quality, max_pixels;
	int webp;
};

/* The route's values, then the query's over them (a query width alone sets the height too). */
static int
thumb_args(const struct lagless_request *rq, struct lagless_output *out, struct thumb_args *a)
{
	const struct lagless_host *h = rq->host;
	const struct thumb_route *rt = rq->route;
	uint64_t hh = rt->height ? rt->height : rt->width;
	const char *f;
	size_t len;

	a->quality = rt->quality;
	a->max_pixels = rt->max_pixels;
	a->webp = rt->format == 1;
	if (h->query_uint(rq, "width", rt->width, 1, MAX_SIDE, &a->width) == -1 ||
	    h->query_uint(rq, "height", h->query(rq, "width", &len) ? a->width : hh, 1, MAX_SIDE,
	    &a->height) == -1) {
		h->set_message(out, "width and height must be integers in 1.." MAX_SIDE_S "\n");
		return -1;
	}
	if ((f = h->query(rq, "format", &len)) != NULL)
		a->webp = len == 4 && memcmp(f, "webp", 4) == 0;
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
	    "height", (int)a.height, "size", VIPS_SIZE_DOWN, NULL) != 0) /* never enlarged */
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

LAGLESS_MODULE_HOOKS("thumbnail", "1.1.0", (.init = thumb_init, .exit = thumb_exit),
    LAGLESS_KIND("thumbnail", thumb_run, .ctype = "image/jpeg", LAGLESS_QUERY(query_args),
        LAGLESS_ROUTE(route_keys, struct thumb_route)));
