/*
 * bench_vision: the C sides of bench/py/vision_pipeline.py, on the crops the grist loader
 * takes (a jobs file the Python side writes: each record's JPEG bytes and its box).
 *
 *   codec   one thread doing only grist's libjpeg region decodes of the boxes as the
 *           transform does them (ISLOW IDCT, fancy upsampling: exact mode's settings; RGB, in
 *           place in the thread's buffer); its rate times --threads is the codec bound.
 *   entropy one thread: what every region decode pays whatever its mode or scale: the header
 *           read, jpeg_start_decompress() (a progressive file's every scan), and the Huffman
 *           decoding of every row down to the box's bottom at the image's full width
 *           (jpeg_skip_scanlines() to there: no IDCT, upsampling or colour conversion). The
 *           floor under decode="fast" (docs/tuning.md, "Fast mode on a --max-side 512 dataset").
 *   decode_resize  one thread: grist_vision_apply() with uint8 output, no flip or normalize
 *           (the decode, the resize, the copy out).
 *   grist1  one thread: grist_vision_apply() of the benchmark's transform (RandomResizedCrop
 *           224, flip 0.5, normalize to float32): with the two above, the CPU shares of
 *           decode, resize and output per image.
 *   grist   the same on --threads threads: the transform without the loader.
 *   ffcv    FFCV's method on --threads threads: TurboJPEG's full decode (tjDecompress2 with
 *           TJFLAG_FASTDCT, as libffcv's imdecode), the box cut out, OpenCV's INTER_AREA
 *           resize to 224 x 224 (grist's interpolation="area", within a level of cv2), then
 *           the flip and ToTensor + Normalize to float32 in a plain loop. grist's INTER_AREA
 *           is computed in double without SIMD, slower than OpenCV's: vision_pipeline.py
 *           times cv2.resize on the same crops and prints the side with it in its place.
 *   ffcv_decode  one thread: the full decode alone (what that substitution keeps).
 *   resize  one thread: the resize alone at each box's size (pseudo-random pixels).
 *
 * A side named with "_fast" (codec_fast, decode_resize_fast, grist1_fast, grist_fast) runs
 * with decode="fast" whatever --decode says, so both modes alternate in one run.
 *
 * Every transform side checks the box it used against the job's (the same crops). Sides run
 * in rounds, their order rotated each round; each prints its rounds' images/s (wall) and
 * images per CPU-second (the process's CPU time, every thread) as one line:
 *   side=codec threads=1 images=1280 wall=... cpu=... (per round, comma separated)
 *
 *   bench_vision JOBS [--threads N] [--rounds R] [--reps K] [--sides codec,grist,...] [--decode fast]
 *
 * JOBS: "GVJOBS1\n", then u32 count, u64 epoch, u64 seed; per job u64 index, i32 top, left,
 * height, width, flipped, u32 length, the bytes (little-endian, as bench/py writes it).
 */
#define GRIST_INTERNAL /* the JPEG region decode and resizes alone: see grist/internal/vision.h */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <jpeglib.h>
#include <setjmp.h>
#include <turbojpeg.h>

#include "bench_util.h"
#include "grist/error.h"
#include "grist/internal/vision.h"
#include "grist/vision.h"

#define SIZE 224
#define MAX_ROUNDS 64

struct job {
	uint64_t index;
	int32_t box[5];
	uint32_t len;
	const uint8_t *data;
};

struct run {
	const struct job *jobs;
	size_t n, total; /* jobs, and jobs x reps */
	uint64_t epoch, seed;
	enum grist_vision_decode decode;
	const char *side;
	atomic_size_t next;
	atomic_int failed;
};

static const float MEAN[3] = { 0.485f, 0.456f, 0.406f }, STD[3] = { 0.229f, 0.224f, 0.225f };

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec * 1e-6;
}

