/*
 * A transform applied to one image: header checked, box drawn, region decoded, resized,
 * then flipped, normalized and converted into the caller's dtype and layout.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "grist_config.h"
#include "features/features_internal.h"
#include "features/vision_internal.h"

size_t grist_vision_out_bytes(const struct grist_vision_transform *tr)
{
	struct grist_vision_transform t;

	if (gv_transform_load(&t, tr))
		return 0;
	return gv_out_bytes(&t);
}

size_t gv_out_bytes(const struct grist_vision_transform *t)
{
	return (size_t)t->out_height * t->out_width * t->channels * gf_dtype_bytes(t->dtype);
}

/*
 * The output stage, one resized row at a time as the resize's vertical pass makes it (the
 * row still in L1, no whole uint8 image written and read again): normalize, convert and lay
 * out into the output. The flip is the resize's (gv_resize_rows). A float output is a
 * function of (channel, value) alone, each value as torchvision computes it in float32:
 * ToTensor's x / 255, then Normalize's (x - mean) / std. The vector path does that
 * arithmetic (with divisions, or without where gv_emit_f32_fma_exact() found every value the
 * same); the other paths look each value up in a table of 3 x 256 computed so.
 *
 * That choice and those tables are the output plan (struct gv_out_plan): a function of the
 * transform alone, so made with it (grist_features_set_transform(), or once per
 * grist_vision_apply() call) and only read after, by any number of threads: no per-image
 * or per-thread state, whatever transforms a record's features have.
 */
void gv_out_plan_make(struct gv_out_plan *p, const struct grist_vision_transform *t)
{
	size_t nc = t->channels, esz = gf_dtype_bytes(t->dtype);

	p->how = GV_EMIT_TABLE;
#if GRIST_HAVE_VISION_AVX2
	/* HWC, or one channel (the same thing): rows are contiguous values in the channel pattern */
	if (t->dtype == GRIST_DTYPE_FLOAT32 && (t->layout != GRIST_VISION_CHW || nc == 1) && gv_have_avx2()) {
		for (int k = 0; k < 24; k++) {
			p->m24[k] = t->normalize ? t->mean[k % nc] : 0.0f; /* (f - 0) / 1 is f: the same bits */
			p->s24[k] = t->normalize ? t->std[k % nc] : 1.0f;
		}
		p->how = gv_have_fma() && gv_emit_f32_fma_exact(p->m24, p->s24, p->r24) ? GV_EMIT_FMA : GV_EMIT_AVX2;
		return;
	}
#endif
	for (size_t c = 0; c < nc && esz > 1; c++) {
		for (int v = 0; v < 256; v++) {
			float f = (float)v / 255.0f;

			if (t->normalize)
				f = (f - t->mean[c]) / t->std[c];
			if (esz == 4)
				p->lut[c][v] = f;
			else
				p->lut16[c][v] = t->dtype == GRIST_DTYPE_BFLOAT16 ? gf_float_to_bfloat16(f) :
										   gf_float_to_half(f);
		}
	}
}

struct emitter {
	const struct grist_vision_transform *t;
	const struct gv_out_plan *p;
	void *out;
};

/* A gv_rows sink: output row @y from @row (out_width x channels uint8). */
static void emit_row(void *ctx, uint32_t y, const uint8_t *row)
{
	const struct emitter *e = ctx;
	const struct grist_vision_transform *t = e->t;
	const struct gv_out_plan *pl = e->p;
	size_t ow = t->out_width, plane = (size_t)t->out_height * ow, esz = gf_dtype_bytes(t->dtype), nc = t->channels;
	bool chw = t->layout == GRIST_VISION_CHW;

#if GRIST_HAVE_VISION_AVX2
	if (pl->how == GV_EMIT_FMA) {
		gv_emit_row_f32_fma(row, ow * nc, pl->m24, pl->s24, pl->r24, (float *)e->out + y * ow * nc);
		return;
	}
	if (pl->how == GV_EMIT_AVX2) {
		gv_emit_row_f32_avx2(row, ow * nc, pl->m24, pl->s24, (float *)e->out + y * ow * nc);
		return;
	}
#endif
	for (size_t x = 0; x < ow; x++) {
		const uint8_t *p = row + x * nc;

		for (size_t c = 0; c < nc; c++) {
			size_t at = chw ? c * plane + y * ow + x : (y * ow + x) * nc + c;
			uint8_t *dst = (uint8_t *)e->out + at * esz;

			if (esz == 1)
				*dst = p[c];
			else if (esz == 4)
				memcpy(dst, &pl->lut[c][p[c]], 4);
			else
				memcpy(dst, &pl->lut16[c][p[c]], 2);
		}
	}
}

