/* Datasets shrunk at conversion (FFCV's trick): an image over max_side resized and re-encoded as JPEG. */
#ifndef GRIST_CONVERT_IMAGE_SHRINK_H
#define GRIST_CONVERT_IMAGE_SHRINK_H

#include <stddef.h>
#include <stdint.h>

/* What a shrinker keeps between images: the resized pixels and TurboJPEG's encoder and output. */
struct gc_shrink {
	uint8_t *small;
	size_t small_cap;
	void *tj;              /* tjhandle, made on first use */
	unsigned char *jpeg;   /* TurboJPEG's allocation, reused */
	unsigned long jpeg_cap;
};

/*
 * @pixels (@h x @w x @c, packed) resized so its longer side is @max_side, the shorter one
 * rounded half up (at least 1), with Pillow's antialiased bilinear resize, then encoded by
 * TurboJPEG at @quality (4:2:0, or gray): *@out (owned by @s, valid until its next use),
 * *@n. *@out NULL when nothing is to be done: within max_side, or not 1 or 3 channels
 * (JPEG has no alpha: such an image is kept as read). @name goes into messages.
 * Return: 0, -ENOMEM, -EIO (the encoder failed), or the resize's error.
 */
int gc_shrink_pixels(struct gc_shrink *s, const uint8_t *pixels, uint32_t h, uint32_t w, uint32_t c,
		     uint32_t max_side, int quality, const char *name, const uint8_t **out, size_t *n);
/* The same from encoded PNG or JPEG bytes (decoded first; 16-bit images are kept as read). */
int gc_shrink_image(struct gc_shrink *s, const uint8_t *img, size_t len, uint32_t max_side, int quality,
		    const char *name, const uint8_t **out, size_t *n);
void gc_shrink_free(struct gc_shrink *s);

#endif
