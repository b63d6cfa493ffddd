/*
 * Where a transform's randomness comes from, and the boxes it draws: a counter-based
 * generator keyed per record, torchvision's RandomResizedCrop.get_params, the centre crops.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <xxhash.h>

#include "common/error.h"
#include "features/vision_internal.h"

#define GOLDEN 0x9e3779b97f4a7c15ull

/* SplitMix64's finalizer: a bijection that mixes every input bit into every output bit. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * The key folds seed, epoch, index and the feature's key one after another through the
 * mixer, so no two of them can trade places; draw k is SplitMix64's k-th output from that
 * state, a function of (key, k) alone: the same on any thread, in any order.
 */
void gv_stream_init(struct gv_stream *s, uint64_t seed, uint64_t epoch, uint64_t index, const char *key)
{
	uint64_t k = mix64(seed + GOLDEN);

	k = mix64(k ^ (epoch + GOLDEN));
	k = mix64(k ^ (index + 2 * GOLDEN));
	k = mix64(k ^ XXH64(key ? key : "", key ? strlen(key) : 0, 0x67726973742d7631ull /* "grist-v1" */));
	s->key = k;
	s->n = 0;
}

double gv_uniform(struct gv_stream *s)
{
	uint64_t z = mix64(s->key + ++s->n * GOLDEN);

	return (double)(z >> 11) * 0x1.0p-53;
}

double gv_draw(struct gv_draws *d)
{
	if (d->stream)
		return gv_uniform(d->stream);
	return d->at < d->n ? d->list[d->at++] : 0.0;
}

double gv_round_half_even(double x)
{
	double f = floor(x), r = x - f;

	if (r > 0.5)
		return f + 1;
	if (r < 0.5)
		return f;
	return fmod(f, 2.0) == 0.0 ? f : f + 1;
}

/* randint(0, n - 1) from a uniform: floor(u x n), kept below n where u x n rounds up to it. */
static int32_t pick(double u, uint32_t n)
{
	double v = floor(u * n);

	return v >= n ? (int32_t)n - 1 : (int32_t)v;
}

/*
 * torchvision/transforms/transforms.py, RandomResizedCrop.get_params, line for line; torch's
 * uniform_(a, b) is a + u x (b - a), randint(0, n) is floor(u x n).
 */
void gv_rrc_params(uint32_t h, uint32_t w, const double scale[2], const double ratio[2], struct gv_draws *d,
		   struct grist_vision_box *box)
{
	double area = (double)h * w, log_lo = log(ratio[0]), log_hi = log(ratio[1]);
	double rlo = fmin(ratio[0], ratio[1]), rhi = fmax(ratio[0], ratio[1]), in_ratio;
	int32_t ch, cw;

	for (int attempt = 0; attempt < 10; attempt++) {
		double target = area * (scale[0] + gv_draw(d) * (scale[1] - scale[0]));
		double aspect = exp(log_lo + gv_draw(d) * (log_hi - log_lo));
		double fw = gv_round_half_even(sqrt(target * aspect)), fh = gv_round_half_even(sqrt(target / aspect));

		if (fw > 0 && fw <= w && fh > 0 && fh <= h) {
			cw = (int32_t)fw;
			ch = (int32_t)fh;
			box->top = pick(gv_draw(d), h - (uint32_t)ch + 1);
			box->left = pick(gv_draw(d), w - (uint32_t)cw + 1);
			box->height = ch;
			box->width = cw;
			return;
		}
	}
	/* the fallback: a central crop, its aspect clamped into the range */
	in_ratio = (double)w / h;
	if (in_ratio < rlo) {
		cw = (int32_t)w;
		ch = (int32_t)gv_round_half_even(cw / rlo);
	} else if (in_ratio > rhi) {
		ch = (int32_t)h;
		cw = (int32_t)gv_round_half_even(ch * rhi);
	} else {
		cw = (int32_t)w;
		ch = (int32_t)h;
	}
	/* a ratio range far from 1 on a thin image can round to 0 or past the side: keep the box inside */
	ch = ch < 1 ? 1 : ch > (int32_t)h ? (int32_t)h : ch;
	cw = cw < 1 ? 1 : cw > (int32_t)w ? (int32_t)w : cw;
	box->top = ((int32_t)h - ch) / 2;
	box->left = ((int32_t)w - cw) / 2;
	box->height = ch;
	box->width = cw;
}