static void transform(struct grist_vision_transform *t, const struct run *r, bool full)
{
	grist_vision_transform_init(t);
	t->op = GRIST_VISION_RANDOM_RESIZED_CROP;
	t->out_height = t->out_width = SIZE;
	t->seed = r->seed;
	t->decode = r->decode;
	if (full) {
		t->flip = 0.5;
		t->normalize = true;
		memcpy(t->mean, MEAN, sizeof(MEAN));
		memcpy(t->std, STD, sizeof(STD));
		t->dtype = GRIST_DTYPE_FLOAT32;
	}
}

static int fail(struct run *r, const struct job *j, const char *what)
{
	fprintf(stderr, "bench_vision: %s: record %llu: %s\n", r->side, (unsigned long long)j->index, what);
	atomic_store(&r->failed, 1);
	return -1;
}

/* grist_vision_apply() of every job it takes; the box checked against the job's. */
static int side_apply(struct run *r, bool full)
{
	struct grist_vision_transform t;
	size_t cap;
	void *out;

	transform(&t, r, full);
	cap = grist_vision_out_bytes(&t);
	out = malloc(cap);
	if (!out)
		return fail(r, r->jobs, "out of memory");
	for (size_t k; (k = atomic_fetch_add(&r->next, 1)) < r->total && !atomic_load(&r->failed);) {
		const struct job *j = &r->jobs[k % r->n];
		struct grist_vision_box b;

		if (grist_vision_apply(&t, j->data, j->len, r->epoch, j->index, "image", out, cap, &b)) {
			free(out);
			return fail(r, j, grist_last_error());
		}
		if (b.top != j->box[0] || b.left != j->box[1] || b.height != j->box[2] || b.width != j->box[3] ||
		    (full && b.flipped != j->box[4])) {
			free(out);
			return fail(r, j, "another box than the loader's");
		}
	}
	free(out);
	return 0;
}

/*
 * Only the region decode of each job's box, as grist's transform decodes it: in place, RGB.
 * codec_fast: fast mode's settings (fast IDCT, plain upsampling) at full scale, what fast
 * mode decodes where no DCT scaling applies (every box of the --max-side 512 set).
 */
static int side_codec(struct run *r)
{
	for (size_t k; (k = atomic_fetch_add(&r->next, 1)) < r->total && !atomic_load(&r->failed);) {
		const struct job *j = &r->jobs[k % r->n];
		struct gv_jpeg_info info;
		struct gv_jpeg *jd;

		if (gv_jpeg_open(j->data, j->len, 500, &jd, &info) ||
		    (r->decode == GRIST_VISION_DECODE_FAST
			     ? gv_jpeg_read_region_fast(jd, 1, (uint32_t)j->box[0], (uint32_t)j->box[1],
							(uint32_t)j->box[2], (uint32_t)j->box[3], NULL, 0)
			     : gv_jpeg_read_region(jd, (uint32_t)j->box[0], (uint32_t)j->box[1], (uint32_t)j->box[2],
						   (uint32_t)j->box[3], false, NULL, 0)))
			return fail(r, j, grist_last_error());
		gv_jpeg_release(jd);
	}
	return 0;
}

struct entropy_err {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
};

static void entropy_error_exit(j_common_ptr c)
{
	longjmp(((struct entropy_err *)c->err)->jb, 1);
}

/*
 * The entropy floor (see the top): on a decompressor of its own, each job's header, start and
 * Huffman decoding down to its box's bottom row, nothing else. libjpeg-turbo returns at once
 * from a skip to the last row, so the skip stops one row short of the image's bottom: a box
 * reaching the bottom is counted without its last iMCU row.
 */
