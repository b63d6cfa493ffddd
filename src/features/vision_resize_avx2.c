/*
 * The resize's two passes for 3-channel rows, and the float output of a row, with AVX2,
 * built with -mavx2 and called only where the CPU has it (vision_resize.c, vision.c choose). Same integers as the portable passes:
 * every product and sum is the portable pass's (Pillow's, or with the 15-bit horizontal
 * weights of GV_RESIZE_W16 those), only the order of the additions differs, and integer
 * addition does not care (no sum comes near 2^31: the weights sum to 2^22, pixels are < 256,
 * the negative lobes are small).
 */
#include <errno.h>
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "features/vision_internal.h"

#define PRECISION_BITS (32 - 8 - 2)

/* Two adjacent RGB pixels at @p as int32 lanes R0 G0 B0 0 R1 G1 B1 0; @safe: 8 bytes may be read. */
static inline __m256i two_pixels(const uint8_t *p, int safe)
{
	const __m128i spread = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	__m128i v;

	if (safe) {
		v = _mm_loadl_epi64((const __m128i *)(const void *)p);
	} else {
		uint64_t w = 0;

		memcpy(&w, p, 6);
		v = _mm_cvtsi64_si128((long long)w);
	}
	v = _mm_shuffle_epi8(v, spread);
	return _mm256_cvtepu8_epi32(v);
}

/* Lanes R G B x of an int32 sum, rounded and shifted, clamped to 3 bytes at @out. */
static inline void store_rgb(__m128i s, uint8_t *out)
{
	uint32_t w;

	s = _mm_packs_epi32(s, s);
	s = _mm_packus_epi16(s, s);
	w = (uint32_t)_mm_cvtsi128_si32(s);
	out[0] = (uint8_t)w;
	out[1] = (uint8_t)(w >> 8);
	out[2] = (uint8_t)(w >> 16);
}

static void gv_hpass_rgb_avx2_mullo(const uint8_t *src, size_t sstride, uint32_t sw, uint32_t y0, uint32_t rows,
				    const int32_t *bounds, const int32_t *kk, uint32_t ksize, uint32_t prec, uint32_t dw,
				    uint8_t *dst, size_t dstride)
{
	const __m256i pick = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
	const size_t row_bytes = (size_t)sw * 3;

	for (uint32_t y = 0; y < rows; y++) {
		const uint8_t *in = src + (size_t)(y0 + y) * sstride;
		uint8_t *out = dst + (size_t)y * dstride;

		for (uint32_t xx = 0; xx < dw; xx++) {
			const int32_t *k = kk + (size_t)xx * ksize;
			int32_t xmin = bounds[2 * xx], n = bounds[2 * xx + 1], x = 0;
			__m256i acc = _mm256_setzero_si256();
			__m128i s;

			for (; x + 1 < n; x += 2) {
				size_t at = (size_t)(xmin + x) * 3;
				__m256i px = two_pixels(in + at, at + 8 <= row_bytes);
				__m256i kv = _mm256_permutevar8x32_epi32(
					_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(const void *)(k + x))), pick);

				acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(px, kv));
			}
			s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
			if (x < n) {
				const uint8_t *p = in + (size_t)(xmin + x) * 3;

				s = _mm_add_epi32(s, _mm_mullo_epi32(_mm_setr_epi32(p[0], p[1], p[2], 0), _mm_set1_epi32(k[x])));
			}
			s = _mm_add_epi32(s, _mm_set1_epi32(1 << (prec - 1)));
			store_rgb(_mm_sra_epi32(s, _mm_cvtsi32_si128((int)prec)), out + (size_t)xx * 3);
		}
	}
}

/* 16 bytes of @in from byte @at of a row of @row_bytes: zeros past its end (their taps weigh 0). */
static inline __m128i row_bytes16(const uint8_t *in, size_t at, size_t row_bytes)
{
	uint8_t tmp[16] = { 0 };

	if (at + 16 <= row_bytes)
		return _mm_loadu_si128((const __m128i *)(const void *)(in + at));
	if (at < row_bytes)
		memcpy(tmp, in + at, row_bytes - at < 16 ? row_bytes - at : 16);
	return _mm_loadu_si128((const __m128i *)(const void *)tmp);
}

/*
 * What every step of a horizontal pass's row shares: the byte spread, the rounding's half
 * unit and the shift (the weights' bits), and @w16: the weights are int16 as they are (one
 * vector a group, one multiply-add), not split in high and low halves (two of each).
 */
struct hstep {
	__m256i spread, half;
	__m128i shift;
};

/*
 * Four taps of one output pixel: the 16 bytes at @b spread over int16 pairs, times weights
 * @w (hi, then lo; with @w16 one vector): high parts into @ah, low into @al.
 */
