/*
 * Vision transforms (grist/vision.h) in C, under the sanitizers: the region decode against
 * TurboJPEG's full decode of the same files (made here by TurboJPEG's encoder), the C API's
 * checks, hostile headers refused before allocation, and a transformed feature in a row.
 * The comparisons with Pillow and torchvision live in tests/python/test_vision.py.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <zlib.h>

#include "helpers.h"
#include "features_loader.h"
#include "common/error.h"
#include "features/features_internal.h"
#include "features/vision_internal.h"
#include "grist/features.h"
#include "grist/format.h"
#include "grist/loader.h"
#include "grist/vision.h"

/* A smooth RGB image with noise, @h x @w, deterministic. */
static uint8_t *photo(int h, int w, uint64_t seed)
{
	uint8_t *p = malloc((size_t)h * w * 3), *noise = malloc((size_t)h * w * 3);

	assert_non_null(p);
	assert_non_null(noise);
	t_fill(noise, (size_t)h * w * 3, seed);
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			for (int c = 0; c < 3; c++) {
				double v = 127 + 90 * sin(x / (3.0 + 5 * c) + y / 7.0) + (noise[(y * w + x) * 3 + c] % 40) - 20;

				p[(y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
			}
	free(noise);
	return p;
}

/* TurboJPEG's encoding of @px; @gray makes a one-component file. */
static uint8_t *encode(const uint8_t *px, int h, int w, int subsamp, int flags, unsigned long *len)
{
	tjhandle t = tjInitCompress();
	unsigned char *out = NULL;
	uint8_t *copy;

	assert_non_null(t);
	assert_int_equal(tjCompress2(t, px, w, 0, h, TJPF_RGB, &out, len, subsamp, 88, flags), 0);
	copy = malloc(*len);
	memcpy(copy, out, *len);
	tjFree(out);
	tjDestroy(t);
	return copy;
}

static uint8_t *full_decode(const uint8_t *jpg, unsigned long len, int h, int w, int pf)
{
	tjhandle t = tjInitDecompress();
	uint8_t *out = malloc((size_t)h * w * tjPixelSize[pf]);

	assert_int_equal(tjDecompress2(t, jpg, len, out, w, 0, h, pf, 0), 0);
	tjDestroy(t);
	return out;
}

static void test_region_equals_full_decode(void **state)
{
	static const int subsamps[] = { TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_GRAY };
	static const int sizes[][2] = { { 77, 123 }, { 64, 64 }, { 250, 17 }, { 33, 301 } };

	(void)state;
	for (size_t s = 0; s < sizeof(subsamps) / sizeof(subsamps[0]); s++) {
		for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
			for (int prog = 0; prog < 2; prog++) {
				int h = sizes[z][0], w = sizes[z][1], gray = subsamps[s] == TJSAMP_GRAY;
				uint8_t *px = photo(h, w, 7 + s + z), *jpg, *full;
				unsigned long len;
				size_t ch = gray ? 1 : 3;
				uint32_t crops[][4] = { { 0, 0, (uint32_t)h, (uint32_t)w }, { 0, 0, 1, 1 },
							{ (uint32_t)h - 1, (uint32_t)w - 1, 1, 1 },
							{ 3, 5, (uint32_t)h - 4, (uint32_t)w - 9 },
							{ (uint32_t)h / 2, 16, (uint32_t)h - h / 2, (uint32_t)w - 16 },
							{ 1, (uint32_t)w / 3, 9, 1 } };

				jpg = encode(px, h, w, subsamps[s], prog ? TJFLAG_PROGRESSIVE : 0, &len);
				full = full_decode(jpg, len, h, w, gray ? TJPF_GRAY : TJPF_RGB);
				for (size_t k = 0; k < sizeof(crops) / sizeof(crops[0]); k++) {
					uint32_t top = crops[k][0], left = crops[k][1], ch_ = crops[k][2], cw = crops[k][3];
					uint8_t *got = malloc((size_t)ch_ * cw * ch);

					if (left + cw > (uint32_t)w)
						cw = (uint32_t)w - left;
					assert_int_equal(gv_jpeg_decode_region(jpg, len, top, left, ch_, cw, gray, got, cw * ch,
									       500), 0);
					for (uint32_t y = 0; y < ch_; y++)
						assert_memory_equal(got + (size_t)y * cw * ch,
								    full + ((size_t)(top + y) * w + left) * ch, cw * ch);
					free(got);
				}
				free(px);
				free(jpg);
				free(full);
			}
		}
	}
}

/* A JPEG whose SOF says @h x @w (the first SOF0/SOF2 marker patched). */
static void patch_size(uint8_t *jpg, unsigned long len, uint16_t h, uint16_t w)
{
	for (unsigned long i = 2; i + 9 < len; i++) {
		if (jpg[i] == 0xff && (jpg[i + 1] == 0xc0 || jpg[i + 1] == 0xc2)) {
			jpg[i + 5] = (uint8_t)(h >> 8);
			jpg[i + 6] = (uint8_t)h;
			jpg[i + 7] = (uint8_t)(w >> 8);
			jpg[i + 8] = (uint8_t)w;
			return;
		}
	}
	fail_msg("no SOF marker");
}

static void test_bad_images(void **state)
{
	struct grist_vision_transform t;
	uint8_t *px = photo(40, 48, 3), *jpg, out[16 * 16 * 3];
	unsigned long len;
	struct grist_vision_box box;

	(void)state;
	grist_vision_transform_init(&t);
	t.op = GRIST_VISION_RANDOM_RESIZED_CROP;
	t.out_height = t.out_width = 16;
	jpg = encode(px, 40, 48, TJSAMP_420, 0, &len);
	assert_int_equal(grist_vision_apply(&t, jpg, len, 0, 1, "image", out, sizeof(out), &box), 0);
	assert_true(box.top >= 0 && box.top + box.height <= 40 && box.left + box.width <= 48);

	/* a header claiming 60000 x 60000 is refused before anything is allocated */
	patch_size(jpg, len, 60000, 60000);
	assert_int_equal(grist_vision_apply(&t, jpg, len, 0, 1, "image", out, sizeof(out), NULL), -EFBIG);
	assert_non_null(strstr(grist_last_error(), "max_pixels"));
	/* a size within max_pixels that the data does not fill: an error, not gray rows */
	patch_size(jpg, len, 2000, 1500);
	assert_int_equal(grist_vision_apply(&t, jpg, len, 0, 1, "image", out, sizeof(out), NULL), -EBADMSG);
	patch_size(jpg, len, 0, 48);
	assert_int_equal(grist_vision_apply(&t, jpg, len, 0, 1, "image", out, sizeof(out), NULL), -EBADMSG);
	patch_size(jpg, len, 40, 48);
	/* truncated, a wrong marker, no image at all */
	assert_int_equal(grist_vision_apply(&t, jpg, len / 2, 0, 1, "image", out, sizeof(out), NULL), -EBADMSG);
	jpg[3] = 0x01;
	assert_int_equal(grist_vision_apply(&t, jpg, len, 0, 1, "image", out, sizeof(out), NULL), -EBADMSG);
	assert_int_equal(grist_vision_apply(&t, (const uint8_t *)"GIF89a", 6, 0, 1, "image", out, sizeof(out), NULL),
			 -EBADMSG);
	assert_int_equal(grist_vision_apply(&t, jpg, 0, 0, 1, "image", out, sizeof(out), NULL), -EBADMSG);
	free(jpg);

	/* a progressive file past the scan limit */
	jpg = encode(px, 40, 48, TJSAMP_420, TJFLAG_PROGRESSIVE, &len);
	assert_int_equal(grist_vision_apply(&t, jpg, len, 0, 1, "image", out, sizeof(out), NULL), 0);
	t.scan_limit = 2;
	assert_int_equal(grist_vision_apply(&t, jpg, len, 0, 1, "image", out, sizeof(out), NULL), -EFBIG);
	assert_non_null(strstr(grist_last_error(), "scan limit"));
	free(jpg);
	free(px);
}

/*
 * A PNG, @h x @w, of colour type @ct (0 gray, 2 RGB, 4 gray+alpha, 6 RGBA) and @depth
 * bits (8 or 16): samples from @seed (0: a ramp), each row's filter byte cycling through
 * all five (valid whatever the bytes), one IDAT (zlib's own stream).
 */
static uint8_t *png_make(uint32_t h, uint32_t w, int ct, int depth, uint64_t seed, size_t *len)
{
	size_t c = ct == 0 ? 1 : ct == 2 ? 3 : ct == 4 ? 2 : 4, line = 1 + (size_t)w * c * (size_t)depth / 8;
	size_t raw_len = (size_t)h * line, at = 0;
	uint8_t *raw = malloc(raw_len), *p;
	uLongf z = compressBound(raw_len);
	static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	uint8_t ihdr[13] = { 0 };

	assert_non_null(raw);
	if (seed)
		t_fill(raw, raw_len, seed);
	else
		for (size_t i = 0; i < raw_len; i++)
			raw[i] = (uint8_t)(i % 251);
	for (uint32_t y = 0; y < h; y++)
		raw[(size_t)y * line] = seed ? (uint8_t)(y % 5) : 0;
	p = malloc(8 + 25 + 12 + z + 12);
	assert_non_null(p);
	memcpy(p, sig, 8);
	at = 8;
	for (int i = 0; i < 4; i++)
		ihdr[i] = (uint8_t)(w >> (24 - 8 * i)), ihdr[4 + i] = (uint8_t)(h >> (24 - 8 * i));
	ihdr[8] = (uint8_t)depth, ihdr[9] = (uint8_t)ct;
	/* chunk: length, type, data, CRC over type and data */
	for (int k = 0; k < 3; k++) {
		const char *type = k == 0 ? "IHDR" : k == 1 ? "IDAT" : "IEND";
		uint8_t *d = p + at + 8;
		uLongf n = 0;

		memcpy(p + at + 4, type, 4);
		if (k == 0)
			memcpy(d, ihdr, n = 13);
		else if (k == 1)
			assert_int_equal(compress2(d, (n = z, &n), raw, raw_len, 1), Z_OK);
		for (int i = 0; i < 4; i++)
			p[at + i] = (uint8_t)(n >> (24 - 8 * i));
		uLong crc = crc32(crc32(0, NULL, 0), p + at + 4, 4 + (uInt)n);
		for (int i = 0; i < 4; i++)
			d[n + i] = (uint8_t)(crc >> (24 - 8 * i));
		at += 12 + n;
	}
	free(raw);
	*len = at;
	return p;
}

/* An 8-bit RGB PNG of a ramp, every row unfiltered. */
static uint8_t *png_rgb(uint32_t h, uint32_t w, size_t *len)
{
	return png_make(h, w, 2, 8, 0, len);
}

/*
 * The PNG region decode (rows read one by one, none past the region's last) equals the
 * whole image decoded then cropped, for every colour type at 8 and 16 bits and crops at
 * each edge; and an 8-bit RGB file's whole decode equals the features stage's own decoder.
 */
static void test_png_region_equals_full_decode(void **state)
{
	static const int kinds[][2] = { { 0, 8 }, { 2, 8 }, { 4, 8 }, { 6, 8 }, { 0, 16 }, { 2, 16 }, { 4, 16 }, { 6, 16 } };
	const uint32_t h = 37, w = 29;
	const uint32_t crops[][4] = { { 0, 0, 37, 29 }, { 0, 0, 1, 1 }, { 36, 28, 1, 1 }, { 5, 3, 20, 11 },
				      { 0, 10, 37, 5 }, { 30, 0, 7, 29 }, { 17, 0, 1, 29 } };
	uint8_t full[37 * 29 * 3], got[37 * 29 * 3];

	(void)state;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		size_t len;
		uint8_t *png = png_make(h, w, kinds[k][0], kinds[k][1], 11 + k, &len);
		struct gv_png dec;

		assert_int_equal(gv_png_open(&dec, png, len), 0);
		assert_int_equal(dec.height, h);
		assert_int_equal(dec.sample_bytes, (uint32_t)kinds[k][1] / 8);
		assert_int_equal(gv_png_read_region(&dec, 0, 0, h, w, full, (size_t)w * 3), 0);
		if (kinds[k][0] == 2 && kinds[k][1] == 8) {
			struct gf_image im;
			uint8_t direct[37 * 29 * 3];

			assert_int_equal(gf_image_open(&im, GRIST_DECODE_PNG, png, len), 0);
			assert_int_equal(gf_image_decode(&im, direct, (size_t)w * 3), 0);
			assert_memory_equal(direct, full, sizeof(direct));
		}
		for (size_t c = 0; c < sizeof(crops) / sizeof(crops[0]); c++) {
			const uint32_t *r = crops[c];

			assert_int_equal(gv_png_open(&dec, png, len), 0);
			assert_int_equal(gv_png_read_region(&dec, r[0], r[1], r[2], r[3], got, (size_t)r[3] * 3), 0);
			for (uint32_t y = 0; y < r[2]; y++)
				assert_memory_equal(got + (size_t)y * r[3] * 3, full + ((size_t)(r[0] + y) * w + r[1]) * 3,
						    (size_t)r[3] * 3);
			/*
			 * pulled (gv_png_pull): overlapping windows of 1-4 rows, steps of 0-4 rows (rows kept,
			 * rows never asked for decoded and dropped), each window the full decode's rows
			 */
			assert_int_equal(gv_png_open(&dec, png, len), 0);
			assert_int_equal(gv_png_begin_region(&dec, r[0], r[1], r[2], r[3]), 0);
			for (uint32_t y = 0, i = 0; y < r[2]; y += (i * 7) % 5, i++) {
				uint32_t n = 1 + (i * 3) % 4 < r[2] - y ? 1 + (i * 3) % 4 : r[2] - y;
				const uint8_t *rows;
				size_t pitch;

				assert_int_equal(gv_png_pull(&dec, y, n, &rows, &pitch), 0);
				for (uint32_t k = 0; k < n; k++)
					assert_memory_equal(rows + k * pitch,
							    full + ((size_t)(r[0] + y + k) * w + r[1]) * 3, (size_t)r[3] * 3);
			}
			gv_png_close(&dec);
		}
		/* a region outside the image is refused, and the PNG released */
		assert_int_equal(gv_png_open(&dec, png, len), 0);
		assert_int_equal(gv_png_read_region(&dec, 30, 0, 8, 29, got, (size_t)w * 3), -EINVAL);
		/* truncated inside the region's rows: an error, not gray rows */
		assert_int_equal(gv_png_open(&dec, png, len / 2), 0);
		assert_int_equal(gv_png_read_region(&dec, 0, 0, h, w, full, (size_t)w * 3), -EBADMSG);
		free(png);
	}
}

