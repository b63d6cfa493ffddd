/* The vision transforms' internals: resize, the crop sampler, JPEG region decode (grist/vision.h). */
#ifndef GRIST_VISION_INTERNAL_H
#define GRIST_VISION_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/vision.h"

#ifndef GRIST_INTERNAL
#define GRIST_INTERNAL
#endif
#include "grist/internal/vision.h" /* gv_resize, gv_resize_area, the JPEG region decode */

/* ---- resize (vision_resize.c) ---- */

/*
 * The same, of an output of @full_h x @full_w only the window of @dh x @dw at (@y0, @x0):
 * Pillow's resize then crop (torchvision's Resize then CenterCrop) without the rest.
 */
int gv_resize_window(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
		     uint32_t full_w, uint32_t y0, uint32_t x0, uint8_t *dst, uint32_t dh, uint32_t dw, size_t dstride,
		     enum grist_vision_interp interp);
/* Where a resize hands its output rows, one at a time, in order (@row: dw x c bytes). */
struct gv_rows {
	void (*emit)(void *ctx, uint32_t y, const uint8_t *row);
	void *ctx;
};
/*
 * gv_resize_window's resize, mirrored left to right when @flip (the horizontal pass writes
 * each pixel's own sum at the mirrored place, so it costs nothing where that pass runs), its
 * rows written into @dst (@dstride apart) or, with @sink, handed to it one by one as the
 * vertical pass makes them, from a one-row buffer (never a whole image, where the passes
 * allow). The same bytes either way.
 */
int gv_resize_rows(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
		   uint32_t full_w, uint32_t y0, uint32_t x0, uint32_t dh, uint32_t dw, enum grist_vision_interp interp,
		   bool flip, uint8_t *dst, size_t dstride, const struct gv_rows *sink);
/*
 * Where a resize reads its source: all of it at @px (rows @stride apart), or, with @pull,
 * rows asked for as the resize goes: pull(ctx, y, n, &rows, &stride) makes source rows
 * [y, y + n) readable at rows (@stride apart) until the next call, or fails (a negative errno
 * with its message, which the resize returns). Each row is asked for once, in order (y at or
 * past the last call's y + n). Where the passes allow (Pillow's filters, both passes) the
 * resize pulls the rows a few at a time, just before the horizontal pass reads them; else
 * it pulls every row at once and resizes as from @px.
 */
struct gv_src {
	const uint8_t *px;
	size_t stride;
	int (*pull)(void *ctx, uint32_t y, uint32_t n, const uint8_t **rows, size_t *stride);
	void *ctx;
};
/*
 * gv_resize_rows from @src (@sh x @sw x @c), @how: GV_RESIZE_SIMD the SIMD passes allowed
 * (else the portable code, for tests; the same bytes), GV_RESIZE_W16 the horizontal pass's
 * weights in 15 bits (14 where a weight is 1), not Pillow's 22: one 16-bit multiply-add a
 * tap, not two, for a result within a level of Pillow's (the vision transform's float
 * outputs; docs/vision.md, "Resize"). The same bytes with or without SIMD either way.
 */
#define GV_RESIZE_SIMD 1u
#define GV_RESIZE_W16 2u
int gv_resize_rows_src(const struct gv_src *src, uint32_t sh, uint32_t sw, uint32_t c, uint32_t full_h,
		       uint32_t full_w, uint32_t y0, uint32_t x0, uint32_t dh, uint32_t dw,
		       enum grist_vision_interp interp, bool flip, uint8_t *dst, size_t dstride,
		       const struct gv_rows *sink, unsigned how);
/* The same with the SIMD passes allowed or not (@simd false: the portable code, for tests). */
int gv_resize_rows_with(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
			uint32_t full_w, uint32_t y0, uint32_t x0, uint32_t dh, uint32_t dw,
			enum grist_vision_interp interp, bool flip, uint8_t *dst, size_t dstride,
			const struct gv_rows *sink, bool simd);
/* The same with the SIMD passes allowed or not (@simd false: the portable code, for tests). */
int gv_resize_with(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
		   uint32_t full_w, uint32_t y0, uint32_t x0, uint8_t *dst, uint32_t dh, uint32_t dw, size_t dstride,
		   enum grist_vision_interp interp, bool simd);

