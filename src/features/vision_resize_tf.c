/*
 * antialias=False: TensorFlow's tf.image.resize(..., antialias=False) for "bilinear" and
 * "bicubic", which TF2 runs as ResizeBilinear / ResizeBicubic with half_pixel_centers=True
 * (tensorflow/core/kernels/image/resize_bilinear_op.cc, resize_bicubic_op.cc), in float32
 * as those kernels compute, operation for operation:
 *
 * - the scale is (float)in / (float)out, a source position (x + 0.5f) * scale - 0.5f;
 * - bilinear: the two neighbours floor and ceil of the position, clamped into the image,
 *   lerp = position - floor; top + (bottom - top) * y_lerp of the two horizontal lerps;
 * - bicubic: Keys' cubic with a = -0.5 read from TF's 1024-entry table at
 *   lrintf(fraction x 1024), taps outside the image weighted 0 and the four weights
 *   renormalized, the four rows combined first, then the four columns.
 *
 * A fixed 2- or 4-tap kernel at any scale: a large downscale aliases (which is why Pillow,
 * torchvision and grist's default widen the filter). TF returns float32; the result here
 * is rounded to nearest (ties to even, tf.round) and clamped into 0-255 before the flip and
 * normalize that follow. tests/python/test_vision.py holds it to a line-by-line NumPy copy
 * of the kernels to the level, and to TensorFlow itself where it is installed.
 *
 * Keep this file free of -ffast-math and FMA contraction: the float order is the result.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/error.h"
#include "features/vision_internal.h"

#define TF_TABLE 1024

/*
 * TF's InitCoeffsTable(-0.5): entry 2i is the weight at distance i / 1024, 2i + 1 at 1 + i / 1024.
 * Process-wide: filled once (pthread_once) by the first bicubic resize, read-only after.
 */
static float keys_table[(TF_TABLE + 1) * 2];
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;

static void keys_make(void)
{
	const double a = -0.5;

	for (int i = 0; i <= TF_TABLE; i++) {
		float x = (float)(i * 1.0 / TF_TABLE);

		keys_table[i * 2] = (float)(((a + 2) * x - (a + 3)) * x * x + 1);
		x += 1.0f;
		keys_table[i * 2 + 1] = (float)(((a * x - 5 * a) * x + 8 * a) * x - 4 * a);
	}
}

/* One output position's taps on an axis: first index and weights (2 for bilinear, 4 for bicubic). */
struct tf_tap {
	int64_t idx[4];
	float w[4];
};

static int64_t bound(int64_t v, int64_t limit)
{
	return v < 0 ? 0 : v > limit - 1 ? limit - 1 : v;
}

/* TF's compute_interpolation_weights (bilinear: idx[0] lower, idx[1] upper, w[0] lerp) or GetWeightsAndIndices. */
static void tf_taps(uint32_t in_size, uint32_t out_size, uint32_t first, uint32_t count, bool bicubic,
		    struct tf_tap *taps)
{
	float scale = (float)in_size / (float)out_size;

	for (uint32_t i = 0; i < count; i++) {
		float in = ((float)(first + i) + 0.5f) * scale - 0.5f;
		struct tf_tap *t = taps + i;

		if (!bicubic) {
			float in_f = floorf(in);
			int64_t lo = (int64_t)in_f, hi = (int64_t)ceilf(in);

			t->idx[0] = lo < 0 ? 0 : lo;
			t->idx[1] = hi > (int64_t)in_size - 1 ? (int64_t)in_size - 1 : hi;
			t->w[0] = in - in_f;
			continue;
		}
		int64_t loc = (int64_t)floorf(in);
		float delta = in - (float)loc;
		int64_t off = lrintf(delta * TF_TABLE);
		const float want[4] = { keys_table[off * 2 + 1], keys_table[off * 2], keys_table[(TF_TABLE - off) * 2],
					keys_table[(TF_TABLE - off) * 2 + 1] };

		for (int k = 0; k < 4; k++) {
			t->idx[k] = bound(loc - 1 + k, in_size);
			t->w[k] = t->idx[k] == loc - 1 + k ? want[k] : 0.0f;
		}
		float sum = t->w[0] + t->w[1] + t->w[2] + t->w[3];

		if (fabsf(sum) >= 1000.0f * 1.17549435e-38f) { /* 1000 x FLT_MIN, as TF */
			float inv = 1.0f / sum;

			for (int k = 0; k < 4; k++)
				t->w[k] *= inv;
		}
	}
}

static uint8_t to_u8(float v)
{
	v = rintf(v);
	return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

int gv_resize_tf(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
		 uint32_t full_w, uint32_t y0, uint32_t x0, uint8_t *dst, uint32_t dh, uint32_t dw, size_t dstride,
		 bool bicubic)
{
	struct tf_tap *xs = malloc(sizeof(*xs) * dw), *ys = malloc(sizeof(*ys) * dh);

	if (!xs || !ys) {
		free(xs);
		free(ys);
		return grist_fail(-ENOMEM, "resize: out of memory for %ux%u taps", dh, dw);
	}
	if (bicubic)
		pthread_once(&keys_once, keys_make);
	tf_taps(sw, full_w, x0, dw, bicubic, xs);
	tf_taps(sh, full_h, y0, dh, bicubic, ys);
	for (uint32_t y = 0; y < dh; y++) {
		const struct tf_tap *ty = ys + y;
		uint8_t *out = dst + (size_t)y * dstride;

		for (uint32_t x = 0; x < dw; x++) {
			const struct tf_tap *tx = xs + x;

			for (uint32_t ch = 0; ch < c; ch++) {
				float v;

				if (!bicubic) {
					const uint8_t *top = src + (size_t)ty->idx[0] * sstride + ch;
					const uint8_t *bot = src + (size_t)ty->idx[1] * sstride + ch;
					float tl = top[tx->idx[0] * c], tr = top[tx->idx[1] * c];
					float bl = bot[tx->idx[0] * c], br = bot[tx->idx[1] * c];
					float t = tl + (tr - tl) * tx->w[0], b = bl + (br - bl) * tx->w[0];

					v = t + (b - t) * ty->w[0];
				} else {
					float col[4];

					/* ComputeYInterpolation for each of the four columns, then Compute across them */
					for (int k = 0; k < 4; k++) {
						size_t at = (size_t)tx->idx[k] * c + ch;

						col[k] = (float)src[(size_t)ty->idx[0] * sstride + at] * ty->w[0] +
							 (float)src[(size_t)ty->idx[1] * sstride + at] * ty->w[1] +
							 (float)src[(size_t)ty->idx[2] * sstride + at] * ty->w[2] +
							 (float)src[(size_t)ty->idx[3] * sstride + at] * ty->w[3];
					}
					v = col[0] * tx->w[0] + col[1] * tx->w[1] + col[2] * tx->w[2] + col[3] * tx->w[3];
				}
				out[(size_t)x * c + ch] = to_u8(v);
			}
		}
	}
	free(xs);
	free(ys);
	return 0;
}