/*
 * The AVX2 passes give the portable passes' bytes (which are Pillow's arithmetic, step for
 * step: test_vision.py checks those against Pillow itself), for up- and downscales, odd widths
 * (the 8-pixel blocks' remainders), 1-pixel edges, windows, and both filters.
 */
static void test_resize_avx2_is_portable(void **state)
{
	static const uint32_t sizes[][8] = {
		/* sh, sw, full_h, full_w, y0, x0, dh, dw */
		{ 97, 131, 224, 224, 0, 0, 224, 224 }, { 375, 500, 224, 224, 0, 0, 224, 224 },
		{ 480, 97, 224, 224, 0, 0, 224, 224 }, { 61, 800, 23, 37, 0, 0, 23, 37 },
		{ 224, 224, 224, 224, 0, 0, 224, 224 }, { 300, 413, 224, 229, 0, 0, 224, 229 },
		{ 97, 131, 97, 9, 0, 0, 97, 9 }, { 131, 97, 7, 97, 0, 0, 7, 97 },
		{ 2, 1, 5, 3, 0, 0, 5, 3 }, { 1, 29, 1, 1, 0, 0, 1, 1 }, { 600, 17, 224, 15, 0, 0, 224, 15 },
		{ 375, 500, 256, 341, 16, 58, 224, 224 }, { 800, 533, 224, 224, 3, 5, 200, 211 },
		/* upscales: the two-tap pass (an odd width's last pair, a 2- and a 1-pixel-wide source) */
		{ 61, 150, 70, 229, 0, 0, 70, 229 }, { 5, 2, 9, 7, 0, 0, 9, 7 }, { 9, 1, 4, 33, 0, 0, 4, 33 },
		{ 160, 160, 224, 224, 0, 0, 224, 224 }, { 160, 160, 260, 300, 20, 40, 224, 224 },
	};
	uint8_t *a = malloc(224 * 341 * 3), *b = malloc(224 * 341 * 3), *img = photo(800, 800, 11);

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	if (!gv_have_avx2()) {
		free(a);
		free(b);
		free(img);
		skip();
	}
	/*
	 * gray, 2 and 4 channels: the portable horizontal pass, the AVX2 vertical one (no caller
	 * resizes 2 or 4 channels today, vision and convert --max-side make 1 or 3; the resize
	 * takes them). Odd rounds mirrored (the flip), through the row sink's path.
	 */
	for (int round = 0; round < 10; round++) {
		enum grist_vision_interp in = round % 2 ? GRIST_VISION_BICUBIC : GRIST_VISION_BILINEAR;
		uint32_t c = round < 4 ? 3 : round < 6 ? 1 : round < 8 ? 2 : 4;
		bool flip = round % 2;

		if (round == 2) /* noise: bicubic's negative lobes overshoot, both clamps run */
			t_fill(img, 800 * 800 * 3, 12);
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			const uint32_t *s = sizes[i];
			size_t n = (size_t)s[6] * s[7] * c;

			memset(a, 0xa5, n);
			memset(b, 0x5a, n);
			/* Pillow's weights, then the 15-bit horizontal ones (GV_RESIZE_W16): the same bytes either way */
			for (unsigned w16 = 0; w16 <= GV_RESIZE_W16; w16 += GV_RESIZE_W16) {
				struct gv_src src = { img, 800 * 3, NULL, NULL };

				memset(a, 0xa5, n);
				memset(b, 0x5a, n);
				assert_int_equal(gv_resize_rows_src(&src, s[0], s[1], c, s[2], s[3], s[4], s[5], s[6], s[7],
								    in, flip, a, (size_t)s[7] * c, NULL,
								    GV_RESIZE_SIMD | w16),
						 0);
				assert_int_equal(gv_resize_rows_src(&src, s[0], s[1], c, s[2], s[3], s[4], s[5], s[6], s[7],
								    in, flip, b, (size_t)s[7] * c, NULL, w16),
						 0);
				if (memcmp(a, b, n))
					fail_msg("%s %ux%ux%u -> %ux%u (window %ux%u at %u, %u)%s%s: AVX2 differs from the "
						 "portable pass",
						 round % 2 ? "bicubic" : "bilinear", s[0], s[1], c, s[2], s[3], s[6], s[7], s[4],
						 s[5], flip ? ", flipped" : "", w16 ? ", 15-bit weights" : "");
			}
		}
	}
	free(a);
	free(b);
	free(img);
}

