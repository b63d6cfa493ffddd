/*
 * PNG (the direct path below for the common kinds, libspng otherwise) and JPEG
 * (libjpeg-turbo's TurboJPEG) decoding into a row.
 *
 * The header is read first and its size checked by the caller against the spec and the
 * row's room, so a lying or hostile image never writes past its column or allocates
 * more than the spec allows. Channels are the image's own (no gray<->color
 * conversion): gray 1, gray+alpha 2, RGB 3, RGBA 4; a palette expands to RGB, or RGBA
 * when it has a tRNS chunk, as OpenCV's IMREAD_UNCHANGED (TFDS's decoder) gives it.
 * 16-bit PNGs decode into uint16 columns (SPNG_FMT_PNG gives host-endian samples).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <spng.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <zlib.h>

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
 * After a failed call the handle is retired and the thread's next image gets a fresh
 * one. TurboJPEG 2.1 leaves a decompressor that failed inside tjDecompressHeader3()
 * (a reserved marker, a stream cut in its header, a bogus Huffman table) mid-header,
 * and every later call on it then fails too ("Improper call to JPEG library in state"
 * or the old error again): one bad image would fail every JPEG after it on this thread
 * (issue 35). A failure is rare, so making a handle then costs nothing that matters.
 * The message is taken first: it lives in the handle.
 */
static int tj_fail(tjhandle h, const char *what)
{
	int ret = grist_fail(-EBADMSG, "%s: %s", what, tjGetErrorStr2(h));

	if (pthread_getspecific(tj_key) == h)
		pthread_setspecific(tj_key, NULL);
	tjDestroy(h);
	return ret;
}

/*
 * The direct path for the PNGs datasets are made of (8- or 16-bit gray, gray+alpha, RGB,
 * RGBA, not interlaced: what TFDS's encoder writes), beside libspng. libspng 0.7 makes a
 * context per image and inflates scanline by scanline, one inflate() call per row, with
 * its own row buffers: for a 28x28 MNIST digit that overhead was half of the decode
 * (zlib's inflate itself is ~1.5 us of it, `perf` of the dict Loader). Here the whole
 * IDAT stream is inflated at once with a per-thread z_stream (inflateReset: no
 * allocation), and the rows are unfiltered in place. Integrity is checked as libspng
 * does and more: every chunk's CRC up to IEND, zlib's Adler-32, the exact inflated
 * size, every filter byte. On anything else (another format, a bad CRC, a truncated or
 * trailing stream, a critical chunk it does not know) it declines, and libspng decodes
 * the image from the start: its result or its error stands, so the direct path changes
 * speed, never results.
 */
#define PNG_DIRECT_KEEP (4u << 20) /* a thread keeps a scanline buffer up to this size between images */

struct png_direct_tls {
	z_stream z;
	bool z_ready;
	uint8_t *buf;            /* inflated scanlines (filter byte + row each) */
	size_t cap;
};

static pthread_key_t pd_key;
static pthread_once_t pd_once = PTHREAD_ONCE_INIT;
static int pd_key_ret;

static void pd_free(void *v)
{
	struct png_direct_tls *t = v;

	if (t->z_ready)
		inflateEnd(&t->z);
	free(t->buf);
	free(t);
}

static void pd_key_make(void)
{
	pd_key_ret = pthread_key_create(&pd_key, pd_free);
}

static struct png_direct_tls *pd_tls(void)
{
	struct png_direct_tls *t;

	pthread_once(&pd_once, pd_key_make);
	if (pd_key_ret)
		return NULL;
	t = pthread_getspecific(pd_key);
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (t && pthread_setspecific(pd_key, t)) {
			free(t);
			t = NULL;
		}
	}
	return t;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The chunk at @p (its length field), wholly inside [p, end) with a good CRC: its data length, else -1. */
static int64_t png_chunk(const uint8_t *p, const uint8_t *end)
{
	uint32_t n;

	if (end - p < 12)
		return -1;
	n = be32(p);
	if (n > 0x7fffffffu || (size_t)(end - p) - 12 < n)
		return -1;
	if (crc32(crc32(0L, Z_NULL, 0), p + 4, n + 4) != be32(p + 8 + n))
		return -1;
	return n;
}