/*
 * antialias=False (vision_resize_tf.c): TF's ResizeBilinear / ResizeBicubic with half-pixel
 * centres in float32, rounded to uint8; the same arguments as gv_resize_window.
 */
int gv_resize_tf(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
		 uint32_t full_w, uint32_t y0, uint32_t x0, uint8_t *dst, uint32_t dh, uint32_t dw, size_t dstride,
		 bool bicubic);

/*
 * vision_resize_avx2.c (x86-64 with AVX2 only): the horizontal pass on RGB rows, a vertical
 * output row. The horizontal pass's weights are laid out once per resize (an axis's
 * @bounds, @kk of @ksize per output, @dw outputs, source rows @sw pixels): make, then any
 * number of gv_hpass_rgb_avx2() calls on rows of that resize, then free. A layout that could
 * not be made (-ENOMEM; wt NULL) still serves: the pass then runs without it.
 */
struct gv_hlayout {
	void *wt;          /* __m256i: per output, per four-tap group, the high and low halves (one with prec <= 15) */
	uint32_t prec;     /* the weights' fixed-point bits: 22 (split in two int16 halves) or <= 15 (int16 as they are) */
	size_t groups;     /* four-tap groups per output: the most taps any output has, in fours */
	uint32_t fast_end; /* outputs below it read only whole 16-byte loads inside the row */
	bool two_taps;     /* no output has more than 2 taps (an upscale): per output pair, hi and lo */
};
int gv_hlayout_make_avx2(const int32_t *bounds, const int32_t *kk, uint32_t ksize, uint32_t prec, uint32_t dw,
			 uint32_t sw, struct gv_hlayout *l);
void gv_hlayout_free(struct gv_hlayout *l);
void gv_hpass_rgb_avx2(const struct gv_hlayout *l, const uint8_t *src, size_t sstride, uint32_t sw, uint32_t y0,
		       uint32_t rows, const int32_t *bounds, const int32_t *kk, uint32_t ksize, uint32_t dw,
		       uint8_t *dst, size_t dstride);
void gv_vrow_avx2(const uint8_t *first, size_t sstride, int32_t n, const int32_t *k, size_t row_bytes, uint8_t *out);
/* An RGB row to float32 as emit() computes it; @m24/@s24: mean and std over 24 lanes. */
void gv_emit_row_f32_avx2(const uint8_t *px, size_t n, const float *m24, const float *s24, float *out);
/*
 * The same division-free (vision_resize_avx2.c says how), with @r24 the reciprocals of @s24,
 * which gv_emit_f32_fma_exact() fills: it returns whether this form gives every value the
 * divisions give, to the bit (call the FMA functions only where gv_have_fma()).
 */
bool gv_emit_f32_fma_exact(const float *m24, const float *s24, float *r24);
void gv_emit_row_f32_fma(const uint8_t *px, size_t n, const float *m24, const float *s24, const float *r24,
			 float *out);
/* @n RGB pixels reversed (the flip); 1 byte of slack past @in's and @out's rows. */
void gv_reverse_rgb(const uint8_t *in, size_t n, uint8_t *out);
/* Whether the AVX2 paths run here (built for and supported by the CPU). */
bool gv_have_avx2(void);
/* Whether the CPU has AVX2 and FMA (the float32 output without divisions). */
bool gv_have_fma(void);

/* ---- the generator and the samplers (vision_sample.c) ---- */

/* A counter-based stream: draw k of a key is a pure function of (key, k). */
struct gv_stream {
	uint64_t key;
	uint64_t n;
};
void gv_stream_init(struct gv_stream *s, uint64_t seed, uint64_t epoch, uint64_t index, const char *key);
/* The next uniform double in [0, 1) (53 bits). */
double gv_uniform(struct gv_stream *s);

/* Where the sampler's uniforms come from: a stream, or (tests) a list of injected values. */
struct gv_draws {
	struct gv_stream *stream;
	const double *list;
	size_t n, at;
};
/* The next uniform; an exhausted list gives 0. */
double gv_draw(struct gv_draws *d);

