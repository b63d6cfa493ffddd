/*
 * grist-bench --vision: the training transform alone, RandomResizedCrop(224) + flip +
 * normalize to float32 (grist/vision.h), over a set of images on N threads: images/s, per
 * core and per CPU-second, medians of --repeat rounds. (bench_vision.c, a program of its own,
 * runs bench/py/vision_pipeline.py's C sides on the loader's crops.)
 *
 * The images are given (JPEG and PNG files, or folders of them) or generated: photo-like
 * frames (smooth gradients, edges and noise, not flat noise that no codec sees in
 * practice) of ImageNet's sizes (shorter side 200-800, median about 375, mostly 4:3), JPEG
 * quality 75-95 and 4:2:0 (10% 4:4:4), encoded by TurboJPEG. All are read into memory first,
 * so the figure is the decode and transform, not the disk (bench/py/vision_pipeline.py runs
 * the whole loader on real photographs, beside its peers).
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "bench.h"
#include "grist/error.h"
#include "grist/features.h"
#include "grist/vision.h"
#include "cli.h"

/* "grist-bench: vision: MESSAGE: what @err says" on stderr; CLI_EXIT_DATA. */
static int verr(int err, const char *what, ...) __attribute__((format(printf, 2, 3)));
static int verr(int err, const char *what, ...)
{
	va_list ap;

	fprintf(stderr, "%s: vision: ", cli_command_name);
	va_start(ap, what);
	vfprintf(stderr, what, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(-err));
	return CLI_EXIT_DATA;
}

struct vimage {
	uint8_t *data;
	size_t len;
};

struct vset {
	struct vimage *im;
	size_t n, cap;
	uint64_t bytes;
};

static int vset_add(struct vset *s, uint8_t *data, size_t len)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct vimage *im = realloc(s->im, cap * sizeof(*im));

		if (!im)
			return -ENOMEM;
		s->im = im;
		s->cap = cap;
	}
	s->im[s->n++] = (struct vimage){ data, len };
	s->bytes += len;
	return 0;
}

static void vset_free(struct vset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->im[i].data);
	free(s->im);
}

/* xorshift64*: the generated set is the same every run */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static double rnd_unit(uint64_t *s)
{
	return (double)(rnd(s) >> 11) * 0x1p-53;
}

/* One generated frame, JPEG-encoded: sizes, quality and subsampling as the header says. */
static int make_image(tjhandle tj, uint64_t *seed, uint8_t **out, size_t *len)
{
	double u = rnd_unit(seed), aspect = u < 0.75 ? 4.0 / 3 : u < 0.9 ? 3.0 / 4 : 0.6 + 1.2 * rnd_unit(seed);
	double g = sqrt(-2 * log(rnd_unit(seed) + 1e-12)) * cos(2 * M_PI * rnd_unit(seed));
	int shorter = (int)fmin(800, fmax(200, round(375 * exp(0.3 * g))));
	int w = aspect >= 1 ? (int)round(shorter * aspect) : shorter, h = aspect >= 1 ? shorter : (int)round(shorter / aspect);
	double fx = 3 + 20 * rnd_unit(seed), fy = 3 + 20 * rnd_unit(seed), edge = 0.2 + 0.6 * rnd_unit(seed);
	int quality = 75 + (int)(rnd(seed) % 21), samp = rnd_unit(seed) < 0.9 ? TJSAMP_420 : TJSAMP_444;
	uint8_t *px = malloc((size_t)w * h * 3);
	unsigned char *jpg = NULL;
	unsigned long n = 0;

	if (!px)
		return -ENOMEM;
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			for (int c = 0; c < 3; c++) {
				double v = 127 + 70 * sin(x / (fx + 4 * c) + y / fy) + (x > edge * w ? 40 : -40) +
					   (double)(rnd(seed) % 31) - 15;

				px[((size_t)y * w + x) * 3 + c] = (uint8_t)fmin(255, fmax(0, v));
			}
	if (tjCompress2(tj, px, w, 0, h, TJPF_RGB, &jpg, &n, samp, quality, 0)) {
		free(px);
		return -EIO;
	}
	free(px);
	*out = malloc(n);
	if (!*out) {
		tjFree(jpg);
		return -ENOMEM;
	}
	memcpy(*out, jpg, n);
	*len = n;
	tjFree(jpg);
	return 0;
}