/* SimplePhilox::Uniform(n): an integer in [0, n). */
static int32_t tf_uniform(struct gv_draws *d, int32_t n)
{
	return n > 0 ? pick(gv_draw(d), (uint32_t)n) : 0;
}

/* tensorflow/core/kernels/image/sample_distorted_bounding_box_op.cc GenerateRandomCrop, in float. */
static bool tf_random_crop(int32_t ow, int32_t oh, float min_rel, float max_rel, float aspect, struct gv_draws *d,
			   struct grist_vision_box *r)
{
	float min_area, max_area, area;
	int32_t height, max_height, width, x = 0, y = 0;

	if (max_rel <= 0.0f || aspect <= 0.0f || ow <= 0 || oh <= 0 || min_rel > max_rel)
		return false;
	min_area = min_rel * (float)ow * (float)oh;
	max_area = max_rel * (float)ow * (float)oh;
	height = (int32_t)lrintf(sqrtf(min_area / aspect));
	max_height = (int32_t)lrintf(sqrtf(max_area / aspect));
	if (lrintf((float)max_height * aspect) > ow) {
		const float eps = 0.0000001f;

		max_height = (int32_t)((ow + 0.5 - eps) / aspect);
		if (lrintf((float)max_height * aspect) > ow)
			max_height -= 1;
	}
	if (max_height > oh)
		max_height = oh;
	if (height >= max_height)
		height = max_height;
	if (height < max_height)
		height += tf_uniform(d, max_height - height + 1);
	width = (int32_t)lrintf((float)height * aspect);
	area = (float)(width * height);
	if (area < min_area) {
		height += 1;
		width = (int32_t)lrintf((float)height * aspect);
		area = (float)(width * height);
	}
	if (area > max_area) {
		height -= 1;
		width = (int32_t)lrintf((float)height * aspect);
		area = (float)(width * height);
	}
	if (area < min_area || area > max_area || width > ow || height > oh || width <= 0 || height <= 0)
		return false;
	if (height < oh)
		y = tf_uniform(d, oh - height);
	if (width < ow)
		x = tf_uniform(d, ow - width);
	*r = (struct grist_vision_box){ .top = y, .left = x, .height = height, .width = width };
	return true;
}

bool gv_tf_params(uint32_t h, uint32_t w, const double scale[2], const double ratio[2], double min_covered,
		  struct gv_draws *d, struct grist_vision_box *box)
{
	const float lo = (float)ratio[0], hi = (float)ratio[1], covered = (float)min_covered;
	const float image_area = (float)((int32_t)w * (int32_t)h);

	for (int attempt = 0; attempt < 10; attempt++) {
		float aspect = (float)gv_draw(d) * (hi - lo) + lo;
		struct grist_vision_box r;

		/* SatisfiesOverlapConstraints with the whole image as the one object */
		if (tf_random_crop((int32_t)w, (int32_t)h, (float)scale[0], (float)scale[1], aspect, d, &r) &&
		    (float)(r.width * r.height) >= 1.0f && (float)(r.width * r.height) / image_area >= covered) {
			box->top = r.top;
			box->left = r.left;
			box->height = r.height;
			box->width = r.width;
			return true;
		}
	}
	*box = (struct grist_vision_box){ .top = 0, .left = 0, .height = (int32_t)h, .width = (int32_t)w };
	return false;
}

void gv_center_params(const struct grist_vision_transform *t, uint32_t h, uint32_t w, struct grist_vision_box *box)
{
	uint32_t s = h < w ? h : w;

	if (t->crop_fraction > 0) {
		/* TF/TPU: int(fraction x shorter side), offset ((H - c) + 1) // 2 */
		int32_t c = (int32_t)(t->crop_fraction * s);

		c = c < 1 ? 1 : c;
		box->height = box->width = c;
		box->top = ((int32_t)h - c + 1) / 2;
		box->left = ((int32_t)w - c + 1) / 2;
		return;
	}
	/* torchvision Resize(resize) then CenterCrop(out): the window in the resized image */
	{
		uint32_t nh, nw;

		gv_center_resized(t, h, w, &nh, &nw);
		box->top = (int32_t)gv_round_half_even(((double)nh - t->out_height) / 2.0);
		box->left = (int32_t)gv_round_half_even(((double)nw - t->out_width) / 2.0);
		box->height = (int32_t)t->out_height;
		box->width = (int32_t)t->out_width;
	}
}

