/*
 * EXIF orientation (tag 0x0112 of IFD0) of a JPEG, and what it does to coordinates and
 * pixels, as Pillow's ImageOps.exif_transpose() applies it. Read from the bytes, every
 * length checked: a damaged EXIF block reads as orientation 1, as it does for Pillow.
 */
#include <string.h>

#include "features/vision_internal.h"

static uint32_t rd16(const uint8_t *p, int le)
{
	return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : (uint32_t)p[0] << 8 | p[1];
}

static uint32_t rd32(const uint8_t *p, int le)
{
	return le ? rd16(p, 1) | rd16(p + 2, 1) << 16 : rd16(p, 0) << 16 | rd16(p + 2, 0);
}

/* The orientation in a TIFF structure (an APP1 "Exif\0\0" segment's body): 1 to 8, or 1. */
static uint32_t tiff_orientation(const uint8_t *t, size_t n)
{
	uint32_t ifd, count;
	int le;

	if (n < 8 || (memcmp(t, "II*\0", 4) && memcmp(t, "MM\0*", 4)))
		return 1;
	le = t[0] == 'I';
	ifd = rd32(t + 4, le);
	if (ifd > n - 2)
		return 1;
	count = rd16(t + ifd, le);
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *e = t + ifd + 2 + (size_t)i * 12;
		uint32_t v;

		if ((size_t)(e - t) + 12 > n)
			return 1;
		if (rd16(e, le) != 0x0112)
			continue;
		if (rd16(e + 2, le) != 3 || rd32(e + 4, le) != 1) /* one SHORT */
			return 1;
		v = rd16(e + 8, le);
		return v >= 1 && v <= 8 ? v : 1;
	}
	return 1;
}

uint32_t gv_jpeg_orientation(const uint8_t *p, size_t len)
{
	size_t at = 2;

	if (len < 4 || p[0] != 0xff || p[1] != 0xd8)
		return 1;
	/* the markers before the first scan: each FF xx and a 2-byte length that counts itself */
	while (at + 4 <= len && p[at] == 0xff) {
		uint8_t m = p[at + 1];
		size_t seg;

		if (m == 0xff) { /* fill bytes */
			at++;
			continue;
		}
		if (m == 0xda || m == 0xd9)
			break;
		seg = (size_t)p[at + 2] << 8 | p[at + 3];
		if (seg < 2 || seg > len - at - 2)
			break;
		if (m == 0xe1 && seg >= 8 && !memcmp(p + at + 4, "Exif\0\0", 6))
			return tiff_orientation(p + at + 10, seg - 8);
		at += 2 + seg;
	}
	return 1;
}

void gv_orient_region(uint32_t o, uint32_t h, uint32_t w, const struct grist_vision_box *d,
		      struct grist_vision_box *s)
{
	uint32_t t = (uint32_t)d->top, l = (uint32_t)d->left, dh = (uint32_t)d->height, dw = (uint32_t)d->width;
	bool swap = o >= 5;

	*s = *d;
	s->height = (int32_t)(swap ? dw : dh);
	s->width = (int32_t)(swap ? dh : dw);
	switch (o) {
	case 2: s->left = (int32_t)(w - l - dw); break;
	case 3: s->top = (int32_t)(h - t - dh); s->left = (int32_t)(w - l - dw); break;
	case 4: s->top = (int32_t)(h - t - dh); break;
	case 5: s->top = (int32_t)l; s->left = (int32_t)t; break;
	case 6: s->top = (int32_t)(h - l - dw); s->left = (int32_t)t; break;
	case 7: s->top = (int32_t)(h - l - dw); s->left = (int32_t)(w - t - dh); break;
	case 8: s->top = (int32_t)l; s->left = (int32_t)(w - t - dh); break;
	default: break;
	}
}

void gv_orient_pixels(uint32_t o, const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c,
		      uint8_t *dst)
{
	uint32_t dh = o >= 5 ? sw : sh, dw = o >= 5 ? sh : sw;

	for (uint32_t y = 0; y < dh; y++) {
		for (uint32_t x = 0; x < dw; x++) {
			uint32_t sy, sx;

			switch (o) {
			case 2: sy = y; sx = sw - 1 - x; break;
			case 3: sy = sh - 1 - y; sx = sw - 1 - x; break;
			case 4: sy = sh - 1 - y; sx = x; break;
			case 5: sy = x; sx = y; break;
			case 6: sy = sh - 1 - x; sx = y; break;
			case 7: sy = sh - 1 - x; sx = sw - 1 - y; break;
			case 8: sy = x; sx = sw - 1 - y; break;
			default: sy = y; sx = x; break;
			}
			memcpy(dst + ((size_t)y * dw + x) * c, src + (size_t)sy * sstride + (size_t)sx * c, c);
		}
	}
}