/* IHDR for the direct path: @img's size and channels set and true, or false (libspng's turn). */
static bool png_direct_header(struct gf_image *img)
{
	const uint8_t *p = img->p + 8, *h = p + 8;

	if (png_chunk(p, img->p + img->len) != 13 || memcmp(p + 4, "IHDR", 4))
		return false;
	if ((h[8] != 8 && h[8] != 16) || h[10] || h[11] || h[12]) /* depth; compression, filter, interlace */
		return false;
	switch (h[9]) {
	case 0: img->channels = 1; break;
	case 2: img->channels = 3; break;
	case 4: img->channels = 2; break;
	case 6: img->channels = 4; break;
	default: return false;
	}
	img->width = be32(h);
	img->height = be32(h + 4);
	if (!img->width || !img->height || img->width > 0x7fffffffu || img->height > 0x7fffffffu)
		return false;
	img->sample_bytes = h[8] / 8;
	return true;
}

static uint8_t paeth(uint8_t a, uint8_t b, uint8_t c)
{
	int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);

	return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Unfilter @row (@n bytes, @bpp bytes per pixel) in place against @prev (NULL: the first row). */
static bool png_unfilter(uint8_t filter, uint8_t *row, const uint8_t *prev, size_t n, size_t bpp)
{
	size_t i;

	switch (filter) {
	case 0: return true;
	case 1:
		for (i = bpp; i < n; i++)
			row[i] = (uint8_t)(row[i] + row[i - bpp]);
		return true;
	case 2:
		for (i = 0; prev && i < n; i++)
			row[i] = (uint8_t)(row[i] + prev[i]);
		return true;
	case 3:
		for (i = 0; i < n; i++)
			row[i] = (uint8_t)(row[i] + (((i >= bpp ? row[i - bpp] : 0) + (prev ? prev[i] : 0)) >> 1));
		return true;
	case 4:
		for (i = 0; i < n; i++)
			row[i] = (uint8_t)(row[i] + paeth(i >= bpp ? row[i - bpp] : 0, prev ? prev[i] : 0,
							  i >= bpp && prev ? prev[i - bpp] : 0));
		return true;
	}
	return false;
}

static int png_direct_into(struct png_direct_tls *t, uint8_t *buf, struct gf_image *img, uint8_t *dst,
			   size_t pitch);

/* Decode @img into @dst (rows @pitch apart): 0, or 1 when it declines (nothing reported). */
static int png_direct(struct gf_image *img, uint8_t *dst, size_t pitch)
{
	struct png_direct_tls *t = pd_tls();
	size_t row = (size_t)img->width * img->channels * img->sample_bytes, need;
	uint8_t *big;
	int ret;

	if (!t || row > (SIZE_MAX - 1) / img->height - 1)
		return 1;
	need = (row + 1) * img->height;
	if (need > PNG_DIRECT_KEEP) { /* a large image: its buffer is not kept */
		if (!(big = malloc(need)))
			return 1;
		ret = png_direct_into(t, big, img, dst, pitch);
		free(big);
		return ret;
	}
	if (need > t->cap) {
		uint8_t *b = malloc(PNG_DIRECT_KEEP);

		if (!b)
			return 1;
		free(t->buf);
		t->buf = b;
		t->cap = PNG_DIRECT_KEEP;
	}
	return png_direct_into(t, t->buf, img, dst, pitch);
}

