/*
 * The resize's two passes for 3-channel rows, and the float output of a row, with AVX2,
 * built with -mavx2 and called only where the CPU has it (vision_resize.c, vision.c choose). Same integers as the portable passes:
 * every product and sum is Pillow's, only the order of the additions differs, and integer
 * addition does not care (no sum comes near 2^31: the weights sum to 2^22, pixels are < 256,
 * the negative lobes are small).
 */
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

/* Lanes R G B x of an int32 sum, rounded and clamped to 3 bytes at @out. */
static inline void store_rgb(__m128i s, uint8_t *out)
{
	uint32_t w;

	s = _mm_srai_epi32(s, PRECISION_BITS);
	s = _mm_packs_epi32(s, s);
	s = _mm_packus_epi16(s, s);
	w = (uint32_t)_mm_cvtsi128_si32(s);
	out[0] = (uint8_t)w;
	out[1] = (uint8_t)(w >> 8);
	out[2] = (uint8_t)(w >> 16);
}

static void gv_hpass_rgb_avx2_mullo(const uint8_t *src, size_t sstride, uint32_t sw, uint32_t y0, uint32_t rows,
		       const int32_t *bounds, const int32_t *kk, uint32_t ksize, uint32_t dw, uint8_t *dst,
		       size_t dstride)
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
			s = _mm_add_epi32(s, _mm_set1_epi32(1 << (PRECISION_BITS - 1)));
			store_rgb(s, out + (size_t)xx * 3);
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

/* Four taps of one output pixel: the 16 bytes at @b spread over int16 pairs, times weights @w (hi, lo). */
static inline void taps4(__m128i b, const __m256i *w, __m256i spread, __m256i *ah, __m256i *al)
{
	__m256i px = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(b), spread);

	*ah = _mm256_add_epi32(*ah, _mm256_madd_epi16(px, _mm256_load_si256(w)));
	*al = _mm256_add_epi32(*al, _mm256_madd_epi16(px, _mm256_load_si256(w + 1)));
}

/*
 * The horizontal pass, four taps per step with 16-bit multiply-adds: a weight k (22-bit fixed
 * point, |k| < 2^23) is split as k = kh x 2^11 + kl with 0 <= kl < 2^11, both halves fit
 * int16, and sum(p x k) = 2^11 x sum(p x kh) + sum(p x kl) exactly. Each 128-bit lane holds
 * two taps' R, G, B as int16 pairs (R_j, R_j+1, G_j, G_j+1, B_j, B_j+1, 0, 0), so one
 * _mm256_madd_epi16 does four taps of all three channels. The weights, laid out that way,
 * are made once per output column, not per row.
 *
 * Every output pixel runs the same number of steps (the most taps any has, in fours; the
 * extra taps weigh 0), so the loop's trip count never changes between pixels (a count that
 * alternates, as 4 and 5 taps do at a 2x downscale, costs a mispredicted branch a pixel);
 * two pixels go together, their two sums reduced and stored as one.
 */