/*
 * The 15-bit horizontal weights (GV_RESIZE_W16, the transform's default) against Pillow's
 * 22-bit ones (whose bytes the Python tests find equal to Pillow's): within 1 level, over
 * many sizes (random up- and downscales to 1 x 1, odd factors, 1-pixel sources), on a photo
 * and on noise, 1 and 3 channels, with and without AVX2; and few values differ at all (under
 * 1%: a horizontal sum moves by at most ksize x 255 x 2^-16 levels). Bilinear only: bicubic
 * keeps Pillow's weights under GV_RESIZE_W16 (resize_core() says why), its bytes checked equal.
 */
static void test_resize_w16_within_a_level(void **state)
{
	uint8_t *img = photo(420, 420, 5), *noise = malloc(420 * 420 * 3), *a = malloc(420 * 420 * 3),
		*b = malloc(420 * 420 * 3);
	uint64_t r = 0x9e3779b97f4a7c15ull;
	size_t differ = 0, total = 0;

	(void)state;
	assert_non_null(noise);
	assert_non_null(a);
	assert_non_null(b);
	t_fill(noise, 420 * 420 * 3, 7);
	for (int i = 0; i < 240; i++) {
		uint32_t v[4], c = i % 4 == 3 ? 1 : 3;
		enum grist_vision_interp in = i % 2 ? GRIST_VISION_BICUBIC : GRIST_VISION_BILINEAR;
		const uint8_t *px = i % 3 == 2 ? noise : img;

		for (int k = 0; k < 4; k++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			/* a side of 1-8 one time in eight, else 1-420 */
			v[k] = (uint32_t)(r >> 33) % ((r >> 20) % 8 ? 420 : 8) + 1;
		}
		for (int simd = 0; simd < 2; simd++) {
			struct gv_src src = { px, 420 * 3, NULL, NULL };
			unsigned how = simd ? GV_RESIZE_SIMD : 0;
			size_t n = (size_t)v[2] * v[3] * c;

			if (simd && !gv_have_avx2())
				continue;
			assert_int_equal(gv_resize_rows_src(&src, v[0], v[1], c, v[2], v[3], 0, 0, v[2], v[3], in, false, a,
							    (size_t)v[3] * c, NULL, how),
					 0);
			assert_int_equal(gv_resize_rows_src(&src, v[0], v[1], c, v[2], v[3], 0, 0, v[2], v[3], in, false, b,
							    (size_t)v[3] * c, NULL, how | GV_RESIZE_W16),
					 0);
			for (size_t j = 0; j < n; j++) {
				int d = (int)a[j] - (int)b[j];

				if (d > 1 || d < -1 || (d && in == GRIST_VISION_BICUBIC))
					fail_msg("%s %ux%ux%u -> %ux%u: %d levels off Pillow's weights at byte %zu",
						 i % 2 ? "bicubic" : "bilinear", v[0], v[1], c, v[2], v[3], d, j);
				differ += d != 0;
			}
			total += n;
		}
	}
	if (differ * 100 >= total)
		fail_msg("%zu of %zu values differ from Pillow's weights' (1%% or more)", differ, total);
	free(a);
	free(b);
	free(noise);
	free(img);
}

/* A gv_rows sink that stores each row it is handed at its place in a packed image. */
struct collect {
	uint8_t *img;
	size_t row;
	uint32_t next;
};

static void collect_row(void *ctx, uint32_t y, const uint8_t *row)
{
	struct collect *c = ctx;

	assert_int_equal(y, c->next); /* in order, each once */
	c->next++;
	memcpy(c->img + y * c->row, row, c->row);
}

/*
 * The resize's row sink and its flip against the plain resize into an image, mirrored here
 * pixel by pixel: the same bytes for every filter (Pillow's passes, area, TF's kernels, a
 * pass skipped, the very tall image's two resizes), 1 to 4 channels, up and down, windows.
 */
static void test_resize_rows_sink(void **state)
{
	static const uint32_t sizes[][8] = {
		/* sh, sw, full_h, full_w, y0, x0, dh, dw */
		{ 97, 131, 37, 41, 0, 0, 37, 41 },  { 30, 41, 37, 45, 0, 0, 37, 45 }, { 41, 41, 41, 41, 0, 0, 41, 41 },
		{ 41, 50, 41, 23, 0, 0, 41, 23 },   { 50, 23, 17, 23, 0, 0, 17, 23 }, { 1, 1, 3, 5, 0, 0, 3, 5 },
		{ 90, 64, 40, 33, 3, 5, 30, 21 },   { 400, 3, 5, 2, 0, 0, 5, 2 },     { 7, 9, 1, 1, 0, 0, 1, 1 },
	};
	static const enum grist_vision_interp interps[] = { GRIST_VISION_BILINEAR, GRIST_VISION_BICUBIC,
							    GRIST_VISION_AREA, GRIST_VISION_BILINEAR_TF };
	uint8_t *img = photo(400, 131, 21), *plain = malloc(64 * 64 * 4), *want = malloc(64 * 64 * 4),
		*got = malloc(64 * 64 * 4);

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (uint32_t c = 1; c <= 4; c++)
			for (size_t f = 0; f < sizeof(interps) / sizeof(interps[0]); f++)
				for (int flip = 0; flip < 2; flip++)
					for (int sink = 0; sink < 2; sink++) {
						const uint32_t *s = sizes[i];
						size_t row = (size_t)s[7] * c;
						struct collect col = { got, row, 0 };
						struct gv_rows rows = { collect_row, &col };

						assert_int_equal(gv_resize_window(img, s[0], s[1], 131 * 3, c, s[2], s[3], s[4], s[5],
										  plain, s[6], s[7], row, interps[f]),
								 0);
						for (uint32_t y = 0; y < s[6]; y++)
							for (uint32_t x = 0; x < s[7]; x++)
								memcpy(want + y * row + x * c,
								       plain + y * row + (flip ? s[7] - 1 - x : x) * c, c);
						memset(got, 0x33, row * s[6]);
						assert_int_equal(gv_resize_rows(img, s[0], s[1], 131 * 3, c, s[2], s[3], s[4], s[5],
										s[6], s[7], interps[f], flip, sink ? NULL : got, row,
										sink ? &rows : NULL),
								 0);
						assert_int_equal(col.next, sink ? s[6] : 0);
						if (memcmp(got, want, row * s[6]))
							fail_msg("%ux%ux%u -> %ux%u, filter %d, flip %d, sink %d: not the plain resize",
								 s[0], s[1], c, s[6], s[7], (int)interps[f], flip, sink);
					}
	free(img);
	free(plain);
	free(want);
	free(got);
}

/* A gv_src pull over a packed image: each call's rows copied into a buffer of exactly their size (freed at the next). */
struct puller {
	const uint8_t *img;
	size_t stride, row;
	uint32_t next, calls;
	uint8_t *rows;
};

static int pull_copy(void *ctx, uint32_t y, uint32_t n, const uint8_t **rows, size_t *stride)
{
	struct puller *p = ctx;

	assert_true(y >= p->next && n > 0); /* in order, each row once */
	p->next = y + n;
	p->calls++;
	free(p->rows);
	p->rows = malloc((size_t)n * p->row);
	assert_non_null(p->rows);
	for (uint32_t i = 0; i < n; i++)
		memcpy(p->rows + (size_t)i * p->row, p->img + (size_t)(y + i) * p->stride, p->row);
	*rows = p->rows;
	*stride = p->row;
	return 0;
}

static int pull_fail(void *ctx, uint32_t y, uint32_t n, const uint8_t **rows, size_t *stride)
{
	struct puller *p = ctx;

	if (p->calls == 3) /* the fourth pull fails (pull_copy counts the others) */
		return grist_fail(-EBADMSG, "pull_fail: row %u", y);
	return pull_copy(ctx, y, n, rows, stride);
}

/*
 * A pulled source (gv_src): the same bytes as the resize of the whole image, every filter
 * (both passes streamed; one pass, area, TF's kernels, the very tall image: all rows pulled
 * at once), 1 and 3 channels, flipped or not, AVX2 and portable; each row pulled once, in
 * order, read only while it is the last pull's (a buffer of exactly those rows, freed at the
 * next pull: ASan sees a read of any other). A failed pull is the resize's error.
 */
