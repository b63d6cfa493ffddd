/*
 * Resize of Pillow's quality and to its level: ImagingResample (src/libImaging/Resample.c)
 * for 8-bit images, reproduced step for step so a model trained on Pillow's pixels sees
 * the same ones.
 *
 * - The filter's support widens by the downscale factor (antialiasing): a 1000 -> 224
 *   bilinear pass averages about 9 source pixels per output pixel, not 2.
 * - Coefficients are computed in double exactly as Pillow computes them (centre at
 *   (x + 0.5) x scale, bounds rounded by (int)(v + 0.5), weights normalized to sum 1),
 *   then turned into 22-bit fixed point with Pillow's rounding; accumulation starts at
 *   half a unit and the result is shifted and clamped. Any other order of operations or
 *   float accumulation differs from Pillow by a level here and there. The vision
 *   transform's bilinear default rounds the horizontal weights on to 15 bits instead
 *   (GV_RESIZE_W16, coeffs_narrow()): within a level of Pillow, not its bytes.
 * - The horizontal pass runs first, over only the rows the vertical pass reads, into a
 *   uint8 intermediate; a pass whose size does not change is skipped. Both as Pillow.
 *   Pillow's Image.resize puts the vertical pass first for an image more than 100 times
 *   as tall as wide whose height shrinks; so does this.
 *
 * FMA contraction would change the doubles (GCC contracts only with -ffp-contract=fast,
 * not the default in ISO C mode): keep this file free of -ffast-math.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "grist_config.h"
#include "features/vision_internal.h"

#define PRECISION_BITS (32 - 8 - 2)

/*
 * The most weights one axis's table may hold (ksize x outputs), 2^22: 16 MiB of int32, and
 * 64 MiB as the AVX2 pass lays them out (16 bytes a weight). ksize x outputs is about
 * 2 x support x the source length on a downscale, so this admits a bicubic resize of a
 * source axis of a million pixels; a 1 x 2^28 image (within max_pixels) resized to 224 x 224
 * would need 4 GiB here and 16 GiB for AVX2, and is refused (-EFBIG) before allocating.
 */
#define RESIZE_MAX_COEFFS ((size_t)1 << 22)

struct filter {
	double (*fn)(double x);
	double support;
};

static double bilinear_filter(double x)
{
	if (x < 0.0)
		x = -x;
	if (x < 1.0)
		return 1.0 - x;
	return 0.0;
}

static double bicubic_filter(double x)
{
	const double a = -0.5;

	if (x < 0.0)
		x = -x;
	if (x < 1.0)
		return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
	if (x < 2.0)
		return (((x - 5) * x + 8) * x - 4) * a;
	return 0.0;
}

static const struct filter filters[] = {
	[GRIST_VISION_BILINEAR] = { bilinear_filter, 1.0 },
	[GRIST_VISION_BICUBIC] = { bicubic_filter, 2.0 },
};

/* One axis: for each output index, the first source index, the tap count and ksize fixed-point weights. */
struct coeffs {
	uint32_t ksize;
	uint32_t prec;   /* fixed-point bits of the weights: Pillow's 22, or 14-15 (GV_RESIZE_W16) */
	int32_t *bounds; /* 2 per output: xmin, count */
	int32_t *k;      /* ksize per output */
};

static void coeffs_free(struct coeffs *c)
{
	free(c->bounds);
	free(c->k);
}

/* The filter at @x, as bilinear_filter() / bicubic_filter() (inlined: one call a tap was 10% of coeffs_make). */
static inline double filter_at(bool bicubic, double x)
{
	return bicubic ? bicubic_filter(x) : bilinear_filter(x);
}

/* One axis's unnormalized weights into @pre (@n taps from @xmin); returns their sum, added in Pillow's order. */
static inline double weights_at(bool bicubic, int xmin, int n, double center, double ss, double *pre)
{
	double ww = 0.0;

	for (int x = 0; x < n; x++) {
		double w = filter_at(bicubic, (x + xmin - center + 0.5) * ss);

		pre[x] = w;
		ww += w;
	}
	return ww;
}