void gv_center_resized(const struct grist_vision_transform *t, uint32_t h, uint32_t w, uint32_t *nh, uint32_t *nw)
{
	/* torchvision's _compute_resized_output_size: the long side int(size x long / short), truncated */
	if (h <= w) {
		*nh = t->resize;
		*nw = (uint32_t)((double)t->resize * w / h);
	} else {
		*nw = t->resize;
		*nh = (uint32_t)((double)t->resize * h / w);
	}
}

int gv_transform_load(struct grist_vision_transform *t, const struct grist_vision_transform *src)
{
	int ret = grist_sized_in(t, sizeof(*t), src, "struct grist_vision_transform");

	if (ret)
		return ret;
	if (t->scale[0] == 0 && t->scale[1] == 0) {
		t->scale[0] = 0.08;
		t->scale[1] = 1.0;
	}
	if (t->ratio[0] == 0 && t->ratio[1] == 0) {
		t->ratio[0] = 3.0 / 4.0;
		t->ratio[1] = 4.0 / 3.0;
	}
	for (int i = 0; i < 3; i++)
		if (t->std[i] == 0)
			t->std[i] = 1.0f;
	if (!t->dtype)
		t->dtype = t->normalize ? GRIST_DTYPE_FLOAT32 : GRIST_DTYPE_UINT8;
	if (!t->max_pixels)
		t->max_pixels = (uint64_t)1 << 28;
	if (!t->scan_limit)
		t->scan_limit = 500;
	if (!t->channels)
		t->channels = 3;
	if (t->min_object_covered == 0)
		t->min_object_covered = 0.1;
	if ((unsigned)t->sampler > GRIST_VISION_SAMPLER_DALI)
		return grist_fail(-EINVAL, "vision: unknown sampler %d", (int)t->sampler);
	if (!(t->min_object_covered >= 0 && t->min_object_covered <= 1))
		return grist_fail(-EINVAL, "vision: min_object_covered %g is not 0 to 1", t->min_object_covered);
	if ((unsigned)t->decode > GRIST_VISION_DECODE_FAST)
		return grist_fail(-EINVAL, "vision: unknown decode mode %d", (int)t->decode);
	if (t->channels != 1 && t->channels != 3)
		return grist_fail(-EINVAL, "vision: channels must be 1 or 3, not %u", t->channels);
	if (t->op < GRIST_VISION_RANDOM_RESIZED_CROP || t->op > GRIST_VISION_RESIZE)
		return grist_fail(-EINVAL, "vision: unknown transform op %d", (int)t->op);
	if (!t->out_height || !t->out_width || t->out_height > 65536 || t->out_width > 65536)
		return grist_fail(-EINVAL, "vision: the output size %ux%u is not 1 to 65536 on each side", t->out_height,
				  t->out_width);
	if ((unsigned)t->interp > GRIST_VISION_BICUBIC_TF)
		return grist_fail(-EINVAL, "vision: unknown interpolation %d", (int)t->interp);
	if (!(t->scale[0] > 0 && t->scale[0] <= t->scale[1] && t->scale[1] <= 1.0))
		return grist_fail(-EINVAL, "vision: scale (%g, %g) is not 0 < lo <= hi <= 1", t->scale[0], t->scale[1]);
	if (!(t->ratio[0] > 0 && t->ratio[0] <= t->ratio[1] && isfinite(t->ratio[1])))
		return grist_fail(-EINVAL, "vision: ratio (%g, %g) is not 0 < lo <= hi", t->ratio[0], t->ratio[1]);
	if (!(t->flip >= 0 && t->flip <= 1))
		return grist_fail(-EINVAL, "vision: flip %g is not a probability", t->flip);
	for (int i = 0; i < 3; i++)
		if (!isfinite(t->mean[i]) || !isfinite(t->std[i]))
			return grist_fail(-EINVAL, "vision: mean and std must be finite");
	if (t->dtype != GRIST_DTYPE_UINT8 && t->dtype != GRIST_DTYPE_FLOAT32 && t->dtype != GRIST_DTYPE_FLOAT16 &&
	    t->dtype != GRIST_DTYPE_BFLOAT16)
		return grist_fail(-EINVAL, "vision: dtype must be uint8, float16, bfloat16 or float32");
	if (t->dtype == GRIST_DTYPE_UINT8 && t->normalize)
		return grist_fail(-EINVAL, "vision: a normalized image is float (dtype float32 or float16)");
	if ((unsigned)t->layout > GRIST_VISION_CHW)
		return grist_fail(-EINVAL, "vision: unknown layout %d", (int)t->layout);
	if (t->op == GRIST_VISION_CENTER_CROP && !(t->crop_fraction > 0) &&
	    (t->resize < t->out_height || t->resize < t->out_width))
		return grist_fail(-EINVAL, "vision: CenterCrop resizes the shorter side to %u, less than the crop %ux%u "
				  "(set resize, or crop_fraction for the TF form)", t->resize, t->out_height, t->out_width);
	if (t->crop_fraction > 1)
		return grist_fail(-EINVAL, "vision: crop_fraction %g is more than 1", t->crop_fraction);
	return 0;
}

