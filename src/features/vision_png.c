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
	free(png->raw);
	free(png->win);
	png->raw = png->win = NULL;
	png->win_cap = 0;
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

int gv_png_begin_region(struct gv_png *png, uint32_t top, uint32_t left, uint32_t height, uint32_t width)
{
	size_t need = 0;
	int e;

	if ((uint64_t)top + height > png->height || (uint64_t)left + width > png->width || !height || !width) {
		grist_fail(-EINVAL, "PNG: region %ux%u at (%u, %u) outside the %ux%u image", height, width, top, left,
			   png->height, png->width);
		gv_png_close(png);
		return -EINVAL;
	}
	if ((e = spng_decoded_image_size(png->ctx, png->fmt, &need)))
		goto bad;
	png->raw_row = need / png->height;
	png->r_top = top;
	png->r_skip = (size_t)left * png->channels * png->sample_bytes;
	png->r_height = height;
	png->r_width = width;
	png->r_lo = png->r_hi = 0;
	png->r_next = 0;
	/* 32 bytes of slack past each row, as the JPEG rows have (vision_jpeg.c) */
	png->r_pitch = (((size_t)width * 3 + 31) & ~(size_t)31) + 32;
	if (png->interlaced) {
		/* Adam7 comes in passes: the whole image, then its rows */
		if (!(png->raw = malloc(need))) {
			gv_png_close(png);
			return grist_fail(-ENOMEM, "PNG: out of memory for a %ux%u image", png->height, png->width);
		}
		if ((e = spng_decode_image(png->ctx, png->raw, need, png->fmt, 0)))
			goto bad;
		return 0;
	}
	if (!(png->raw = malloc(png->raw_row))) {
		gv_png_close(png);
		return grist_fail(-ENOMEM, "PNG: out of memory for a row of %zu bytes", png->raw_row);
	}
	if ((e = spng_decode_image(png->ctx, NULL, 0, png->fmt, SPNG_DECODE_PROGRESSIVE)))
		goto bad;
	return 0;
bad:
	gv_png_close(png);
	return grist_fail(-EBADMSG, "PNG does not decode: %s", spng_strerror(e));
}

/* The image's row @y (region row @y - top when inside it): decoded in order, each row once (each is filtered against the one before). */
static int next_row(struct gv_png *png, const uint8_t **raw)
{
	uint32_t y = png->r_next++;
	int e;

	if (png->interlaced) {
		*raw = png->raw + (size_t)y * png->raw_row;
		return 0;
	}
	e = spng_decode_row(png->ctx, png->raw, png->raw_row);
	if (e && !(e == SPNG_EOI && y + 1 == png->height)) {
		gv_png_close(png);
		return grist_fail(-EBADMSG, "PNG does not decode: %s", spng_strerror(e));
	}
	*raw = png->raw;
	return 0;
}

int gv_png_pull(struct gv_png *png, uint32_t y, uint32_t n, const uint8_t **rows, size_t *pitch)
{
	size_t keep;
	int ret;

	if (!png->ctx || y < png->r_lo || y > png->r_height || n > png->r_height - y) {
		gv_png_close(png);
		return grist_fail(-EINVAL, "PNG: rows [%u, %u) asked of a region of %u rows, at row %u", y, y + n,
				  png->r_height, png->r_lo);
	}
	if (y > png->r_lo) {
		/* the rows from y on kept, moved to the start; rows never asked for are decoded and dropped */
		keep = y < png->r_hi ? (size_t)(png->r_hi - y) * png->r_pitch : 0;
		if (keep)
			memmove(png->win, png->win + (size_t)(y - png->r_lo) * png->r_pitch, keep);
		png->r_lo = y;
		png->r_hi = y > png->r_hi ? y : png->r_hi;
	}
	if (y + n > png->r_hi) {
		size_t need = (size_t)(y + n - png->r_lo) * png->r_pitch;

		if (need > png->win_cap) {
			/* the caller checked the image against max_pixels: this is at most about that much */
			uint8_t *w = aligned_alloc(32, need);

			if (!w) {
				gv_png_close(png);
				return grist_fail(-ENOMEM, "PNG: out of memory for %u rows of %zu bytes", n, png->r_pitch);
			}
			if (png->r_hi > png->r_lo)
				memcpy(w, png->win, (size_t)(png->r_hi - png->r_lo) * png->r_pitch);
			free(png->win);
			png->win = w;
			png->win_cap = need;
		}
		/* every row to the last asked for is inflated; none after */
		while (png->r_next < png->r_top + y + n) {
			uint32_t at = png->r_next;
			const uint8_t *raw = NULL;

			if ((ret = next_row(png, &raw)))
				return ret;
			if (at >= png->r_top + png->r_hi)
				row_to_rgb(png, raw + png->r_skip,
					   png->win + (size_t)(at - png->r_top - png->r_lo) * png->r_pitch, png->r_width);
		}
		png->r_hi = y + n;
	}
	*rows = png->win + (size_t)(y - png->r_lo) * png->r_pitch;
	*pitch = png->r_pitch;
	return 0;
}

int gv_png_read_region(struct gv_png *png, uint32_t top, uint32_t left, uint32_t height, uint32_t width,
		       uint8_t *dst, size_t pitch)
{
	const uint8_t *rows;
	size_t rp;
	int ret = gv_png_begin_region(png, top, left, height, width);

	for (uint32_t y = 0; !ret && y < height; y++)
		if (!(ret = gv_png_pull(png, y, 1, &rows, &rp)))
			memcpy(dst + (size_t)y * pitch, rows, (size_t)width * 3);
	gv_png_close(png);
	return ret;
}