/*
 * @c's @n weights (22-bit, Pillow's) rounded to 15 bits, or 14 where one would not fit int16
 * at 15 (a weight of 1: an upscale's tap that lands on a source pixel). Rounding the 22-bit
 * integers, not the doubles, adds at most 2^-23 to each weight's error of 2^-16 (2^-15 at 14
 * bits): per output pixel at most ksize x 255 x 2^-16 levels off the exact sum, 0.03 levels
 * at 8 taps, before the rounding to uint8.
 */
static void coeffs_narrow(struct coeffs *c, size_t n)
{
	int32_t hi = 0, lo = 0;
	uint32_t drop;

	for (size_t i = 0; i < n; i++) {
		hi = c->k[i] > hi ? c->k[i] : hi;
		lo = c->k[i] < lo ? c->k[i] : lo;
	}
	c->prec = ((hi + 64) >> 7) > 32767 || ((lo + 64) >> 7) < -32768 ? 14 : 15;
	drop = PRECISION_BITS - c->prec;
	for (size_t i = 0; i < n; i++)
		c->k[i] = (c->k[i] + (1 << (drop - 1))) >> drop; /* to nearest, ties up */
}

/*
 * Pillow's precompute_coeffs() then normalize_coeffs_8bpc(), for in0 = 0, in1 = @in_size, an
 * output of @full samples of which only [@first, @first + @out_size) are wanted. The same
 * doubles in the same order (each weight, their sum, each weight divided by it), then the
 * same rounding to fixed point: Pillow's 22 bits, or with @w16 the most bits (15, or 14
 * where a weight reaches 1) at which every weight fits int16, so that one 16-bit multiply-add
 * does a tap (resize_core() says what that costs in fidelity).
 */
static int coeffs_make(uint32_t in_size, uint32_t full, uint32_t first, uint32_t out_size, const struct filter *f,
		       const char *axis, bool w16, struct coeffs *c)
{
	double scale = (double)in_size / full, filterscale = scale < 1.0 ? 1.0 : scale;
	double support = f->support * filterscale, pre_stack[64], *pre;
	size_t ksize = (size_t)ceil(support) * 2 + 1;
	bool bicubic = f->fn == bicubic_filter;

	if (ksize > RESIZE_MAX_COEFFS / out_size)
		return grist_fail(-EFBIG,
				  "resize: %s %u -> %u pixels needs %zu x %u coefficients, more than the %zu allowed "
				  "(too thin an image for this size)",
				  axis, in_size, full, ksize, out_size, RESIZE_MAX_COEFFS);
	c->ksize = (uint32_t)ksize;
	c->prec = w16 ? 15 : PRECISION_BITS;
	c->bounds = malloc(2 * sizeof(int32_t) * out_size);
	c->k = malloc(sizeof(int32_t) * ksize * out_size);
	pre = ksize <= 64 ? pre_stack : malloc(sizeof(double) * ksize);
	if (!c->bounds || !c->k || !pre) {
		if (pre != pre_stack)
			free(pre);
		coeffs_free(c);
		return grist_fail(-ENOMEM, "resize: out of memory for %u x %zu coefficients", out_size, ksize);
	}
	for (uint32_t xx = 0; xx < out_size; xx++) {
		double center = (first + xx + 0.5) * scale, ww, ss = 1.0 / filterscale;
		int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5), x;
		int32_t *k = c->k + (size_t)xx * ksize;

		if (xmin < 0)
			xmin = 0;
		if (xmax > (int)in_size)
			xmax = (int)in_size;
		xmax -= xmin;
		/* the filter chosen once per axis, not per tap: both loops inline their filter */
		ww = bicubic ? weights_at(true, xmin, xmax, center, ss, pre) : weights_at(false, xmin, xmax, center, ss, pre);
		if (ww != 0.0)
			for (x = 0; x < xmax; x++)
				pre[x] /= ww;
		for (x = 0; x < xmax; x++)
			k[x] = pre[x] < 0 ? (int32_t)(-0.5 + pre[x] * (1 << PRECISION_BITS)) :
					    (int32_t)(0.5 + pre[x] * (1 << PRECISION_BITS));
		for (; x < (int)ksize; x++)
			k[x] = 0; /* (int32_t)(0.5 + 0.0 x 2^22) */
		c->bounds[2 * xx] = xmin;
		c->bounds[2 * xx + 1] = xmax;
	}
	if (pre != pre_stack)
		free(pre);
	if (w16)
		coeffs_narrow(c, (size_t)ksize * out_size);
	return 0;
}