static int side_entropy(struct run *r)
{
	struct jpeg_decompress_struct d;
	struct entropy_err e;
	const struct job *volatile j = r->jobs;

	d.err = jpeg_std_error(&e.pub);
	e.pub.error_exit = entropy_error_exit;
	if (setjmp(e.jb)) {
		jpeg_destroy_decompress(&d);
		return fail(r, j, "libjpeg failed");
	}
	jpeg_create_decompress(&d);
	for (size_t k; (k = atomic_fetch_add(&r->next, 1)) < r->total && !atomic_load(&r->failed);) {
		uint32_t bottom;

		j = &r->jobs[k % r->n];
		bottom = (uint32_t)j->box[0] + (uint32_t)j->box[2];
		jpeg_mem_src(&d, j->data, j->len);
		jpeg_read_header(&d, TRUE);
		if (d.num_components == 4)
			d.out_color_space = JCS_CMYK;
		jpeg_start_decompress(&d);
		jpeg_skip_scanlines(&d, bottom < d.output_height ? bottom : d.output_height - 1);
		jpeg_abort_decompress(&d);
	}
	jpeg_destroy_decompress(&d);
	return 0;
}

/*
 * The resize alone (Pillow's bilinear, to 224 x 224 uint8) at each job's box size, from one
 * buffer of pseudo-random bytes as large as the largest box: the resize's cost on the crops'
 * size distribution, without the decode's noise around it.
 */
static int side_resize(struct run *r)
{
	size_t maxh = 1, maxw = 1;
	uint8_t *src, *px = malloc(SIZE * SIZE * 3);

	for (size_t i = 0; i < r->n; i++) {
		maxh = (size_t)r->jobs[i].box[2] > maxh ? (size_t)r->jobs[i].box[2] : maxh;
		maxw = (size_t)r->jobs[i].box[3] > maxw ? (size_t)r->jobs[i].box[3] : maxw;
	}
	src = malloc(maxh * maxw * 3);
	if (!src || !px) {
		free(src);
		free(px);
		return fail(r, r->jobs, "out of memory");
	}
	for (size_t i = 0; i < maxh * maxw * 3; i++)
		src[i] = (uint8_t)((i * 2654435761u) >> 24);
	for (size_t k; (k = atomic_fetch_add(&r->next, 1)) < r->total && !atomic_load(&r->failed);) {
		const struct job *j = &r->jobs[k % r->n];

		if (gv_resize(src, (uint32_t)j->box[2], (uint32_t)j->box[3], maxw * 3, 3, px, SIZE, SIZE, SIZE * 3,
			      GRIST_VISION_BILINEAR)) {
			free(src);
			free(px);
			return fail(r, j, grist_last_error());
		}
	}
	free(src);
	free(px);
	return 0;
}

/*
 * FFCV's method: full decode (fast IDCT), the box cut out, INTER_AREA, flip, normalize;
 * @decode_only: the full decode alone (its share, to weigh the resize's).
 */