static inline __attribute__((always_inline)) void taps4(__m128i b, const __m256i *w, bool w16, __m256i spread,
							 __m256i *ah, __m256i *al)
{
	__m256i px = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(b), spread);

	*ah = _mm256_add_epi32(*ah, _mm256_madd_epi16(px, _mm256_load_si256(w)));
	if (!w16)
		*al = _mm256_add_epi32(*al, _mm256_madd_epi16(px, _mm256_load_si256(w + 1)));
}

/* One pixel's sums from its high and low accumulators: hi x 2^11 + lo (with @w16: hi alone). */
static inline __attribute__((always_inline)) __m256i recombine(__m256i ah, __m256i al, bool w16)
{
	return w16 ? ah : _mm256_add_epi32(_mm256_slli_epi32(ah, 11), al);
}

/* pair_sum's accumulators of pixels a and b joined: lanes [R G B x of a | R G B x of b], rounded and shifted. */
static inline __attribute__((always_inline)) __m256i join(__m256i aha, __m256i ala, __m256i ahb, __m256i alb,
							   bool w16, const struct hstep *st)
{
	__m256i sa = recombine(aha, ala, w16), sb = recombine(ahb, alb, w16);

	/* [a's low half, b's low half] + [a's high half, b's high half] */
	sa = _mm256_add_epi32(_mm256_permute2x128_si256(sa, sb, 0x20), _mm256_permute2x128_si256(sa, sb, 0x31));
	return _mm256_sra_epi32(_mm256_add_epi32(sa, st->half), st->shift);
}

/*
 * The sums of output pixels @xx and @xx + 1, shifted: int32 lanes [R G B x of xx | R G B x of
 * xx + 1]. @fast: both read whole 16-byte loads inside the row.
 */
static inline __attribute__((always_inline)) __m256i pair_sum(const uint8_t *in, size_t row_bytes,
							       const int32_t *bounds, const __m256i *wt, size_t groups,
							       bool w16, uint32_t xx, bool fast, const struct hstep *st)
{
	const size_t vpg = w16 ? 1 : 2; /* vectors a group */
	const __m256i *wa = &wt[(size_t)xx * groups * vpg], *wb = wa + groups * vpg;
	size_t a = (size_t)bounds[2 * xx] * 3, b = (size_t)bounds[2 * xx + 2] * 3;
	__m256i aha = _mm256_setzero_si256(), ala = aha, ahb = aha, alb = aha;

	if (fast) {
		for (size_t g = 0; g < groups; g++, a += 12, b += 12) {
			taps4(_mm_loadu_si128((const __m128i *)(const void *)(in + a)), wa + vpg * g, w16, st->spread,
			      &aha, &ala);
			taps4(_mm_loadu_si128((const __m128i *)(const void *)(in + b)), wb + vpg * g, w16, st->spread,
			      &ahb, &alb);
		}
	} else {
		for (size_t g = 0; g < groups; g++, a += 12, b += 12) {
			taps4(row_bytes16(in, a, row_bytes), wa + vpg * g, w16, st->spread, &aha, &ala);
			taps4(row_bytes16(in, b, row_bytes), wb + vpg * g, w16, st->spread, &ahb, &alb);
		}
	}
	return join(aha, ala, ahb, alb, w16, st);
}

/* The last pixel @xx of an odd width alone, as pair_sum's low lane. */
static inline __attribute__((always_inline)) __m256i one_sum(const uint8_t *in, size_t row_bytes,
							      const int32_t *bounds, const __m256i *wt, size_t groups,
							      bool w16, uint32_t xx, const struct hstep *st)
{
	const size_t vpg = w16 ? 1 : 2;
	const __m256i *wa = &wt[(size_t)xx * groups * vpg];
	size_t a = (size_t)bounds[2 * xx] * 3;
	__m256i ah = _mm256_setzero_si256(), al = ah, s;

	for (size_t g = 0; g < groups; g++, a += 12)
		taps4(row_bytes16(in, a, row_bytes), wa + vpg * g, w16, st->spread, &ah, &al);
	s = recombine(ah, al, w16);
	s = _mm256_add_epi32(s, _mm256_permute2x128_si256(s, s, 0x11));
	return _mm256_sra_epi32(_mm256_add_epi32(s, st->half), st->shift);
}

/* Four taps of one output pixel in two rows: the 16 bytes at @b0 and @b1, the weights @wh, @wl loaded once. */
static inline __attribute__((always_inline)) void taps4x2(__m128i b0, __m128i b1, __m256i wh, __m256i wl, bool w16,
							   __m256i spread, __m256i *ah0, __m256i *al0, __m256i *ah1,
							   __m256i *al1)
{
	__m256i p0 = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(b0), spread);
	__m256i p1 = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(b1), spread);

	*ah0 = _mm256_add_epi32(*ah0, _mm256_madd_epi16(p0, wh));
	*ah1 = _mm256_add_epi32(*ah1, _mm256_madd_epi16(p1, wh));
	if (!w16) {
		*al0 = _mm256_add_epi32(*al0, _mm256_madd_epi16(p0, wl));
		*al1 = _mm256_add_epi32(*al1, _mm256_madd_epi16(p1, wl));
	}
}