static void test_resize_pulled_source(void **state)
{
	static const uint32_t sizes[][8] = {
		/* sh, sw, full_h, full_w, y0, x0, dh, dw */
		{ 375, 500, 224, 224, 0, 0, 224, 224 }, { 97, 131, 37, 41, 0, 0, 37, 41 },
		{ 61, 150, 70, 229, 0, 0, 70, 229 },    { 400, 131, 23, 19, 0, 0, 23, 19 },
		{ 90, 64, 40, 33, 3, 5, 30, 21 },       { 41, 50, 41, 23, 0, 0, 41, 23 },
		{ 50, 23, 17, 23, 0, 0, 17, 23 },       { 400, 3, 5, 2, 0, 0, 5, 2 },
		{ 41, 41, 41, 41, 0, 0, 41, 41 },       { 2, 1, 5, 3, 0, 0, 5, 3 },
	};
	static const enum grist_vision_interp interps[] = { GRIST_VISION_BILINEAR, GRIST_VISION_BICUBIC,
							    GRIST_VISION_AREA, GRIST_VISION_BILINEAR_TF };
	uint8_t *img = photo(400, 500, 23), *want = malloc(224 * 229 * 3), *got = malloc(224 * 229 * 3);

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (uint32_t c = 1; c <= 3; c += 2)
			for (size_t f = 0; f < sizeof(interps) / sizeof(interps[0]); f++)
				for (int v = 0; v < 4; v++) {
					const uint32_t *s = sizes[i];
					bool flip = v & 1, simd = v & 2 ? gv_have_avx2() : false;
					size_t row = (size_t)s[7] * c;
					struct puller p = { img, 500 * 3, (size_t)s[1] * c, 0, 0, NULL };
					struct gv_src src = { NULL, 0, pull_copy, &p };

					assert_int_equal(gv_resize_rows_with(img, s[0], s[1], 500 * 3, c, s[2], s[3], s[4], s[5],
									     s[6], s[7], interps[f], flip, want, row, NULL, simd),
							 0);
					memset(got, 0x33, row * s[6]);
					assert_int_equal(gv_resize_rows_src(&src, s[0], s[1], c, s[2], s[3], s[4], s[5], s[6], s[7],
									    interps[f], flip, got, row, NULL, simd),
							 0);
					free(p.rows);
					if (memcmp(got, want, row * s[6]))
						fail_msg("%ux%ux%u -> %ux%u, filter %d, flip %d, simd %d: a pulled source differs",
							 s[0], s[1], c, s[6], s[7], (int)interps[f], flip, simd);
					if (i == 0 && f == 0)
						assert_true(p.calls > 100); /* streamed, not one pull */
				}
	{
		struct puller p = { img, 500 * 3, 500 * 3, 0, 0, NULL };
		struct gv_src src = { NULL, 0, pull_fail, &p };

		assert_int_equal(gv_resize_rows_src(&src, 375, 500, 3, 224, 224, 0, 0, 224, 224, GRIST_VISION_BILINEAR,
						    false, got, 224 * 3, NULL, gv_have_avx2()),
				 -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "pull_fail"));
		free(p.rows);
	}
	free(img);
	free(want);
	free(got);
}

/*
 * A JPEG region pulled in batches of odd sizes, with rows skipped (never asked for) and
 * batches past the read-ahead (rows kept, the buffer grown under them): each batch the
 * full decode's rows, for 4:2:0, 4:4:4, gray (as RGB and as gray), progressive and CMYK.
 * A truncated file fails in the pull that reaches the damage, with libjpeg's message.
 */
static void test_jpeg_pull(void **state)
{
	static const uint32_t batches[] = { 1, 3, 2, 40, 7, 64, 5, 200 };
	const int h = 260, w = 1500;
	uint8_t *px = photo(h, w, 5);

	(void)state;
	for (int k = 0; k < 5; k++) {
		int sub = k == 1 ? TJSAMP_444 : k == 2 || k == 3 ? TJSAMP_GRAY : TJSAMP_420;
		bool gray_out = k == 3;
		size_t ch = gray_out ? 1 : 3;
		unsigned long len;
		uint8_t *jpg = encode(px, h, w, sub, k == 4 ? TJFLAG_PROGRESSIVE : 0, &len);
		uint8_t *full = full_decode(jpg, len, h, w, gray_out ? TJPF_GRAY : TJPF_RGB);
		uint32_t top = 11, left = 37, rh = 240, rw = 1401, y = 0;
		struct gv_jpeg_info info;
		struct gv_jpeg *j;

		assert_int_equal(gv_jpeg_open(jpg, len, 500, &j, &info), 0);
		assert_int_equal(gv_jpeg_begin_region(j, 1, false, top, left, rh, rw, gray_out), 0);
		for (int b = 0; y < rh; b++) {
			uint32_t n = batches[b % 8] < rh - y ? batches[b % 8] : rh - y;
			const uint8_t *rows;
			size_t pitch;

			assert_int_equal(gv_jpeg_pull(j, y, n, &rows, &pitch), 0);
			for (uint32_t i = 0; i < n; i++)
				if (memcmp(rows + i * pitch, full + ((size_t)(top + y + i) * w + left) * ch, rw * ch))
					fail_msg("kind %d: region row %u (a batch of %u from %u) differs", k, y + i, n, y);
			y += n + (b % 3 == 2 ? 9 : 0); /* every third batch, 9 rows never asked for */
		}
		gv_jpeg_close(j);
		gv_jpeg_release(j);
		free(full);
		free(jpg);
	}
	{
		/* CMYK: made RGB in place as the rows are pulled; the same as the whole region read at once */
		uint8_t *cmyk = malloc((size_t)64 * 96 * 4), *want = malloc((size_t)40 * 50 * 3);
		const uint8_t *rows;
		unsigned char *out = NULL;
		unsigned long len = 0;
		tjhandle t = tjInitCompress();
		struct gv_jpeg_info info;
		struct gv_jpeg *j;
		size_t pitch;

		t_fill(cmyk, (size_t)64 * 96 * 4, 3);
		assert_int_equal(tjCompress2(t, cmyk, 96, 0, 64, TJPF_CMYK, &out, &len, TJSAMP_444, 90, 0), 0);
		tjDestroy(t);
		assert_int_equal(gv_jpeg_decode_region(out, len, 10, 20, 40, 50, false, want, 50 * 3, 500), 0);
		assert_int_equal(gv_jpeg_open(out, len, 500, &j, &info), 0);
		assert_int_equal(gv_jpeg_begin_region(j, 1, false, 10, 20, 40, 50, false), 0);
		for (uint32_t y = 0; y < 40; y += 3) {
			uint32_t n = 40 - y < 3 ? 40 - y : 3;

			assert_int_equal(gv_jpeg_pull(j, y, n, &rows, &pitch), 0);
			for (uint32_t i = 0; i < n; i++)
				assert_memory_equal(rows + i * pitch, want + (size_t)(y + i) * 50 * 3, 50 * 3);
		}
		gv_jpeg_close(j);
		/* cut short: the pull that reaches the cut fails */
		assert_int_equal(gv_jpeg_open(out, len * 2 / 3, 500, &j, &info), 0);
		assert_int_equal(gv_jpeg_begin_region(j, 1, false, 0, 0, 64, 96, false), 0);
		assert_int_equal(gv_jpeg_pull(j, 0, 64, &rows, &pitch), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "JPEG does not decode"));
		gv_jpeg_close(j);
		gv_jpeg_release(j);
		tjFree(out);
		free(cmyk);
		free(want);
	}
	free(px);
}

/*
 * The output stage, fused into the resize's rows, against the unfused one written out here:
 * the uint8 HWC output of the same transform (flipped or not: the same box and flip), then
 * (x / 255 - mean) / std in float32, rounded to float16 or bfloat16, laid out HWC or CHW. To
 * the bit, for each dtype, layout, channel count, flip and filter, on odd sizes (the vector
 * rows' tails), with and without normalize, for ImageNet's mean and std and another set
 * (float32's division-free form, checked per transform, is exact for both; it fails here when
 * its correction step is dropped).
 */
static void test_output_stage(void **state)
{
	static const uint32_t outs[][2] = { { 17, 23 }, { 5, 3 }, { 1, 1 }, { 32, 8 }, { 9, 41 } };
	static const enum grist_dtype dtypes[] = { GRIST_DTYPE_FLOAT32, GRIST_DTYPE_FLOAT16, GRIST_DTYPE_BFLOAT16,
						   GRIST_DTYPE_UINT8 };
	static const float means[2][3] = { { 0.485f, 0.456f, 0.406f }, { 0.1f, 0.7f, 0.333f } };
	static const float stds[2][3] = { { 0.229f, 0.224f, 0.225f }, { 0.0171f, 3.3f, 0.999f } };
	uint8_t *px = photo(120, 90, 8), *jpg, u8[41 * 32 * 3];
	unsigned long len;
	uint8_t got[41 * 32 * 3 * 4], want[41 * 32 * 3 * 4];
	struct grist_vision_transform t, u;
	struct grist_vision_box b1, b2;

	(void)state;
	jpg = encode(px, 120, 90, TJSAMP_420, 0, &len);
	for (size_t o = 0; o < sizeof(outs) / sizeof(outs[0]); o++)
		for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++)
			for (int variant = 0; variant < 8; variant++) {
				uint32_t oh = outs[o][0], ow = outs[o][1], nc = variant & 1 ? 1 : 3;
				size_t esz = gf_dtype_bytes(dtypes[d]), plane = (size_t)oh * ow;

				grist_vision_transform_init(&t);
				t.op = variant & 4 ? GRIST_VISION_RESIZE : GRIST_VISION_RANDOM_RESIZED_CROP;
				t.interp = o % 2 ? GRIST_VISION_BICUBIC : o == 4 ? GRIST_VISION_AREA : GRIST_VISION_BILINEAR;
				t.out_height = oh;
				t.out_width = ow;
				t.channels = nc;
				t.flip = variant & 4 ? 1.0 : 0.5;
				t.layout = variant & 2 ? GRIST_VISION_CHW : GRIST_VISION_HWC;
				t.dtype = dtypes[d];
				t.normalize = dtypes[d] != GRIST_DTYPE_UINT8 && variant != 6;
				memcpy(t.mean, means[o % 2], sizeof(t.mean));
				memcpy(t.std, stds[o % 2], sizeof(t.std));
				u = t;
				u.dtype = GRIST_DTYPE_UINT8;
				u.layout = GRIST_VISION_HWC;
				u.normalize = false;
				for (uint64_t i = 0; i < 4; i++) {
					assert_int_equal(grist_vision_apply(&t, jpg, len, 0, i, "image", got, sizeof(got), &b1), 0);
					assert_int_equal(grist_vision_apply(&u, jpg, len, 0, i, "image", u8, sizeof(u8), &b2), 0);
					assert_memory_equal(&b1, &b2, sizeof(b1));
					for (size_t y = 0; y < oh; y++)
						for (size_t x = 0; x < ow; x++)
							for (size_t c = 0; c < nc; c++) {
								size_t at = t.layout == GRIST_VISION_CHW ? c * plane + y * ow + x
													 : (y * ow + x) * nc + c;
								uint8_t v = u8[(y * ow + x) * nc + c];
								float f = (float)v / 255.0f;
								uint16_t h;

								if (t.normalize)
									f = (f - t.mean[c]) / t.std[c];
								h = dtypes[d] == GRIST_DTYPE_BFLOAT16 ? gf_float_to_bfloat16(f)
												      : gf_float_to_half(f);
								if (esz == 1)
									want[at] = v;
								else if (esz == 4)
									memcpy(want + at * 4, &f, 4);
								else
									memcpy(want + at * 2, &h, 2);
							}
					if (memcmp(got, want, plane * nc * esz))
						fail_msg("%ux%ux%u dtype %d %s flip %d normalize %d image %llu: not the unfused output",
							 oh, ow, nc, (int)dtypes[d], variant & 2 ? "CHW" : "HWC", b1.flipped,
							 t.normalize, (unsigned long long)i);
				}
			}
	free(jpg);
	free(px);
}