/* The draws of one record: flip first, so the box's attempts never move it. */
int gv_box(const struct grist_vision_transform *tp, uint32_t height, uint32_t width, uint64_t epoch, uint64_t index,
	   const char *key, struct grist_vision_box *box)
{
	const struct grist_vision_transform t = *tp;
	struct gv_stream s;
	struct gv_draws d = { .stream = &s };
	double u;

	if (!height || !width)
		return grist_fail(-EINVAL, "vision: a %ux%u image", height, width);
	if (t.op == GRIST_VISION_CENTER_CROP && !(t.crop_fraction > 0) &&
	    (double)t.resize * (height > width ? height : width) / (height < width ? height : width) >= 2147483648.0)
		/* gv_center_resized's long side (and the window's int32 offset) would not fit */
		return grist_fail(-EFBIG, "vision: a %ux%u image resized to %u on its shorter side: the longer side "
				  "would pass 2^31 pixels", height, width, t.resize);
	gv_stream_init(&s, t.seed, epoch, index, key);
	u = gv_draw(&d);
	box->flipped = u < t.flip;
	switch (t.op) {
	case GRIST_VISION_RANDOM_RESIZED_CROP:
		if (t.sampler == GRIST_VISION_SAMPLER_TF) {
			gv_tf_params(height, width, t.scale, t.ratio, t.min_object_covered, &d, box);
			if (box->height == (int32_t)height && box->width == (int32_t)width) {
				/* resnet_preprocessing.py: a crop that is the whole image becomes the eval crop */
				struct grist_vision_transform c = t;

				c.crop_fraction = t.crop_fraction > 0 ? t.crop_fraction : 224.0 / 256.0;
				gv_center_params(&c, height, width, box);
			}
		} else if (t.sampler == GRIST_VISION_SAMPLER_DALI) {
			gv_dali_params(height, width, t.scale, t.ratio, &d, box);
		} else {
			gv_rrc_params(height, width, t.scale, t.ratio, &d, box);
		}
		break;
	case GRIST_VISION_CENTER_CROP:
		gv_center_params(&t, height, width, box);
		if (!(t.crop_fraction > 0)) {
			/* the window of the resized image, mapped back to source pixels (rounded down, at least 1) */
			uint32_t nh, nw;

			gv_center_resized(&t, height, width, &nh, &nw);
			box->top = (int32_t)((double)box->top * height / nh);
			box->left = (int32_t)((double)box->left * width / nw);
			box->height = (int32_t)fmax(1, (double)t.out_height * height / nh);
			box->width = (int32_t)fmax(1, (double)t.out_width * width / nw);
		}
		break;
	default:
		box->top = box->left = 0;
		box->height = (int32_t)height;
		box->width = (int32_t)width;
		break;
	}
	return 0;
}

int grist_vision_box(const struct grist_vision_transform *tr, uint32_t height, uint32_t width, uint64_t epoch,
		     uint64_t index, const char *key, struct grist_vision_box *box)
{
	struct grist_vision_transform t;
	int ret;

	if (!box)
		return grist_fail(-EINVAL, "vision: box: NULL box");
	if ((ret = gv_transform_load(&t, tr)))
		return ret;
	return gv_box(&t, height, width, epoch, index, key, box);
}