/* pair_sum of rows @in0 and @in1 at once (each weight loaded once for both), both @fast. */
static inline __attribute__((always_inline)) void pair_sum2(const uint8_t *in0, const uint8_t *in1,
							    const int32_t *bounds, const __m256i *wt, size_t groups,
							    bool w16, uint32_t xx, const struct hstep *st, __m256i *s0,
							    __m256i *s1)
{
	const size_t vpg = w16 ? 1 : 2;
	const __m256i *wa = &wt[(size_t)xx * groups * vpg], *wb = wa + groups * vpg;
	size_t a = (size_t)bounds[2 * xx] * 3, b = (size_t)bounds[2 * xx + 2] * 3;
	__m256i z = _mm256_setzero_si256(), ha0 = z, la0 = z, hb0 = z, lb0 = z, ha1 = z, la1 = z, hb1 = z, lb1 = z;

	for (size_t g = 0; g < groups; g++, a += 12, b += 12) {
		const __m256i *va = wa + vpg * g, *vb = wb + vpg * g;

		taps4x2(_mm_loadu_si128((const __m128i *)(const void *)(in0 + a)),
			_mm_loadu_si128((const __m128i *)(const void *)(in1 + a)), _mm256_load_si256(va),
			w16 ? z : _mm256_load_si256(va + 1), w16, st->spread, &ha0, &la0, &ha1, &la1);
		taps4x2(_mm_loadu_si128((const __m128i *)(const void *)(in0 + b)),
			_mm_loadu_si128((const __m128i *)(const void *)(in1 + b)), _mm256_load_si256(vb),
			w16 ? z : _mm256_load_si256(vb + 1), w16, st->spread, &hb0, &lb0, &hb1, &lb1);
	}
	*s0 = join(ha0, la0, hb0, lb0, w16, st);
	*s1 = join(ha1, la1, hb1, lb1, w16, st);
}

/* Four pairs' sums (pixels 0-7) as 24 bytes at @out. */
static inline void store8(__m256i s0, __m256i s1, __m256i s2, __m256i s3, uint8_t *out)
{
	const __m256i drop_x = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
						0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
	/* lane 0: pixels 0 2 4 6, lane 1: 1 3 5 7, as RGBx bytes */
	__m256i r = _mm256_packus_epi16(_mm256_packs_epi32(s0, s1), _mm256_packs_epi32(s2, s3));

	r = _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
	r = _mm256_shuffle_epi8(r, drop_x);
	r = _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7));
	_mm_storeu_si128((__m128i *)(void *)out, _mm256_castsi256_si128(r));
	_mm_storel_epi64((__m128i *)(void *)(out + 16), _mm256_extracti128_si256(r, 1));
}

/* Pixels [@xx, @dw) of one row of the horizontal pass: eight a step, then two, then one. */
static inline __attribute__((always_inline)) void hpass_tail(const uint8_t *in, size_t row_bytes, const int32_t *bounds,
							     const __m256i *wt, size_t groups, bool w16,
							     uint32_t fast_end, uint32_t xx, uint32_t dw, uint8_t *out,
							     const struct hstep *st)
{
	for (; xx + 8 <= dw; xx += 8)
		store8(pair_sum(in, row_bytes, bounds, wt, groups, w16, xx, xx + 1 < fast_end, st),
		       pair_sum(in, row_bytes, bounds, wt, groups, w16, xx + 2, xx + 3 < fast_end, st),
		       pair_sum(in, row_bytes, bounds, wt, groups, w16, xx + 4, xx + 5 < fast_end, st),
		       pair_sum(in, row_bytes, bounds, wt, groups, w16, xx + 6, xx + 7 < fast_end, st),
		       out + (size_t)xx * 3);
	for (; xx < dw; xx += 2) {
		bool two = xx + 1 < dw;
		__m256i sum = two ? pair_sum(in, row_bytes, bounds, wt, groups, w16, xx, xx + 1 < fast_end, st)
				  : one_sum(in, row_bytes, bounds, wt, groups, w16, xx, st);
		uint32_t pa, pb;

		sum = _mm256_packus_epi16(_mm256_packs_epi32(sum, sum), sum);
		pa = (uint32_t)_mm256_extract_epi32(sum, 0);
		pb = (uint32_t)_mm256_extract_epi32(sum, 4);
		memcpy(out + (size_t)xx * 3, &pa, 3);
		if (two)
			memcpy(out + (size_t)xx * 3 + 3, &pb, 3);
	}
}