/*
 * The output stage's plan (vision.c: the float32 path and its FMA check, the float16 and
 * bfloat16 tables) is made with the transform and read by every thread. Transforms that
 * differ in one of its values each, applied in turns in one thread and in two threads at
 * once, give the bytes a fresh thread gives; each pair of neighbours in the list gives other
 * bytes, so a plan shared with the wrong transform would show. The same through a features
 * spec: one record with the image under each transform's feature (plans made at attach),
 * decoded in two threads at once, each column grist_vision_apply()'s bytes.
 */
#define PLAN_N 9
#define PLAN_OUT (32 * 24 * 3 * 4)

struct plan_job {
	const uint8_t *jpg;
	unsigned long len;
	const struct grist_vision_transform *t;
	const int *order;
	size_t n;
	uint8_t (*fresh)[PLAN_OUT]; /* fresh[i]: transform i's bytes; written, or with @check compared */
	bool check;
	int ret;
	int bad; /* with @check: 1 + the first step whose bytes were not fresh[i]'s */
};

static void *plan_run(void *arg)
{
	struct plan_job *j = arg;
	uint8_t out[PLAN_OUT];

	for (size_t k = 0; k < j->n && !j->ret && !j->bad; k++) {
		int i = j->order[k];

		memset(out, 0, sizeof(out));
		j->ret = grist_vision_apply(&j->t[i], j->jpg, j->len, 0, 3, "image", j->check ? out : j->fresh[i],
					    PLAN_OUT, NULL);
		if (!j->ret && j->check && memcmp(out, j->fresh[i], PLAN_OUT))
			j->bad = (int)k + 1;
	}
	return NULL;
}

/* @fn(@a) and @fn(@b) in two threads at once, both joined. */
static void two_threads(void *(*fn)(void *), void *a, void *b)
{
	pthread_t ta, tb;

	assert_int_equal(pthread_create(&ta, NULL, fn, a), 0);
	assert_int_equal(pthread_create(&tb, NULL, fn, b), 0);
	assert_int_equal(pthread_join(ta, NULL), 0);
	assert_int_equal(pthread_join(tb, NULL), 0);
}

struct plan_rows {
	const struct grist_features_decoder *d;
	const uint8_t *rec;
	size_t rec_len, row_bytes;
	const uint8_t *want; /* the row every decode must give */
	int ret, bad;        /* bad: 1 + the first round whose row was not @want */
};

static void *plan_rows_run(void *arg)
{
	struct plan_rows *r = arg;
	uint8_t *row = malloc(r->row_bytes);
	size_t got;

	if (!row) {
		r->ret = -ENOMEM;
		return NULL;
	}
	for (int k = 0; k < 20 && !r->ret && !r->bad; k++) {
		memset(row, 0, r->row_bytes);
		r->ret = grist_features_decode(r->d, r->rec, r->rec_len, 0, 3, row, r->row_bytes, &got);
		if (!r->ret && memcmp(row, r->want, r->row_bytes))
			r->bad = k + 1;
	}
	free(row);
	return NULL;
}

/* test_output_plan_cache's transforms @t, each on its own feature of one record (see there). */
static void plan_features(const uint8_t *jpg, unsigned long len, const struct grist_vision_transform *t)
{
	struct grist_features *f;
	struct grist_features_decoder *d;
	struct grist_example_encoder *e;
	struct grist_feature_column c;
	const uint8_t *rec;
	size_t rec_len, row_bytes;
	uint8_t *want;
	char key[PLAN_N][8];

	assert_int_equal(grist_features_create(&f), 0);
	assert_int_equal(grist_example_encoder_create(&e), 0);
	grist_example_begin(e);
	for (int i = 0; i < PLAN_N; i++) {
		int k;

		snprintf(key[i], sizeof(key[i]), "image%d", i);
		k = grist_features_add(f, key[i], GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ -1, -1, 3 }, 3);
		assert_int_equal(k, i);
		assert_int_equal(grist_features_set(f, (size_t)k, GRIST_FEATURE_DECODE, GRIST_DECODE_JPEG), 0);
		assert_int_equal(grist_features_set_transform(f, (size_t)k, &t[i], false), 0);
		assert_int_equal(grist_example_add_bytes(e, key[i], jpg, (uint64_t[]){ 0, len }, 1), 0);
	}
	assert_int_equal(grist_example_finish(e, &rec, &rec_len), 0);
	assert_int_equal(grist_features_finish(f), 0);
	assert_int_equal(grist_features_decoder_create(f, NULL, 0, &d), 0);
	row_bytes = grist_features_row_bytes(f);
	want = calloc(1, row_bytes);
	assert_non_null(want);
	for (int i = 0; i < PLAN_N; i++) {
		grist_feature_column_init(&c);
		assert_int_equal(grist_feature_column(f, (size_t)i, &c), 0);
		assert_int_equal(grist_vision_apply(&t[i], jpg, len, 0, 3, key[i], want + c.offset, c.bytes, NULL), 0);
	}
	{
		struct plan_rows a = { d, rec, rec_len, row_bytes, want, 0, 0 }, b = a;

		two_threads(plan_rows_run, &a, &b);
		assert_int_equal(a.ret, 0);
		assert_int_equal(b.ret, 0);
		if (a.bad || b.bad)
			fail_msg("%d transformed features of one record, two threads: round %d, %d not apply()'s bytes",
				 PLAN_N, a.bad - 1, b.bad - 1);
	}
	free(want);
	grist_example_encoder_destroy(e);
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
}

