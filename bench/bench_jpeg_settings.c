/*
 * bench_jpeg_settings: libjpeg decoder settings weighed for decode="fast" on the loader's own
 * crops (the jobs file of bench/bench_vision.c: bench/py/vision_pipeline.py --keep DIR writes
 * DIR/jobs.bin). Each setting decodes every job's box as grist's region decode does (the box
 * rounded outward to the scaled grid, a column of margin each side, jpeg_crop_scanline,
 * jpeg_skip_scanlines, the rows read, jpeg_abort_decompress), optionally then Pillow's
 * bilinear resize to 224 x 224 (gv_resize). Settings run in rounds, their order rotated;
 * each prints the median CPU ms per image (this thread's) and the median over rounds of
 * exact's time / its time (pairs from the same round: the figure to read on a busy machine).
 *
 *   entropy   header, start and Huffman decoding down to the box's bottom, nothing else
 *   start     header and jpeg_start_decompress alone (a progressive file's scans included)
 *   exact     ISLOW, fancy upsampling, full scale: exact mode
 *   fast      IFAST, plain upsampling, 1/2, 1/4 or 1/8 where the box still covers 224: fast mode
 *   islow8    ISLOW, plain upsampling, full scale
 *   mN        IFAST, plain upsampling, forced to N/8 (N = 1..8)
 *   autoM     IFAST, plain, the smallest N/8 of N = 1..8 that still covers 224
 *   auto3     the same of N in 1, 2, 3, 4, 8
 *   under6    1/2 (or smaller) wherever the scaled box is at least 0.6 x 224
 *   ...+r     (names ending in "+r") the same then the resize
 *
 *   bench_jpeg_settings JOBS [--rounds R] [--sides a,b,...] [--psnr]
 *
 * --psnr instead prints, for each "+r" side, the PSNR of its 224 x 224 output against
 * exact+r's (median and 5th percentile over the jobs; exact's outputs are held, 150 KB a
 * job) and which scales it chose. Jobs whose JPEG is not 3-component are left out
 * (grayscale and CMYK decode otherwise). The ratio needs exact (or exact+r) among the sides.
 */
#define GRIST_INTERNAL /* gv_resize: see grist/internal/vision.h */
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>

#include "bench_util.h"
#include "grist/internal/vision.h"

#define OUT 224
#define OUT_BYTES (OUT * OUT * 3)
#define MAX_SIDES 24
#define MAX_ROUNDS 64

struct job {
	int32_t box[5];
	uint32_t len;
	const uint8_t *data;
};

struct setting {
	const char *name;
	bool entropy, start, resize, fancy;
	J_DCT_METHOD dct;
	int scale;           /* N of N/8; 0: chosen per box */
	unsigned allowed;    /* bit N: N/8 may be chosen */
	double cover;        /* the chosen scale keeps the box at least cover x 224 */
};

struct jerr {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
};

static void on_error(j_common_ptr c)
{
	longjmp(((struct jerr *)c->err)->jb, 1);
}