static bool is_image_name(const char *name)
{
	const char *dot = strrchr(name, '.');

	return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

static int read_whole(const char *path, struct vset *s)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;
	int ret = -EIO;

	if (!f)
		return -errno;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		goto out;
	if (!(buf = malloc(n ? (size_t)n : 1))) {
		ret = -ENOMEM;
		goto out;
	}
	if (fread(buf, 1, (size_t)n, f) != (size_t)n)
		goto out;
	ret = vset_add(s, buf, (size_t)n);
	if (!ret)
		buf = NULL;
out:
	free(buf);
	fclose(f);
	return ret;
}

/* @path: an image file, or a folder whose images (any depth, by name) are read. */
static int add_path(const char *path, struct vset *s)
{
	struct stat st;
	struct dirent **list;
	int n, ret = 0;

	if (stat(path, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return read_whole(path, s);
	if ((n = scandir(path, &list, NULL, alphasort)) < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		char sub[4096];
		const char *name = list[i]->d_name;

		if (!ret && name[0] != '.' && snprintf(sub, sizeof(sub), "%s/%s", path, name) < (int)sizeof(sub)) {
			struct stat ss;

			if (!stat(sub, &ss) && (S_ISDIR(ss.st_mode) || is_image_name(name)))
				ret = add_path(sub, s);
		}
		free(list[i]);
	}
	free(list);
	return ret;
}

struct vrun {
	const struct grist_vision_transform *t;
	const struct vset *set;
	atomic_ullong next;        /* the next image's index: threads take work as they free up */
	atomic_ullong done;
	atomic_int error;
	double stop;               /* bench_now() when the round ends */
};

static void *vworker(void *arg)
{
	struct vrun *r = arg;
	size_t cap = grist_vision_out_bytes(r->t);
	void *out = malloc(cap);

	if (!out) {
		atomic_store(&r->error, -ENOMEM);
		return NULL;
	}
	while (bench_now() < r->stop && !atomic_load(&r->error)) {
		unsigned long long k = atomic_fetch_add(&r->next, 1);
		const struct vimage *im = &r->set->im[k % r->set->n];
		/* epoch and index from the running count: every pass over the set draws new boxes */
		int ret = grist_vision_apply(r->t, im->data, im->len, k / r->set->n, k % r->set->n, "image", out, cap,
					     NULL);

		if (ret) {
			/* the library's message lives on this thread: say it here */
			fprintf(stderr, "%s: vision: image %llu: %s\n", cli_command_name, k % r->set->n, grist_last_error());
			atomic_store(&r->error, ret);
			break;
		}
		atomic_fetch_add(&r->done, 1);
	}
	free(out);
	return NULL;
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec * 1e-6;
}

int bench_run_vision(const char *const *paths, size_t num_paths, const struct bench_vision_opts *o)
{
	struct grist_vision_transform t;
	struct vset set = { 0 };
	double ips[99], cps[99];
	unsigned threads = o->threads ? o->threads : 1, rounds = o->repeat ? o->repeat : 1;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned cores = ncpu > 0 && (unsigned)ncpu < threads ? (unsigned)ncpu : threads;
	pthread_t *tid = calloc(threads, sizeof(*tid));
	int ret = 0;

	if (!tid)
		return verr(-ENOMEM, "out of memory");
	for (size_t i = 0; i < num_paths && !ret; i++)
		if ((ret = add_path(paths[i], &set)))
			ret = verr(ret, "%s: cannot read", paths[i]);
	if (!ret && !num_paths) {
		tjhandle tj = tjInitCompress();
		uint64_t seed = 0x9e3779b97f4a7c15ull;

		for (uint64_t i = 0; tj && !ret && i < o->images; i++) {
			uint8_t *data;
			size_t len;

			if (!(ret = make_image(tj, &seed, &data, &len)) && (ret = vset_add(&set, data, len)))
				free(data);
		}
		if (!tj)
			ret = -ENOMEM;
		if (tj)
			tjDestroy(tj);
		if (ret)
			ret = verr(ret, "cannot make the images");
	}
	if (!ret && !set.n)
		ret = verr(-EINVAL, "no JPEG or PNG images among the files given");
	if (ret)
		goto out;
	grist_vision_transform_init(&t);
	t.op = GRIST_VISION_RANDOM_RESIZED_CROP;
	t.out_height = t.out_width = 224;
	t.flip = 0.5;
	t.normalize = true;
	t.dtype = GRIST_DTYPE_FLOAT32;
	t.decode = o->fast ? GRIST_VISION_DECODE_FAST : GRIST_VISION_DECODE_EXACT;
	memcpy(t.mean, (const float[3]){ 0.485f, 0.456f, 0.406f }, sizeof(t.mean));
	memcpy(t.std, (const float[3]){ 0.229f, 0.224f, 0.225f }, sizeof(t.std));
	if (!o->json)
		fprintf(stderr, "%s: vision: %zu %s images (%.1f KB each on average), RandomResizedCrop(224) + flip + "
			"normalize to float32, %s decode, %u threads, %u round%s of %.1f s\n",
			cli_command_name, set.n, num_paths ? "given" : "generated", set.bytes / 1e3 / set.n,
			o->fast ? "fast" : "exact", threads, rounds, rounds > 1 ? "s" : "", o->seconds);
	for (unsigned k = 0; k < rounds && !ret; k++) {
		struct vrun r = { .t = &t, .set = &set };
		double t0 = bench_now(), c0 = cpu_seconds(), wall, cpu;
		unsigned started = 0;

		r.stop = t0 + o->seconds;
		for (; started < threads; started++)
			if (pthread_create(&tid[started], NULL, vworker, &r)) {
				atomic_store(&r.error, -EAGAIN);
				break;
			}
		for (unsigned i = 0; i < started; i++)
			pthread_join(tid[i], NULL);
		wall = bench_now() - t0;
		cpu = cpu_seconds() - c0;
		if ((ret = atomic_load(&r.error))) {
			ret = verr(ret, "an image did not transform");
			break;
		}
		ips[k] = (double)atomic_load(&r.done) / wall;
		cps[k] = cpu > 0 ? (double)atomic_load(&r.done) / cpu : 0;
	}
	if (ret)
		goto out;
	{
		double m, mc;

		m = ips[bench_median_index(ips, rounds)];
		mc = cps[bench_median_index(cps, rounds)];
		if (o->json) {
			printf("{\"mode\": \"vision\", \"transform\": \"RandomResizedCrop(224)+flip+normalize float32\", "
			       "\"decode\": \"%s\", \"images\": %zu, \"generated\": %s, \"threads\": %u, \"cores\": %u, "
			       "\"images_per_s\": %.1f, \"images_per_s_per_core\": %.1f, \"images_per_cpu_s\": %.1f, "
			       "\"rounds\": [",
			       o->fast ? "fast" : "exact", set.n, num_paths ? "false" : "true", threads, cores, m, m / cores, mc);
			for (unsigned k = 0; k < rounds; k++)
				printf("%s%.1f", k ? ", " : "", ips[k]);
			printf("]}\n");
		} else {
			printf("vision  %9.1f images/s  %8.1f per core (%u)  %8.1f per CPU-second   rounds:", m, m / cores,
			       cores, mc);
			for (unsigned k = 0; k < rounds; k++)
				printf(" %.0f", ips[k]);
			printf("\n");
		}
	}
out:
	free(tid);
	vset_free(&set);
	return ret;
}