static void test_output_plan_cache(void **state)
{
	static const float mean[3] = { 0.485f, 0.456f, 0.406f }, std[3] = { 0.229f, 0.224f, 0.225f };
	int forward[2 * PLAN_N * PLAN_N], backward[2 * PLAN_N * PLAN_N];
	size_t steps = 0;
	struct grist_vision_transform t[PLAN_N];
	uint8_t *px = photo(96, 120, 31), *jpg;
	uint8_t(*fresh)[PLAN_OUT] = calloc(PLAN_N, PLAN_OUT);
	unsigned long len;

	(void)state;
	assert_non_null(fresh);
	jpg = encode(px, 96, 120, TJSAMP_420, 0, &len);
	for (int i = 0; i < PLAN_N; i++) {
		grist_vision_transform_init(&t[i]);
		t[i].op = GRIST_VISION_RANDOM_RESIZED_CROP;
		t[i].out_height = 32;
		t[i].out_width = 24;
		t[i].normalize = true;
		memcpy(t[i].mean, mean, sizeof(mean));
		memcpy(t[i].std, std, sizeof(std));
		t[i].dtype = GRIST_DTYPE_FLOAT32;
	}
	t[1].std[1] = nextafterf(std[1], 1.0f); /* one ulp: the float32 quotients move */
	t[2].mean[2] = nextafterf(mean[2], 1.0f);
	t[3].dtype = GRIST_DTYPE_FLOAT16;
	t[4].dtype = GRIST_DTYPE_BFLOAT16; /* the same values as 3: only the dtype differs */
	t[5].dtype = GRIST_DTYPE_BFLOAT16;
	t[5].layout = GRIST_VISION_CHW;
	t[6].layout = GRIST_VISION_CHW; /* float32 CHW: the table path */
	t[7].layout = GRIST_VISION_CHW;
	t[7].normalize = false;
	t[8].channels = 1;
	/* every transform after every other (i then j, for all i != j), and after itself */
	for (int i = 0; i < PLAN_N; i++)
		for (int j = 0; j < PLAN_N; j++) {
			forward[steps] = i;
			forward[steps + 1] = j;
			backward[steps] = PLAN_N - 1 - j;
			backward[steps + 1] = PLAN_N - 1 - i;
			steps += 2;
		}
	/* each alone in a thread of its own: no plan kept from an earlier transform */
	for (int i = 0; i < PLAN_N; i++) {
		struct plan_job j = { jpg, len, t, &i, 1, fresh, false, 0, 0 };
		pthread_t th;

		assert_int_equal(pthread_create(&th, NULL, plan_run, &j), 0);
		assert_int_equal(pthread_join(th, NULL), 0);
		assert_int_equal(j.ret, 0);
	}
	for (int i = 0; i + 1 < PLAN_N; i++)
		if (!memcmp(fresh[i], fresh[i + 1], PLAN_OUT))
			fail_msg("transforms %d and %d give the same bytes: this test could not see a stale plan", i, i + 1);
	/* in turns in this thread, then in two threads at once in other orders */
	{
		struct plan_job a = { jpg, len, t, forward, steps, fresh, true, 0, 0 };
		struct plan_job b = { jpg, len, t, backward, steps, fresh, true, 0, 0 };

		plan_run(&a);
		assert_int_equal(a.ret, 0);
		if (a.bad)
			fail_msg("step %d (transform %d) in turns with others: not a fresh thread's bytes", a.bad - 1,
				 forward[a.bad - 1]);
		two_threads(plan_run, &a, &b);
		assert_int_equal(a.ret, 0);
		assert_int_equal(b.ret, 0);
		if (a.bad || b.bad)
			fail_msg("two threads at once: step %d of the first, %d of the second not a fresh thread's bytes",
				 a.bad - 1, b.bad - 1);
	}
	plan_features(jpg, len, t);
	free(fresh);
	free(jpg);
	free(px);
}

/*
 * antialias=False (TF's kernels) under the sanitizers: at scale 1 both are the identity
 * (the half-pixel position lands on the pixel, the other taps weigh 0), and up- and
 * downscales of every edge size run inside their buffers. Values: test_vision.py.
 */
static void test_resize_tf_kernels(void **state)
{
	static const uint32_t sizes[][4] = { { 37, 29, 37, 29 }, { 37, 29, 224, 224 }, { 37, 29, 1, 1 }, { 1, 1, 5, 3 },
					     { 1, 29, 7, 1 }, { 37, 1, 2, 9 } };
	uint8_t *img = photo(37, 29, 5), out[224 * 224 * 3];

	(void)state;
	for (int bicubic = 0; bicubic < 2; bicubic++) {
		enum grist_vision_interp in = bicubic ? GRIST_VISION_BICUBIC_TF : GRIST_VISION_BILINEAR_TF;

		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			const uint32_t *s = sizes[i];

			assert_int_equal(gv_resize(img, s[0], s[1], 29 * 3, 3, out, s[2], s[3], (size_t)s[3] * 3, in), 0);
			if (s[0] == s[2] && s[1] == s[3])
				assert_memory_equal(out, img, sizeof(uint8_t) * 37 * 29 * 3);
		}
	}
	free(img);
}

/*
 * A 1 x N or N x 1 PNG within max_pixels: a resize to 224 x 224 would need a coefficient
 * table of about 4 x N entries per axis (16 x that for AVX2); past the cap it is refused
 * before anything is allocated for it. A long but sane strip still resizes.
 */
static void test_resize_table_bound(void **state)
{
	struct grist_vision_transform t;
	static uint8_t out[224 * 224 * 3];
	size_t len;
	uint8_t *png;

	(void)state;
	grist_vision_transform_init(&t);
	t.op = GRIST_VISION_RESIZE;
	t.out_height = t.out_width = 224;
	t.interp = GRIST_VISION_BICUBIC;
	for (int tall = 0; tall < 2; tall++) {
		png = png_rgb(tall ? 1u << 23 : 1, tall ? 1 : 1u << 23, &len);
		assert_int_equal(grist_vision_apply(&t, png, len, 0, 1, "image", out, sizeof(out), NULL), -EFBIG);
		assert_non_null(strstr(grist_last_error(), "coefficients"));
		assert_non_null(strstr(grist_last_error(), "8388608 -> 224"));
		free(png);
		png = png_rgb(tall ? 20000 : 1, tall ? 1 : 20000, &len);
		assert_int_equal(grist_vision_apply(&t, png, len, 0, 1, "image", out, sizeof(out), NULL), 0);
		free(png);
	}
}

/* CMYK (TurboJPEG writes it as Adobe does) and fast mode at every scale, for the sanitizers. */
static void test_cmyk_and_fast(void **state)
{
	uint8_t *px = photo(300, 420, 5), *cmyk = malloc(300 * 420 * 4), *jpg, *full, *got;
	tjhandle tc = tjInitCompress();
	unsigned char *out = NULL;
	unsigned long len = 0;
	struct grist_vision_transform t;
	uint8_t o[48 * 40 * 3];

	(void)state;
	for (size_t i = 0; i < 300 * 420; i++)
		for (int c = 0; c < 4; c++)
			cmyk[i * 4 + c] = (uint8_t)(c < 3 ? 255 - px[i * 3 + c] : px[i * 3] / 4);
	assert_int_equal(tjCompress2(tc, cmyk, 420, 0, 300, TJPF_CMYK, &out, &len, TJSAMP_420, 90, 0), 0);
	/* the region equals the full decode's crop, CMYK converted to RGB the same way */
	full = malloc(300 * 420 * 3);
	got = malloc(100 * 77 * 3);
	assert_int_equal(gv_jpeg_decode_region(out, len, 0, 0, 300, 420, false, full, 420 * 3, 500), 0);
	assert_int_equal(gv_jpeg_decode_region(out, len, 101, 33, 100, 77, false, got, 77 * 3, 500), 0);
	for (int y = 0; y < 100; y++)
		assert_memory_equal(got + y * 77 * 3, full + ((101 + y) * 420 + 33) * 3, 77 * 3);
	tjFree(out);
	tjDestroy(tc);
	free(cmyk);
	free(full);
	free(got);

	grist_vision_transform_init(&t);
	t.out_height = 48;
	t.out_width = 40;
	t.decode = GRIST_VISION_DECODE_FAST;
	jpg = encode(px, 300, 420, TJSAMP_420, 0, &len);
	for (int op = GRIST_VISION_RANDOM_RESIZED_CROP; op <= GRIST_VISION_RESIZE; op++) {
		t.op = (enum grist_vision_op)op;
		t.resize = 64;
		for (uint64_t i = 0; i < 20; i++)
			assert_int_equal(grist_vision_apply(&t, jpg, len, 0, i, "image", o, sizeof(o), NULL), 0);
	}
	/*
	 * float32 HWC, flipped: emit()'s vector path (table lookups by gather) on odd widths gives
	 * each value's own arithmetic, (x / 255 - mean) / std in float32, to the bit
	 */
	{
		static const float mean[3] = { 0.485f, 0.456f, 0.406f }, sd[3] = { 0.229f, 0.224f, 0.225f };
		float fo[17 * 23 * 3], want[17 * 23 * 3];
		uint8_t u8[17 * 23 * 3];

		t.op = GRIST_VISION_RANDOM_RESIZED_CROP;
		t.out_height = 17;
		t.out_width = 23;
		t.flip = 1.0;
		t.decode = GRIST_VISION_DECODE_EXACT;
		memcpy(t.mean, mean, sizeof(mean));
		memcpy(t.std, sd, sizeof(sd));
		for (uint64_t i = 0; i < 10; i++) {
			t.normalize = true;
			t.dtype = GRIST_DTYPE_FLOAT32;
			assert_int_equal(grist_vision_apply(&t, jpg, len, 0, i, "image", fo, sizeof(fo), NULL), 0);
			t.normalize = false;
			t.dtype = GRIST_DTYPE_UINT8;
			assert_int_equal(grist_vision_apply(&t, jpg, len, 0, i, "image", u8, sizeof(u8), NULL), 0);
			for (size_t j = 0; j < sizeof(u8); j++)
				want[j] = ((float)u8[j] / 255.0f - mean[j % 3]) / sd[j % 3];
			assert_memory_equal(fo, want, sizeof(fo));
		}
	}
	free(jpg);
	free(px);
}

/* The EXIF reader on every truncation and corruption of an APP1 block: 6, or 1, never a bad read. */
static void test_exif_reader(void **state)
{
	static const uint8_t le[] = {
		0xff, 0xd8, 0xff, 0xe1, 0x00, 0x22, 'E', 'x', 'i', 'f', 0, 0,
		'I', 'I', 0x2a, 0x00, 0x08, 0x00, 0x00, 0x00,             /* TIFF, IFD0 at 8 */
		0x01, 0x00,                                                 /* one entry */
		0x12, 0x01, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0xff, 0xda };
	static const uint8_t be[] = {
		0xff, 0xd8, 0xff, 0xe0, 0x00, 0x04, 0x00, 0x00,             /* an APP0 first */
		0xff, 0xe1, 0x00, 0x22, 'E', 'x', 'i', 'f', 0, 0,
		'M', 'M', 0x00, 0x2a, 0x00, 0x00, 0x00, 0x08,
		0x00, 0x01,
		0x01, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x08, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0xff, 0xda };
	uint8_t buf[sizeof(be)];

	(void)state;
	assert_int_equal(gv_jpeg_orientation(le, sizeof(le)), 6);
	assert_int_equal(gv_jpeg_orientation(be, sizeof(be)), 8);
	for (size_t n = 0; n < sizeof(le); n++) {
		uint8_t *cut = malloc(n ? n : 1); /* exactly n bytes, so ASan sees a read past them */

		memcpy(cut, le, n);
		assert_true(gv_jpeg_orientation(cut, n) == 1 || n >= sizeof(le) - 2);
		free(cut);
	}
	for (size_t i = 0; i < sizeof(be); i++) {
		for (int v = 0; v < 256; v += 51) {
			uint32_t o;

			memcpy(buf, be, sizeof(be));
			buf[i] = (uint8_t)v;
			o = gv_jpeg_orientation(buf, sizeof(buf));
			assert_true(o >= 1 && o <= 8);
		}
	}
}