static double thread_cpu(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static bool parse_setting(const char *name, struct setting *s)
{
	size_t n = strlen(name);

	*s = (struct setting){ .name = name, .dct = JDCT_IFAST, .cover = 1.0, .allowed = 1u << 8 };
	s->resize = n > 2 && !strcmp(name + n - 2, "+r");
	n -= s->resize ? 2 : 0;
	if (!strncmp(name, "entropy", n) && n == 7)
		s->entropy = true;
	else if (!strncmp(name, "start", n) && n == 5)
		s->start = true;
	else if (!strncmp(name, "exact", n) && n == 5)
		s->dct = JDCT_ISLOW, s->fancy = true, s->scale = 8;
	else if (!strncmp(name, "fast", n) && n == 4)
		s->allowed = 0x116; /* 1, 2, 4, 8 */
	else if (!strncmp(name, "islow8", n) && n == 6)
		s->dct = JDCT_ISLOW, s->scale = 8;
	else if (!strncmp(name, "autoM", n) && n == 5)
		s->allowed = 0x1fe;
	else if (!strncmp(name, "auto3", n) && n == 5)
		s->allowed = 0x11e;
	else if (!strncmp(name, "under6", n) && n == 6)
		s->allowed = 0x116, s->cover = 0.6;
	else if (n == 2 && name[0] == 'm' && name[1] >= '1' && name[1] <= '8')
		s->scale = name[1] - '0';
	else
		return false;
	return true;
}

/* The scale N/8 for a box of @qh x @qw. */
static int scale_for(const struct setting *s, uint32_t qh, uint32_t qw)
{
	if (s->scale)
		return s->scale;
	for (int m = 1; m < 8; m++)
		if ((s->allowed >> m & 1) && (double)(qh * m / 8) >= s->cover * OUT && (double)(qw * m / 8) >= s->cover * OUT)
			return m;
	return 8;
}

struct ctx {
	struct jpeg_decompress_struct d;
	struct jerr e;
	uint8_t *rows, *ref, *px;
	size_t rows_cap;
	double *psnr;
	size_t npsnr;
	long scales[9];
};

/* One job under @s (libjpeg's errors longjmp out of it): 1 done, 0 left out (not 3-component), -1 failed. */
static int decode_one(struct ctx *c, const struct setting *s, const struct job *j, size_t k, bool psnr)
{
	struct jpeg_decompress_struct *d = &c->d;
	uint32_t top = (uint32_t)j->box[0], left = (uint32_t)j->box[1], qh = (uint32_t)j->box[2];
	uint32_t qw = (uint32_t)j->box[3], sh, sw, bottom, right;
	JDIMENSION x, w;
	size_t pitch;
	int m;

	jpeg_mem_src(d, j->data, j->len);
	jpeg_read_header(d, TRUE);
	if (d->num_components != 3) {
		jpeg_abort_decompress(d);
		return 0;
	}
	m = s->entropy || s->start ? 8 : scale_for(s, qh, qw);
	c->scales[m]++;
	d->scale_num = (unsigned)m;
	d->scale_denom = 8;
	d->dct_method = s->dct;
	d->do_fancy_upsampling = s->fancy;
	d->out_color_space = JCS_RGB;
	/* libjpeg-turbo < 3.1.2 leaves these dangling into the freed pool (see vision_jpeg.c) */
	d->cconvert = NULL;
	d->cquantize = NULL;
	jpeg_start_decompress(d);
	if (s->start) {
		jpeg_abort_decompress(d);
		return 1;
	}
	sh = d->output_height;
	sw = d->output_width;
	bottom = (uint32_t)(((uint64_t)(top + qh) * (uint32_t)m + 7) / 8);
	right = (uint32_t)(((uint64_t)(left + qw) * (uint32_t)m + 7) / 8);
	top = top * (uint32_t)m / 8;
	left = left * (uint32_t)m / 8;
	qh = (bottom < sh ? bottom : sh) - top;
	qw = (right < sw ? right : sw) - left;
	if (s->entropy) {
		/* libjpeg-turbo returns at once from a skip to the last row: stop one short */
		jpeg_skip_scanlines(d, top + qh < sh ? top + qh : sh - 1);
		jpeg_abort_decompress(d);
		return 1;
	}
	x = left ? left - 1 : 0;
	w = (left + qw < sw ? left + qw + 1 : sw) - x;
	if (x || w != sw)
		jpeg_crop_scanline(d, &x, &w);
	pitch = ((size_t)w * 3 + 63) & ~(size_t)31;
	if (pitch * qh > c->rows_cap) {
		free(c->rows);
		c->rows_cap = pitch * qh;
		if (!(c->rows = malloc(c->rows_cap)))
			longjmp(c->e.jb, 1);
	}
	if (top)
		jpeg_skip_scanlines(d, top);
	for (uint32_t y = 0; y < qh;) {
		JSAMPROW r[8];
		uint32_t n = qh - y < 8 ? qh - y : 8;

		for (uint32_t i = 0; i < n; i++)
			r[i] = c->rows + (size_t)(y + i) * pitch;
		y += jpeg_read_scanlines(d, r, n);
	}
	jpeg_abort_decompress(d);
	if (s->resize) {
		uint8_t *o = psnr && s->scale == 8 && s->fancy ? c->ref + k * OUT_BYTES : c->px;
		double se = 0;

		if (gv_resize(c->rows + (size_t)(left - x) * 3, qh, qw, pitch, 3, o, OUT, OUT, OUT * 3,
			      GRIST_VISION_BILINEAR))
			return -1;
		if (psnr && o == c->px) {
			for (size_t i = 0; i < OUT_BYTES; i++) {
				double e = (double)o[i] - c->ref[k * OUT_BYTES + i];

				se += e * e;
			}
			se /= OUT_BYTES;
			c->psnr[c->npsnr++] = 10 * log10(255.0 * 255.0 / (se > 1e-12 ? se : 1e-12));
		}
	}
	return 1;
}

/* decode_one() with libjpeg's errors caught: -1. */
static int one(struct ctx *c, const struct setting *s, const struct job *j, size_t k, bool psnr)
{
	if (setjmp(c->e.jb)) {
		jpeg_abort_decompress(&c->d);
		return -1;
	}
	return decode_one(c, s, j, k, psnr);
}

/* CPU ms per image of @s over every job (the ones left out not counted). */
static double pass(struct ctx *c, const struct setting *s, const struct job *jobs, size_t n, bool psnr)
{
	double t0 = thread_cpu();
	size_t done = 0;

	for (size_t k = 0; k < n; k++) {
		int r = one(c, s, &jobs[k], k, psnr);

		if (r < 0) {
			fprintf(stderr, "bench_jpeg_settings: %s: job %zu: %s\n", s->name, k, c->e.pub.jpeg_message_table
					? c->e.pub.jpeg_message_table[c->e.pub.msg_code] : "failed");
			exit(1);
		}
		done += (size_t)r;
	}
	return done ? (thread_cpu() - t0) / (double)done * 1e3 : 0;
}

static struct job *parse_jobs(const uint8_t *buf, size_t len, size_t *n)
{
	const uint8_t *p = buf + 28, *end = buf + len;
	uint32_t count;
	struct job *jobs;

	if (len < 28 || memcmp(buf, "GVJOBS1\n", 8))
		return NULL;
	memcpy(&count, buf + 8, 4);
	if (!count || !(jobs = calloc(count, sizeof(*jobs))))
		return NULL;
	for (uint32_t i = 0; i < count; i++, p += jobs[i - 1].len) {
		if ((size_t)(end - p) < 32) {
			free(jobs);
			return NULL;
		}
		memcpy(jobs[i].box, p + 8, 20);
		memcpy(&jobs[i].len, p + 28, 4);
		p += 32;
		if ((size_t)(end - p) < jobs[i].len) {
			free(jobs);
			return NULL;
		}
		jobs[i].data = p;
	}
	*n = count;
	return jobs;
}

int main(int argc, char **argv)
{
	const char *sides = "entropy,start,exact,fast,islow8,m7,m6,m5,m4,m3,m2,m1,exact+r,fast+r,under6+r,m4+r";
	struct setting set[MAX_SIDES];
	static double t[MAX_SIDES][MAX_ROUNDS];
	unsigned rounds = 5, ns = 0, ex = MAX_SIDES, ex_r = MAX_SIDES;
	bool psnr = false;
	struct ctx c = { 0 };
	struct job *jobs;
	size_t len, n;
	uint8_t *buf;
	char *list;

	if (argc < 2)
		return fprintf(stderr, "usage: bench_jpeg_settings JOBS [--rounds R] [--sides a,b] [--psnr]\n"), 2;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--psnr"))
			psnr = true;
		else if (i + 1 < argc && !strcmp(argv[i], "--rounds"))
			rounds = (unsigned)atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--sides"))
			sides = argv[++i];
		else
			return fprintf(stderr, "bench_jpeg_settings: unknown option %s\n", argv[i]), 2;
	}
	if (!rounds || rounds > MAX_ROUNDS)
		return fprintf(stderr, "bench_jpeg_settings: --rounds 1-%d\n", MAX_ROUNDS), 2;
	if (!(buf = bench_slurp(argv[1], &len)) || !(jobs = parse_jobs(buf, len, &n)))
		return fprintf(stderr, "bench_jpeg_settings: %s: cannot read the jobs\n", argv[1]), 1;
	list = strdup(sides);
	for (char *s = strtok(list, ","); s; s = strtok(NULL, ",")) {
		if (ns == MAX_SIDES || !parse_setting(s, &set[ns]))
			return fprintf(stderr, "bench_jpeg_settings: unknown or too many sides: %s\n", s), 2;
		if (!strcmp(s, "exact"))
			ex = ns;
		else if (!strcmp(s, "exact+r"))
			ex_r = ns;
		ns++;
	}
	c.d.err = jpeg_std_error(&c.e.pub);
	c.e.pub.error_exit = on_error;
	jpeg_create_decompress(&c.d);
	c.px = malloc(OUT_BYTES);
	if (psnr) {
		c.ref = malloc(n * OUT_BYTES);
		c.psnr = malloc(n * sizeof(double));
		if (ex_r == MAX_SIDES || !c.ref || !c.psnr || !c.px)
			return fprintf(stderr, "bench_jpeg_settings: --psnr needs exact+r among the sides, and memory\n"), 2;
		pass(&c, &set[ex_r], jobs, n, true);
		for (unsigned s = 0; s < ns; s++) {
			if (s == ex_r || !set[s].resize)
				continue;
			c.npsnr = 0;
			memset(c.scales, 0, sizeof(c.scales));
			pass(&c, &set[s], jobs, n, true);
			qsort(c.psnr, c.npsnr, sizeof(double), bench_cmp_double);
			printf("%-10s PSNR against exact+r: median %.1f dB, 5th percentile %.1f dB (%zu jobs); scales:",
			       set[s].name, c.psnr[c.npsnr / 2], c.psnr[c.npsnr / 20], c.npsnr);
			for (int m = 8; m >= 1; m--)
				if (c.scales[m])
					printf(" %d/8 x%ld", m, c.scales[m]);
			printf("\n");
		}
	} else {
		for (unsigned k = 0; k < rounds; k++)
			for (unsigned i = 0; i < ns; i++) {
				unsigned s = (i + k) % ns;

				t[s][k] = pass(&c, &set[s], jobs, n, false);
			}
		for (unsigned s = 0; s < ns; s++) {
			double ratio[MAX_ROUNDS], ms[MAX_ROUNDS];
			const unsigned base = set[s].resize ? ex_r : ex; /* the time of exact in the same round */

			for (unsigned k = 0; k < rounds; k++) {
				ms[k] = t[s][k];
				ratio[k] = base < ns && t[s][k] > 0 ? t[base][k] / t[s][k] : 0;
			}
			printf("%-10s %.3f ms per image", set[s].name, bench_median(ms, rounds));
			if (base < ns)
				printf("; exact / this, median of the rounds' pairs: %.3f", bench_median(ratio, rounds));
			printf("\n");
		}
	}
	jpeg_destroy_decompress(&c.d);
	free(c.rows);
	free(c.ref);
	free(c.px);
	free(c.psnr);
	free(list);
	free(jobs);
	free(buf);
	return 0;
}