static inline uint8_t clip8(int32_t v, uint32_t prec)
{
	v >>= prec;
	return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* AVX2 where the library was built for it and the CPU has it (the same integers either way). */
bool gv_have_avx2(void)
{
#if GRIST_HAVE_VISION_AVX2
	return __builtin_cpu_supports("avx2");
#else
	return false;
#endif
}

/* The same for FMA (the float32 output's division-free form). */
bool gv_have_fma(void)
{
#if GRIST_HAVE_VISION_AVX2
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
	return false;
#endif
}

/*
 * Rows [y0, y0 + rows) of @src (@sw pixels wide), each resized horizontally into a row of
 * @dst; @hl: the AVX2 pass's weights (RGB with @simd), made once per resize.
 */
static void pass_horizontal(const uint8_t *src, size_t sstride, uint32_t sw, uint32_t c, uint32_t y0, uint32_t rows,
			    const struct coeffs *co, const struct gv_hlayout *hl, uint32_t dw, uint8_t *dst,
			    size_t dstride, bool simd)
{
#if GRIST_HAVE_VISION_AVX2
	if (c == 3 && simd) {
		gv_hpass_rgb_avx2(hl, src, sstride, sw, y0, rows, co->bounds, co->k, co->ksize, dw, dst, dstride);
		return;
	}
#endif
	(void)hl;
	(void)sw;
	(void)simd;
	for (uint32_t y = 0; y < rows; y++) {
		const uint8_t *in = src + (size_t)(y0 + y) * sstride;
		uint8_t *out = dst + (size_t)y * dstride;

		for (uint32_t xx = 0; xx < dw; xx++) {
			const int32_t *k = co->k + (size_t)xx * co->ksize;
			const uint8_t *p = in + (size_t)co->bounds[2 * xx] * c;
			int32_t n = co->bounds[2 * xx + 1];

			if (c == 3) {
				int32_t s0 = 1 << (co->prec - 1), s1 = s0, s2 = s0;

				for (int32_t x = 0; x < n; x++, p += 3) {
					s0 += p[0] * k[x];
					s1 += p[1] * k[x];
					s2 += p[2] * k[x];
				}
				out[3 * xx] = clip8(s0, co->prec);
				out[3 * xx + 1] = clip8(s1, co->prec);
				out[3 * xx + 2] = clip8(s2, co->prec);
			} else {
				for (uint32_t ch = 0; ch < c; ch++) {
					int32_t s = 1 << (co->prec - 1);

					for (int32_t x = 0; x < n; x++)
						s += p[(size_t)x * c + ch] * k[x];
					out[(size_t)xx * c + ch] = clip8(s, co->prec);
				}
			}
		}
	}
}

/* @n pixels of @c bytes from @in into @out in reverse order; @slack: both rows have 1 byte past them. */
static void reverse_row(const uint8_t *in, uint32_t n, uint32_t c, uint8_t *out, bool slack)
{
#if GRIST_HAVE_VISION_AVX2
	if (c == 3 && slack && gv_have_avx2()) {
		gv_reverse_rgb(in, n, out);
		return;
	}
#endif
	(void)slack;
	for (uint32_t x = 0; x < n; x++)
		memcpy(out + (size_t)x * c, in + (size_t)(n - 1 - x) * c, c);
}

/*
 * Where the output rows go: written into @dst (@dstride apart), or, with a sink, each handed
 * to it in order from @buf (room for one row and 32 bytes), mirrored first into @rev (the
 * same room) when @flip.
 */
struct out_rows {
	uint8_t *dst;
	size_t dstride;
	const struct gv_rows *sink;
	uint8_t *buf, *rev;
	uint32_t dw, c;
	bool flip;
};

/* Where output row @y is computed. */
static inline uint8_t *row_at(const struct out_rows *o, uint32_t y)
{
	return o->sink || o->flip ? o->buf : o->dst + (size_t)y * o->dstride;
}

/* Output row @y, computed at row_at(), is done: mirrored, then handed over or stored. */
static void row_done(const struct out_rows *o, uint32_t y)
{
	const uint8_t *row = row_at(o, y);

	if (o->flip) {
		reverse_row(row, o->dw, o->c, o->rev, true);
		row = o->rev;
	}
	if (o->sink)
		o->sink->emit(o->sink->ctx, y, row);
	else if (row != o->dst + (size_t)y * o->dstride)
		memcpy(o->dst + (size_t)y * o->dstride, row, (size_t)o->dw * o->c);
}

/* Output row @yy: a weighted sum of source rows, element by element (vectorizes). */
static void vertical_row(const uint8_t *src, size_t sstride, size_t row_bytes, const struct coeffs *co, uint32_t yy,
			 int32_t shift, const struct out_rows *o, int32_t *acc, bool avx2)
{
	const int32_t *k = co->k + (size_t)yy * co->ksize;
	int32_t ymin = co->bounds[2 * yy] - shift, n = co->bounds[2 * yy + 1];
	uint8_t *out = row_at(o, yy);

#if GRIST_HAVE_VISION_AVX2
	if (avx2) {
		gv_vrow_avx2(src + (size_t)ymin * sstride, sstride, n, k, row_bytes, out);
		row_done(o, yy);
		return;
	}
#endif
	(void)avx2;
	for (size_t i = 0; i < row_bytes; i++)
		acc[i] = 1 << (co->prec - 1);
	for (int32_t y = 0; y < n; y++) {
		const uint8_t *in = src + (size_t)(ymin + y) * sstride;
		int32_t w = k[y];

		for (size_t i = 0; i < row_bytes; i++)
			acc[i] += in[i] * w;
	}
	for (size_t i = 0; i < row_bytes; i++)
		out[i] = clip8(acc[i], co->prec);
	row_done(o, yy);
}

/*
 * Both passes, the horizontal one just ahead of the vertical one: source rows [first, last)
 * resized horizontally into @tmp (one row of @row bytes each, row first at the top) as the
 * next output row first needs them, an even number at a time where it can (the AVX2 pass
 * does rows in pairs). The vertical pass then reads rows written a moment before, from L1,
 * where running the whole horizontal pass first left them to L2 (an intermediate of a
 * 316-row crop is about 210 KB). The same rows and sums as the two passes one after the other.
 * A pulled source is asked for each batch of rows just before they are resized (gv_src): a
 * decoder hands rows it decoded a moment before, and never holds the whole source.
 */
static int pass_both(const struct gv_src *s, uint32_t sw, uint32_t c, const struct coeffs *ch,
		     const struct gv_hlayout *hl, const struct coeffs *cv, uint32_t dh, uint32_t dw, uint32_t first,
		     uint32_t last, uint8_t *tmp, const struct out_rows *o, int32_t *acc, bool simd)
{
	size_t row = (size_t)dw * c;
	uint32_t done = first; /* rows [first, done) are in tmp */

	for (uint32_t yy = 0; yy < dh; yy++) {
		uint32_t need = (uint32_t)(cv->bounds[2 * yy] + cv->bounds[2 * yy + 1]);

		if (need > done) {
			uint32_t end = need + ((need - done) & 1), y = done;
			const uint8_t *rows = s->px;
			size_t stride = s->stride;
			int ret;

			if (end > last)
				end = last;
			if (s->pull) {
				if ((ret = s->pull(s->ctx, done, end - done, &rows, &stride)))
					return ret;
				y = 0;
			}
			pass_horizontal(rows, stride, sw, c, y, end - done, ch, hl, dw, tmp + (size_t)(done - first) * row,
					row, simd);
			done = end;
		}
		vertical_row(tmp, row, row, cv, yy, (int32_t)first, o, acc, simd);
	}
	return 0;
}

int gv_resize(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint8_t *dst, uint32_t dh,
	      uint32_t dw, size_t dstride, enum grist_vision_interp interp)
{
	return gv_resize_window(src, sh, sw, sstride, c, dh, dw, 0, 0, dst, dh, dw, dstride, interp);
}

int gv_resize_window(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
		     uint32_t full_w, uint32_t y0, uint32_t x0, uint8_t *dst, uint32_t dh, uint32_t dw, size_t dstride,
		     enum grist_vision_interp interp)
{
	return gv_resize_with(src, sh, sw, sstride, c, full_h, full_w, y0, x0, dst, dh, dw, dstride, interp,
			      gv_have_avx2());
}

static int resize_core(const struct gv_src *s, uint32_t sh, uint32_t sw, uint32_t c, uint32_t full_h, uint32_t full_w,
		       uint32_t y0, uint32_t x0, uint32_t dh, uint32_t dw, enum grist_vision_interp interp,
		       struct out_rows *o, bool simd, bool w16);

int gv_resize_with(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
		   uint32_t full_w, uint32_t y0, uint32_t x0, uint8_t *dst, uint32_t dh, uint32_t dw, size_t dstride,
		   enum grist_vision_interp interp, bool simd)
{
	return gv_resize_rows_with(src, sh, sw, sstride, c, full_h, full_w, y0, x0, dh, dw, interp, false, dst, dstride,
				   NULL, simd);
}

int gv_resize_rows(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
		   uint32_t full_w, uint32_t y0, uint32_t x0, uint32_t dh, uint32_t dw, enum grist_vision_interp interp,
		   bool flip, uint8_t *dst, size_t dstride, const struct gv_rows *sink)
{
	return gv_resize_rows_with(src, sh, sw, sstride, c, full_h, full_w, y0, x0, dh, dw, interp, flip, dst, dstride,
				   sink, gv_have_avx2());
}

int gv_resize_rows_with(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
			uint32_t full_w, uint32_t y0, uint32_t x0, uint32_t dh, uint32_t dw,
			enum grist_vision_interp interp, bool flip, uint8_t *dst, size_t dstride,
			const struct gv_rows *sink, bool simd)
{
	struct gv_src s = { src, sstride, NULL, NULL };

	return gv_resize_rows_src(&s, sh, sw, c, full_h, full_w, y0, x0, dh, dw, interp, flip, dst, dstride, sink,
				  simd ? GV_RESIZE_SIMD : 0);
}

int gv_resize_rows_src(const struct gv_src *src, uint32_t sh, uint32_t sw, uint32_t c, uint32_t full_h,
		       uint32_t full_w, uint32_t y0, uint32_t x0, uint32_t dh, uint32_t dw,
		       enum grist_vision_interp interp, bool flip, uint8_t *dst, size_t dstride,
		       const struct gv_rows *sink, unsigned how)
{
	bool simd = how & GV_RESIZE_SIMD, w16 = how & GV_RESIZE_W16;
	struct out_rows o = { dst, dstride, sink, NULL, NULL, dw, c, flip };
	size_t row = (size_t)dw * c;
	uint8_t *bufs = NULL;
	int ret;

	if (!sh || !sw || !dh || !dw || c < 1 || c > 4 || (unsigned)interp > GRIST_VISION_BICUBIC_TF ||
	    y0 > full_h || dh > full_h - y0 || x0 > full_w || dw > full_w - x0)
		return grist_fail(-EINVAL, "resize: %ux%ux%u to %ux%u (window %ux%u at %u, %u): bad size or filter", sh,
				  sw, c, full_h, full_w, dh, dw, y0, x0);
	if (sink || flip) {
		/* one output row, and one for its mirror, each with 32 bytes of slack for SIMD stores */
		bufs = malloc(2 * (row + 32));
		if (!bufs)
			return grist_fail(-ENOMEM, "resize: out of memory for a row of %u pixels", dw);
		o.buf = bufs;
		o.rev = bufs + row + 32;
	}
	ret = resize_core(src, sh, sw, c, full_h, full_w, y0, x0, dh, dw, interp, &o, simd, w16);
	free(bufs);
	return ret;
}

/*
 * The rows of a whole output @img (packed), for the passes that do not hand rows over as
 * they make them (area, TF's kernels, the very tall image's two resizes, the horizontal
 * pass alone).
 */
static void deliver_image(const uint8_t *img, uint32_t dh, const struct out_rows *o)
{
	size_t row = (size_t)o->dw * o->c;

	for (uint32_t y = 0; y < dh; y++) {
		uint8_t *at = row_at(o, y);

		if (at != img + (size_t)y * row)
			memcpy(at, img + (size_t)y * row, row);
		row_done(o, y);
	}
}

static int resize_core(const struct gv_src *s, uint32_t sh, uint32_t sw, uint32_t c, uint32_t full_h, uint32_t full_w,
		       uint32_t y0, uint32_t x0, uint32_t dh, uint32_t dw, enum grist_vision_interp interp,
		       struct out_rows *o, bool simd, bool w16)
{
	bool need_h = full_w != sw, need_v = full_h != sh;
	bool whole = interp == GRIST_VISION_AREA || interp == GRIST_VISION_BILINEAR_TF ||
		     interp == GRIST_VISION_BICUBIC_TF || (need_h && (uint64_t)sh > (uint64_t)sw * 100 && full_h < sh);
	size_t row = (size_t)dw * c, sstride = s->stride;
	const uint8_t *src = s->px;
	struct coeffs ch = { 0 }, cv = { 0 };
	struct gv_hlayout hl = { 0 };
	const struct filter *f;
	uint8_t *tmp = NULL, *img;
	int32_t *acc = NULL;
	int ret = 0;

	/* a pulled source streams into pass_both; every other pass reads the whole source */
	if (s->pull && (whole || !need_h || !need_v) && (ret = s->pull(s->ctx, 0, sh, &src, &sstride)))
		return ret;

	if (whole) {
		/* the whole output first: into dst when it is packed and no sink takes the rows */
		img = !o->sink && o->dstride == row ? o->dst : malloc(row * dh);
		if (!img)
			return grist_fail(-ENOMEM, "resize: out of memory for a %ux%u image", dh, dw);
		if (interp == GRIST_VISION_AREA) {
			ret = gv_resize_area(src, sh, sw, sstride, c, full_h, full_w, y0, x0, img, dh, dw, row);
		} else if (interp == GRIST_VISION_BILINEAR_TF || interp == GRIST_VISION_BICUBIC_TF) {
			ret = gv_resize_tf(src, sh, sw, sstride, c, full_h, full_w, y0, x0, img, dh, dw, row,
					   interp == GRIST_VISION_BICUBIC_TF);
		} else {
			/*
			 * Image.resize (Image.py, Pillow 12) runs an image taller than 100 x its width
			 * whose height shrinks as two resizes, the vertical one first: so does this.
			 */
			tmp = malloc((size_t)dh * sw * c);
			if (!tmp)
				ret = grist_fail(-ENOMEM, "resize: out of memory for a %ux%u intermediate", dh, sw);
			else if (!(ret = gv_resize_with(src, sh, sw, sstride, c, full_h, sw, y0, 0, tmp, dh, sw,
							(size_t)sw * c, interp, simd)))
				ret = gv_resize_with(tmp, dh, sw, (size_t)sw * c, c, dh, full_w, 0, x0, img, dh, dw, row,
						     interp, simd);
		}
		if (!ret)
			deliver_image(img, dh, o);
		if (img != o->dst)
			free(img);
		free(tmp);
		return ret;
	}
	f = &filters[interp];
	if (!need_h && !need_v) {
		for (uint32_t y = 0; y < dh; y++) {
			memcpy(row_at(o, y), src + (size_t)(y0 + y) * sstride + (size_t)x0 * c, row);
			row_done(o, y);
		}
		return 0;
	}
	/*
	 * With @w16 the horizontal pass's weights narrowed (gv_resize_rows_src), bilinear's only;
	 * the vertical pass's stay Pillow's. Why that keeps the result within a level of Pillow's:
	 * the narrowed weights move a horizontal sum by at most ksize x 255 x 2^-16 levels, so an
	 * intermediate pixel differs from Pillow's by 0 or 1 (the sum was that close to a half);
	 * the vertical pass weighs those differences with weights that are >= 0 and sum to 1, so
	 * its sum moves by at most 1 (give or take the 22-bit weights' own rounding, under 2^-19
	 * levels) and its rounded value by 1. Bicubic's weights have negative lobes (their
	 * magnitudes sum to up to 1.28 on an upscale): intermediates off by +1 and -1 under
	 * weights of both signs can move the sum past 1, and 2-level differences were found
	 * (17 x 5 -> 296 x 344), so bicubic keeps Pillow's 22 bits in both passes.
	 */
	w16 = w16 && interp == GRIST_VISION_BILINEAR;
	if ((need_h && (ret = coeffs_make(sw, full_w, x0, dw, f, "width", w16, &ch))) ||
	    (need_v && (ret = coeffs_make(sh, full_h, y0, dh, f, "height", false, &cv))))
		goto out;
	if (!need_h)
		src += (size_t)x0 * c; /* the window's columns, unresized */
#if GRIST_HAVE_VISION_AVX2
	if (need_h && c == 3 && simd)
		(void)gv_hlayout_make_avx2(ch.bounds, ch.k, ch.ksize, ch.prec, dw, sw, &hl); /* none: the pass runs without */
#endif
	if (!need_v) {
		if (!o->sink && !o->flip) {
			pass_horizontal(src, sstride, sw, c, y0, dh, &ch, &hl, dw, o->dst, o->dstride, simd);
		} else {
			tmp = malloc(row * dh);
			if (!tmp) {
				ret = grist_fail(-ENOMEM, "resize: out of memory for a %ux%u intermediate", dh, dw);
				goto out;
			}
			pass_horizontal(src, sstride, sw, c, y0, dh, &ch, &hl, dw, tmp, row, simd);
			deliver_image(tmp, dh, o);
		}
		goto out;
	}
	acc = malloc(sizeof(int32_t) * row);
	if (!acc) {
		ret = grist_fail(-ENOMEM, "resize: out of memory");
		goto out;
	}
	if (need_h) {
		/* only the source rows the vertical pass reads: [first, last) */
		uint32_t first = (uint32_t)cv.bounds[0];
		uint32_t last = (uint32_t)(cv.bounds[2 * dh - 2] + cv.bounds[2 * dh - 1]);

		tmp = malloc(row * (last - first));
		if (!tmp) {
			ret = grist_fail(-ENOMEM, "resize: out of memory for a %ux%u intermediate", last - first, dw);
			goto out;
		}
		ret = pass_both(s, sw, c, &ch, &hl, &cv, dh, dw, first, last, tmp, o, acc, simd);
	} else {
		for (uint32_t yy = 0; yy < dh; yy++)
			vertical_row(src, sstride, (size_t)sw * c, &cv, yy, 0, o, acc, simd);
	}
out:
	free(tmp);
	free(acc);
#if GRIST_HAVE_VISION_AVX2
	gv_hlayout_free(&hl);
#endif
	coeffs_free(&ch);
	coeffs_free(&cv);
	return ret;
}
