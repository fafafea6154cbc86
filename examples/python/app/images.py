"""A Pillow thumbnail: the upload is read from the shared-memory body, the JPEG written straight
into the job's output region (no bytes object for the answer, no copy of it)."""
import io

from PIL import Image

import lagless

MAX_SIDE = 4096
Image.MAX_IMAGE_PIXELS = 40_000_000  # a larger upload is refused, never decoded


class OutputWriter(io.RawIOBase):
    """A file object over request.output: Pillow's save() writes into shared memory."""

    def __init__(self, view):
        self.view, self.n = view, 0

    def writable(self):
        return True

    def write(self, b):
        b = memoryview(b).cast("B")
        if self.n + len(b) > len(self.view):
            raise lagless.BadRequest("the thumbnail does not fit the output region", 413)
        self.view[self.n:self.n + len(b)] = b
        self.n += len(b)
        return len(b)


def side(request, name):
    try:
        v = int(request.query.get(name, request.route.get(name, "128")))
    except ValueError:
        raise lagless.BadRequest("%s must be an integer" % name)
    if not 1 <= v <= MAX_SIDE:
        raise lagless.BadRequest("%s must be in 1..%d" % (name, MAX_SIDE))
    return v


def thumbnail(body, request):
    """POST /thumbnail?width=W&height=H: a JPEG, PNG or WebP in, a JPEG that fits W x H out."""
    w = side(request, "width")
    h = side(request, "height") if "height" in request.query else w
    try:
        img = Image.open(io.BytesIO(body), formats=["JPEG", "PNG", "WEBP"])
        img.thumbnail((w, h))
    except (OSError, Image.DecompressionBombError) as e:
        raise lagless.BadRequest("not an image this route takes: %s" % e)
    out = OutputWriter(request.output)
    img.convert("RGB").save(out, "JPEG", quality=int(request.route.get("quality", "80")))
    return (200, "image/jpeg", request.output[:out.n])