/* Rows [y0, y0 + rows) of the horizontal pass, with the weights laid out in @wt (gv_hpass_rgb_avx2). */
static inline __attribute__((always_inline)) void
hpass_rows(const uint8_t *src, size_t sstride, size_t row_bytes, uint32_t y0, uint32_t rows, const int32_t *bounds,
	   const __m256i *wt, size_t groups, bool w16, uint32_t prec, uint32_t fast_end, uint32_t dw, uint8_t *dst,
	   size_t dstride)
{
	const struct hstep st = {
		_mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 6, -1, 9, -1, 7, -1, 10, -1,
				 8, -1, 11, -1, -1, -1, -1, -1),
		_mm256_set1_epi32(1 << (prec - 1)), _mm_cvtsi32_si128((int)prec)
	};

	for (uint32_t y = 0; y < rows; y++) {
		const uint8_t *in = src + (size_t)(y0 + y) * sstride;
		uint8_t *out = dst + (size_t)y * dstride;

		/*
		 * Two rows at once where both have one: each pixel's weights loaded once for both
		 * rows, not once per row (4-6% less time for the resize at the benchmark's crop
		 * sizes). Over the pixels whose loads stay inside the row; the rest, and the last
		 * odd row, one row at a time.
		 */
		if (y + 1 < rows) {
			const uint8_t *in1 = in + sstride;
			uint8_t *out1 = out + dstride;
			uint32_t x2 = 0;

			for (; x2 + 8 <= dw && x2 + 7 < fast_end; x2 += 8) {
				__m256i a0, a1, a2, a3, b0, b1, b2, b3;

				pair_sum2(in, in1, bounds, wt, groups, w16, x2, &st, &a0, &b0);
				pair_sum2(in, in1, bounds, wt, groups, w16, x2 + 2, &st, &a1, &b1);
				pair_sum2(in, in1, bounds, wt, groups, w16, x2 + 4, &st, &a2, &b2);
				pair_sum2(in, in1, bounds, wt, groups, w16, x2 + 6, &st, &a3, &b3);
				store8(a0, a1, a2, a3, out + (size_t)x2 * 3);
				store8(b0, b1, b2, b3, out1 + (size_t)x2 * 3);
			}
			if (x2) {
				/* each row's remaining pixels alone; both rows done */
				hpass_tail(in, row_bytes, bounds, wt, groups, w16, fast_end, x2, dw, out, &st);
				hpass_tail(in1, row_bytes, bounds, wt, groups, w16, fast_end, x2, dw, out1, &st);
				y++;
				continue;
			}
		}

		/*
		 * Eight pixels a step: four pairs' sums packed together and stored as 24 bytes,
		 * which costs about a quarter of the per-pair cross-lane moves, packs and small
		 * stores (these, not the multiply-adds, bounded the loop: shuffle port and store
		 * forwarding).
		 */
		hpass_tail(in, row_bytes, bounds, wt, groups, w16, fast_end, 0, dw, out, &st);
	}
}

/*
 * Two taps at most (every upscale: the filter spans two source pixels): one output pixel
 * per 128-bit lane, its taps' R, G, B as int16 pairs (R_0, R_1, G_0, G_1, B_0, B_1, 0, 0),
 * two pixels a step. Each pixel's sums end in its own lane: no cross-lane join, half the
 * multiply-adds and weight loads of the four-tap layout, whose slots would be half empty.
 */

/* 8 bytes of @in from byte @at of a row of @row_bytes: zeros past its end (their taps weigh 0). */
static inline __m128i row_bytes8(const uint8_t *in, size_t at, size_t row_bytes)
{
	uint64_t w = 0;

	if (at + 8 <= row_bytes)
		return _mm_loadl_epi64((const __m128i *)(const void *)(in + at));
	if (at < row_bytes)
		memcpy(&w, in + at, row_bytes - at < 8 ? row_bytes - at : 8);
	return _mm_cvtsi64_si128((long long)w);
}

/*
 * The sums of outputs @xx (even) and @xx + 1 (past @dw: a copy of @xx's loads at weight 0),
 * shifted: int32 lanes [R G B x of xx | R G B x of xx + 1]. @fast: both 8-byte loads inside
 * the row. The pair's weights: hi and lo at @wt[xx], [xx + 1]; with @w16 one vector at [xx / 2].
 */
static inline __attribute__((always_inline)) __m256i pair2_sum(const uint8_t *in, size_t row_bytes,
							       const int32_t *bounds, const __m256i *wt, bool w16,
							       uint32_t xx, uint32_t dw, bool fast,
							       const struct hstep *st)
{
	const __m256i *w = &wt[w16 ? (size_t)xx / 2 : (size_t)xx];
	size_t a = (size_t)bounds[2 * xx] * 3, b = xx + 1 < dw ? (size_t)bounds[2 * xx + 2] * 3 : a;
	__m128i va = fast ? _mm_loadl_epi64((const __m128i *)(const void *)(in + a)) : row_bytes8(in, a, row_bytes);
	__m128i vb = fast ? _mm_loadl_epi64((const __m128i *)(const void *)(in + b)) : row_bytes8(in, b, row_bytes);
	__m256i p = _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(va), vb, 1), st->spread);
	__m256i h = _mm256_madd_epi16(p, _mm256_load_si256(w));

	if (!w16)
		h = _mm256_add_epi32(_mm256_slli_epi32(h, 11), _mm256_madd_epi16(p, _mm256_load_si256(w + 1)));
	return _mm256_sra_epi32(_mm256_add_epi32(h, st->half), st->shift);
}

