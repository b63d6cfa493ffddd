/* Random-read benchmark of the io backends (one ring, a ring per thread, the pread pool) beside fio. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grist/error.h"
#define GRIST_INTERNAL /* the io stage's callers' interface: see grist/internal/io.h */
#include "grist/internal/io.h"
#include "bench_util.h"

struct opts {
	const char *file;
	uint64_t size;      /* bytes, when the file must be created */
	uint32_t bs;
	unsigned qd;
	unsigned threads;   /* pread pool workers, and rings in the multi-ring run */
	double seconds;
	unsigned repeat;
	bool warm, direct, fio;
};

struct run {
	const struct opts *o;
	enum grist_io_kind kind;
	int fd;
	uint64_t size;
	uint64_t seed;
	uint64_t ops, bytes;
	int err;
};

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* One io object driven for o->seconds at queue depth o->qd with random bs-aligned offsets. */
static void *drive(void *arg)
{
	struct run *r = arg;
	const struct opts *o = r->o;
	struct grist_io_config cfg = { .queue_depth = o->qd, .threads = o->threads,
				       .max_bytes_in_flight = (uint64_t)o->qd * o->bs };
	struct grist_io_req *reqs = NULL, **free_list = NULL, **done = NULL;
	uint64_t blocks = r->size / o->bs;
	struct grist_io *io = NULL;
	unsigned nfree, i;
	uint8_t *arena = NULL;
	uint32_t slot;
	double end;
	int ret;

	reqs = calloc(o->qd, sizeof(*reqs));
	free_list = calloc(o->qd, sizeof(*free_list));
	done = calloc(o->qd, sizeof(*done));
	if (posix_memalign((void **)&arena, 4096, (size_t)o->qd * o->bs) || !reqs || !free_list || !done) {
		r->err = -ENOMEM;
		goto out;
	}
	/* The arena is offered for registration; the 8 MiB memlock default may refuse it. */
	cfg.fixed_buf = arena;
	cfg.fixed_buf_len = (size_t)o->qd * o->bs;
	ret = grist_io_create(r->kind, &cfg, &io);
	if (!ret)
		ret = grist_io_add_file(io, r->fd, o->file, &slot);
	if (ret) {
		r->err = ret;
		goto out;
	}
	for (i = 0; i < o->qd; i++) {
		reqs[i].file = slot;
		reqs[i].len = o->bs;
		reqs[i].buf = arena + (size_t)i * o->bs;
		free_list[i] = &reqs[i];
	}
	nfree = o->qd;
	end = bench_now() + o->seconds;
	while (bench_now() < end) {
		for (i = 0; i < nfree; i++)
			free_list[i]->offset = (rng(&r->seed) % blocks) * o->bs;
		ret = grist_io_submit(io, free_list, nfree);
		if (ret < 0) {
			r->err = ret;
			goto out;
		}
		memmove(free_list, free_list + ret, (nfree - (unsigned)ret) * sizeof(*free_list));
		nfree -= (unsigned)ret;
		ret = grist_io_reap(io, done, o->qd, 1);
		if (ret < 0) {
			r->err = ret;
			goto out;
		}
		for (i = 0; i < (unsigned)ret; i++) {
			if (done[i]->result != (int32_t)o->bs) {
				r->err = done[i]->result < 0 ? done[i]->result : -EIO;
				goto out;
			}
			r->ops++;
			r->bytes += o->bs;
			free_list[nfree++] = done[i];
		}
	}
out:
	grist_io_destroy(io);
	free(arena);
	free(done);
	free(free_list);
	free(reqs);
	return NULL;
}

/* Run @nthreads io objects of @kind at once; returns IOPS, or -1 on error. */
static double measure(const struct opts *o, enum grist_io_kind kind, unsigned nthreads, int fd,
		      uint64_t size, double *gbs)
{
	struct run runs[64];
	pthread_t tid[64];
	uint64_t ops = 0, bytes = 0;
	double t0, t;
	unsigned i;

	memset(runs, 0, sizeof(runs));
	t0 = bench_now();
	for (i = 0; i < nthreads; i++) {
		runs[i] = (struct run){ .o = o, .kind = kind, .fd = fd, .size = size,
					.seed = 0x9E3779B97F4A7C15ull * (i + 1) + (uint64_t)(t0 * 1e6) };
		pthread_create(&tid[i], NULL, drive, &runs[i]);
	}
	for (i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
	t = bench_now() - t0;
	for (i = 0; i < nthreads; i++) {
		if (runs[i].err) {
			fprintf(stderr, "bench_io: %s (%s)\n", grist_last_error(), grist_strerror(runs[i].err));
			return -1;
		}
		ops += runs[i].ops;
		bytes += runs[i].bytes;
	}
	*gbs = (double)bytes / t / 1e9;
	return (double)ops / t;
}

/* fio's read IOPS for the same file, block size and depth (terse output, field 8). */
static double fio_iops(const struct opts *o, bool direct)
{
	char cmd[1024], line[8192];
	double iops = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "fio --name=r --filename=%s --ioengine=io_uring --direct=%d --rw=randread --bs=%u "
		 "--iodepth=%u --runtime=%g --time_based --invalidate=%d --minimal 2>/dev/null",
		 o->file, direct, o->bs, o->qd, o->seconds, direct);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (fgets(line, sizeof(line), p)) {
		char *save = NULL, *tok = strtok_r(line, ";", &save);

		for (int f = 1; tok && f < 8; f++)
			tok = strtok_r(NULL, ";", &save);
		if (tok)
			iops = strtod(tok, NULL);
	}
	pclose(p);
	return iops;
}