/*
 * torchvision's RandomResizedCrop.get_params on an @h x @w image with uniforms from @d:
 * per attempt, area = u1, log aspect = u2 (each scaled into its range), then top = u3 and
 * left = u4 as floor(u x (H - h + 1)) when the box fits. Sets the box's top, left, height, width.
 */
void gv_rrc_params(uint32_t h, uint32_t w, const double scale[2], const double ratio[2], struct gv_draws *d,
		   struct grist_vision_box *box);
/*
 * TF's sample_distorted_bounding_box with the whole image as its one box (see grist/vision.h),
 * uniforms from @d: per attempt the aspect (RandFloat), the height (Uniform), then y and x
 * (Uniform: floor(u x n)). Sets the box; false when every attempt failed (the whole image).
 */
bool gv_tf_params(uint32_t h, uint32_t w, const double scale[2], const double ratio[2], double min_covered,
		  struct gv_draws *d, struct grist_vision_box *box);
/*
 * DALI's RandomCropGenerator (vision_sample_dali.c) with uniforms from @d: per attempt the
 * area, the log aspect; then the left and the top offset. Sets the box.
 */
void gv_dali_params(uint32_t h, uint32_t w, const double scale[2], const double ratio[2], struct gv_draws *d,
		    struct grist_vision_box *box);
/* CENTER_CROP's box in source pixels (see grist/vision.h). */
void gv_center_params(const struct grist_vision_transform *t, uint32_t h, uint32_t w, struct grist_vision_box *box);
/* CENTER_CROP with resize: the size torchvision's Resize(resize) gives an @h x @w image. */
void gv_center_resized(const struct grist_vision_transform *t, uint32_t h, uint32_t w, uint32_t *nh, uint32_t *nw);
/* grist_vision_box() on a loaded transform. */
int gv_box(const struct grist_vision_transform *t, uint32_t height, uint32_t width, uint64_t epoch, uint64_t index,
	   const char *key, struct grist_vision_box *box);
/* Python's round(): to nearest, ties to even. */
double gv_round_half_even(double x);
/* A transform read from a caller (sized), its zero fields given their defaults, checked. -EINVAL + message. */
int gv_transform_load(struct grist_vision_transform *dst, const struct grist_vision_transform *src);

/* ---- EXIF orientation (vision_exif.c) ---- */

/* A JPEG's EXIF orientation, 1 to 8 (1 when absent or unreadable). */
uint32_t gv_jpeg_orientation(const uint8_t *p, size_t len);
/* Where box @d of the image as displayed (orientation @o) lies in the stored @h x @w image. */
void gv_orient_region(uint32_t o, uint32_t h, uint32_t w, const struct grist_vision_box *d,
		      struct grist_vision_box *s);
/* @src (stored, @sh x @sw x @c, rows @sstride apart) turned as displayed into @dst (packed). */
void gv_orient_pixels(uint32_t o, const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c,
		      uint8_t *dst);

/* ---- one image (vision.c) ---- */

/*
 * The output stage's plan: how a resized row becomes the output (vision.c's emit_row), a
 * function of the transform's dtype, layout, channels, normalize, mean and std alone, made
 * once with the transform and read by every thread: the float32 path (the AVX2 divisions, or
 * without them where gv_emit_f32_fma_exact() found every value the same) with its 24-lane
 * mean, std and reciprocals, or the tables of 3 x 256 values (float32 CHW, float16,
 * bfloat16). Making it costs 0.2 us for float32, about 4 us for the 16-bit tables.
 */
struct gv_out_plan {
	enum { GV_EMIT_TABLE, GV_EMIT_AVX2, GV_EMIT_FMA } how;
	float m24[24], s24[24], r24[24];
	float lut[3][256];      /* float32 (the table path) */
	uint16_t lut16[3][256]; /* float16, bfloat16 */
};
/* @t's output plan into @p (a loaded transform). */
void gv_out_plan_make(struct gv_out_plan *p, const struct grist_vision_transform *t);
/* Bytes of one output image of a loaded transform. */
size_t gv_out_bytes(const struct grist_vision_transform *t);
/* grist_vision_apply() on a loaded transform and its plan; @out holds gv_out_bytes(). */
int gv_apply(const struct grist_vision_transform *t, const struct gv_out_plan *plan, const uint8_t *img, size_t len,
	     uint64_t epoch, uint64_t index, const char *key, void *out, struct grist_vision_box *box);

