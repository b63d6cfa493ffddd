/*
 * interpolation "area": OpenCV's cv::resize INTER_AREA for 8-bit images (FFCV's resize),
 * from imgproc/src/resize.cpp, in double with the result rounded to nearest.
 *
 * - Shrinking on both axes (source >= output on each): each output pixel is the average of
 *   the source area it covers, partial pixels weighted by the part covered
 *   (computeResizeAreaTab: a weight is kept only where the part is over 1e-3).
 * - Otherwise (a crop smaller than the output on either axis): OpenCV's linear resize with
 *   its area-mode offsets, on both axes: sx = floor(x * scale), fx = (x + 1) - (sx + 1) /
 *   scale, kept only for its fraction (0 where it is not positive), sx past the last pixel
 *   clamped there with fx = 0. It enlarges as nearest neighbour blended at the source
 *   pixels' borders.
 *
 * OpenCV computes in float (shrink) or 11-bit fixed point (enlarge) and rounds its own way
 * (the integer-factor shrink rounds a half up): the outputs agree within one level
 * (test_vision.py holds it to cv2.resize).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "features/vision_internal.h"

/* One axis' taps: output i reads src[first[i] .. first[i] + n[i]) with weights w[i * stride ...]. */
struct taps {
	uint32_t *first, *n;
	double *w;
	uint32_t stride;
};

static void taps_free(struct taps *t)
{
	free(t->first);
	free(t->n);
	free(t->w);
}

/* The taps of outputs [@o0, @o0 + @count) of a @src -> @full axis, area mode when @shrink. */
static int taps_make(uint32_t src, uint32_t full, uint32_t o0, uint32_t count, bool shrink, struct taps *t)
{
	/* OpenCV's doubles: scale is 1 / (full / src), not src / full (70 x 400/224 floors to 125,
	 * 70 / 0.56 to 124) */
	double inv = (double)full / src, scale = 1.0 / inv;

	t->stride = shrink ? (uint32_t)ceil(scale) + 2 : 2;
	t->first = calloc(count, sizeof(*t->first));
	t->n = calloc(count, sizeof(*t->n));
	t->w = calloc((size_t)count * t->stride, sizeof(*t->w));
	if (!t->first || !t->n || !t->w)
		return grist_fail(-ENOMEM, "resize: out of memory for the area taps");
	for (uint32_t i = 0; i < count; i++) {
		uint32_t o = o0 + i, k = 0;
		double *w = t->w + (size_t)i * t->stride;

		if (shrink) {
			double fsx1 = o * scale, fsx2 = fsx1 + scale, cell = fmin(scale, src - fsx1);
			int64_t sx1 = (int64_t)ceil(fsx1), sx2 = (int64_t)floor(fsx2);

			sx2 = sx2 < (int64_t)src ? sx2 : (int64_t)src;
			sx1 = sx1 < sx2 ? sx1 : sx2;
			t->first[i] = (uint32_t)(sx1 - (sx1 - fsx1 > 1e-3 ? 1 : 0));
			if (sx1 - fsx1 > 1e-3)
				w[k++] = (sx1 - fsx1) / cell;
			for (int64_t s = sx1; s < sx2; s++)
				w[k++] = 1.0 / cell;
			if (fsx2 - sx2 > 1e-3 && sx2 < (int64_t)src)
				w[k++] = fmin(fmin(fsx2 - sx2, 1.0), cell) / cell;
		} else {
			int64_t sx = (int64_t)floor(o * scale);
			double fx = (float)((o + 1) - (sx + 1) * inv);

			fx = fx <= 0 ? 0 : fx - floor(fx);
			if (sx >= (int64_t)src - 1) {
				sx = src - 1;
				fx = 0;
			}
			t->first[i] = (uint32_t)sx;
			w[k++] = 1 - fx;
			if (sx + 1 < (int64_t)src)
				w[k++] = fx;
		}
		t->n[i] = k;
	}
	return 0;
}

int gv_resize_area(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
		   uint32_t full_w, uint32_t y0, uint32_t x0, uint8_t *dst, uint32_t dh, uint32_t dw, size_t dstride)
{
	bool shrink = sh >= full_h && sw >= full_w;
	struct taps tx = { 0 }, ty = { 0 };
	double *rows = NULL;
	uint32_t first, last;
	int ret;

	if ((ret = taps_make(sw, full_w, x0, dw, shrink, &tx)) || (ret = taps_make(sh, full_h, y0, dh, shrink, &ty)))
		goto out;
	/* the source rows the vertical taps read: [first, last), each resized horizontally once */
	first = ty.first[0];
	last = ty.first[dh - 1] + ty.n[dh - 1];
	rows = malloc(sizeof(double) * (size_t)(last - first) * dw * c);
	if (!rows) {
		ret = grist_fail(-ENOMEM, "resize: out of memory for a %ux%u intermediate", last - first, dw);
		goto out;
	}
	for (uint32_t y = first; y < last; y++) {
		const uint8_t *s = src + (size_t)y * sstride;
		double *r = rows + (size_t)(y - first) * dw * c;

		for (uint32_t x = 0; x < dw; x++)
			for (uint32_t ch = 0; ch < c; ch++) {
				double acc = 0;

				for (uint32_t k = 0; k < tx.n[x]; k++)
					acc += tx.w[(size_t)x * tx.stride + k] * s[(size_t)(tx.first[x] + k) * c + ch];
				r[(size_t)x * c + ch] = acc;
			}
	}
	for (uint32_t y = 0; y < dh; y++) {
		uint8_t *d = dst + (size_t)y * dstride;

		for (uint32_t i = 0; i < dw * c; i++) {
			double acc = 0, v;

			for (uint32_t k = 0; k < ty.n[y]; k++)
				acc += ty.w[(size_t)y * ty.stride + k] * rows[(size_t)(ty.first[y] + k - first) * dw * c + i];
			v = nearbyint(acc);
			d[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
		}
	}
out:
	free(rows);
	taps_free(&tx);
	taps_free(&ty);
	return ret;
}
