/*
 * PNG for the vision transforms: decoded row by row (libspng's progressive API), only the
 * crop's rows kept, and 8- or 16-bit samples turned into the RGB bytes Pillow's
 * convert("RGB") gives.
 *
 * A PNG has no random access: every row above the crop must be inflated and unfiltered
 * (each row's filter reads the one before). What the row API saves is memory (one row,
 * not the whole image) and the rows below the crop, which are never inflated: the decode
 * stops at the crop's last row. The region equals a full decode then crop
 * (tests/features/test_vision.c). An interlaced (Adam7) file comes in passes, so it is
 * decoded whole and then cropped.
 *
 * 16 bits to 8, as Pillow opens the file and then converts it: RGB, RGBA and gray+alpha
 * files open as "RGB", "RGBA" and "LA" from their high bytes (rawmodes "RGB;16B",
 * "RGBA;16B", "LA;16B"); a 16-bit gray file opens as "I;16", whose convert("RGB") or
 * ("L") clips at 255 (Convert.c I16_RGB, I16_L), so a value above 255 is white. That
 * clip is what a Pillow-based pipeline (torchvision's ImageFolder) gives; tests hold
 * both rules to Pillow itself.
 */
#include <errno.h>
#include <spng.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "features/vision_internal.h"

/* Bound what ancillary chunks may allocate (text, ICC profiles), as image.c does. */
#define GV_PNG_CHUNK_LIMIT (64u << 20)

int gv_png_open(struct gv_png *png, const uint8_t *p, size_t len)
{
	struct spng_ihdr ihdr;
	struct spng_trns trns;
	int e;

	*png = (struct gv_png){ 0 };
	if (len < 8 || memcmp(p, "\x89PNG\r\n\x1a\n", 8))
		return grist_fail(-EBADMSG, "%zu bytes that are neither a PNG nor a JPEG", len);
	if (!(png->ctx = spng_ctx_new(0)))
		return grist_fail(-ENOMEM, "PNG: out of memory");
	if ((e = spng_set_chunk_limits(png->ctx, GV_PNG_CHUNK_LIMIT, GV_PNG_CHUNK_LIMIT)) ||
	    (e = spng_set_png_buffer(png->ctx, p, len)) || (e = spng_get_ihdr(png->ctx, &ihdr)))
		goto bad;
	png->height = ihdr.height;
	png->width = ihdr.width;
	png->interlaced = ihdr.interlace_method != 0;
	png->fmt = SPNG_FMT_PNG;
	png->gray16 = false;
	png->sample_bytes = ihdr.bit_depth == 16 ? 2 : 1;
	switch (ihdr.color_type) {
	case SPNG_COLOR_TYPE_GRAYSCALE: png->channels = 1; png->gray16 = ihdr.bit_depth == 16; break;
	case SPNG_COLOR_TYPE_TRUECOLOR: png->channels = 3; break;
	case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: png->channels = 2; break;
	case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: png->channels = 4; break;
	case SPNG_COLOR_TYPE_INDEXED:
		/* a palette expands to RGB (RGBA with tRNS, whose alpha is then dropped) */
		e = spng_get_trns(png->ctx, &trns);
		if (e && e != SPNG_ECHUNKAVAIL)
			goto bad;
		png->channels = 3;
		png->fmt = SPNG_FMT_RGB8;
		png->sample_bytes = 1;
		break;
	default:
		e = SPNG_EIHDR_SIZE;
		goto bad;
	}
	if (ihdr.bit_depth < 8 && ihdr.color_type != SPNG_COLOR_TYPE_INDEXED) {
		gv_png_close(png);
		return grist_fail(-ENOTSUP, "PNG of %u-bit samples: only 8- and 16-bit images are decoded",
				  ihdr.bit_depth);
	}
	return 0;
bad:
	gv_png_close(png);
	return grist_fail(-EBADMSG, "not a valid PNG: %s", spng_strerror(e));
}

void gv_png_close(struct gv_png *png)
{
	if (png->ctx)
		spng_ctx_free(png->ctx);
	png->ctx = NULL;
}

/* One decoded row (@png's channels and sample size; 16-bit host-endian) to @n RGB pixels. */
static void row_to_rgb(const struct gv_png *png, const uint8_t *in, uint8_t *out, size_t n)
{
	uint32_t c = png->channels;

	if (png->sample_bytes == 1) {
		for (size_t x = 0; x < n; x++, in += c, out += 3) {
			out[0] = in[0];
			out[1] = c >= 3 ? in[1] : in[0];
			out[2] = c >= 3 ? in[2] : in[0];
		}
		return;
	}
	for (size_t x = 0; x < n; x++, in += 2 * c, out += 3) {
		uint16_t s[3];

		memcpy(&s[0], in, 2);
		if (c >= 3) {
			memcpy(&s[1], in + 2, 2);
			memcpy(&s[2], in + 4, 2);
		} else {
			s[1] = s[2] = s[0];
		}
		for (int k = 0; k < 3; k++)
			out[k] = png->gray16 ? (uint8_t)(s[k] > 255 ? 255 : s[k]) : (uint8_t)(s[k] >> 8);
	}
}

int gv_png_read_region(struct gv_png *png, uint32_t top, uint32_t left, uint32_t height, uint32_t width,
		       uint8_t *dst, size_t pitch)
{
	size_t row = 0, need = 0, skip = (size_t)left * png->channels * png->sample_bytes;
	uint8_t *buf = NULL;
	int e, ret = 0;

	if ((uint64_t)top + height > png->height || (uint64_t)left + width > png->width || !height || !width) {
		ret = grist_fail(-EINVAL, "PNG: region %ux%u at (%u, %u) outside the %ux%u image", height, width, top,
				 left, png->height, png->width);
		goto out;
	}
	if ((e = spng_decoded_image_size(png->ctx, png->fmt, &need)))
		goto bad;
	row = need / png->height;
	if (png->interlaced) {
		/* Adam7 comes in passes: the whole image, then its rows */
		if (!(buf = malloc(need))) {
			ret = grist_fail(-ENOMEM, "PNG: out of memory for a %ux%u image", png->height, png->width);
			goto out;
		}
		if ((e = spng_decode_image(png->ctx, buf, need, png->fmt, 0)))
			goto bad;
		for (uint32_t y = 0; y < height; y++)
			row_to_rgb(png, buf + (size_t)(top + y) * row + skip, dst + (size_t)y * pitch, width);
		goto out;
	}
	if (!(buf = malloc(row))) {
		ret = grist_fail(-ENOMEM, "PNG: out of memory for a row of %zu bytes", row);
		goto out;
	}
	if ((e = spng_decode_image(png->ctx, NULL, 0, png->fmt, SPNG_DECODE_PROGRESSIVE)))
		goto bad;
	/* every row to the crop's last is inflated (each is filtered against the one before); none after */
	for (uint32_t y = 0; y < top + height; y++) {
		e = spng_decode_row(png->ctx, buf, row);
		if (e && !(e == SPNG_EOI && y + 1 == png->height))
			goto bad;
		if (y >= top)
			row_to_rgb(png, buf + skip, dst + (size_t)(y - top) * pitch, width);
	}
	goto out;
bad:
	ret = grist_fail(-EBADMSG, "PNG does not decode: %s", spng_strerror(e));
out:
	free(buf);
	gv_png_close(png);
	return ret;
}