static void test_transform_checks(void **state)
{
	struct grist_vision_transform t, bad;
	struct { struct grist_vision_transform t; uint64_t extra; } longer;
	struct grist_vision_box a, b;

	(void)state;
	grist_vision_transform_init(&t);
	t.op = GRIST_VISION_RANDOM_RESIZED_CROP;
	t.out_height = t.out_width = 224;
	t.flip = 0.5;
	assert_int_equal(grist_vision_out_bytes(&t), 224 * 224 * 3);
	t.normalize = true;
	assert_int_equal(grist_vision_out_bytes(&t), 224 * 224 * 3 * 4); /* float32 by default */
	t.normalize = false;
	/* the same keys, the same box; the box inside the image */
	assert_int_equal(grist_vision_box(&t, 375, 500, 2, 7, "image", &a), 0);
	assert_int_equal(grist_vision_box(&t, 375, 500, 2, 7, "image", &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_true(a.top >= 0 && a.left >= 0 && a.top + a.height <= 375 && a.left + a.width <= 500);
	assert_int_equal(grist_vision_box(&t, 375, 500, 2, 7, "label", &b), 0);
	assert_memory_not_equal(&a, &b, sizeof(a));

	bad = t;
	bad.op = 9;
	assert_int_equal(grist_vision_box(&bad, 10, 10, 0, 0, "k", &a), -EINVAL);
	bad = t;
	bad.out_width = 0;
	assert_int_equal(grist_vision_out_bytes(&bad), 0);
	bad = t;
	bad.scale[0] = 0.5, bad.scale[1] = 0.2;
	assert_int_equal(grist_vision_box(&bad, 10, 10, 0, 0, "k", &a), -EINVAL);
	bad = t;
	bad.flip = 1.5;
	assert_int_equal(grist_vision_box(&bad, 10, 10, 0, 0, "k", &a), -EINVAL);
	bad = t;
	bad.op = GRIST_VISION_CENTER_CROP;
	bad.resize = 100;
	assert_int_equal(grist_vision_box(&bad, 10, 10, 0, 0, "k", &a), -EINVAL);
	assert_int_equal(grist_vision_box(&t, 0, 10, 0, 0, "k", &a), -EINVAL);
	/* a newer caller's longer struct: refused only when its extra bytes are set */
	longer.t = t;
	longer.t.size = sizeof(longer);
	longer.extra = 0;
	assert_int_equal(grist_vision_box(&longer.t, 10, 10, 0, 0, "k", &a), 0);
	longer.extra = 1;
	assert_int_equal(grist_vision_box(&longer.t, 10, 10, 0, 0, "k", &a), -E2BIG);
	/* bfloat16 is a transform's output, never a feature's own dtype or an encoded value */
	{
		struct grist_features *f;
		struct grist_example_encoder *e;
		uint16_t v = 0x3f80;

		assert_int_equal(grist_features_create(&f), 0);
		assert_int_equal(grist_features_add(f, "x", GRIST_WIRE_FLOAT, GRIST_DTYPE_BFLOAT16, NULL, 0), -EINVAL);
		grist_features_destroy(f);
		assert_int_equal(grist_example_encoder_create(&e), 0);
		grist_example_begin(e);
		assert_int_equal(grist_example_add_typed(e, "x", GRIST_DTYPE_BFLOAT16, &v, 1), -EINVAL);
		grist_example_encoder_destroy(e);
		bad = t;
		bad.dtype = GRIST_DTYPE_BFLOAT16;
		bad.normalize = true;
		assert_int_equal(grist_vision_out_bytes(&bad), 224 * 224 * 3 * 2);
	}
	/* an older caller's shorter struct: the missing fields read as their defaults */
	bad = t;
	bad.size = offsetof(struct grist_vision_transform, seed);
	assert_int_equal(grist_vision_box(&bad, 10, 10, 0, 0, "k", &a), 0);
	/* Resize(256) of a 1 x 16.7M image: a long side of 2^32 pixels does not fit; refused, both ways round */
	bad = t;
	bad.op = GRIST_VISION_CENTER_CROP;
	bad.resize = 256;
	assert_int_equal(grist_vision_box(&bad, 1, 1u << 24, 0, 0, "k", &a), -EFBIG);
	assert_non_null(strstr(grist_last_error(), "1x16777216"));
	assert_int_equal(grist_vision_box(&bad, 1u << 24, 1, 0, 0, "k", &a), -EFBIG);
	assert_int_equal(grist_vision_box(&bad, 1, 1u << 20, 0, 0, "k", &a), 0); /* 2^28: it fits */
}

/* An Example of one JPEG (or bytes) under "image" and a label. */
static const uint8_t *example(struct grist_example_encoder *e, const uint8_t *img, size_t len, size_t *out_len)
{
	const uint8_t *data;
	int64_t label = 3;

	grist_example_begin(e);
	assert_int_equal(grist_example_add_bytes(e, "image", img, (uint64_t[]){ 0, len }, 1), 0);
	assert_int_equal(grist_example_add_int64s(e, "label", &label, 1), 0);
	assert_int_equal(grist_example_finish(e, &data, out_len), 0);
	return data;
}

static void test_transformed_feature_row(void **state)
{
	struct grist_features *f;
	struct grist_features_decoder *d;
	struct grist_example_encoder *e;
	struct grist_vision_transform t;
	struct grist_feature_column c;
	struct grist_vision_box box;
	uint8_t *px = photo(50, 70, 9), *jpg, *row, *want;
	unsigned long len;
	const uint8_t *rec;
	size_t rec_len, row_len;
	int img, lab;

	(void)state;
	jpg = encode(px, 50, 70, TJSAMP_420, 0, &len);
	grist_vision_transform_init(&t);
	t.op = GRIST_VISION_RANDOM_RESIZED_CROP;
	t.out_height = 12;
	t.out_width = 20;
	t.flip = 0.5;
	t.normalize = true;
	t.mean[0] = 0.5f;
	t.std[1] = 0.25f;
	t.layout = GRIST_VISION_CHW;
	t.seed = 11;
	assert_int_equal(grist_features_create(&f), 0);
	img = grist_features_add(f, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ -1, -1, 3 }, 3);
	lab = grist_features_add(f, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, NULL, 0);
	assert_true(img >= 0 && lab >= 0);
	assert_int_equal(grist_features_set(f, (size_t)img, GRIST_FEATURE_DECODE, GRIST_DECODE_IMAGE), 0);
	assert_int_equal(grist_features_set_transform(f, (size_t)lab, &t, true), 0); /* checked at finish */
	assert_int_equal(grist_features_finish(f), -EINVAL);
	grist_features_destroy(f);

	assert_int_equal(grist_features_create(&f), 0);
	img = grist_features_add(f, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ -1, -1, 3 }, 3);
	lab = grist_features_add(f, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, NULL, 0);
	assert_int_equal(grist_features_set(f, (size_t)img, GRIST_FEATURE_DECODE, GRIST_DECODE_IMAGE), 0);
	assert_int_equal(grist_features_set_transform(f, (size_t)img, &t, true), 0);
	assert_int_equal(grist_features_finish(f), 0);
	grist_feature_column_init(&c);
	assert_int_equal(grist_feature_column(f, (size_t)img, &c), 0);
	assert_int_equal(c.dtype, GRIST_DTYPE_FLOAT32);
	assert_int_equal(c.row_shape[0], 3);
	assert_int_equal(c.row_shape[1], 12);
	assert_int_equal(c.row_shape[2], 20);
	assert_int_equal(c.bytes, 3 * 12 * 20 * 4);
	assert_true(c.box_offset != SIZE_MAX && c.dims_offset == SIZE_MAX);
	assert_int_equal(grist_features_decoder_create(f, NULL, 0, &d), 0);
	assert_int_equal(grist_example_encoder_create(&e), 0);
	rec = example(e, jpg, len, &rec_len);
	row = malloc(grist_features_row_bytes(f));
	want = malloc(c.bytes);
	assert_int_equal(grist_features_decode(d, rec, rec_len, 0, 42, row, grist_features_row_bytes(f), &row_len), 0);
	assert_int_equal(grist_vision_apply(&t, jpg, len, 0, 42, "image", want, c.bytes, &box), 0);
	assert_memory_equal(row + c.offset, want, c.bytes);
	assert_memory_equal(row + c.box_offset, &box, sizeof(int32_t) * 5);

	/* a corrupt image: the error names the record and the feature */
	rec = example(e, jpg, len / 3, &rec_len);
	assert_int_equal(grist_features_decode(d, rec, rec_len, 0, 42, row, grist_features_row_bytes(f), &row_len),
			 -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "record 42"));
	assert_non_null(strstr(grist_last_error(), "feature 'image'"));
	free(row);
	free(want);
	free(jpg);
	free(px);
	grist_example_encoder_destroy(e);
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
}