/* RGB rows to Pillow's "L" (Convert.c rgb2l: ITU-R 601-2 luma in 16-bit fixed point), in place. */
static void rgb_to_l(uint8_t *p, size_t rows, size_t cols, size_t stride)
{
	for (size_t y = 0; y < rows; y++) {
		const uint8_t *in = p + y * stride;
		uint8_t *out = p + y * stride;

		for (size_t x = 0; x < cols; x++, in += 3)
			out[x] = (uint8_t)((in[0] * 19595 + in[1] * 38470 + in[2] * 7471 + 0x8000) >> 16);
	}
}

/* The JPEG or PNG region's rows as the resize pulls them (gv_src), made "L" for one channel. */
struct pulled {
	struct gv_jpeg *j; /* or, when NULL: */
	struct gv_png *png;
	bool gray;
	uint32_t width;
};

static int pull_rows(void *ctx, uint32_t y, uint32_t n, const uint8_t **rows, size_t *stride)
{
	const struct pulled *p = ctx;
	int ret = p->j ? gv_jpeg_pull(p->j, y, n, rows, stride) : gv_png_pull(p->png, y, n, rows, stride);

	if (!ret && p->gray) /* each row is pulled once: converted once, in the thread's buffer */
		rgb_to_l((uint8_t *)(uintptr_t)*rows, n, p->width, *stride);
	return ret;
}

/*
 * Fast mode's scale: the largest 1/8, 1/4 or 1/2 at which the region (@rh x @rw of an
 * @h x @w image) still has at least as many pixels as what it is resized to, on both axes.
 */
static uint32_t fast_denom(const struct grist_vision_transform *t, uint32_t h, uint32_t w, uint32_t rh, uint32_t rw)
{
	uint32_t need_h = t->out_height, need_w = t->out_width;

	if (t->op == GRIST_VISION_CENTER_CROP && !(t->crop_fraction > 0))
		gv_center_resized(t, h, w, &need_h, &need_w); /* the whole image resized, then cropped */
	for (uint32_t d = 8; d > 1; d /= 2)
		if (rh / d >= need_h && rw / d >= need_w)
			return d;
	return 1;
}