static int png_direct_into(struct png_direct_tls *t, uint8_t *buf, struct gf_image *img, uint8_t *dst,
			   size_t pitch)
{
	const uint8_t *p = img->p + 8 + 25, *end = img->p + img->len; /* past the signature and IHDR */
	size_t row = (size_t)img->width * img->channels * img->sample_bytes, need = (row + 1) * img->height, y, i;
	size_t bpp = (size_t)img->channels * img->sample_bytes;
	bool in_idat = false, idat_done = false, stream_end = false;
	int64_t n;

	if (!t->z_ready) {
		memset(&t->z, 0, sizeof(t->z));
		if (inflateInit(&t->z) != Z_OK)
			return 1;
		t->z_ready = true;
	} else if (inflateReset(&t->z) != Z_OK) {
		return 1;
	}
	t->z.next_out = buf;
	t->z.avail_out = (uInt)(need > UINT_MAX ? UINT_MAX : need);
	if (need > UINT_MAX)
		return 1;
	for (;;) {
		if ((n = png_chunk(p, end)) < 0)
			return 1;
		if (!memcmp(p + 4, "IDAT", 4)) {
			if (idat_done || stream_end || !n) {
				if (idat_done || n)
					return 1; /* IDATs apart, or data past the stream's end */
			} else {
				int zr;

				t->z.next_in = (Bytef *)(uintptr_t)(p + 8);
				t->z.avail_in = (uInt)n;
				zr = inflate(&t->z, Z_NO_FLUSH);
				if (zr == Z_STREAM_END)
					stream_end = true;
				else if (zr != Z_OK)
					return 1;
				if (t->z.avail_in)
					return 1; /* bytes past the zlib stream */
			}
			in_idat = true;
		} else {
			if (in_idat)
				idat_done = true;
			if (!memcmp(p + 4, "IEND", 4))
				break;
			if (!(p[4] & 0x20) && memcmp(p + 4, "PLTE", 4))
				return 1; /* a critical chunk the direct path does not know */
		}
		p += 12 + (size_t)n;
	}
	if (!stream_end || t->z.total_out != need)
		return 1;
	for (y = 0; y < img->height; y++) {
		uint8_t *line = buf + y * (row + 1);

		if (!png_unfilter(line[0], line + 1, y ? line - row : NULL, row, bpp))
			return 1;
	}
	for (y = 0; y < img->height; y++) {
		const uint8_t *line = buf + y * (row + 1) + 1;
		uint8_t *out = dst + y * pitch;

		if (img->sample_bytes == 1) {
			memcpy(out, line, row);
		} else { /* big-endian samples to host order, as SPNG_FMT_PNG gives them */
			for (i = 0; i < row; i += 2) {
				uint16_t v = (uint16_t)(line[i] << 8 | line[i + 1]);

				memcpy(out + i, &v, 2);
			}
		}
	}
	return 0;
}

/*
 * A libspng context per image: 0.7 has no way to reset one for the next image (its
 * zlib stream and chunk state live inside), so unlike TurboJPEG's it cannot be kept per
 * thread. Creating and freeing one (malloc, free, spng_ctx_free) took about 4% of the
 * samples in `perf record` of bench_features on 28x28 PNGs.
 */
static int png_open_spng(struct gf_image *img)
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

static int png_open(struct gf_image *img)
{
	if (png_direct_header(img)) {
		img->direct = true;
		return 0;
	}
	return png_open_spng(img);
}

static int jpeg_open(struct gf_image *img)
{
	tjhandle h = tj_handle();
	int w, hh, subsamp, cs;

	if (!h)
		return grist_fail(-ENOMEM, "JPEG: cannot make a TurboJPEG decompressor");
	if (img->len > (unsigned long)-1 || tjDecompressHeader3(h, img->p, (unsigned long)img->len, &w, &hh, &subsamp, &cs))
		return tj_fail(h, "not a valid JPEG");
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

	if (img->direct) {
		uint32_t w = img->width, h = img->height, c = img->channels, sb = img->sample_bytes;

		if (!png_direct(img, dst, pitch))
			return 0;
		/* declined: libspng decodes it from the start, and must find the same header */
		img->direct = false;
		if ((e = png_open_spng(img)))
			return e;
		if (img->width != w || img->height != h || img->channels != c || img->sample_bytes != sb) {
			gf_image_close(img);
			return grist_fail(-EBADMSG, "PNG header read two ways: %ux%ux%u, then %ux%ux%u", h, w, c,
					  img->height, img->width, img->channels);
		}
	}

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

	if (!h) /* a handle retired after another image's failure is made again here */
		return grist_fail(-ENOMEM, "JPEG: cannot make a TurboJPEG decompressor");
	/*
	 * Warnings stop the decode: libjpeg turns a truncated or damaged stream into a
	 * warning and fills the rest with gray, which would be a made-up row. A progressive
	 * file of more than 500 scans stops too: each scan passes over every coefficient
	 * again, and thousands of tiny ones make a large image decode for minutes.
	 */
	if (tjDecompress2(h, img->p, (unsigned long)img->len, dst, (int)img->width, (int)pitch, (int)img->height,
			  img->channels == 1 ? TJPF_GRAY : TJPF_RGB, TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS))
		return tj_fail(h, "JPEG does not decode");
	return 0;
}

int gf_image_decode(struct gf_image *img, uint8_t *dst, size_t pitch)
{
	return img->kind == GRIST_DECODE_PNG ? png_decode(img, dst, pitch) : jpeg_decode(img, dst, pitch);
}
