/*
 * Tests for the image decoders' per-thread state (src/features/image.c): a damaged image
 * fails alone, and every good image decoded after it on the same thread comes out as
 * it did before (issue 35: one JPEG with a reserved marker left the thread's TurboJPEG
 * handle failing every later JPEG).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "helpers.h"
#include "grist/error.h"
#include "grist/features.h"

/* PNG chunk CRC (ISO 3309, as zlib's crc32), to damage a chunk's data behind a valid CRC. */
static uint32_t png_crc(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
	}
	return c ^ 0xffffffffu;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Where marker 0xFF @m first starts in JPEG @p (a header marker), or the test fails. */
static size_t jpeg_marker(const uint8_t *p, size_t len, uint8_t m)
{
	for (size_t i = 2; i + 1 < len; i++)
		if (p[i] == 0xff && p[i + 1] == m)
			return i;
	fail_msg("JPEG marker 0x%02x not found", m);
	return 0;
}

/* Where PNG chunk @type starts (its length field), or the test fails. */
static size_t png_chunk_at(const uint8_t *p, size_t len, const char *type)
{
	for (size_t i = 8; i + 12 <= len; i += 12 + get_be32(p + i))
		if (!memcmp(p + i + 4, type, 4))
			return i;
	fail_msg("PNG chunk %s not found", type);
	return 0;
}

enum damage { CUT_HEADER, CUT_DATA, RESERVED, BAD_TABLE, BAD_DATA, EMPTY, NUM_DAMAGE };

static const char *const damage_name[] = { "truncated in the header", "truncated in the data",
					   "a reserved marker / unknown critical chunk",
					   "a bad Huffman table / bad zlib header", "bad Huffman / deflate data",
					   "empty" };

/* A damaged copy of @img (malloc'd, *@out_len its length). */
static uint8_t *damage(const uint8_t *img, size_t len, bool jpeg, enum damage how, size_t *out_len)
{
	uint8_t *p = malloc(len + 12);
	size_t at, n = len;

	assert_non_null(p);
	memcpy(p, img, len);
	switch (how) {
	case CUT_HEADER:
		n = jpeg ? jpeg_marker(p, len, 0xc4) + 7 : 8 + 15; /* inside DHT / IHDR */
		break;
	case CUT_DATA:
		n = len * 2 / 3;
		break;
	case RESERVED:
		if (jpeg) { /* APPn -> 0xFF02, one of the reserved markers */
			p[3] = 0x02;
		} else { /* an empty chunk "ABCD" after IHDR: critical (upper case), unknown */
			at = 8 + 25;
			memmove(p + at + 12, p + at, len - at);
			memcpy(p + at, "\0\0\0\0ABCD", 8);
			put_be32(p + at + 8, png_crc(p + at + 4, 4));
			n = len + 12;
		}
		break;
	case BAD_TABLE:
		if (jpeg) { /* the first DHT's code counts add up to more codes than there are */
			at = jpeg_marker(p, len, 0xc4) + 5;
			memset(p + at, 0xff, 16);
		} else { /* a zlib header whose check bits are wrong, behind a valid CRC */
			at = png_chunk_at(p, len, "IDAT");
			p[at + 9] ^= 0x01;
			put_be32(p + at + 8 + get_be32(p + at), png_crc(p + at + 4, 4 + get_be32(p + at)));
		}
		break;
	case BAD_DATA:
		if (jpeg) { /* all-ones bits: no valid Huffman code, "bad Huffman code" */
			at = jpeg_marker(p, len, 0xda);
			at += 2 + ((size_t)p[at + 2] << 8 | p[at + 3]);
			for (size_t i = at; i + 1 < len - 2 && i < at + 64; i += 2) {
				p[i] = 0xff;
				p[i + 1] = 0x00;
			}
		} else { /* the first deflate block of type 3 (reserved), behind a valid CRC */
			at = png_chunk_at(p, len, "IDAT");
			p[at + 10] = 0xff;
			put_be32(p + at + 8 + get_be32(p + at), png_crc(p + at + 4, 4 + get_be32(p + at)));
		}
		break;
	case EMPTY:
	case NUM_DAMAGE:
		n = 0;
		break;
	}
	*out_len = n;
	return p;
}

/* A decoder of one image feature "img" of @h x @w x @c (uint8, or uint16 when @wide). */
static struct grist_features_decoder *image_decoder(int64_t h, int64_t w, int64_t c, bool wide)
{
	struct grist_features *f;
	struct grist_features_decoder *d;
	int64_t shape[3] = { h, w, c };
	int i;

	assert_int_equal(grist_features_create(&f), 0);
	i = grist_features_add(f, "img", GRIST_WIRE_BYTES, wide ? GRIST_DTYPE_UINT16 : GRIST_DTYPE_UINT8, shape, 3);
	assert_true(i >= 0);
	assert_int_equal(grist_features_set(f, (size_t)i, GRIST_FEATURE_DECODE, GRIST_DECODE_IMAGE), 0);
	assert_int_equal(grist_features_finish(f), 0);
	assert_int_equal(grist_features_decoder_create(f, NULL, 0, &d), 0);
	grist_features_destroy(f);
	return d;
}

/* Decode the Example {"img": @img} into @row (@cap bytes); the decoder's return. */
static int decode_image(struct grist_example_encoder *e, struct grist_features_decoder *d, const uint8_t *img,
			size_t len, uint8_t *row, size_t cap)
{
	const uint8_t *rec;
	size_t rlen, row_len;

	grist_example_begin(e);
	assert_int_equal(grist_example_add_bytes(e, "img", img, (uint64_t[]){ 0, len }, 1), 0);
	assert_int_equal(grist_example_finish(e, &rec, &rlen), 0);
	memset(row, 0xa5, cap);
	return grist_features_decode(d, rec, rlen, 0, 3, row, cap, &row_len);
}