static int side_ffcv(struct run *r, bool decode_only)
{
	tjhandle tj = tjInitDecompress();
	uint8_t *img = NULL, *px = malloc(SIZE * SIZE * 3);
	float *out = malloc(sizeof(float) * SIZE * SIZE * 3);
	size_t cap = 0;
	int ret = 0;

	if (!tj || !px || !out) {
		ret = fail(r, r->jobs, "out of memory");
		goto done;
	}
	for (size_t k; (k = atomic_fetch_add(&r->next, 1)) < r->total && !atomic_load(&r->failed);) {
		const struct job *j = &r->jobs[k % r->n];
		int w, h, sub, cs;
		const uint8_t *crop;

		if (tjDecompressHeader3(tj, j->data, j->len, &w, &h, &sub, &cs)) {
			ret = fail(r, j, tjGetErrorStr2(tj));
			break;
		}
		if ((size_t)w * (size_t)h * 4 > cap) {
			free(img);
			cap = (size_t)w * (size_t)h * 4;
			if (!(img = malloc(cap))) {
				ret = fail(r, j, "out of memory");
				break;
			}
		}
		if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
			/* FFCV stores RGB; the few CMYK files: decoded as CMYK, Adobe's inverted form */
			if (tjDecompress2(tj, j->data, j->len, img, w, 0, h, TJPF_CMYK, TJFLAG_FASTDCT)) {
				ret = fail(r, j, tjGetErrorStr2(tj));
				break;
			}
			for (size_t i = 0; i < (size_t)w * (size_t)h; i++)
				for (int c = 0; c < 3; c++)
					img[i * 3 + c] = (uint8_t)(img[i * 4 + c] * img[i * 4 + 3] / 255);
		} else if (tjDecompress2(tj, j->data, j->len, img, w, 0, h, TJPF_RGB, TJFLAG_FASTDCT)) {
			ret = fail(r, j, tjGetErrorStr2(tj));
			break;
		}
		if (decode_only)
			continue;
		crop = img + ((size_t)j->box[0] * (size_t)w + (size_t)j->box[1]) * 3;
		if (gv_resize_area(crop, (uint32_t)j->box[2], (uint32_t)j->box[3], (size_t)w * 3, 3, SIZE, SIZE, 0, 0, px,
				   SIZE, SIZE, SIZE * 3)) {
			ret = fail(r, j, grist_last_error());
			break;
		}
		for (size_t y = 0; y < SIZE; y++)
			for (size_t x = 0; x < SIZE; x++) {
				const uint8_t *p = px + (y * SIZE + (j->box[4] ? SIZE - 1 - x : x)) * 3;

				for (int c = 0; c < 3; c++)
					out[(y * SIZE + x) * 3 + c] = ((float)p[c] / 255.0f - MEAN[c]) / STD[c];
			}
	}
done:
	if (tj)
		tjDestroy(tj);
	free(img);
	free(px);
	free(out);
	return ret;
}

static void *worker(void *arg)
{
	struct run *r = arg;

	if (!strcmp(r->side, "codec"))
		side_codec(r);
	else if (!strcmp(r->side, "entropy"))
		side_entropy(r);
	else if (!strcmp(r->side, "resize"))
		side_resize(r);
	else if (!strcmp(r->side, "ffcv") || !strcmp(r->side, "ffcv_decode"))
		side_ffcv(r, !strcmp(r->side, "ffcv_decode"));
	else
		side_apply(r, strcmp(r->side, "decode_resize") != 0);
	return NULL;
}

/* @side without a "_fast" ending into @base (of @cap bytes); whether it had one. */
static bool side_base(const char *side, char *base, size_t cap)
{
	size_t n = strlen(side);
	bool fast = n > 5 && !strcmp(side + n - 5, "_fast");

	snprintf(base, cap, "%.*s", (int)(fast ? n - 5 : n), side);
	return fast;
}

/* One round of @side on @threads threads over @reps passes of the jobs: images/s and per CPU-second. */
static int round_of(struct run *r, const char *side, unsigned threads, size_t reps, double *wall, double *cpu)
{
	pthread_t th[64];
	double t0, c0;
	char base[64];
	enum grist_vision_decode mode = r->decode;
	int ret;

	r->decode = side_base(side, base, sizeof(base)) ? GRIST_VISION_DECODE_FAST : mode;
	r->side = base;
	r->total = r->n * reps;
	atomic_store(&r->next, 0);
	t0 = bench_now();
	c0 = cpu_seconds();
	for (unsigned i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, worker, r))
			return -1;
	for (unsigned i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	*wall = (double)r->total / (bench_now() - t0);
	*cpu = (double)r->total / (cpu_seconds() - c0);
	ret = atomic_load(&r->failed) ? -1 : 0;
	r->decode = mode;
	return ret;
}

/* The sides that run on one thread (the codec bound, and the shares of the CPU per image). */
static bool single(const char *side)
{
	char b[64];

	side_base(side, b, sizeof(b));
	return !strcmp(b, "codec") || !strcmp(b, "entropy") || !strcmp(b, "decode_resize") || !strcmp(b, "grist1") ||
	       !strcmp(b, "ffcv_decode") || !strcmp(b, "resize");
}

