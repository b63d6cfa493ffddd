/*
 * sampler="dali": DALI's RandomResizedCrop box (NVIDIA/DALI dali/util/random_crop_generator.cc,
 * RandomCropGenerator::GenerateCropWindowImpl), line for line in its float32 arithmetic,
 * with grist's uniforms in place of its mt19937:
 *
 * - two early exits: an image too wide (H x maxW < min area, maxW = int(H x max ratio))
 *   takes H x maxW, one too tall W x maxH, without an attempt;
 * - per attempt (10): area = scale x H x W (uniform), aspect = exp(uniform log), w and h
 *   rounded half away from zero (roundf) and kept at least 1; accepted when it fits and
 *   the rounded w / h is still inside the ratio range;
 * - after 10 misses: the whole image clamped into the ratio range, shrunk to at most the
 *   largest area (sides times sqrt(shrink), truncated, at least 1);
 * - the offsets x then y, uniform over every place the box fits (both ends inclusive, as
 *   std::uniform_int_distribution(0, W - w)): floor(u x (W - w + 1)), so a fallback box is
 *   placed at random too, not centred.
 */
#include <math.h>

#include "features/vision_internal.h"

/* std::uniform_real_distribution<float>(lo, hi) on the uniform @u: u x (hi - lo) + lo, in float. */
static float uniform_f(float lo, float hi, double u)
{
	return (float)u * (hi - lo) + lo;
}

/* std::uniform_int_distribution(0, n) on @u, as grist draws every offset. */
static int32_t offset(int64_t n, double u)
{
	int64_t v = (int64_t)floor(u * (double)(n + 1));

	return (int32_t)(v > n ? n : v);
}

void gv_dali_params(uint32_t h, uint32_t w, const double scale[2], const double ratio[2], struct gv_draws *d,
		    struct grist_vision_box *box)
{
	const int H = (int)h, W = (int)w;
	const float area_lo = (float)scale[0], area_hi = (float)scale[1];
	const float min_wh = (float)ratio[0], max_wh = (float)ratio[1], max_hw = 1 / (float)ratio[0];
	const float log_lo = logf((float)ratio[0]), log_hi = logf((float)ratio[1]);
	float min_area = (float)(W * H) * area_lo;
	int maxW = (int)((float)H * max_wh), maxH = (int)((float)W * max_hw), cw = 0, ch = 0;

	maxW = maxW > 1 ? maxW : 1;
	maxH = maxH > 1 ? maxH : 1;
	if ((float)((int64_t)H * maxW) < min_area) { /* too wide */
		ch = H;
		cw = maxW;
	} else if ((float)((int64_t)W * maxH) < min_area) { /* too tall */
		cw = W;
		ch = maxH;
	} else {
		int left = 10;

		for (; left > 0; left--) {
			float s = uniform_f(area_lo, area_hi, gv_draw(d));
			float target = s * (float)((size_t)H * (size_t)W);
			float r = expf(uniform_f(log_lo, log_hi, gv_draw(d)));

			cw = (int)roundf(sqrtf(target * r));
			ch = (int)roundf(sqrtf(target / r));
			cw = cw < 1 ? 1 : cw;
			ch = ch < 1 ? 1 : ch;
			r = (float)cw / (float)ch;
			if (cw <= W && ch <= H && r >= min_wh && r <= max_wh)
				break;
		}
		if (left <= 0) {
			float max_area = area_hi * (float)W * (float)H, r = (float)W / (float)H, shrink;

			if (r > max_wh) {
				ch = H;
				cw = maxW;
			} else if (r < min_wh) {
				cw = W;
				ch = maxH;
			} else {
				cw = W;
				ch = H;
			}
			shrink = fminf(1.0f, max_area / (float)(cw * ch));
			/* sqrt of a float argument: C's double sqrt, as the unqualified call resolves in DALI */
			cw = (int)(cw * sqrt(shrink));
			ch = (int)(ch * sqrt(shrink));
			cw = cw > 1 ? cw : 1;
			ch = ch > 1 ? ch : 1;
		}
	}
	box->width = cw;
	box->height = ch;
	box->left = offset(W - cw, gv_draw(d));
	box->top = offset(H - ch, gv_draw(d));
}
