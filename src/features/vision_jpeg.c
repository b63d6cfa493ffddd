/*
 * JPEG region decode through the libjpeg API (libjpeg-turbo 2.1 has no TurboJPEG crop):
 * only the crop's rows are decoded and only its iMCU columns are transformed.
 *
 * - jpeg_crop_scanline() moves the region's left edge down to an iMCU boundary; the
 *   region asked for has one column of margin on each side, because fancy upsampling
 *   treats a region's first and last column as the image's edge and would give them other
 *   values than a full decode does. The margins are dropped when the rows are copied out.
 * - jpeg_skip_scanlines() to the crop's first row (entropy decoding still runs, the IDCT,
 *   upsampling and colour conversion do not), the crop's rows read, then
 *   jpeg_abort_decompress(): jpeg_finish_decompress() would want every remaining row.
 * - ISLOW IDCT and fancy upsampling (libjpeg's defaults, Pillow's and torchvision's), so the
 *   pixels equal a full decode then crop.
 * - A libjpeg warning (a truncated or damaged stream, which libjpeg fills in with gray) is
 *   an error, as TurboJPEG's TJFLAG_STOPONWARNING makes it; a progress monitor stops a
 *   progressive file past the scan limit (TurboJPEG's TJFLAG_LIMITSCANS, 500 there).
 * - CMYK and YCCK (libjpeg converts YCCK to CMYK) become RGB as Pillow makes them: the
 *   samples inverted first ("assume adobe conventions", JpegImagePlugin.py reads every
 *   CMYK JPEG as CMYK;I), then Convert.c's cmyk2rgb.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "common/error.h"
#include "features/vision_internal.h"

struct jerr {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	char msg[JMSG_LENGTH_MAX];
	int code;
};

struct jprog {
	struct jpeg_progress_mgr pub;
	uint32_t limit;
};

static void on_error(j_common_ptr c)
{
	struct jerr *e = (struct jerr *)c->err;

	(*c->err->format_message)(c, e->msg);
	e->code = -EBADMSG;
	longjmp(e->jb, 1);
}

/* Warnings (level -1) are damaged data: stop, as a made-up gray region is not the image. */
static void on_message(j_common_ptr c, int level)
{
	struct jerr *e = (struct jerr *)c->err;

	if (level >= 0)
		return;
	(*c->err->format_message)(c, e->msg);
	e->code = -EBADMSG;
	longjmp(e->jb, 1);
}

static void on_progress(j_common_ptr c)
{
	struct jerr *e = (struct jerr *)c->err;
	struct jprog *p = (struct jprog *)c->progress;

	if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > (int)p->limit) {
		snprintf(e->msg, sizeof(e->msg), "a progressive JPEG of more than %u scans (the scan limit)", p->limit);
		e->code = -EFBIG;
		longjmp(e->jb, 1);
	}
}

/*
 * One decompressor per thread, made on first use and destroyed when the thread exits
 * (decode threads live as long as their loader): jpeg_create_decompress() allocates its
 * pools, jpeg_abort_decompress() after each image keeps them for the next.
 */
struct gv_jpeg {
	struct jpeg_decompress_struct d;
	struct jerr e;
	struct jprog pr;
	uint8_t *buf;          /* region rows as libjpeg writes them, margins and all */
	size_t buf_cap;
	const uint8_t *px;     /* the last in-place region's first pixel in buf, and its rows' pitch */
	size_t pitch;
	/* the region being read (gv_jpeg_begin_region, then gv_jpeg_pull) */
	uint32_t r_height;     /* its rows */
	uint32_t r_off;        /* its first pixel's place in a row libjpeg gives (the margin, the iMCU alignment) */
	uint32_t r_width;      /* its pixels a row */
	uint32_t r_ch;         /* bytes a pixel libjpeg gives: 1, 3, or 4 (CMYK, made RGB in place) */
	uint32_t r_lo, r_hi;   /* its rows [r_lo, r_hi) are in buf, r_lo first; libjpeg's next row is r_hi */
	size_t r_pitch;        /* of its rows in buf */
};

/*
 * The rows a pull decodes at least, when a caller asks for fewer: about 256 KB of them (half
 * a Zen 3 core's L2), so the decode and the resize take turns every few hundred rows, not
 * every few. Measured on the benchmark's crops (vision_ab.sh, docs/tuning.md): 16 KB batches,
 * whose rows the resize reads from L1, made the transform 1% slower than decoding the whole
 * crop first (the switch between libjpeg's code and the resize's every 16 rows costs more
 * than L2 reads, which the prefetcher hides); 256 KB is at parity there, and on 3000-pixel
 * photos, whose crops pass the L2 and the 16 MB a thread keeps, 1.11x faster.
 */