static bool take(const uint8_t **p, const uint8_t *end, void *v, size_t n)
{
	if ((size_t)(end - *p) < n)
		return false;
	memcpy(v, *p, n);
	*p += n;
	return true;
}

static struct job *parse_jobs(const uint8_t *buf, size_t len, size_t *n, uint64_t *epoch, uint64_t *seed)
{
	const uint8_t *p = buf + 8, *end = buf + len;
	uint32_t count;
	struct job *jobs;

	if (len < 8 || memcmp(buf, "GVJOBS1\n", 8) || !take(&p, end, &count, 4) || !take(&p, end, epoch, 8) ||
	    !take(&p, end, seed, 8) || !count || !(jobs = calloc(count, sizeof(*jobs))))
		return NULL;
	for (uint32_t i = 0; i < count; i++) {
		if (!take(&p, end, &jobs[i].index, 8) || !take(&p, end, jobs[i].box, 20) ||
		    !take(&p, end, &jobs[i].len, 4) || (size_t)(end - p) < jobs[i].len) {
			free(jobs);
			return NULL;
		}
		jobs[i].data = p;
		p += jobs[i].len;
	}
	*n = count;
	return jobs;
}

int main(int argc, char **argv)
{
	const char *sides = "codec,decode_resize,grist1,grist,ffcv", *names[8];
	unsigned threads = 2, rounds = 3, nsides = 0;
	size_t reps = 1, len, n;
	double wall[8][MAX_ROUNDS], cpu[8][MAX_ROUNDS];
	struct run r = { .decode = GRIST_VISION_DECODE_EXACT };
	uint8_t *buf;
	char *list;

	if (argc < 2) {
		fprintf(stderr, "usage: bench_vision JOBS [--threads N] [--rounds R] [--reps K] [--sides a,b] "
				"[--decode fast]\n");
		return 2;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--threads"))
			threads = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--reps"))
			reps = (size_t)atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--sides"))
			sides = argv[i + 1];
		else if (!strcmp(argv[i], "--decode"))
			r.decode = strcmp(argv[i + 1], "fast") ? GRIST_VISION_DECODE_EXACT : GRIST_VISION_DECODE_FAST;
		else
			return fprintf(stderr, "bench_vision: unknown option %s\n", argv[i]), 2;
	}
	if (!threads || threads > 64 || !rounds || rounds > MAX_ROUNDS || !reps)
		return fprintf(stderr, "bench_vision: --threads 1-64, --rounds 1-%d, --reps >= 1\n", MAX_ROUNDS), 2;
	if (!(buf = bench_slurp(argv[1], &len)) || !(r.jobs = parse_jobs(buf, len, &n, &r.epoch, &r.seed)))
		return fprintf(stderr, "bench_vision: %s: cannot read the jobs\n", argv[1]), 1;
	r.n = n;
	list = strdup(sides);
	for (char *s = strtok(list, ","); s && nsides < 8; s = strtok(NULL, ","))
		names[nsides++] = s;
	for (unsigned k = 0; k < rounds; k++)
		for (unsigned i = 0; i < nsides; i++) {
			unsigned s = (i + k) % nsides;
			bool one = single(names[s]);

			if (round_of(&r, names[s], one ? 1 : threads, reps, &wall[s][k], &cpu[s][k]))
				return 1;
		}
	for (unsigned s = 0; s < nsides; s++) {
		bool one = single(names[s]);

		printf("side=%s threads=%u images=%zu wall=", names[s], one ? 1 : threads, n * reps);
		for (unsigned k = 0; k < rounds; k++)
			printf("%s%.1f", k ? "," : "", wall[s][k]);
		printf(" cpu=");
		for (unsigned k = 0; k < rounds; k++)
			printf("%s%.1f", k ? "," : "", cpu[s][k]);
		printf("\n");
	}
	free(list);
	free((void *)r.jobs);
	free(buf);
	return 0;
}