/* A file of @n Examples, each a JPEG of its own size (record @bad, if >= 0, cut short). */
static void write_photos(const char *path, int n, int bad)
{
	struct grist_example_encoder *e;
	struct grist_writer *w;

	assert_int_equal(grist_example_encoder_create(&e), 0);
	assert_int_equal(grist_writer_open(path, "group_size:2,zstd:1", &w), 0);
	for (int i = 0; i < n; i++) {
		int h = 20 + (i * 37) % 90, wd = 24 + (i * 53) % 110;
		uint8_t *px = photo(h, wd, (uint64_t)i), *jpg;
		unsigned long len;
		const uint8_t *rec;
		size_t rl;

		jpg = encode(px, h, wd, i % 3 ? TJSAMP_420 : TJSAMP_444, i % 4 == 1 ? TJFLAG_PROGRESSIVE : 0, &len);
		rec = example(e, jpg, i == bad ? len / 2 : len, &rl);
		assert_int_equal(grist_writer_write(w, rec, rl), 0);
		free(px);
		free(jpg);
	}
	assert_int_equal(grist_writer_close(w), 0);
	grist_example_encoder_destroy(e);
}

/*
 * Every batch of a loader running the transform, back to back; *err is the loader's end.
 * With @skipped, bad images are skipped (GRIST_ON_ERROR_SKIP) and *skipped counts them.
 */
static uint8_t *run_loader(const char *path, unsigned threads, size_t *total, int *err, uint64_t *skipped)
{
	struct grist_features *f;
	struct grist_features_decoder *d;
	struct grist_vision_transform t;
	struct grist_dataset_spec ds = { .paths = &path, .num_paths = 1 };
	struct grist_loader_config cfg = { .size = sizeof(cfg) };
	struct grist_loader *l;
	struct grist_batch *b;
	uint8_t *all = NULL;
	size_t at = 0;
	int img, ret;

	grist_vision_transform_init(&t);
	t.op = GRIST_VISION_RANDOM_RESIZED_CROP;
	t.out_height = 16;
	t.out_width = 24;
	t.flip = 0.5;
	t.seed = 42;
	assert_int_equal(grist_features_create(&f), 0);
	img = grist_features_add(f, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ -1, -1, 3 }, 3);
	assert_true(grist_features_add(f, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, NULL, 0) > 0);
	assert_int_equal(grist_features_set(f, (size_t)img, GRIST_FEATURE_DECODE, GRIST_DECODE_JPEG), 0);
	assert_int_equal(grist_features_set_transform(f, (size_t)img, &t, true), 0);
	if (skipped)
		assert_int_equal(grist_features_set(f, (size_t)img, GRIST_FEATURE_ON_ERROR, GRIST_ON_ERROR_SKIP), 0);
	assert_int_equal(grist_features_finish(f), 0);
	assert_int_equal(grist_features_decoder_create(f, &ds, 1, &d), 0);
	t_features_loader_config(&cfg, &ds, f, d, 8, threads);
	assert_int_equal(grist_loader_create(&cfg, &l), 0);
	while ((ret = grist_loader_next(l, &b)) == 0 && b) {
		all = realloc(all, at + b->bytes);
		memcpy(all + at, b->data, b->bytes);
		at += b->bytes;
		grist_loader_release(l, b);
	}
	*err = ret;
	grist_loader_destroy(l);
	if (skipped) {
		struct grist_feature_skip first[4];
		size_t n;

		*skipped = grist_features_skipped(d, first, 4, &n);
		assert_int_equal(n, *skipped < 4 ? *skipped : 4);
		for (size_t k = 0; k < n; k++) {
			assert_int_equal(first[k].index, 17);
			assert_non_null(strstr(first[k].reason, "record 17"));
		}
	}
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
	*total = at;
	return all;
}

static void test_loader_threads(void **state)
{
	char *dir = t_mkdtemp(), path[512];
	uint8_t *one, *two;
	size_t n1, n2;
	int err;

	(void)state;
	snprintf(path, sizeof(path), "%s", t_path(dir, "photos.array_record"));
	write_photos(path, 29, -1);
	one = run_loader(path, 1, &n1, &err, NULL);
	assert_int_equal(err, 0);
	two = run_loader(path, 2, &n2, &err, NULL);
	assert_int_equal(err, 0);
	assert_true(n1 > 0);
	assert_int_equal(n1, n2);
	assert_memory_equal(one, two, n1); /* the same pixels and boxes at any thread count */
	free(one);
	free(two);

	/* a corrupt image stops the loader with the file, the record and the feature */
	write_photos(path, 29, 17);
	one = run_loader(path, 2, &n1, &err, NULL);
	assert_int_equal(err, -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "photos.array_record: record 17"));
	assert_non_null(strstr(grist_last_error(), "feature 'image'"));
	free(one);
	/* ...or, skipping, is dropped in both epochs and counted: the same rows at 1 and 2 threads */
	{
		uint64_t s1, s2;

		one = run_loader(path, 1, &n1, &err, &s1);
		assert_int_equal(err, 0);
		two = run_loader(path, 2, &n2, &err, &s2);
		assert_int_equal(err, 0);
		assert_int_equal(s1, 2);
		assert_int_equal(s2, 2);
		assert_int_equal(n1, n2);
		assert_memory_equal(one, two, n1);
		free(one);
		free(two);
	}
	t_rmtree(dir);
}

/*
 * One thread's decompressor, reused: a 4:4:4 decode, then a fast 4:2:0 crop at 1/1 that starts
 * below the top (merged upsampling, then jpeg_skip_scanlines()). libjpeg-turbo before 3.1.2
 * left cconvert pointing into the first image's freed pool and the skip wrote through it; the
 * pixels came out wrong only when malloc had reused that memory, so the loader test can miss
 * it, but valgrind sees the access every time: tools/test-all runs this test under valgrind
 * (GRIST_TEST_FILTER). Without valgrind it checks the crop against a full fast decode.
 */
static void test_fast_decode_reuses_the_decompressor(void **state)
{
	uint8_t *px = photo(96, 80, 11), *a, *b, *full, *got, *scratch;
	unsigned long alen, blen;
	struct gv_jpeg_info info;
	struct gv_jpeg *j;

	(void)state;
	a = encode(px, 96, 80, TJSAMP_444, 0, &alen);
	b = encode(px, 96, 80, TJSAMP_420, 0, &blen);
	full = malloc(96 * 80 * 3);
	got = malloc(40 * 30 * 3);
	scratch = malloc(96 * 80 * 3);
	assert_non_null(scratch);
	assert_non_null(full);
	assert_non_null(got);
	for (int round = 0; round < 3; round++) {
		assert_int_equal(gv_jpeg_open(a, alen, 500, &j, &info), 0);
		assert_int_equal(gv_jpeg_read_region_fast(j, 1, 0, 0, 96, 80, scratch, 80 * 3), 0);
		assert_int_equal(gv_jpeg_open(b, blen, 500, &j, &info), 0);
		assert_int_equal(gv_jpeg_read_region_fast(j, 1, 0, 0, 96, 80, full, 80 * 3), 0);
		assert_int_equal(gv_jpeg_open(a, alen, 500, &j, &info), 0);
		assert_int_equal(gv_jpeg_read_region_fast(j, 1, 0, 0, 96, 80, scratch, 80 * 3), 0);
		assert_int_equal(gv_jpeg_open(b, blen, 500, &j, &info), 0);
		assert_int_equal(gv_jpeg_read_region_fast(j, 1, 37, 21, 40, 30, got, 30 * 3), 0);
		for (int y = 0; y < 40; y++)
			assert_memory_equal(got + y * 30 * 3, full + ((37 + y) * 80 + 21) * 3, 30 * 3);
	}
	free(full);
	free(got);
	free(scratch);
	free(a);
	free(b);
	free(px);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_region_equals_full_decode),
		cmocka_unit_test(test_bad_images),
		cmocka_unit_test(test_png_region_equals_full_decode),
		cmocka_unit_test(test_resize_table_bound),
		cmocka_unit_test(test_resize_tf_kernels),
		cmocka_unit_test(test_resize_avx2_is_portable),
		cmocka_unit_test(test_resize_w16_within_a_level),
		cmocka_unit_test(test_resize_rows_sink),
		cmocka_unit_test(test_output_stage),
		cmocka_unit_test(test_output_plan_cache),
		cmocka_unit_test(test_resize_pulled_source),
		cmocka_unit_test(test_jpeg_pull),
		cmocka_unit_test(test_cmyk_and_fast),
		cmocka_unit_test(test_fast_decode_reuses_the_decompressor),
		cmocka_unit_test(test_exif_reader),
		cmocka_unit_test(test_transform_checks),
		cmocka_unit_test(test_transformed_feature_row),
		cmocka_unit_test(test_loader_threads),
	};

	/* one test by name, e.g. under valgrind (tools/test-all) */
	if (getenv("GRIST_TEST_FILTER"))
		cmocka_set_test_filter(getenv("GRIST_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