/* Rows [y0, y0 + rows) of the two-tap pass: eight pixels a step (four pairs, one 24-byte store), then two. */
static inline __attribute__((always_inline)) void hpass2_rows(const uint8_t *src, size_t sstride, size_t row_bytes,
							      uint32_t y0, uint32_t rows, const int32_t *bounds,
							      const __m256i *wt, bool w16, uint32_t prec,
							      uint32_t fast_end, uint32_t dw, uint8_t *dst,
							      size_t dstride)
{
	const struct hstep st = {
		_mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1, 1, -1, 4, -1, 2,
				 -1, 5, -1, -1, -1, -1, -1),
		_mm256_set1_epi32(1 << (prec - 1)), _mm_cvtsi32_si128((int)prec)
	};

	for (uint32_t y = 0; y < rows; y++) {
		const uint8_t *in = src + (size_t)(y0 + y) * sstride;
		uint8_t *out = dst + (size_t)y * dstride;
		uint32_t xx = 0;

		for (; xx + 8 <= dw; xx += 8)
			store8(pair2_sum(in, row_bytes, bounds, wt, w16, xx, dw, xx + 1 < fast_end, &st),
			       pair2_sum(in, row_bytes, bounds, wt, w16, xx + 2, dw, xx + 3 < fast_end, &st),
			       pair2_sum(in, row_bytes, bounds, wt, w16, xx + 4, dw, xx + 5 < fast_end, &st),
			       pair2_sum(in, row_bytes, bounds, wt, w16, xx + 6, dw, xx + 7 < fast_end, &st),
			       out + (size_t)xx * 3);
		for (; xx < dw; xx += 2) {
			__m256i sum = pair2_sum(in, row_bytes, bounds, wt, w16, xx, dw, xx + 1 < fast_end, &st);
			uint32_t pa, pb;

			sum = _mm256_packus_epi16(_mm256_packs_epi32(sum, sum), sum);
			pa = (uint32_t)_mm256_extract_epi32(sum, 0);
			pb = (uint32_t)_mm256_extract_epi32(sum, 4);
			memcpy(out + (size_t)xx * 3, &pa, 3);
			if (xx + 1 < dw)
				memcpy(out + (size_t)xx * 3 + 3, &pb, 3);
		}
	}
}

/*
 * The horizontal pass, four taps per step with 16-bit multiply-adds. Each 128-bit lane holds
 * two taps' R, G, B as int16 pairs (R_j, R_j+1, G_j, G_j+1, B_j, B_j+1, 0, 0), so one
 * _mm256_madd_epi16 does four taps of all three channels against int16 weights. Pillow's
 * 22-bit weight k (|k| < 2^23) does not fit: it is split as k = kh x 2^11 + kl with
 * 0 <= kl < 2^11, both halves int16, and sum(p x k) = 2^11 x sum(p x kh) + sum(p x kl)
 * exactly, at two multiply-adds per four taps. Weights of 15 bits or fewer (GV_RESIZE_W16)
 * are int16 as they are: one. The weights, laid out that way, are made once per resize
 * (gv_hlayout_make_avx2), not per row.
 *
 * Every output pixel runs the same number of steps (the most taps any has, in fours; the
 * extra taps weigh 0), so the loop's trip count never changes between pixels (a count that
 * alternates, as 4 and 5 taps do at a 2x downscale, costs a mispredicted branch a pixel);
 * two pixels share one reduction, and four such pairs one pack and one 24-byte store.
 */
/* Taps @k0, @k1 as an int32 of two int16s: with @half 0 as they are (w16), 1 their high parts (k >> 11), 2 their low (k & 2047). */
static inline int32_t tap_pair(int32_t k0, int32_t k1, int half)
{
	uint32_t a = half == 1 ? (uint32_t)(uint16_t)(k0 >> 11) : half == 2 ? (uint32_t)(k0 & 2047) : (uint16_t)k0;
	uint32_t b = half == 1 ? (uint32_t)(uint16_t)(k1 >> 11) : half == 2 ? (uint32_t)(k1 & 2047) : (uint16_t)k1;

	return (int32_t)(a | b << 16);
}

