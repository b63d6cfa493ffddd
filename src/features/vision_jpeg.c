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
	uint8_t *row;          /* one decoded row of the region with its margins (copy-out) */
	size_t row_cap;
	uint8_t *buf;          /* the region's rows as libjpeg writes them, margins and all (in place) */
	size_t buf_cap;
	const uint8_t *px;     /* the last in-place region's first pixel in buf, and its rows' pitch */
	size_t pitch;
};

/* A thread keeps a region buffer up to this size between images; a larger one is freed after use. */
#define REGION_KEEP ((size_t)16 << 20)

static pthread_key_t jkey;
static pthread_once_t jonce = PTHREAD_ONCE_INIT;
static int jkey_ret;

static void jfree(void *v)
{
	struct gv_jpeg *j = v;

	jpeg_destroy_decompress(&j->d);
	free(j->row);
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

/*
 * The rows [@top, @top + @height) of the started decompression, decoded straight into the
 * thread's buffer (no copy): each row as libjpeg writes it, @w pixels of @ch bytes (margins
 * and the iMCU alignment included), rows a pitch apart that leaves 32 bytes and more of slack
 * (room for any SIMD store past the row, and 32-byte alignment for the resize's loads). The
 * region's first pixel is @off pixels into its row; CMYK rows become RGB in place (every
 * pixel's 3 bytes land at or before its 4). Sets j->px and j->pitch.
 */
static int read_in_place(struct gv_jpeg *j, uint32_t top, uint32_t height, uint32_t off, uint32_t width, JDIMENSION w,
			 uint32_t ch)
{
	struct jpeg_decompress_struct *d = &j->d;
	size_t pitch = (((size_t)w * ch + 31) & ~(size_t)31) + 32, need = pitch * height;
	JDIMENSION skip;

	/* the caller checked the image against max_pixels: this is at most about that much */
	if (need > j->buf_cap) {
		free(j->buf);
		j->buf_cap = 0;
		j->buf = aligned_alloc(32, need);
		if (!j->buf) {
			jpeg_abort_decompress(d);
			return grist_fail(-ENOMEM, "JPEG: out of memory for a %ux%u region", height, (unsigned)w);
		}
		j->buf_cap = need;
	}
	if (top && (skip = jpeg_skip_scanlines(d, top)) != top)
		return region_fail(j, -EBADMSG, "rows skipped:", (unsigned)skip, top);
	for (uint32_t y = 0; y < height;) {
		JSAMPROW rows[8];
		uint32_t n = height - y < 8 ? height - y : 8;
		JDIMENSION got;

		for (uint32_t i = 0; i < n; i++)
			rows[i] = j->buf + (size_t)(y + i) * pitch;
		if (!(got = jpeg_read_scanlines(d, rows, n)))
			return region_fail(j, -EBADMSG, "row missing:", top + y, d->output_height);
		if (ch == 4) /* CMYK to RGB in place */
			for (uint32_t i = 0; i < got; i++)
				cmyk_to_rgb(rows[i] + (size_t)off * 4, rows[i] + (size_t)off * 3, width);
		y += got;
	}
	j->px = j->buf + (size_t)off * (ch == 4 ? 3 : ch);
	j->pitch = pitch;
	/* not jpeg_finish_decompress(): it would want the rows below the region */
	jpeg_abort_decompress(d);
	return 0;
}

static int read_region(struct gv_jpeg *j, uint32_t denom, bool fast, uint32_t top, uint32_t left, uint32_t height,
		       uint32_t width, bool gray_out, uint8_t *dst, size_t pitch)
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
	jpeg_start_decompress(d);
	/* one column of margin each side (see the top of the file) */
	x = left ? left - 1 : 0;
	w = (left + width < d->output_width ? left + width + 1 : d->output_width) - x;
	if (x || w != d->output_width)
		jpeg_crop_scanline(d, &x, &w);
	if (!dst)
		return read_in_place(j, top, height, left - (uint32_t)x, width, w, ch);
	if ((size_t)w * ch > j->row_cap) {
		uint8_t *r = realloc(j->row, (size_t)w * ch);

		if (!r) {
			jpeg_abort_decompress(d);
			return grist_fail(-ENOMEM, "JPEG: out of memory for a row of %u pixels", (unsigned)w);
		}
		j->row = r;
		j->row_cap = (size_t)w * ch;
	}
	if (top && (skip = jpeg_skip_scanlines(d, top)) != top)
		return region_fail(j, -EBADMSG, "rows skipped:", (unsigned)skip, top);
	for (uint32_t y = 0; y < height; y++) {
		JSAMPROW r = j->row;
		const uint8_t *from = j->row + (size_t)(left - x) * ch;

		if (jpeg_read_scanlines(d, &r, 1) != 1)
			return region_fail(j, -EBADMSG, "row missing:", top + y, d->output_height);
		if (cmyk)
			cmyk_to_rgb(from, dst + (size_t)y * pitch, width);
		else
			memcpy(dst + (size_t)y * pitch, from, (size_t)width * ch);
	}
	/* not jpeg_finish_decompress(): it would want the rows below the region */
	jpeg_abort_decompress(d);
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