/*
 * On this thread: each good image, then each kind of damage to it followed by the good
 * image again, and each good image of the other files between. Every damaged one fails
 * with -EBADMSG; every good one decodes to the bytes of its first decode.
 */
static void test_good_after_bad(void **state)
{
	static const struct {
		const char *name;
		int64_t c;
		bool wide;
	} images[] = {
		{ "rgb420.jpg", 3, false }, { "gray.jpg", 1, false },	    { "progressive.jpg", 3, false },
		{ "rgb444.jpg", 3, false }, { "rgb.png", 3, false },	    { "gray.png", 1, false },
		{ "interlaced.png", 3, false }, { "palette.png", 3, false }, { "rgb16.png", 3, true },
	};
	enum { N = sizeof(images) / sizeof(images[0]) };
	struct grist_features_decoder *d[N];
	struct grist_example_encoder *e;
	uint8_t *img[N], *first[N], *row;
	size_t len[N], cap = 23 * 37 * 4 * 2 + 4096;

	(void)state;
	assert_int_equal(grist_example_encoder_create(&e), 0);
	row = aligned_alloc(8, cap);
	for (size_t i = 0; i < N; i++) {
		char path[64];

		snprintf(path, sizeof(path), "features/%s", images[i].name);
		img[i] = t_read_file(t_data(path), &len[i]);
		assert_non_null(img[i]);
		d[i] = image_decoder(23, 37, images[i].c, images[i].wide);
		first[i] = aligned_alloc(8, cap);
		if (decode_image(e, d[i], img[i], len[i], first[i], cap))
			fail_msg("%s: %s", images[i].name, grist_last_error());
	}
	for (size_t i = 0; i < N; i++) {
		bool jpeg = strstr(images[i].name, ".jpg") != NULL;

		for (int how = 0; how < NUM_DAMAGE; how++) {
			size_t blen;
			uint8_t *bad = damage(img[i], len[i], jpeg, (enum damage)how, &blen);
			int ret = decode_image(e, d[i], bad, blen, row, cap);

			free(bad);
			if (ret != -EBADMSG)
				fail_msg("%s %s: %d (%s), not -EBADMSG", images[i].name, damage_name[how], ret,
					 ret ? grist_last_error() : "decoded");
			/* the same image, and every other one, decodes as before */
			for (size_t k = 0; k < N; k++) {
				size_t j = (i + k) % N;

				ret = decode_image(e, d[j], img[j], len[j], row, cap);
				if (ret)
					fail_msg("%s after %s %s: %s", images[j].name, images[i].name, damage_name[how],
						 grist_last_error());
				if (memcmp(row, first[j], cap))
					fail_msg("%s after %s %s: other pixels than before", images[j].name,
						 images[i].name, damage_name[how]);
			}
		}
	}
	for (size_t i = 0; i < N; i++) {
		grist_features_decoder_destroy(d[i]);
		free(first[i]);
		free(img[i]);
	}
	free(row);
	grist_example_encoder_destroy(e);
}

/*
 * A 16x16 gray progressive JPEG of 704 scans, every one valid: DC, then each AC coefficient
 * alone, each sent in 11 successive-approximation steps (Al 10 down to 0).
 */
static uint8_t *many_scans_jpeg(size_t *len)
{
	static jpeg_scan_info s[11 * 64];
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr err;
	unsigned char *out = NULL;
	unsigned long olen = 0;
	uint8_t px[16 * 16], *copy;
	int n = 0;

	for (int i = 0; i < 256; i++)
		px[i] = (uint8_t)(i * 37 + (i >> 4) * 11);
	for (int k = 0; k < 64; k++)
		for (int al = 10; al >= 0; al--)
			s[n++] = (jpeg_scan_info){ .comps_in_scan = 1, .Ss = k, .Se = k, .Ah = al == 10 ? 0 : al + 1,
						   .Al = al };
	c.err = jpeg_std_error(&err);
	jpeg_create_compress(&c);
	jpeg_mem_dest(&c, &out, &olen);
	c.image_width = 16;
	c.image_height = 16;
	c.input_components = 1;
	c.in_color_space = JCS_GRAYSCALE;
	jpeg_set_defaults(&c);
	c.scan_info = s;
	c.num_scans = n;
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < 16) {
		JSAMPROW r = px + c.next_scanline * 16;

		jpeg_write_scanlines(&c, &r, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	copy = malloc(olen);
	assert_non_null(copy);
	memcpy(copy, out, olen);
	free(out);
	*len = olen;
	return copy;
}

/*
 * A progressive JPEG of more scans than any encoder writes (libjpeg-turbo's TJFLAG_LIMITSCANS
 * bound, 500) is refused: each scan passes over every coefficient of the image again, so a
 * large image of thousands of tiny scans takes minutes to decode.
 */
static void test_scan_limit(void **state)
{
	struct grist_features_decoder *d = image_decoder(16, 16, 1, false);
	struct grist_example_encoder *e;
	size_t len, cap = 16 * 16 + 4096;
	uint8_t *img = many_scans_jpeg(&len), *row = aligned_alloc(8, cap);
	int ret;

	(void)state;
	assert_int_equal(grist_example_encoder_create(&e), 0);
	ret = decode_image(e, d, img, len, row, cap);
	if (ret != -EBADMSG || !strstr(grist_last_error(), "500 scans"))
		fail_msg("704 scans: %d (%s), not refused", ret, ret ? grist_last_error() : "decoded");
	grist_example_encoder_destroy(e);
	grist_features_decoder_destroy(d);
	free(img);
	free(row);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_after_bad),
		cmocka_unit_test(test_scan_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