int gv_hlayout_make_avx2(const int32_t *bounds, const int32_t *kk, uint32_t ksize, uint32_t prec, uint32_t dw,
			 uint32_t sw, struct gv_hlayout *l)
{
	const size_t row_bytes = (size_t)sw * 3;
	const bool w16 = prec <= 15;
	const size_t vpg = w16 ? 1 : 2; /* vectors a group (or a two-tap pair) */
	size_t groups = 1;
	uint32_t fast_end = 0; /* pixels below it read only whole 16-byte loads inside the row */
	__m256i *wt;

	for (uint32_t xx = 0; xx < dw; xx++)
		if ((size_t)(bounds[2 * xx + 1] + 3) / 4 > groups)
			groups = (size_t)(bounds[2 * xx + 1] + 3) / 4;
	l->wt = NULL;
	l->prec = prec;
	l->groups = groups;
	l->two_taps = true;
	for (uint32_t xx = 0; xx < dw; xx++)
		l->two_taps = l->two_taps && bounds[2 * xx + 1] <= 2;
	if (l->two_taps) {
		/*
		 * per output pair: [hi of xx | hi of xx + 1], [lo of xx | lo of xx + 1] (w16: the
		 * one vector of the weights as they are); a missing xx + 1 weighs 0
		 */
		wt = aligned_alloc(32, sizeof(__m256i) * ((size_t)dw + 1) + 32);
		if (!wt)
			return -ENOMEM;
		for (uint32_t xx = 0; xx < dw + (dw & 1); xx++) {
			const int32_t *k = kk + (size_t)xx * ksize;
			int32_t n = xx < dw ? bounds[2 * xx + 1] : 0, k0 = n > 0 ? k[0] : 0, k1 = n > 1 ? k[1] : 0;
			uint8_t *at = (uint8_t *)(void *)&wt[(xx / 2) * vpg] + (xx & 1) * 16;

			for (size_t v = 0; v < vpg; v++) {
				int32_t p = tap_pair(k0, k1, w16 ? 0 : (int)v + 1);

				_mm_storeu_si128((__m128i *)(void *)(at + 32 * v), _mm_setr_epi32(p, p, p, 0));
			}
			if (xx < dw && (size_t)bounds[2 * xx] * 3 + 8 <= row_bytes && fast_end == xx)
				fast_end = xx + 1; /* the first pixels' xmin only grows: a prefix */
		}
		l->wt = wt;
		l->fast_end = fast_end;
		return 0;
	}
	wt = aligned_alloc(32, sizeof(__m256i) * vpg * groups * dw + 32);
	if (!wt)
		return -ENOMEM;
	for (uint32_t xx = 0; xx < dw; xx++) {
		const int32_t *k = kk + (size_t)xx * ksize;
		int32_t n = bounds[2 * xx + 1];

		for (size_t g = 0; g < groups; g++) {
			int32_t v[4];

			for (int t = 0; t < 4; t++)
				v[t] = (int32_t)(4 * g) + t < n ? k[4 * g + t] : 0;
			/* taps (0, 1) as R, G, B int16 pairs in the low lane, (2, 3) in the high lane */
			for (size_t h = 0; h < vpg; h++) {
				int32_t p01 = tap_pair(v[0], v[1], w16 ? 0 : (int)h + 1);
				int32_t p23 = tap_pair(v[2], v[3], w16 ? 0 : (int)h + 1);

				_mm256_store_si256(&wt[(xx * groups + g) * vpg + h],
						   _mm256_setr_epi32(p01, p01, p01, 0, p23, p23, p23, 0));
			}
		}
		if ((size_t)(bounds[2 * xx] + 4 * (groups - 1)) * 3 + 16 <= row_bytes && fast_end == xx)
			fast_end = xx + 1; /* the first pixels' xmin only grows: a prefix */
	}
	l->wt = wt;
	l->fast_end = fast_end;
	return 0;
}

void gv_hlayout_free(struct gv_hlayout *l)
{
	free(l->wt);
	l->wt = NULL;
}

/* hpass_rows with its step count and weight form as constants: the loops unroll and the sums stay in registers */
#define HPASS(G, W16)                                                                                                 \
	hpass_rows(src, sstride, row_bytes, y0, rows, bounds, wt, G, W16, l->prec, l->fast_end, dw, dst, dstride)

void gv_hpass_rgb_avx2(const struct gv_hlayout *l, const uint8_t *src, size_t sstride, uint32_t sw, uint32_t y0,
		       uint32_t rows, const int32_t *bounds, const int32_t *kk, uint32_t ksize, uint32_t dw, uint8_t *dst,
		       size_t dstride)
{
	const size_t row_bytes = (size_t)sw * 3;
	const __m256i *wt = l->wt;
	const bool w16 = l->prec <= 15;

	if (!wt) { /* no memory for the laid-out weights: the two-tap path needs none */
		gv_hpass_rgb_avx2_mullo(src, sstride, sw, y0, rows, bounds, kk, ksize, l->prec, dw, dst, dstride);
		return;
	}
	if (l->two_taps) {
		if (w16)
			hpass2_rows(src, sstride, row_bytes, y0, rows, bounds, wt, true, l->prec, l->fast_end, dw, dst,
				    dstride);
		else
			hpass2_rows(src, sstride, row_bytes, y0, rows, bounds, wt, false, l->prec, l->fast_end, dw, dst,
				    dstride);
		return;
	}
	switch (l->groups * 2 + w16) {
	case 2: HPASS(1, false); break;
	case 3: HPASS(1, true); break;
	case 4: HPASS(2, false); break;
	case 5: HPASS(2, true); break;
	case 6: HPASS(3, false); break;
	case 7: HPASS(3, true); break;
	default:
		if (w16)
			HPASS(l->groups, true);
		else
			HPASS(l->groups, false);
	}
}
#undef HPASS