#define PULL_BYTES ((size_t)256 << 10)
#define PULL_MIN_ROWS 4

/* A thread keeps a region buffer up to this size between images; a larger one is freed after use. */
#define REGION_KEEP ((size_t)16 << 20)

static pthread_key_t jkey;
static pthread_once_t jonce = PTHREAD_ONCE_INIT;
static int jkey_ret;

static void jfree(void *v)
{
	struct gv_jpeg *j = v;

	jpeg_destroy_decompress(&j->d);
	free(j->buf);
	free(j);
}

static void jkey_make(void)
{
	jkey_ret = pthread_key_create(&jkey, jfree);
}

static struct gv_jpeg *jpeg_tls(void)
{
	struct gv_jpeg *j;

	pthread_once(&jonce, jkey_make);
	if (jkey_ret)
		return NULL;
	j = pthread_getspecific(jkey);
	if (j)
		return j;
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->d.err = jpeg_std_error(&j->e.pub);
	j->e.pub.error_exit = on_error;
	j->e.pub.emit_message = on_message;
	if (setjmp(j->e.jb)) { /* jpeg_create_decompress fails only for want of memory */
		free(j);
		return NULL;
	}
	jpeg_create_decompress(&j->d);
	j->pr.pub.progress_monitor = on_progress;
	j->d.progress = &j->pr.pub;
	if (pthread_setspecific(jkey, j)) {
		jfree(j);
		return NULL;
	}
	return j;
}

int gv_jpeg_open(const uint8_t *p, size_t len, uint32_t scan_limit, struct gv_jpeg **out, struct gv_jpeg_info *info)
{
	struct gv_jpeg *j = jpeg_tls();

	*out = NULL;
	if (!j)
		return grist_fail(-ENOMEM, "JPEG: cannot make a decompressor");
	if (len > (unsigned long)-1)
		return grist_fail(-EFBIG, "a JPEG of %zu bytes", len);
	j->e.msg[0] = 0;
	j->e.code = 0;
	j->pr.limit = scan_limit;
	if (setjmp(j->e.jb)) {
		jpeg_abort_decompress(&j->d);
		return grist_fail(j->e.code, "not a valid JPEG: %s", j->e.msg);
	}
	jpeg_mem_src(&j->d, p, (unsigned long)len);
	jpeg_read_header(&j->d, TRUE);
	info->width = j->d.image_width;
	info->height = j->d.image_height;
	info->components = (uint32_t)j->d.num_components;
	info->progressive = j->d.progressive_mode;
	if (!info->width || !info->height) {
		jpeg_abort_decompress(&j->d);
		return grist_fail(-EBADMSG, "not a valid JPEG: %ux%u pixels", info->height, info->width);
	}
	if (info->components != 1 && info->components != 3 && info->components != 4) {
		jpeg_abort_decompress(&j->d);
		return grist_fail(-ENOTSUP, "a JPEG of %u components", info->components);
	}
	*out = j;
	return 0;
}

void gv_jpeg_close(struct gv_jpeg *j)
{
	if (j)
		jpeg_abort_decompress(&j->d);
}

static inline uint8_t muldiv255(int a, int b)
{
	int t = a * b + 128;

	return (uint8_t)(((t >> 8) + t) >> 8);
}

/* Pillow's "CMYK;I" unpack then cmyk2rgb, for @n pixels. */
static void cmyk_to_rgb(const uint8_t *in, uint8_t *out, size_t n)
{
	for (size_t x = 0; x < n; x++, in += 4, out += 3) {
		int nk = 255 - (255 - in[3]);

		for (int ch = 0; ch < 3; ch++) {
			int v = nk - muldiv255(255 - in[ch], nk);

			out[ch] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
		}
	}
}

static int region_fail(struct gv_jpeg *j, int code, const char *what, unsigned a, unsigned b)
{
	jpeg_abort_decompress(&j->d);
	return grist_fail(code, "JPEG does not decode: %s %u of %u", what, a, b);
}

void gv_jpeg_scaled(const struct gv_jpeg_info *info, uint32_t denom, uint32_t *h, uint32_t *w)
{
	*h = (uint32_t)(((uint64_t)info->height + denom - 1) / denom);
	*w = (uint32_t)(((uint64_t)info->width + denom - 1) / denom);
}

