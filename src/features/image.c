/*
 * PNG (libspng) and JPEG (libjpeg-turbo's TurboJPEG) decoding into a row.
 *
 * The header is read first and its size checked by the caller against the spec and the
 * row's room, so a lying or hostile image never writes past its column or allocates
 * more than the spec allows. Channels are the image's own (no gray<->color
 * conversion): gray 1, gray+alpha 2, RGB 3, RGBA 4; a palette expands to RGB, or RGBA
 * when it has a tRNS chunk, as OpenCV's IMREAD_UNCHANGED (TFDS's decoder) gives it.
 * 16-bit PNGs decode into uint16 columns (SPNG_FMT_PNG gives host-endian samples).
 */
#include <errno.h>
#include <pthread.h>
#include <spng.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "common/error.h"
#include "features/features_internal.h"

/* Bound what a PNG's ancillary chunks may allocate (text, ICC profiles...): pixels are checked separately. */
#define PNG_CHUNK_LIMIT (64u << 20)

static const uint8_t png_magic[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

static bool is_png(const uint8_t *p, size_t len)
{
	return len >= 8 && memcmp(p, png_magic, 8) == 0;
}

static bool is_jpeg(const uint8_t *p, size_t len)
{
	return len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff;
}

/*
 * One TurboJPEG decompressor per thread, made on first use and destroyed when the thread
 * exits (decode threads live as long as their loader or pool), so no call allocates one.
 */
static pthread_key_t tj_key;
static pthread_once_t tj_once = PTHREAD_ONCE_INIT;
static int tj_key_ret;

static void tj_free(void *h)
{
	tjDestroy(h);
}

static void tj_key_make(void)
{
	tj_key_ret = pthread_key_create(&tj_key, tj_free);
}

static tjhandle tj_handle(void)
{
	tjhandle h;

	pthread_once(&tj_once, tj_key_make);
	if (tj_key_ret)
		return NULL;
	h = pthread_getspecific(tj_key);
	if (!h) {
		h = tjInitDecompress();
		if (h && pthread_setspecific(tj_key, h)) {
			tjDestroy(h);
			h = NULL;
		}
	}
	return h;
}

/*
 * A libspng context per image: 0.7 has no way to reset one for the next image (its
 * zlib stream and chunk state live inside), so unlike TurboJPEG's it cannot be kept per
 * thread. Creating and freeing one (malloc, free, spng_ctx_free) took about 4% of the
 * samples in `perf record` of bench_features on 28x28 PNGs.
 */
static int png_open(struct gf_image *img)
{
	struct spng_ihdr ihdr;
	struct spng_trns trns;
	spng_ctx *ctx = spng_ctx_new(0);
	int e;

	if (!ctx)
		return grist_fail(-ENOMEM, "PNG: out of memory");
	img->spng = ctx;
	if ((e = spng_set_chunk_limits(ctx, PNG_CHUNK_LIMIT, PNG_CHUNK_LIMIT)) ||
	    (e = spng_set_png_buffer(ctx, img->p, img->len)) || (e = spng_get_ihdr(ctx, &ihdr)))
		goto bad;
	img->width = ihdr.width;
	img->height = ihdr.height;
	img->spng_fmt = SPNG_FMT_PNG;
	img->spng_flags = 0;
	switch (ihdr.color_type) {
	case SPNG_COLOR_TYPE_GRAYSCALE: img->channels = 1; break;
	case SPNG_COLOR_TYPE_TRUECOLOR: img->channels = 3; break;
	case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: img->channels = 2; break;
	case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: img->channels = 4; break;
	case SPNG_COLOR_TYPE_INDEXED:
		e = spng_get_trns(ctx, &trns);
		if (e && e != SPNG_ECHUNKAVAIL)
			goto bad;
		img->channels = e ? 3 : 4;
		img->spng_fmt = e ? SPNG_FMT_RGB8 : SPNG_FMT_RGBA8;
		img->spng_flags = e ? 0 : SPNG_DECODE_TRNS;
		break;
	default:
		e = SPNG_EIHDR_SIZE;
		goto bad;
	}
	img->sample_bytes = ihdr.bit_depth == 16 ? 2 : 1;
	if (ihdr.bit_depth < 8 && ihdr.color_type != SPNG_COLOR_TYPE_INDEXED) {
		gf_image_close(img);
		return grist_fail(-ENOTSUP, "PNG of %u-bit samples: only 8- and 16-bit images are decoded",
				  ihdr.bit_depth);
	}
	return 0;
bad:
	gf_image_close(img);
	return grist_fail(-EBADMSG, "not a valid PNG: %s", spng_strerror(e));
}

static int jpeg_open(struct gf_image *img)
{
	tjhandle h = tj_handle();
	int w, hh, subsamp, cs;

	if (!h)
		return grist_fail(-ENOMEM, "JPEG: cannot make a TurboJPEG decompressor");
	if (img->len > (unsigned long)-1 || tjDecompressHeader3(h, img->p, (unsigned long)img->len, &w, &hh, &subsamp, &cs))
		return grist_fail(-EBADMSG, "not a valid JPEG: %s", tjGetErrorStr2(h));
	if (cs == TJCS_CMYK || cs == TJCS_YCCK)
		return grist_fail(-ENOTSUP, "a CMYK JPEG: only grayscale and color (YCbCr, RGB) JPEGs are decoded");
	if (w <= 0 || hh <= 0)
		return grist_fail(-EBADMSG, "not a valid JPEG: %dx%d pixels", w, hh);
	img->width = (uint32_t)w;
	img->height = (uint32_t)hh;
	img->channels = cs == TJCS_GRAY ? 1 : 3;
	img->sample_bytes = 1;
	return 0;
}

int gf_image_open(struct gf_image *img, enum grist_decode want, const uint8_t *p, size_t len)
{
	*img = (struct gf_image){ .p = p, .len = len };
	if (is_png(p, len) && want != GRIST_DECODE_JPEG) {
		img->kind = GRIST_DECODE_PNG;
		return png_open(img);
	}
	if (is_jpeg(p, len) && want != GRIST_DECODE_PNG) {
		img->kind = GRIST_DECODE_JPEG;
		return jpeg_open(img);
	}
	return grist_fail(-EBADMSG, "%zu bytes that are not a %s (they start %s)", len,
			  want == GRIST_DECODE_PNG ? "PNG" : want == GRIST_DECODE_JPEG ? "JPEG" : "PNG or JPEG",
			  is_png(p, len) ? "like a PNG" : is_jpeg(p, len) ? "like a JPEG" : "with neither signature");
}

void gf_image_close(struct gf_image *img)
{
	if (img->spng)
		spng_ctx_free(img->spng);
	img->spng = NULL;
}

static int png_decode(struct gf_image *img, uint8_t *dst, size_t pitch)
{
	size_t row = (size_t)img->width * img->channels * img->sample_bytes, size = 0, need = row * img->height;
	uint8_t *tmp = NULL;
	int e;

	if ((e = spng_decoded_image_size(img->spng, img->spng_fmt, &size)))
		goto bad;
	if (size != need) {
		gf_image_close(img);
		return grist_fail(-EBADMSG, "PNG decodes to %zu bytes, %ux%ux%u expected", size, img->height,
				  img->width, img->channels);
	}
	if (pitch == row) {
		e = spng_decode_image(img->spng, dst, need, img->spng_fmt, img->spng_flags);
	} else {
		/* a padded column: decode whole (interlaced images come in passes), then place the rows */
		tmp = malloc(need ? need : 1);
		if (!tmp) {
			gf_image_close(img);
			return grist_fail(-ENOMEM, "PNG: out of memory");
		}
		e = spng_decode_image(img->spng, tmp, need, img->spng_fmt, img->spng_flags);
		for (size_t y = 0; !e && y < img->height; y++)
			memcpy(dst + y * pitch, tmp + y * row, row);
		free(tmp);
	}
	if (e)
		goto bad;
	gf_image_close(img);
	return 0;
bad:
	gf_image_close(img);
	return grist_fail(-EBADMSG, "PNG does not decode: %s", spng_strerror(e));
}

static int jpeg_decode(struct gf_image *img, uint8_t *dst, size_t pitch)
{
	tjhandle h = tj_handle();

	/*
	 * Warnings stop the decode: libjpeg turns a truncated or damaged stream into a
	 * warning and fills the rest with gray, which would be a made-up row.
	 */
	if (tjDecompress2(h, img->p, (unsigned long)img->len, dst, (int)img->width, (int)pitch, (int)img->height,
			  img->channels == 1 ? TJPF_GRAY : TJPF_RGB, TJFLAG_STOPONWARNING))
		return grist_fail(-EBADMSG, "JPEG does not decode: %s", tjGetErrorStr2(h));
	return 0;
}

int gf_image_decode(struct gf_image *img, uint8_t *dst, size_t pitch)
{
	return img->kind == GRIST_DECODE_PNG ? png_decode(img, dst, pitch) : jpeg_decode(img, dst, pitch);
}