void gv_hpass_rgb_avx2(const uint8_t *src, size_t sstride, uint32_t sw, uint32_t y0, uint32_t rows,
		       const int32_t *bounds, const int32_t *kk, uint32_t ksize, uint32_t dw, uint8_t *dst,
		       size_t dstride)
{
	const __m256i spread = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
						6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
	const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
	const size_t row_bytes = (size_t)sw * 3;
	size_t groups = 1;
	uint32_t fast_end = 0; /* pixels below it read only whole 16-byte loads inside the row */
	__m256i *wt;

	for (uint32_t xx = 0; xx < dw; xx++)
		if ((size_t)(bounds[2 * xx + 1] + 3) / 4 > groups)
			groups = (size_t)(bounds[2 * xx + 1] + 3) / 4;
	wt = aligned_alloc(32, sizeof(__m256i) * 2 * groups * dw + 32);
	if (!wt) { /* no memory for the laid-out weights: the two-tap path needs none */
		gv_hpass_rgb_avx2_mullo(src, sstride, sw, y0, rows, bounds, kk, ksize, dw, dst, dstride);
		return;
	}
	for (uint32_t xx = 0; xx < dw; xx++) {
		const int32_t *k = kk + (size_t)xx * ksize;
		int32_t n = bounds[2 * xx + 1];

		for (size_t g = 0; g < groups; g++) {
			int16_t hi[16] = { 0 }, lo[16] = { 0 };

			for (int t = 0; t < 4; t++) {
				int32_t x = (int32_t)(4 * g) + t, v = x < n ? k[x] : 0;
				int lane = t / 2, pos = t % 2;

				for (int c = 0; c < 3; c++) {
					hi[lane * 8 + 2 * c + pos] = (int16_t)(v >> 11);
					lo[lane * 8 + 2 * c + pos] = (int16_t)(v & 2047);
				}
			}
			memcpy(&wt[(xx * groups + g) * 2], hi, 32);
			memcpy(&wt[(xx * groups + g) * 2 + 1], lo, 32);
		}
		if ((size_t)(bounds[2 * xx] + 4 * (groups - 1)) * 3 + 16 <= row_bytes && fast_end == xx)
			fast_end = xx + 1; /* the first pixels' xmin only grows: a prefix */
	}
	for (uint32_t y = 0; y < rows; y++) {
		const uint8_t *in = src + (size_t)(y0 + y) * sstride;
		uint8_t *out = dst + (size_t)y * dstride;

		for (uint32_t xx = 0; xx < dw; xx += 2) {
			bool two = xx + 1 < dw;
			const __m256i *wa = &wt[(size_t)xx * groups * 2], *wb = two ? wa + groups * 2 : wa;
			size_t a = (size_t)bounds[2 * xx] * 3, b = two ? (size_t)bounds[2 * xx + 2] * 3 : a;
			__m256i aha = _mm256_setzero_si256(), ala = aha, ahb = aha, alb = aha, h, l, sum;
			uint32_t pa, pb;

			if (xx + 1 < fast_end) {
				for (size_t g = 0; g < groups; g++, a += 12, b += 12) {
					taps4(_mm_loadu_si128((const __m128i *)(const void *)(in + a)), wa + 2 * g, spread,
					      &aha, &ala);
					taps4(_mm_loadu_si128((const __m128i *)(const void *)(in + b)), wb + 2 * g, spread,
					      &ahb, &alb);
				}
			} else {
				for (size_t g = 0; g < groups; g++, a += 12, b += 12) {
					taps4(row_bytes16(in, a, row_bytes), wa + 2 * g, spread, &aha, &ala);
					taps4(row_bytes16(in, b, row_bytes), wb + 2 * g, spread, &ahb, &alb);
				}
			}
			/* lanes: [a's low half, b's low half] + [a's high half, b's high half] */
			h = _mm256_add_epi32(_mm256_permute2x128_si256(aha, ahb, 0x20), _mm256_permute2x128_si256(aha, ahb, 0x31));
			l = _mm256_add_epi32(_mm256_permute2x128_si256(ala, alb, 0x20), _mm256_permute2x128_si256(ala, alb, 0x31));
			sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h, 11), l), half);
			sum = _mm256_srai_epi32(sum, PRECISION_BITS);
			sum = _mm256_packus_epi16(_mm256_packs_epi32(sum, sum), sum);
			pa = (uint32_t)_mm256_extract_epi32(sum, 0);
			pb = (uint32_t)_mm256_extract_epi32(sum, 4);
			if (xx + 2 < dw) { /* 4 bytes each: the 4th is the next pixel's, written after */
				memcpy(out + (size_t)xx * 3, &pa, 4);
				memcpy(out + (size_t)xx * 3 + 3, &pb, 4);
			} else {
				memcpy(out + (size_t)xx * 3, &pa, two ? 4 : 3);
				if (two)
					memcpy(out + (size_t)xx * 3 + 3, &pb, 3);
			}
		}
	}
	free(wt);
}

/*
 * One output row of the vertical pass: @n source rows from @first (rows @sstride apart), weights
 * @k, over @row_bytes bytes; 32 bytes at a time in registers, the tail byte by byte.
 */
void gv_vrow_avx2(const uint8_t *first, size_t sstride, int32_t n, const int32_t *k, size_t row_bytes, uint8_t *out)
{
	const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
	size_t i = 0;

	for (; i + 32 <= row_bytes; i += 32) {
		__m256i a0 = half, a1 = half, a2 = half, a3 = half, r01, r23, r;

		for (int32_t y = 0; y < n; y++) {
			__m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(first + (size_t)y * sstride + i));
			__m256i w = _mm256_set1_epi32(k[y]);
			__m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);

			a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(lo), w));
			a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)), w));
			a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(hi), w));
			a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)), w));
		}
		a0 = _mm256_srai_epi32(a0, PRECISION_BITS);
		a1 = _mm256_srai_epi32(a1, PRECISION_BITS);
		a2 = _mm256_srai_epi32(a2, PRECISION_BITS);
		a3 = _mm256_srai_epi32(a3, PRECISION_BITS);
		/* packs work within 128-bit lanes: put the four back in order after */
		r01 = _mm256_packs_epi32(a0, a1);
		r23 = _mm256_packs_epi32(a2, a3);
		r = _mm256_packus_epi16(r01, r23);
		r = _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
		_mm256_storeu_si256((__m256i *)(void *)(out + i), r);
	}
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