int gv_jpeg_begin_region(struct gv_jpeg *j, uint32_t denom, bool fast, uint32_t top, uint32_t left, uint32_t height,
			 uint32_t width, bool gray_out)
{
	struct jpeg_decompress_struct *d = &j->d;
	JDIMENSION x, w, skip;
	uint32_t cmyk, ch;

	if (setjmp(j->e.jb)) {
		jpeg_abort_decompress(d);
		return grist_fail(j->e.code, j->e.code == -EFBIG ? "%s" : "JPEG does not decode: %s", j->e.msg);
	}
	d->scale_num = 1;
	d->scale_denom = denom;
	d->dct_method = fast ? JDCT_IFAST : JDCT_ISLOW;
	d->do_fancy_upsampling = !fast;
	jpeg_calc_output_dimensions(d);
	if (!width || !height || top > d->output_height || height > d->output_height - top ||
	    left > d->output_width || width > d->output_width - left) {
		uint32_t ih = d->output_height, iw = d->output_width;

		jpeg_abort_decompress(d);
		return grist_fail(-EINVAL, "JPEG region %ux%u at (%u, %u) is not inside the %ux%u image", height, width,
				  top, left, ih, iw);
	}
	cmyk = d->num_components == 4;
	if (d->num_components == 1 && gray_out)
		d->out_color_space = JCS_GRAYSCALE;
	else if (cmyk)
		d->out_color_space = JCS_CMYK;
	else
		d->out_color_space = JCS_RGB;
	ch = d->out_color_space == JCS_GRAYSCALE ? 1 : cmyk ? 4 : 3;
	/*
	 * A dangling colour deconverter: libjpeg-turbo before 3.1.2 (f158143e) leaves cconvert
	 * pointing into the last image's freed pool, and a start with merged upsampling (fast
	 * mode's plain upsampling of a 4:2:0 or 4:2:2 image at 1/1) does not set it again; then
	 * jpeg_skip_scanlines() stores a function pointer through it for the rows it discards
	 * and puts the old one back. Where that freed memory now holds this decode's tables or
	 * samples, those rows decode wrong: which, and whether, depends on what malloc handed
	 * out, so the same record gave other pixels at another thread count. Cleared, a merged
	 * start leaves it NULL (skipped there); any other start sets it.
	 */
	d->cconvert = NULL;
	d->cquantize = NULL;
	jpeg_start_decompress(d);
	/* one column of margin each side (see the top of the file) */
	x = left ? left - 1 : 0;
	w = (left + width < d->output_width ? left + width + 1 : d->output_width) - x;
	if (x || w != d->output_width)
		jpeg_crop_scanline(d, &x, &w);
	if (top && (skip = jpeg_skip_scanlines(d, top)) != top)
		return region_fail(j, -EBADMSG, "rows skipped:", (unsigned)skip, top);
	j->r_height = height;
	j->r_off = left - (uint32_t)x;
	j->r_width = width;
	j->r_ch = ch;
	j->r_lo = j->r_hi = 0;
	/* 32 bytes and more of slack: room for any SIMD store past the row, 32-byte aligned rows for the resize */
	j->r_pitch = (((size_t)w * ch + 31) & ~(size_t)31) + 32;
	return 0;
}

/* Room in buf for @rows rows, the rows [r_lo, r_hi) kept at its start. */
static int pull_room(struct gv_jpeg *j, uint32_t rows)
{
	size_t need = j->r_pitch * rows, keep = j->r_pitch * (j->r_hi - j->r_lo);
	uint8_t *b;

	if (need <= j->buf_cap)
		return 0;
	/* the caller checked the image against max_pixels: this is at most about that much */
	b = aligned_alloc(32, need);
	if (!b) {
		jpeg_abort_decompress(&j->d);
		return grist_fail(-ENOMEM, "JPEG: out of memory for %u rows of %zu bytes", rows, j->r_pitch);
	}
	if (keep)
		memcpy(b, j->buf, keep);
	free(j->buf);
	j->buf = b;
	j->buf_cap = need;
	return 0;
}