/* Taps @k0 and @k1 as int16 pairs in every int32 lane: the high parts (k >> 11) in @h, the low (k & 2047) in @l. */
static inline void weight_pair(int32_t k0, int32_t k1, __m256i *h, __m256i *l)
{
	*h = _mm256_set1_epi32((int32_t)((uint32_t)(uint16_t)(k0 >> 11) | (uint32_t)(k1 >> 11) << 16));
	*l = _mm256_set1_epi32((int32_t)((uint32_t)(k0 & 2047) | (uint32_t)(k1 & 2047) << 16));
}

/*
 * One output row of the vertical pass: @n source rows from @first (rows @sstride apart), weights
 * @k, over @row_bytes bytes; 32 bytes at a time in registers, the tail byte by byte. Two source
 * rows a step: their bytes interleaved as int16 pairs (row y, row y + 1), so one
 * _mm256_madd_epi16 does two taps of 8 bytes, with the weights split in 16-bit halves as the
 * horizontal pass splits them (k = kh x 2^11 + kl, the sum recombined exactly). The packs then
 * give the 32 bytes in order.
 */
void gv_vrow_avx2(const uint8_t *first, size_t sstride, int32_t n, const int32_t *k, size_t row_bytes, uint8_t *out)
{
	const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1)), zero = _mm256_setzero_si256();
	__m256i wstack[2 * 8], *w = wstack;
	int32_t pairs = (n + 1) / 2;
	size_t i = 0;

	/* each tap pair's weights split once per row, not once per 32 bytes */
	if (pairs > 8 && !(w = aligned_alloc(32, sizeof(__m256i) * 2 * (size_t)pairs)))
		pairs = 0; /* no memory: the bytewise loop below does the whole row */
	for (int32_t p = 0; p < pairs; p++)
		weight_pair(k[2 * p], 2 * p + 1 < n ? k[2 * p + 1] : 0, &w[2 * p], &w[2 * p + 1]);
	for (; pairs && i + 32 <= row_bytes; i += 32) {
		/* the rounding's half unit starts in the low parts' sums */
		__m256i h[4] = { zero, zero, zero, zero }, l[4] = { half, half, half, half }, s[4];

		for (int32_t y = 0; y < n; y += 2) {
			const uint8_t *r0 = first + (size_t)y * sstride + i;
			bool odd = y + 1 == n; /* the last tap alone: paired with itself at weight 0 */
			__m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)r0);
			__m256i v1 = odd ? v0 : _mm256_loadu_si256((const __m256i *)(const void *)(r0 + sstride));
			__m256i lo = _mm256_unpacklo_epi8(v0, v1), hi = _mm256_unpackhi_epi8(v0, v1);
			__m256i wh = _mm256_load_si256(&w[y]), wl = _mm256_load_si256(&w[y + 1]);
			__m256i p[4] = { _mm256_unpacklo_epi8(lo, zero), _mm256_unpackhi_epi8(lo, zero),
					 _mm256_unpacklo_epi8(hi, zero), _mm256_unpackhi_epi8(hi, zero) };

			for (int j = 0; j < 4; j++) {
				h[j] = _mm256_add_epi32(h[j], _mm256_madd_epi16(p[j], wh));
				l[j] = _mm256_add_epi32(l[j], _mm256_madd_epi16(p[j], wl));
			}
		}
		for (int j = 0; j < 4; j++)
			s[j] = _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(h[j], 11), l[j]), PRECISION_BITS);
		/* s[0..3] hold bytes 0-3, 4-7, 8-11, 12-15 of each 16-byte half: the packs keep that order */
		_mm256_storeu_si256((__m256i *)(void *)(out + i),
				    _mm256_packus_epi16(_mm256_packs_epi32(s[0], s[1]), _mm256_packs_epi32(s[2], s[3])));
	}
	if (w != wstack)
		free(w);
	for (; i < row_bytes; i++) {
		int32_t s = 1 << (PRECISION_BITS - 1);

		for (int32_t y = 0; y < n; y++)
			s += first[(size_t)y * sstride + i] * k[y];
		s >>= PRECISION_BITS;
		out[i] = (uint8_t)(s < 0 ? 0 : s > 255 ? 255 : s);
	}
}