int gv_apply(const struct grist_vision_transform *t, const struct gv_out_plan *plan, const uint8_t *img, size_t len,
	     uint64_t epoch, uint64_t index, const char *key, void *out, struct grist_vision_box *box_out)
{
	struct grist_vision_box box, drawn;
	struct gv_png png = { 0 };
	struct gv_jpeg_info ji;
	struct gv_jpeg *jd = NULL, *jused = NULL;
	uint32_t h, w, rh, rw, o = 1;
	uint8_t *region = NULL;
	struct gv_src src = { NULL, 0, NULL, NULL };
	struct pulled pulled;
	bool jpeg = len >= 3 && img[0] == 0xff && img[1] == 0xd8 && img[2] == 0xff;
	int ret;

	if (jpeg) {
		if ((ret = gv_jpeg_open(img, len, t->scan_limit, &jd, &ji)))
			return ret;
		/* with exif_orientation, everything but the decode sees the image as displayed */
		if (t->exif_orientation)
			o = gv_jpeg_orientation(img, len);
		h = o >= 5 ? ji.width : ji.height;
		w = o >= 5 ? ji.height : ji.width;
	} else {
		if ((ret = gv_png_open(&png, img, len)))
			return ret;
		h = png.height;
		w = png.width;
	}
	if ((uint64_t)h * w > t->max_pixels) {
		gv_png_close(&png);
		gv_jpeg_close(jd);
		return grist_fail(-EFBIG, "a %ux%u image: more than the %llu pixels allowed (max_pixels)", h, w,
				  (unsigned long long)t->max_pixels);
	}
	if ((ret = gv_box(t, h, w, epoch, index, key, &box))) {
		gv_png_close(&png);
		gv_jpeg_close(jd);
		return ret;
	}
	drawn = box;
	/* the pixels resized: the box, or (torchvision's centre crop: resize, then crop) the whole image */
	if (t->op == GRIST_VISION_CENTER_CROP && !(t->crop_fraction > 0)) {
		rh = h;
		rw = w;
		box = (struct grist_vision_box){ 0, 0, (int32_t)h, (int32_t)w, box.flipped };
	} else {
		rh = (uint32_t)box.height;
		rw = (uint32_t)box.width;
	}
	if (jpeg) {
		uint32_t denom = t->decode == GRIST_VISION_DECODE_FAST ? fast_denom(t, h, w, rh, rw) : 1;
		struct grist_vision_box shown = { box.top, box.left, (int32_t)rh, (int32_t)rw, 0 }, stored;
		uint32_t top, left, qh, qw;

		/* the region as stored in the file */
		gv_orient_region(o, ji.height, ji.width, &shown, &stored);
		top = (uint32_t)stored.top;
		left = (uint32_t)stored.left;
		qh = (uint32_t)stored.height;
		qw = (uint32_t)stored.width;
		if (denom > 1) {
			/* the region rounded outward to the scaled grid */
			uint32_t sh, sw, bottom, right;

			gv_jpeg_scaled(&ji, denom, &sh, &sw);
			bottom = (uint32_t)(((uint64_t)top + qh + denom - 1) / denom);
			right = (uint32_t)(((uint64_t)left + qw + denom - 1) / denom);
			top /= denom;
			left /= denom;
			qh = (bottom < sh ? bottom : sh) - top;
			qw = (right < sw ? right : sw) - left;
		}
		/* decoded as the resize asks for its rows, a few at a time (gv_jpeg_pull) */
		ret = gv_jpeg_begin_region(jd, denom, t->decode == GRIST_VISION_DECODE_FAST, top, left, qh, qw, false);
		jused = jd;
		jd = NULL; /* a failed begin ended the decode; out: ends it otherwise */
		rh = o >= 5 ? qw : qh;
		rw = o >= 5 ? qh : qw;
		if (ret)
			goto out;
		if (o != 1) {
			/* every row, turned as displayed */
			if ((ret = gv_jpeg_pull(jused, 0, qh, &src.px, &src.stride)))
				goto out;
			region = malloc((size_t)qh * qw * 3);
			if (!region) {
				ret = grist_fail(-ENOMEM, "vision: out of memory for a %ux%u region", qh, qw);
				goto out;
			}
			gv_orient_pixels(o, src.px, qh, qw, src.stride, 3, region);
			src.px = region;
			src.stride = (size_t)rw * 3;
		} else {
			pulled = (struct pulled){ jused, NULL, t->channels == 1, rw };
			src.pull = pull_rows;
			src.ctx = &pulled;
		}
	} else {
		/* only the region's rows, as RGB, decoded as the resize asks for them (vision_png.c) */
		ret = gv_png_begin_region(&png, (uint32_t)box.top, (uint32_t)box.left, rh, rw);
		pulled = (struct pulled){ NULL, &png, t->channels == 1, rw };
		src.pull = pull_rows;
		src.ctx = &pulled;
	}
	if (ret)
		goto out;
	if (t->channels == 1 && !src.pull) {
		/* to "L" where the pixels lie: this call's buffer or the thread's JPEG buffer (pulled rows: as pulled) */
		rgb_to_l((uint8_t *)(uintptr_t)src.px, rh, rw, src.stride);
	}
	{
		/* uint8 in the resize's own layout: its rows straight into @out; else through the output stage */
		bool direct = t->dtype == GRIST_DTYPE_UINT8 && (t->layout != GRIST_VISION_CHW || t->channels == 1);
		uint32_t nh = t->out_height, nw = t->out_width;
		struct grist_vision_box win = { 0, 0, 0, 0, 0 };
		struct emitter em = { t, plan, out };
		struct gv_rows sink = { emit_row, &em };

		if (t->op == GRIST_VISION_CENTER_CROP && !(t->crop_fraction > 0)) {
			gv_center_resized(t, h, w, &nh, &nw);
			gv_center_params(t, h, w, &win);
		}
		ret = gv_resize_rows_src(&src, rh, rw, t->channels, nh, nw, (uint32_t)win.top, (uint32_t)win.left,
					 t->out_height, t->out_width, t->interp, box.flipped, direct ? out : NULL,
					 (size_t)t->out_width * t->channels, direct ? NULL : &sink,
					 (gv_have_avx2() ? GV_RESIZE_SIMD : 0) | (t->exact_resize ? 0 : GV_RESIZE_W16));
	}
	if (ret)
		goto out;
	if (box_out)
		*box_out = drawn;
out:
	gv_jpeg_close(jd);
	gv_jpeg_close(jused); /* not jpeg_finish_decompress(): it would want the rows below the region */
	gv_jpeg_release(jused);
	free(region);
	gv_png_close(&png);
	return ret;
}

int grist_vision_apply(const struct grist_vision_transform *tr, const uint8_t *img, size_t len, uint64_t epoch,
		       uint64_t index, const char *key, void *out, size_t cap, struct grist_vision_box *box)
{
	struct grist_vision_transform t;
	struct gv_out_plan plan;
	int ret;

	if ((ret = gv_transform_load(&t, tr)))
		return ret;
	if (!img || !out || cap < gv_out_bytes(&t))
		return grist_fail(-EINVAL, "vision: apply: NULL argument or %zu bytes of room, %zu needed", cap,
				  gv_out_bytes(&t));
	/* one image: its plan made here (the loader's features make theirs once, when attached) */
	gv_out_plan_make(&plan, &t);
	return gv_apply(&t, &plan, img, len, epoch, index, key, out, box);
}

int gf_transform_image(const struct gf_feature *ft, const uint8_t *img, size_t len, uint64_t epoch, uint64_t index,
		       uint8_t *row)
{
	struct grist_vision_box b;
	int ret = gv_apply(&ft->tf, &ft->tf_plan, img, len, epoch, index, ft->key, row + ft->offset, &b);

	if (!ret && ft->box_offset != SIZE_MAX) {
		int32_t v[5] = { b.top, b.left, b.height, b.width, b.flipped };

		memcpy(row + ft->box_offset, v, sizeof(v));
	}
	return ret;
}