int gv_jpeg_pull(struct gv_jpeg *j, uint32_t y, uint32_t n, const uint8_t **rows, size_t *pitch)
{
	struct jpeg_decompress_struct *d = &j->d;
	uint32_t want;
	int ret;

	if (y < j->r_lo || y > j->r_height || n > j->r_height - y) {
		jpeg_abort_decompress(d);
		return grist_fail(-EINVAL, "JPEG: rows [%u, %u) asked of a region of %u rows, at row %u", y, y + n,
				  j->r_height, j->r_lo);
	}
	if (y + n > j->r_hi) {
		if (setjmp(j->e.jb)) {
			jpeg_abort_decompress(d);
			return grist_fail(j->e.code, "JPEG does not decode: %s", j->e.msg);
		}
		if (y >= j->r_hi) {
			/* nothing kept: rows below r_hi never asked for are skipped */
			JDIMENSION skip;

			if (y > j->r_hi && (skip = jpeg_skip_scanlines(d, y - j->r_hi)) != y - j->r_hi)
				return region_fail(j, -EBADMSG, "rows skipped:", (unsigned)skip, y - j->r_hi);
			j->r_lo = j->r_hi = y;
		} else if (y > j->r_lo) {
			/* the rows from y on kept, moved to the start */
			memmove(j->buf, j->buf + (size_t)(y - j->r_lo) * j->r_pitch, (size_t)(j->r_hi - y) * j->r_pitch);
			j->r_lo = y;
		}
		want = (uint32_t)(PULL_BYTES / j->r_pitch);
		want = want < PULL_MIN_ROWS ? PULL_MIN_ROWS : want;
		want = want < n ? n : want;
		want = want < j->r_height - y ? want : j->r_height - y;
		if ((ret = pull_room(j, want)))
			return ret;
		while (j->r_hi < y + want) {
			JSAMPROW r[8];
			uint32_t k = y + want - j->r_hi < 8 ? y + want - j->r_hi : 8;
			JDIMENSION got;

			for (uint32_t i = 0; i < k; i++)
				r[i] = j->buf + (size_t)(j->r_hi - j->r_lo + i) * j->r_pitch;
			if (!(got = jpeg_read_scanlines(d, r, k)))
				return region_fail(j, -EBADMSG, "row missing:", j->r_hi, j->r_height);
			if (j->r_ch == 4) /* CMYK to RGB in place: every pixel's 3 bytes land at or before its 4 */
				for (uint32_t i = 0; i < got; i++)
					cmyk_to_rgb(r[i] + (size_t)j->r_off * 4, r[i] + (size_t)j->r_off * 3, j->r_width);
			j->r_hi += got;
		}
	}
	*rows = j->buf + (size_t)(y - j->r_lo) * j->r_pitch + (size_t)j->r_off * (j->r_ch == 4 ? 3 : j->r_ch);
	*pitch = j->r_pitch;
	return 0;
}

static int read_region(struct gv_jpeg *j, uint32_t denom, bool fast, uint32_t top, uint32_t left, uint32_t height,
		       uint32_t width, bool gray_out, uint8_t *dst, size_t pitch)
{
	const uint8_t *rows;
	size_t rp, bytes;
	int ret = gv_jpeg_begin_region(j, denom, fast, top, left, height, width, gray_out);

	if (ret)
		return ret;
	if (!dst) {
		/* in place: every row at once, in the thread's buffer */
		if ((ret = gv_jpeg_pull(j, 0, height, &rows, &rp)))
			return ret;
		j->px = rows;
		j->pitch = rp;
	} else {
		bytes = (size_t)width * (j->r_ch == 4 ? 3 : j->r_ch);
		for (uint32_t y = 0; y < height; y++) {
			if ((ret = gv_jpeg_pull(j, y, 1, &rows, &rp)))
				return ret;
			memcpy(dst + (size_t)y * pitch, rows, bytes);
		}
	}
	/* not jpeg_finish_decompress(): it would want the rows below the region */
	jpeg_abort_decompress(&j->d);
	return 0;
}

int gv_jpeg_read_region(struct gv_jpeg *j, uint32_t top, uint32_t left, uint32_t height, uint32_t width,
			bool gray_out, uint8_t *dst, size_t pitch)
{
	return read_region(j, 1, false, top, left, height, width, gray_out, dst, pitch);
}

int gv_jpeg_read_region_fast(struct gv_jpeg *j, uint32_t denom, uint32_t top, uint32_t left, uint32_t height,
			     uint32_t width, uint8_t *dst, size_t pitch)
{
	return read_region(j, denom, true, top, left, height, width, false, dst, pitch);
}

const uint8_t *gv_jpeg_pixels(const struct gv_jpeg *j, size_t *pitch)
{
	*pitch = j->pitch;
	return j->px;
}

void gv_jpeg_release(struct gv_jpeg *j)
{
	if (j && j->buf_cap > REGION_KEEP) {
		free(j->buf);
		j->buf = NULL;
		j->buf_cap = 0;
	}
}

int gv_jpeg_header(const uint8_t *p, size_t len, struct gv_jpeg_info *info)
{
	struct gv_jpeg *j;
	int ret = gv_jpeg_open(p, len, 0, &j, info);

	gv_jpeg_close(j);
	return ret;
}

int gv_jpeg_decode_region(const uint8_t *p, size_t len, uint32_t top, uint32_t left, uint32_t height,
			  uint32_t width, bool gray_out, uint8_t *dst, size_t pitch, uint32_t scan_limit)
{
	struct gv_jpeg_info info;
	struct gv_jpeg *j;
	int ret = gv_jpeg_open(p, len, scan_limit, &j, &info);

	return ret ? ret : gv_jpeg_read_region(j, top, left, height, width, gray_out, dst, pitch);
}