static void drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	sync();
	if (fd >= 0) {
		if (write(fd, "3", 1) != 1)
			fprintf(stderr, "bench_io: could not drop caches\n");
		close(fd);
	}
}

static int ensure_file(const struct opts *o, uint64_t *size)
{
	struct stat st;
	uint8_t *buf;
	uint64_t done = 0, s = 88172645463325252ull;
	int fd;

	if (stat(o->file, &st) == 0 && (uint64_t)st.st_size >= o->size) {
		*size = (uint64_t)st.st_size;
		return 0;
	}
	fprintf(stderr, "bench_io: writing %llu MiB to %s\n", (unsigned long long)(o->size >> 20), o->file);
	fd = open(o->file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	buf = malloc(1 << 20);
	if (fd < 0 || !buf)
		return -1;
	while (done < o->size) {
		for (size_t i = 0; i < (1 << 20) / 8; i++)
			((uint64_t *)buf)[i] = rng(&s);
		if (write(fd, buf, 1 << 20) != 1 << 20)
			return -1;
		done += 1 << 20;
	}
	free(buf);
	fsync(fd);
	close(fd);
	*size = o->size;
	return 0;
}

static void warm_file(int fd, uint64_t size)
{
	uint8_t *buf = malloc(1 << 20);

	for (uint64_t off = 0; buf && off < size; off += 1 << 20)
		if (pread(fd, buf, 1 << 20, (off_t)off) <= 0)
			break;
	free(buf);
}

static void bench_mode(const struct opts *o, bool direct, uint64_t size)
{
	struct {
		const char *name;
		enum grist_io_kind kind;
		unsigned threads;
	} cfgs[] = {
		{ "ring x1", GRIST_IO_URING, 1 },
		{ "rings xT", GRIST_IO_URING, o->threads },
		{ "pread pool T", GRIST_IO_PREAD, 1 },
	};
	double iops[16], gbs[16], best_ring = 0;
	struct grist_io_open_info info;
	unsigned c, k;

	if (grist_io_open_file(o->file, direct ? GRIST_IO_MODE_DIRECT : GRIST_IO_MODE_BUFFERED, &info)) {
		fprintf(stderr, "bench_io: %s\n", grist_last_error());
		return;
	}
	if (direct)
		drop_caches();
	else
		warm_file(info.fd, size);
	printf("%s, bs %u, qd %u, T %u, %g s x %u (median)\n", direct ? "O_DIRECT (cold)" : "buffered (warm)",
	       o->bs, o->qd, o->threads, o->seconds, o->repeat);
	for (c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
		for (k = 0; k < o->repeat; k++)
			iops[k] = measure(o, cfgs[c].kind, cfgs[c].threads, info.fd, size, &gbs[k]);
		double m = bench_median(iops, o->repeat), g = bench_median(gbs, o->repeat);

		printf("  %-14s %10.0f IOPS %7.3f GB/s\n", cfgs[c].name, m, g);
		if (c == 0)
			best_ring = m;
	}
	if (o->fio) {
		for (k = 0; k < o->repeat; k++)
			iops[k] = fio_iops(o, direct);
		double m = bench_median(iops, o->repeat);

		printf("  %-14s %10.0f IOPS %7.3f GB/s   ring x1 / fio = %.2f\n", "fio io_uring", m,
		       m * o->bs / 1e9, m > 0 ? best_ring / m : 0);
	}
	close(info.fd);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_io [-f FILE] [-s SIZE_MIB] [-b BS] [-q QD] [-t THREADS] [-d SECONDS]\n"
		"                [-r REPEAT] [-m warm|direct|both] [-F (also run fio)]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = { .file = "/var/tmp/grist-bench-io.dat", .size = 1ull << 30, .bs = 4096,
			  .qd = 32, .threads = 2, .seconds = 3, .repeat = 3, .warm = true, .direct = true };
	uint64_t size;
	int c;

	while ((c = getopt(argc, argv, "f:s:b:q:t:d:r:m:F")) != -1) {
		switch (c) {
		case 'f': o.file = optarg; break;
		case 's': o.size = strtoull(optarg, NULL, 10) << 20; break;
		case 'b': o.bs = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'q': o.qd = (unsigned)strtoul(optarg, NULL, 10); break;
		case 't': o.threads = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'd': o.seconds = strtod(optarg, NULL); break;
		case 'r': o.repeat = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'm':
			o.warm = strcmp(optarg, "direct") != 0;
			o.direct = strcmp(optarg, "warm") != 0;
			break;
		case 'F': o.fio = true; break;
		default: usage();
		}
	}
	if (!o.bs || o.bs % 4096 || !o.qd || o.qd > 4096 || !o.threads || o.threads > 64 ||
	    !o.repeat || o.repeat > 16 || o.seconds <= 0 || o.size < o.bs)
		usage();
	if (ensure_file(&o, &size)) {
		fprintf(stderr, "bench_io: cannot create %s: %s\n", o.file, strerror(errno));
		return 1;
	}
	if (o.warm)
		bench_mode(&o, false, size);
	if (o.direct)
		bench_mode(&o, true, size);
	return 0;
}
