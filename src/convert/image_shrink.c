/*
 * Images shrunk at conversion: a dataset stored with its images' longer side capped at
 * max_side decodes several times faster at training time (FFCV stores ImageNet at 256 to
 * 512 pixels). One implementation for every converter: `grist convert --from imagefolder
 * --max-side`, and (through the Python extension) grist.tfds.from_parquet and
 * grist.beam.WriteToTFDS with max_side=.
 */
#include <errno.h>
#include <stdlib.h>
#include <turbojpeg.h>

#include "common/error.h"
#include "convert/image_shrink.h"
#include "features/features_internal.h"
#include "features/vision_internal.h"

/* A decoded image larger than this is refused rather than allocated. */
#define SHRINK_PIXELS_MAX ((size_t)1 << 30)

int gc_shrink_pixels(struct gc_shrink *s, const uint8_t *pixels, uint32_t h, uint32_t w, uint32_t c,
		     uint32_t max_side, int quality, const char *name, const uint8_t **out, size_t *n)
{
	uint32_t nw, nh;
	unsigned long size = s->jpeg_cap;
	size_t need;
	int ret;

	*out = NULL;
	if (!max_side || (w <= max_side && h <= max_side) || (c != 1 && c != 3))
		return 0;
	/* the shorter side's share of max_side, rounded half up, in integers (no float surprise) */
	if (w >= h) {
		nw = max_side;
		nh = (uint32_t)(((uint64_t)h * max_side * 2 + w) / ((uint64_t)w * 2));
	} else {
		nh = max_side;
		nw = (uint32_t)(((uint64_t)w * max_side * 2 + h) / ((uint64_t)h * 2));
	}
	nw = nw ? nw : 1;
	nh = nh ? nh : 1;
	need = (size_t)nw * nh * c;
	if (s->small_cap < need) {
		uint8_t *p = realloc(s->small, need);

		if (!p)
			return grist_fail(-ENOMEM, "%s: out of memory", name);
		s->small = p;
		s->small_cap = need;
	}
	ret = gv_resize(pixels, h, w, (size_t)w * c, c, s->small, nh, nw, (size_t)nw * c, GRIST_VISION_BILINEAR);
	if (ret)
		return grist_fail_prefix(ret, "%s: resizing %ux%u to %ux%u", name, w, h, nw, nh);
	if (!s->tj && !(s->tj = tjInitCompress()))
		return grist_fail(-ENOMEM, "%s: no TurboJPEG encoder: %s", name, tjGetErrorStr());
	/* TurboJPEG grows s->jpeg as it needs (and we keep it): size is its capacity in, length out */
	if (tjCompress2(s->tj, s->small, (int)nw, (int)(nw * c), (int)nh, c == 1 ? TJPF_GRAY : TJPF_RGB, &s->jpeg,
			&size, c == 1 ? TJSAMP_GRAY : TJSAMP_420, quality, 0) < 0)
		return grist_fail(-EIO, "%s: TurboJPEG does not encode the %ux%u image: %s", name, nw, nh,
				  tjGetErrorStr2(s->tj));
	if (size > s->jpeg_cap)
		s->jpeg_cap = size;
	*out = s->jpeg;
	*n = size;
	return 0;
}

int gc_shrink_image(struct gc_shrink *s, const uint8_t *img, size_t len, uint32_t max_side, int quality,
		    const char *name, const uint8_t **out, size_t *n)
{
	struct gf_image im;
	uint8_t *px;
	size_t need;
	int ret;

	*out = NULL;
	if ((ret = gf_image_open(&im, GRIST_DECODE_IMAGE, img, len)))
		return grist_fail_prefix(ret, "%s: not an image that decodes", name);
	if (!max_side || (im.width <= max_side && im.height <= max_side) || im.sample_bytes != 1 ||
	    (im.channels != 1 && im.channels != 3)) {
		gf_image_close(&im);
		return 0;
	}
	need = (size_t)im.width * im.height * im.channels;
	if (need > SHRINK_PIXELS_MAX) {
		gf_image_close(&im);
		return grist_fail(-EFBIG, "%s: a %ux%u image, larger than %zu bytes decoded", name, im.width, im.height,
				  SHRINK_PIXELS_MAX);
	}
	if (!(px = malloc(need))) {
		gf_image_close(&im);
		return grist_fail(-ENOMEM, "%s: out of memory", name);
	}
	ret = gf_image_decode(&im, px, (size_t)im.width * im.channels);
	if (ret)
		ret = grist_fail_prefix(ret, "%s: not an image that decodes", name);
	else
		ret = gc_shrink_pixels(s, px, im.height, im.width, im.channels, max_side, quality, name, out, n);
	free(px);
	return ret;
}

void gc_shrink_free(struct gc_shrink *s)
{
	if (s->tj)
		tjDestroy(s->tj);
	tjFree(s->jpeg);
	free(s->small);
	*s = (struct gc_shrink){ 0 };
}