/*
 * @n bytes of an RGB row (n a multiple of 3) to float32 as emit() computes them:
 * (x / 255 - mean[c]) / std[c], the same IEEE divisions and subtraction (no FMA, no
 * reciprocal), so the same bits. @m24 and @s24 hold mean and std repeated over 24 lanes
 * (the channel pattern of three vectors of 8).
 */
void gv_emit_row_f32_avx2(const uint8_t *px, size_t n, const float *m24, const float *s24, float *out)
{
	const __m256 k255 = _mm256_set1_ps(255.0f);
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		size_t phase = i % 24;
		__m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(px + i));
		__m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));

		f = _mm256_div_ps(f, k255);
		f = _mm256_sub_ps(f, _mm256_loadu_ps(m24 + phase));
		f = _mm256_div_ps(f, _mm256_loadu_ps(s24 + phase));
		_mm256_storeu_ps(out + i, f);
	}
	for (; i < n; i++)
		out[i] = ((float)px[i] / 255.0f - m24[i % 24]) / s24[i % 24];
}

/*
 * @n RGB pixels of @in into @out in reverse order (the horizontal flip), five pixels per
 * 16-byte shuffle. Reads up to 1 byte past the row and writes up to 1 byte past @out's 3 x @n:
 * both buffers have that slack (vision.c).
 */
void gv_reverse_rgb(const uint8_t *in, size_t n, uint8_t *out)
{
	const __m128i rev5 = _mm_setr_epi8(12, 13, 14, 9, 10, 11, 6, 7, 8, 3, 4, 5, 0, 1, 2, 15);
	size_t x = 0;

	for (; x + 5 <= n; x += 5) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(in + (n - x - 5) * 3));

		_mm_storeu_si128((__m128i *)(void *)(out + x * 3), _mm_shuffle_epi8(v, rev5));
	}
	for (; x < n; x++)
		memcpy(out + x * 3, in + (n - 1 - x) * 3, 3);
}

/*
 * The same without a division: each IEEE quotient a / b (b = 255, then b = std) as
 * q = a x r, then one correction q + (a - q x b) x r with r = 1 / b, both steps fused
 * multiply-adds (the remainder a - q x b is exact in one FMA). That is the correctly
 * rounded quotient for nearly every a; it is not proven for all, so gv_emit_f32_fma_exact()
 * checks every value that can occur (256 per channel) against the divisions before it is
 * used. Built for FMA: call only where the CPU has it (gv_have_fma()).
 */
static inline __attribute__((target("avx2,fma"))) __m256 div_fma(__m256 a, __m256 b, __m256 r)
{
	__m256 q = _mm256_mul_ps(a, r);

	return _mm256_fmadd_ps(_mm256_fnmadd_ps(q, b, a), r, q);
}

static inline __attribute__((target("avx2,fma"))) __m256 f32_fma(__m256 x, __m256 m, __m256 s, __m256 r)
{
	const __m256 k255 = _mm256_set1_ps(255.0f), r255 = _mm256_set1_ps(1.0f / 255.0f);

	return div_fma(_mm256_sub_ps(div_fma(x, k255, r255), m), s, r);
}

static inline __m256 f32_div(__m256 x, __m256 m, __m256 s)
{
	return _mm256_div_ps(_mm256_sub_ps(_mm256_div_ps(x, _mm256_set1_ps(255.0f)), m), s);
}

__attribute__((target("avx2,fma"))) bool gv_emit_f32_fma_exact(const float *m24, const float *s24, float *r24)
{
	for (int k = 0; k < 24; k++)
		r24[k] = 1.0f / s24[k];
	/* value v in lane i of the vector at phase p is channel (p + i) % 3: three phases, every channel */
	for (int v = 0; v < 256; v += 8) {
		__m256 x = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));

		for (int p = 0; p < 24; p += 8) {
			__m256 m = _mm256_loadu_ps(m24 + p), s = _mm256_loadu_ps(s24 + p), r = _mm256_loadu_ps(r24 + p);
			__m256i a = _mm256_castps_si256(f32_fma(x, m, s, r)), b = _mm256_castps_si256(f32_div(x, m, s));

			if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(a, b)) != -1)
				return false;
		}
	}
	return true;
}

__attribute__((target("avx2,fma"))) void gv_emit_row_f32_fma(const uint8_t *px, size_t n, const float *m24,
							      const float *s24, const float *r24, float *out)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		size_t phase = i % 24;
		__m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(px + i));
		__m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));

		_mm256_storeu_ps(out + i, f32_fma(f, _mm256_loadu_ps(m24 + phase), _mm256_loadu_ps(s24 + phase),
						  _mm256_loadu_ps(r24 + phase)));
	}
	for (; i < n; i++)
		out[i] = ((float)px[i] / 255.0f - m24[i % 24]) / s24[i % 24];
}
