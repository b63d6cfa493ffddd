/*
 * grist/internal/vision.h - UNSTABLE: the vision transforms' building blocks that
 * bench/bench_vision.c times apart from the transform (the codec bound: the JPEG region
 * decode alone; the resize alone; FFCV's INTER_AREA). The transform itself is grist/vision.h.
 *
 * Internal API, declared as such: not installed, not exported from libgrist.so (link
 * libgrist.a), no API or ABI promise; it may change in any commit. Define GRIST_INTERNAL
 * before including it to say you know. Errors follow grist/error.h.
 */
#ifndef GRIST_INTERNAL_VISION_H
#define GRIST_INTERNAL_VISION_H

#ifndef GRIST_INTERNAL
#error "grist/internal/vision.h is grist's unstable internal API: define GRIST_INTERNAL to use it"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/vision.h"

/* ---- resize (src/features/vision_resize.c, vision_resize_area.c) ---- */

/*
 * Resize @src (@sh x @sw x @c uint8, rows @sstride bytes apart) to @dst (@dh x @dw x @c,
 * rows @dstride apart) as Pillow's Image.resize does (ImagingResample, 8 bits per
 * channel): horizontal pass first over the rows the vertical pass needs, each pass
 * skipped when its size does not change. @c is 1 to 4. Return: 0 or -ENOMEM / -EINVAL.
 */
int gv_resize(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint8_t *dst, uint32_t dh,
	      uint32_t dw, size_t dstride, enum grist_vision_interp interp);
/*
 * interpolation "area" (vision_resize_area.c): OpenCV's INTER_AREA, the same arguments as
 * gv_resize_window (already checked by it).
 */
int gv_resize_area(const uint8_t *src, uint32_t sh, uint32_t sw, size_t sstride, uint32_t c, uint32_t full_h,
		   uint32_t full_w, uint32_t y0, uint32_t x0, uint8_t *dst, uint32_t dh, uint32_t dw, size_t dstride);

/* ---- JPEG region decode (vision_jpeg.c) ---- */

/* What a JPEG header says, read before anything is allocated. */
struct gv_jpeg_info {
	uint32_t width, height;
	uint32_t components;   /* 1 gray, 3 color, 4 CMYK / YCCK */
	bool progressive;
};
int gv_jpeg_header(const uint8_t *p, size_t len, struct gv_jpeg_info *info);
/*
 * The same in two steps on this thread's decompressor: open reads the header (and leaves
 * the decompressor holding it), read_region decodes and releases it; close releases it
 * without decoding (NULL is fine). Between them no other JPEG may be opened on this thread.
 */
struct gv_jpeg;
int gv_jpeg_open(const uint8_t *p, size_t len, uint32_t scan_limit, struct gv_jpeg **out, struct gv_jpeg_info *info);
int gv_jpeg_read_region(struct gv_jpeg *j, uint32_t top, uint32_t left, uint32_t height, uint32_t width,
			bool gray_out, uint8_t *dst, size_t pitch);
/*
 * With @dst NULL, read_region (and _fast) decode in place into the thread's buffer, no copy:
 * gv_jpeg_pixels() then gives the region's first pixel and its rows' pitch (3 bytes a pixel,
 * or 1 with gray_out on a gray file), valid until the next decode on this thread;
 * gv_jpeg_release() after use frees that buffer when it grew past what a thread keeps.
 */
const uint8_t *gv_jpeg_pixels(const struct gv_jpeg *j, size_t *pitch);
void gv_jpeg_release(struct gv_jpeg *j);
/*
 * Fast mode: the image decoded at 1/@denom scale (1, 2, 4 or 8) with the fast IDCT and no
 * fancy upsampling; the region is in scaled pixels, inside gv_jpeg_scaled()'s size.
 */
int gv_jpeg_read_region_fast(struct gv_jpeg *j, uint32_t denom, uint32_t top, uint32_t left, uint32_t height,
			     uint32_t width, uint8_t *dst, size_t pitch);
/* The size libjpeg gives the open image at 1/@denom scale: ceil(side / denom). */
void gv_jpeg_scaled(const struct gv_jpeg_info *info, uint32_t denom, uint32_t *h, uint32_t *w);
void gv_jpeg_close(struct gv_jpeg *j);
/*
 * Decode rows [top, top + height) and columns [left, left + width) of a JPEG as RGB (or
 * gray, @gray_out, for a 1-component file) into @dst, rows @pitch bytes apart: ISLOW IDCT,
 * fancy upsampling, the pixels a full decode then crop gives. @scan_limit bounds a
 * progressive file's scans (-EFBIG past it). A libjpeg warning (damaged data) is an error.
 */
int gv_jpeg_decode_region(const uint8_t *p, size_t len, uint32_t top, uint32_t left, uint32_t height,
			  uint32_t width, bool gray_out, uint8_t *dst, size_t pitch, uint32_t scan_limit);

#endif