/* ---- JPEG region decode, streamed (vision_jpeg.c) ---- */

/*
 * The region of an opened JPEG (gv_jpeg_open) decoded as the caller asks for its rows:
 * begin starts the decode (exact mode's settings, or with @fast or @denom > 1 fast mode's;
 * RGB, or gray with @gray_out on a gray file) and skips to the region's first row; then
 * gv_jpeg_pull() (a gv_src pull: @j the context) hands rows [y, y + n) of the region,
 * decoding them, and up to about 256 KB of rows past them, into the thread's buffer (rows
 * before y are dropped, rows never asked for skipped); gv_jpeg_close() ends the decode.
 * Rows are 3 bytes a pixel (CMYK made RGB; 1 for gray_out), valid until the next pull. A
 * failed call has ended the decode already.
 */
int gv_jpeg_begin_region(struct gv_jpeg *j, uint32_t denom, bool fast, uint32_t top, uint32_t left, uint32_t height,
			 uint32_t width, bool gray_out);
int gv_jpeg_pull(struct gv_jpeg *j, uint32_t y, uint32_t n, const uint8_t **rows, size_t *pitch);

/* ---- PNG region decode (vision_png.c) ---- */

/* A PNG opened for a region decode: its header read, its libspng context held. */
struct gv_png {
	void *ctx;             /* spng_ctx */
	uint32_t height, width;
	uint32_t channels;     /* as decoded: 1 gray, 2 gray+alpha, 3 RGB (a palette too), 4 RGBA */
	uint32_t sample_bytes; /* 1, or 2 for 16 bits (host-endian) */
	bool gray16;           /* 16-bit gray: Pillow's "I;16", clipped at 255 into RGB or "L" */
	bool interlaced;       /* Adam7: decoded whole, then cropped */
	int fmt;               /* enum spng_format */
	/* the region being read (gv_png_begin_region, then gv_png_pull) */
	uint8_t *raw;          /* one decoded row (the whole image when interlaced) */
	size_t raw_row;        /* its bytes a row */
	uint8_t *win;          /* the region's rows [r_lo, r_hi) as RGB, r_lo first, r_pitch apart */
	size_t win_cap, r_pitch, r_skip; /* r_skip: the region's first column's byte in a decoded row */
	uint32_t r_top, r_height, r_width, r_lo, r_hi;
	uint32_t r_next;       /* the image's next row to decode */
};
/* Read @p's header into @png (no pixels). -EBADMSG / -ENOTSUP / -ENOMEM + message. */
int gv_png_open(struct gv_png *png, const uint8_t *p, size_t len);
/*
 * Decode rows [top, top + height), columns [left, left + width) as 8-bit RGB into @dst,
 * rows @pitch apart (16 bits reduced as Pillow's convert("RGB"), vision_png.c), reading
 * no row past the region; releases @png.
 */
int gv_png_read_region(struct gv_png *png, uint32_t top, uint32_t left, uint32_t height, uint32_t width,
		       uint8_t *dst, size_t pitch);
/*
 * The same region decoded as the caller asks for its rows, as the JPEG's (gv_jpeg_pull):
 * begin checks it and starts the decode; gv_png_pull() (a gv_src pull) makes region rows
 * [y, y + n) readable as RGB (32 bytes of slack past each), y never below the last call's:
 * rows before it are dropped, rows above it decoded (a PNG row needs the one before) and
 * the ones never asked for not kept; valid until the next pull. A failed call has released
 * @png; gv_png_close() releases it otherwise.
 */
int gv_png_begin_region(struct gv_png *png, uint32_t top, uint32_t left, uint32_t height, uint32_t width);
int gv_png_pull(struct gv_png *png, uint32_t y, uint32_t n, const uint8_t **rows, size_t *pitch);
/* Release an opened PNG without decoding it (a closed one is fine). */
void gv_png_close(struct gv_png *png);

#endif
