/* Tests for the io stage: every backend, O_DIRECT, short reads, retries, errors, EOF, caps, fallbacks. */
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "common/error.h"
#include "io/io.h"

#define FILE_SIZE (4u << 20)
#define MAX_EXTENT (256u << 10)

struct fixture {
	char *dir;
	const char *path;
	uint8_t *data; /* the file's bytes */
	int fd;
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	fx->dir = t_mkdtemp();
	assert_non_null(fx->dir);
	fx->path = strdup(t_path(fx->dir, "data.bin"));
	fx->data = malloc(FILE_SIZE);
	assert_non_null(fx->data);
	t_fill(fx->data, FILE_SIZE, 42);
	assert_int_equal(t_write_file(fx->path, fx->data, FILE_SIZE), 0);
	fx->fd = open(fx->path, O_RDONLY | O_CLOEXEC);
	assert_true(fx->fd >= 0);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	close(fx->fd);
	free(fx->data);
	free((void *)fx->path);
	t_rmtree(fx->dir);
	free(fx);
	return 0;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Create an io object; skip the test when the backend cannot exist on this machine. */
static struct grist_io *make_io(enum grist_io_kind kind, const struct grist_io_config *cfg)
{
	struct grist_io *io = NULL;
	enum grist_io_kind k = kind == GRIST_IO_FAULT && cfg ? cfg->fault.inner : kind;
	char why[160];

	if (k == GRIST_IO_URING && grist_io_probe(why, sizeof(why))) {
		fprintf(stderr, "skipping: %s\n", why);
		skip();
	}
	assert_int_equal(grist_io_create(kind, cfg, &io), 0);
	return io;
}

/* Reap everything in flight, checking that reap never hands back more than asked. */
static unsigned reap_all(struct grist_io *io, struct grist_io_req **done, unsigned max)
{
	struct grist_io_stats st;
	unsigned got = 0;
	int n;

	for (;;) {
		grist_io_get_stats(io, &st);
		if (!st.inflight)
			return got;
		n = grist_io_reap(io, done + got, max - got, 1);
		assert_true(n >= 1 && (unsigned)n <= max - got);
		got += (unsigned)n;
	}
}

/* Random extents (some past EOF) read through @io must equal what pread returns. */
static void check_random_reads(struct grist_io *io, int fd, uint64_t size, unsigned count, uint64_t seed)
{
	struct grist_io_req *reqs = calloc(count, sizeof(*reqs));
	struct grist_io_req **ptrs = calloc(count, sizeof(*ptrs));
	struct grist_io_req **done = calloc(count, sizeof(*done));
	uint8_t *expect = malloc(MAX_EXTENT);
	uint64_t s = seed | 1;
	unsigned i, next = 0, got = 0;
	uint32_t slot;

	assert_true(reqs && ptrs && done && expect);
	assert_int_equal(grist_io_add_file(io, fd, "data.bin", &slot), 0);
	for (i = 0; i < count; i++) {
		reqs[i].file = slot;
		reqs[i].len = 1 + (uint32_t)(rng_next(&s) % MAX_EXTENT);
		reqs[i].offset = rng_next(&s) % (size + 4096); /* a few start past EOF */
		reqs[i].buf = malloc(reqs[i].len);
		reqs[i].user_data = i;
		assert_non_null(reqs[i].buf);
		ptrs[i] = &reqs[i];
	}
	while (got < count) {
		int n = grist_io_submit(io, ptrs + next, count - next);

		assert_true(n >= 0);
		next += (unsigned)n;
		n = grist_io_reap(io, done + got, count - got, n ? 0 : 1);
		assert_true(n >= 0);
		got += (unsigned)n;
	}
	for (i = 0; i < count; i++) {
		struct grist_io_req *r = done[i];
		ssize_t want = pread(fd, expect, r->len, (off_t)r->offset);

		assert_true(want >= 0);
		assert_int_equal(r->result, want);
		assert_memory_equal(r->buf, expect, (size_t)want);
		assert_int_equal(r, &reqs[r->user_data]);
	}
	for (i = 0; i < count; i++)
		free(reqs[i].buf);
	free(expect);
	free(done);
	free(ptrs);
	free(reqs);
}

static void test_uring_random_reads(void **state)
{
	struct fixture *fx = *state;
	struct grist_io_config cfg = { .queue_depth = 16 };
	struct grist_io *io = make_io(GRIST_IO_URING, &cfg);
	struct grist_io_stats st;

	check_random_reads(io, fx->fd, FILE_SIZE, 300, 1);
	grist_io_get_stats(io, &st);
	assert_string_equal(st.backend, "uring");
	assert_int_equal(st.completed, 300);
	assert_int_equal(st.errors, 0);
	/* Kernels with SINGLE_ISSUER (6.0) also have sparse file tables (5.19). */
	if (st.ring_flags & (1u << 12))
		assert_true(st.fixed_files);
	grist_io_destroy(io);
}

struct driven {
	struct grist_io *io;
	int fd;
};

static void *drive_reads(void *arg)
{
	struct driven *d = arg;

	check_random_reads(d->io, d->fd, FILE_SIZE, 40, 9);
	return NULL;
}

/* The engine creates io objects on one thread and drives each from its own thread. */
static void test_uring_driven_from_other_thread(void **state)
{
	struct fixture *fx = *state;
	struct driven d = { .io = make_io(GRIST_IO_URING, NULL), .fd = fx->fd };
	struct grist_io_stats st;
	uint32_t slot;
	pthread_t t;

	assert_int_equal(grist_io_add_file(d.io, fx->fd, fx->path, &slot), 0);
	assert_int_equal(pthread_create(&t, NULL, drive_reads, &d), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	grist_io_get_stats(d.io, &st);
	assert_int_equal(st.completed, 40);
	assert_int_equal(st.errors, 0);
	grist_io_destroy(d.io); /* nothing in flight: any thread may destroy */
}

static void test_pread_random_reads(void **state)
{
	struct fixture *fx = *state;
	struct grist_io_config cfg = { .queue_depth = 16, .threads = 3 };
	struct grist_io *io = make_io(GRIST_IO_PREAD, &cfg);
	struct grist_io_stats st;

	check_random_reads(io, fx->fd, FILE_SIZE, 300, 2);
	grist_io_get_stats(io, &st);
	assert_string_equal(st.backend, "pread");
	assert_int_equal(st.completed, 300);
	grist_io_destroy(io);
}

static void test_auto_random_reads(void **state)
{
	struct fixture *fx = *state;
	struct grist_io *io = make_io(GRIST_IO_AUTO, NULL);
	struct grist_io_stats st;

	check_random_reads(io, fx->fd, FILE_SIZE, 100, 3);
	grist_io_get_stats(io, &st);
	assert_string_equal(st.backend, grist_io_probe(NULL, 0) == 0 ? "uring" : "pread");
	grist_io_destroy(io);
}

static void test_uring_plain_fds(void **state)
{
	struct fixture *fx = *state;
	struct grist_io_config cfg = { .queue_depth = 8, .no_fixed_files = true };
	struct grist_io *io = make_io(GRIST_IO_URING, &cfg);
	struct grist_io_stats st;

	check_random_reads(io, fx->fd, FILE_SIZE, 50, 4);
	grist_io_get_stats(io, &st);
	assert_false(st.fixed_files);
	grist_io_destroy(io);
}

/* O_DIRECT: aligned extents into aligned buffers, through both real backends. */
static void direct_reads(struct fixture *fx, enum grist_io_kind kind)
{
	struct grist_io_config cfg = { .queue_depth = 8 };
	struct grist_io_open_info info;
	struct grist_io_req reqs[32], *ptrs[32], *done[32];
	struct grist_io *io;
	uint64_t s = 77;
	uint32_t slot;
	unsigned i;
	int ret;

	ret = grist_io_open_file(fx->path, GRIST_IO_MODE_DIRECT, &info);
	if (ret == -ENOTSUP) {
		fprintf(stderr, "skipping: %s\n", grist_last_error());
		skip();
	}
	assert_int_equal(ret, 0);
	assert_true(info.direct);
	assert_int_equal(info.size, FILE_SIZE);
	assert_true(info.mem_align >= 512 && info.offset_align >= 1);
	io = make_io(kind, &cfg);
	assert_int_equal(grist_io_add_file(io, info.fd, fx->path, &slot), 0);
	for (i = 0; i < 32; i++) {
		uint64_t off = rng_next(&s) % FILE_SIZE, aoff, alen;

		assert_int_equal(grist_io_align_extent(off, 1 + rng_next(&s) % 70000, 4096, &aoff, &alen), 0);
		memset(&reqs[i], 0, sizeof(reqs[i]));
		reqs[i].offset = aoff;
		reqs[i].len = (uint32_t)alen;
		reqs[i].buf = aligned_alloc(4096, alen);
		assert_non_null(reqs[i].buf);
		ptrs[i] = &reqs[i];
	}
	/* The last one straddles EOF: a direct read comes back short there. */
	reqs[31].offset = FILE_SIZE - 4096;
	reqs[31].len = 8192;
	free(reqs[31].buf);
	reqs[31].buf = aligned_alloc(4096, 8192);
	for (i = 0; i < 32;) {
		ret = grist_io_submit(io, ptrs + i, 32 - i);
		assert_true(ret >= 0);
		i += (unsigned)ret;
		reap_all(io, done, 32);
	}
	for (i = 0; i < 32; i++) {
		uint64_t want = reqs[i].offset + reqs[i].len > FILE_SIZE ? FILE_SIZE - reqs[i].offset
									: reqs[i].len;

		assert_int_equal(reqs[i].result, want);
		assert_memory_equal(reqs[i].buf, fx->data + reqs[i].offset, want);
	}
	/* A misaligned request is refused before it reaches the kernel. */
	reqs[0].offset = 100;
	assert_int_equal(grist_io_submit(io, ptrs, 1), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "not aligned"));
	for (i = 0; i < 32; i++)
		free(reqs[i].buf);
	grist_io_destroy(io);
	close(info.fd);
}

static void test_uring_direct(void **state)
{
	direct_reads(*state, GRIST_IO_URING);
}

static void test_pread_direct(void **state)
{
	direct_reads(*state, GRIST_IO_PREAD);
}

/* Read one extent through @io and return the request's result. */
static int read_one(struct grist_io *io, uint32_t slot, uint64_t off, uint32_t len, uint8_t *buf,
		    struct grist_io_req *r)
{
	struct grist_io_req *p = r, *d;

	memset(r, 0, sizeof(*r));
	r->file = slot;
	r->offset = off;
	r->len = len;
	r->buf = buf;
	assert_int_equal(grist_io_submit(io, &p, 1), 1);
	assert_int_equal(grist_io_reap(io, &d, 1, 1), 1);
	assert_ptr_equal(d, r);
	return r->result;
}

static void test_eof_extents(void **state)
{
	struct fixture *fx = *state;
	enum grist_io_kind kinds[] = { GRIST_IO_PREAD, GRIST_IO_URING };
	struct grist_io_req r;
	uint8_t buf[8192];
	unsigned k;

	for (k = 0; k < 2; k++) {
		struct grist_io *io;
		uint32_t slot;

		if (kinds[k] == GRIST_IO_URING && grist_io_probe(NULL, 0))
			continue;
		io = make_io(kinds[k], NULL);
		assert_int_equal(grist_io_add_file(io, fx->fd, fx->path, &slot), 0);
		assert_int_equal(read_one(io, slot, FILE_SIZE - 100, 8192, buf, &r), 100);
		assert_memory_equal(buf, fx->data + FILE_SIZE - 100, 100);
		assert_int_equal(read_one(io, slot, FILE_SIZE, 10, buf, &r), 0);
		assert_int_equal(read_one(io, slot, FILE_SIZE + 5000, 10, buf, &r), 0);
		grist_io_destroy(io);
	}
}

/* Short reads from the injector must be completed by reading the rest again. */
static void short_reads(struct fixture *fx, enum grist_io_kind inner)
{
	struct grist_io_fault faults[] = {
		{ .seq = 0, .type = GRIST_IO_FAULT_SHORT, .arg = 1 },
		{ .seq = 2, .type = GRIST_IO_FAULT_SHORT, .arg = 1000 },
		{ .seq = 3, .type = GRIST_IO_FAULT_SHORT, .arg = 70000 }, /* longer than the read: no cut */
	};
	struct grist_io_config cfg = { .queue_depth = 4, .fault = { inner, faults, 3 } };
	struct grist_io *io = make_io(GRIST_IO_FAULT, &cfg);
	struct grist_io_req reqs[4], *ptrs[4], *done[4];
	struct grist_io_stats st;
	uint32_t slot;
	unsigned i;

	assert_int_equal(grist_io_add_file(io, fx->fd, fx->path, &slot), 0);
	for (i = 0; i < 4; i++) {
		memset(&reqs[i], 0, sizeof(reqs[i]));
		reqs[i].file = slot;
		reqs[i].offset = 12345 + i * 100000;
		reqs[i].len = 65536;
		reqs[i].buf = calloc(1, 65536);
		ptrs[i] = &reqs[i];
	}
	assert_int_equal(grist_io_submit(io, ptrs, 4), 4);
	assert_int_equal(reap_all(io, done, 4), 4);
	for (i = 0; i < 4; i++) {
		assert_int_equal(reqs[i].result, 65536);
		assert_int_equal(reqs[i].len, 65536);
		/* The tail beyond the cut was only ever read by the resubmission. */
		assert_memory_equal(reqs[i].buf, fx->data + reqs[i].offset, 65536);
		assert_int_equal(!!(reqs[i].flags & GRIST_IO_REQ_RESUBMITTED), i == 0 || i == 2);
		free(reqs[i].buf);
	}
	grist_io_get_stats(io, &st);
	assert_int_equal(st.resubmitted, 2);
	assert_non_null(strstr(st.backend, "fault("));
	grist_io_destroy(io);
}

static void test_short_reads_uring(void **state)
{
	short_reads(*state, GRIST_IO_URING);
}

static void test_short_reads_pread(void **state)
{
	short_reads(*state, GRIST_IO_PREAD);
}

static void test_eagain_retried_then_bounded(void **state)
{
	struct fixture *fx = *state;
	struct grist_io_fault faults[] = {
		{ .seq = 0, .type = GRIST_IO_FAULT_EAGAIN, .arg = 3 },
		{ .seq = 1, .type = GRIST_IO_FAULT_EAGAIN, .arg = GRIST_IO_MAX_RETRIES + 5 },
	};
	struct grist_io_config cfg = { .fault = { GRIST_IO_PREAD, faults, 2 } };
	struct grist_io *io = make_io(GRIST_IO_FAULT, &cfg);
	struct grist_io_stats st;
	struct grist_io_req r;
	uint8_t buf[4096];
	uint32_t slot;

	assert_int_equal(grist_io_add_file(io, fx->fd, fx->path, &slot), 0);
	assert_int_equal(read_one(io, slot, 4096, 4096, buf, &r), 4096);
	assert_int_equal(r.retries, 3);
	assert_memory_equal(buf, fx->data + 4096, 4096);
	grist_clear_error();
	assert_int_equal(read_one(io, slot, 8192, 4096, buf, &r), -EAGAIN);
	assert_non_null(strstr(grist_last_error(), "byte 8192"));
	assert_non_null(strstr(grist_last_error(), "retries"));
	grist_io_get_stats(io, &st);
	assert_int_equal(st.retries, 3 + GRIST_IO_MAX_RETRIES);
	assert_int_equal(st.errors, 1);
	grist_io_destroy(io);
}

static void test_eio_names_file_and_offset(void **state)
{
	struct fixture *fx = *state;
	struct grist_io_fault faults[] = {
		{ .seq = 1, .type = GRIST_IO_FAULT_EIO },
		{ .seq = 2, .type = GRIST_IO_FAULT_DELAY, .arg = 2000 },
	};
	enum grist_io_kind inner[] = { GRIST_IO_PREAD, GRIST_IO_URING };
	struct grist_io_req r;
	uint8_t buf[4096];
	char want[512];
	unsigned k;

	snprintf(want, sizeof(want), "%s: byte 65536: read of 4096 bytes failed: I/O error", fx->path);
	for (k = 0; k < 2; k++) {
		struct grist_io_config cfg = { .fault = { inner[k], faults, 2 } };
		struct grist_io *io;
		uint32_t slot;

		if (inner[k] == GRIST_IO_URING && grist_io_probe(NULL, 0))
			continue;
		io = make_io(GRIST_IO_FAULT, &cfg);
		assert_int_equal(grist_io_add_file(io, fx->fd, fx->path, &slot), 0);
		assert_int_equal(read_one(io, slot, 0, 4096, buf, &r), 4096);
		assert_int_equal(read_one(io, slot, 65536, 4096, buf, &r), -EIO);
		assert_string_equal(grist_last_error(), want);
		grist_clear_error();
		assert_int_equal(grist_io_req_error(io, &r), -EIO);
		assert_string_equal(grist_last_error(), want);
		/* A delayed read still arrives, intact. */
		assert_int_equal(read_one(io, slot, 100, 4096, buf, &r), 4096);
		assert_memory_equal(buf, fx->data + 100, 4096);
		grist_io_destroy(io);
	}
}

/* A real error from the OS: reading a directory fails with -EISDIR on every backend. */
static void test_real_error_surfaces(void **state)
{
	struct fixture *fx = *state;
	enum grist_io_kind kinds[] = { GRIST_IO_PREAD, GRIST_IO_URING };
	int dfd = open(fx->dir, O_RDONLY | O_DIRECTORY);
	struct grist_io_req r;
	uint8_t buf[64];
	unsigned k;

	assert_true(dfd >= 0);
	for (k = 0; k < 2; k++) {
		struct grist_io *io;
		uint32_t slot;

		if (kinds[k] == GRIST_IO_URING && grist_io_probe(NULL, 0))
			continue;
		io = make_io(kinds[k], NULL);
		assert_int_equal(grist_io_add_file(io, dfd, fx->dir, &slot), 0);
		assert_int_equal(read_one(io, slot, 512, 64, buf, &r), -EISDIR);
		assert_non_null(strstr(grist_last_error(), fx->dir));
		assert_non_null(strstr(grist_last_error(), "byte 512"));
		grist_io_destroy(io);
	}
	close(dfd);
}

static void caps(struct fixture *fx, enum grist_io_kind kind)
{
	struct grist_io_config cfg = { .queue_depth = 4, .max_bytes_in_flight = 3 * 65536 };
	struct grist_io_req reqs[10], *ptrs[10], *done[10];
	struct grist_io_stats st;
	struct grist_io *io = make_io(kind, &cfg);
	uint32_t slot;
	unsigned i;

	assert_int_equal(grist_io_add_file(io, fx->fd, fx->path, &slot), 0);
	for (i = 0; i < 10; i++) {
		memset(&reqs[i], 0, sizeof(reqs[i]));
		reqs[i].file = slot;
		reqs[i].offset = i * 4096;
		reqs[i].len = i < 5 ? 1024 : 65536;
		reqs[i].buf = malloc(reqs[i].len);
		ptrs[i] = &reqs[i];
	}
	/* Depth caps first: four small reads, then nothing more until one comes back. */
	assert_int_equal(grist_io_submit(io, ptrs, 10), 4);
	assert_int_equal(grist_io_submit(io, ptrs + 4, 6), 0);
	assert_int_equal(grist_io_reap(io, done, 1, 1), 1);
	assert_int_equal(grist_io_submit(io, ptrs + 4, 6), 1);
	assert_int_equal(reap_all(io, done, 10), 4);
	/* Then bytes: three 64 KiB reads fill the 192 KiB budget. */
	assert_int_equal(grist_io_submit(io, ptrs + 5, 5), 3);
	grist_io_get_stats(io, &st);
	assert_int_equal(st.inflight, 3);
	assert_int_equal(st.bytes_inflight, 3 * 65536);
	assert_int_equal(reap_all(io, done, 10), 3);
	/* One read over the whole budget still goes when it is alone. */
	reqs[8].len = 4 * 65536;
	free(reqs[8].buf);
	reqs[8].buf = malloc(reqs[8].len);
	assert_int_equal(grist_io_submit(io, ptrs + 8, 2), 1);
	assert_int_equal(reap_all(io, done, 10), 1);
	assert_int_equal(reqs[8].result, 4 * 65536);
	/* Malformed requests are refused whole. */
	reqs[9].file = 7;
	assert_int_equal(grist_io_submit(io, ptrs + 8, 2), -EINVAL);
	reqs[9].file = slot;
	reqs[9].len = 0;
	assert_int_equal(grist_io_submit(io, ptrs + 9, 1), -EINVAL);
	grist_io_get_stats(io, &st);
	assert_int_equal(st.inflight, 0);
	assert_int_equal(grist_io_reap(io, done, 10, 5), 0); /* nothing in flight: no wait */
	for (i = 0; i < 10; i++)
		free(reqs[i].buf);
	grist_io_destroy(io);
}

static void test_caps_uring(void **state)
{
	caps(*state, GRIST_IO_URING);
}

static void test_caps_pread(void **state)
{
	caps(*state, GRIST_IO_PREAD);
}

/* Destroy with reads queued and in flight: no leak, no stray thread, no late write (ASan). */
static void destroy_in_flight(struct fixture *fx, enum grist_io_kind kind)
{
	struct grist_io_config cfg = { .queue_depth = 32, .threads = 1 };
	struct grist_io_req reqs[32], *ptrs[32];
	struct grist_io *io = make_io(kind, &cfg);
	uint32_t slot;
	unsigned i;

	assert_int_equal(grist_io_add_file(io, fx->fd, fx->path, &slot), 0);
	for (i = 0; i < 32; i++) {
		memset(&reqs[i], 0, sizeof(reqs[i]));
		reqs[i].file = slot;
		reqs[i].offset = (uint64_t)(i % 4) << 20;
		reqs[i].len = 1u << 20;
		reqs[i].buf = malloc(1u << 20);
		ptrs[i] = &reqs[i];
	}
	assert_int_equal(grist_io_submit(io, ptrs, 32), 32);
	grist_io_destroy(io);
	for (i = 0; i < 32; i++)
		free(reqs[i].buf);
}

static void test_destroy_in_flight_uring(void **state)
{
	destroy_in_flight(*state, GRIST_IO_URING);
}

static void test_destroy_in_flight_pread(void **state)
{
	destroy_in_flight(*state, GRIST_IO_PREAD);
}

static void test_destroy_in_flight_fault(void **state)
{
	struct fixture *fx = *state;
	struct grist_io_fault faults[] = { { .seq = 0, .type = GRIST_IO_FAULT_SHORT, .arg = 10 } };
	struct grist_io_config cfg = { .fault = { GRIST_IO_PREAD, faults, 1 } };
	struct grist_io *io = make_io(GRIST_IO_FAULT, &cfg);
	struct grist_io_req r, *p = &r;
	uint8_t buf[4096];
	uint32_t slot;

	assert_int_equal(grist_io_add_file(io, fx->fd, fx->path, &slot), 0);
	memset(&r, 0, sizeof(r));
	r.file = slot;
	r.len = sizeof(buf);
	r.buf = buf;
	assert_int_equal(grist_io_submit(io, &p, 1), 1);
	grist_io_destroy(io);
	assert_int_equal(r.len, sizeof(buf)); /* the cut length was given back */
}

/* Run @fn in a forked child so rlimits, capabilities and seccomp stay there; its exit status is the verdict. */
static int in_child(int (*fn)(struct fixture *), struct fixture *fx)
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn(fx));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	/* Root is exempt from RLIMIT_MEMLOCK through CAP_IPC_LOCK: give it up. */
	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	return (int)syscall(SYS_capset, &h, d);
}

/* 0: fixed buffers used; 1: fell back cleanly; 2: something wrong; 77: io_uring missing. */
static int memlock_child(struct fixture *fx)
{
	struct rlimit rl = { 64 << 10, 64 << 10 };
	size_t arena_len = 1 << 20;
	uint8_t *arena = aligned_alloc(4096, arena_len);
	struct grist_io_config cfg = { .fixed_buf = arena, .fixed_buf_len = arena_len };
	struct grist_io_stats st;
	struct grist_io_req r;
	struct grist_io *io;
	uint32_t slot;

	if (grist_io_probe(NULL, 0))
		return 77;
	if (!arena || setrlimit(RLIMIT_MEMLOCK, &rl) || drop_ipc_lock())
		return 2;
	if (grist_io_create(GRIST_IO_URING, &cfg, &io) || grist_io_add_file(io, fx->fd, "f", &slot))
		return 2;
	if (read_one(io, slot, 5000, 200000, arena + 4096, &r) != 200000 ||
	    memcmp(arena + 4096, fx->data + 5000, 200000))
		return 2;
	grist_io_get_stats(io, &st);
	grist_io_destroy(io);
	free(arena);
	if (st.fixed_buffers)
		return st.fixed_reads == 1 ? 0 : 2;
	return (st.fixed_buffers_error == -ENOMEM || st.fixed_buffers_error == -EPERM) &&
			       !st.fixed_reads ? 1 : 2;
}

static void test_fixed_buffer_memlock_fallback(void **state)
{
	int rc = in_child(memlock_child, *state);

	if (rc == 77)
		skip();
	assert_int_equal(rc, 1);
}

static void test_fixed_buffer_used(void **state)
{
	struct fixture *fx = *state;
	size_t arena_len = 1 << 20;
	uint8_t *mem = aligned_alloc(4096, 2 * arena_len); /* only the first half is registered */
	struct grist_io_config cfg = { .fixed_buf = mem, .fixed_buf_len = arena_len };
	struct grist_io *io = make_io(GRIST_IO_URING, &cfg);
	struct grist_io_stats st;
	struct grist_io_req r;
	uint32_t slot;

	assert_int_equal(grist_io_add_file(io, fx->fd, fx->path, &slot), 0);
	assert_int_equal(read_one(io, slot, 77, 300000, mem + 100, &r), 300000);
	assert_memory_equal(mem + 100, fx->data + 77, 300000);
	/* Straddling the arena's end, and wholly outside it: plain reads. */
	assert_int_equal(read_one(io, slot, 3, 8192, mem + arena_len - 4096, &r), 8192);
	assert_memory_equal(mem + arena_len - 4096, fx->data + 3, 8192);
	assert_int_equal(read_one(io, slot, 9, 5000, mem + arena_len + 10, &r), 5000);
	assert_memory_equal(mem + arena_len + 10, fx->data + 9, 5000);
	grist_io_get_stats(io, &st);
	/* Root (CAP_IPC_LOCK) or a roomy RLIMIT_MEMLOCK registers 1 MiB; else the fallback test covers it. */
	assert_int_equal(st.fixed_reads, st.fixed_buffers ? 1 : 0);
	grist_io_destroy(io);
	free(mem);
}

/* 0: behaved; 1..: which check failed. Runs under a seccomp filter that refuses io_uring_setup. */
static int seccomp_child(struct fixture *fx)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	struct grist_io_stats st;
	struct grist_io *io;
	struct grist_io_req r;
	uint8_t buf[100];
	char why[160];
	uint32_t slot;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 77;
	if (grist_io_probe(why, sizeof(why)) != -EPERM || !strstr(why, "seccomp"))
		return 1;
	if (grist_io_create(GRIST_IO_URING, NULL, &io) != -EPERM || !strstr(grist_last_error(), "setup"))
		return 2;
	if (grist_io_create(GRIST_IO_AUTO, NULL, &io))
		return 3;
	grist_io_get_stats(io, &st);
	if (strcmp(st.backend, "pread") || grist_io_add_file(io, fx->fd, "f", &slot))
		return 4;
	if (read_one(io, slot, 10, 100, buf, &r) != 100 || memcmp(buf, fx->data + 10, 100))
		return 5;
	grist_io_destroy(io);
	return 0;
}

static void test_auto_falls_back_without_uring(void **state)
{
	int rc = in_child(seccomp_child, *state);

	if (rc == 77)
		skip();
	assert_int_equal(rc, 0);
}

static void test_open_and_align(void **state)
{
	struct fixture *fx = *state;
	struct grist_io_open_info info;
	uint64_t off, len;

	assert_int_equal(grist_io_align_extent(5000, 100, 4096, &off, &len), 0);
	assert_int_equal(off, 4096);
	assert_int_equal(len, 4096);
	assert_int_equal(grist_io_align_extent(4095, 2, 512, &off, &len), 0);
	assert_int_equal(off, 3584);
	assert_int_equal(len, 1024);
	assert_int_equal(grist_io_align_extent(8192, 4096, 4096, &off, &len), 0);
	assert_int_equal(off, 8192);
	assert_int_equal(len, 4096);
	assert_int_equal(grist_io_align_extent(0, 1, 3000, &off, &len), -EINVAL);
	assert_int_equal(grist_io_align_extent(UINT64_MAX - 10, 5, 4096, &off, &len), -EINVAL);

	/* A 4 MiB file fits in half of RAM: AUTO never goes direct, and says why. */
	assert_int_equal(grist_io_open_file(fx->path, GRIST_IO_MODE_AUTO, &info), 0);
	assert_false(info.direct);
	assert_int_equal(info.size, FILE_SIZE);
	assert_non_null(strstr(info.note, info.resident ? "mmap" : "buffered"));
	close(info.fd);
	assert_int_equal(grist_io_open_file(fx->path, GRIST_IO_MODE_BUFFERED, &info), 0);
	assert_false(info.direct);
	assert_int_equal(info.offset_align, 1);
	close(info.fd);
	assert_int_equal(grist_io_open_file(t_path(fx->dir, "missing"), GRIST_IO_MODE_AUTO, &info),
			 -ENOENT);
	assert_non_null(strstr(grist_last_error(), "missing"));
}

/* Drop @fd's clean pages from the page cache; false when the file system keeps them (tmpfs). */
static bool evict(int fd, uint64_t size)
{
	double share;

	assert_int_equal(fdatasync(fd), 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	assert_int_equal(grist_io_resident_share(fd, size, &share), 0);
	return share < 0.05;
}

/*
 * The page-cache probe, on a small file (every page looked at) and a large one (a spread
 * sample), and AUTO's choice from it: cached files are opened for mapping, evicted ones
 * are read.
 */
static void test_resident_probe(void **state)
{
	struct fixture *fx = *state;
	const uint64_t big = 64u << 20;
	const char *path = t_path(fx->dir, "big.bin");
	struct grist_io_open_info info;
	uint8_t *buf = malloc(1u << 20);
	double share;
	uint64_t off;
	int fd;

	assert_non_null(buf);
	assert_int_equal(grist_io_resident_share(fx->fd, 0, &share), 0);
	assert_true(share == 1.0);
	for (off = 0; off < FILE_SIZE; off += 1u << 20)
		assert_int_equal(pread(fx->fd, buf, 1u << 20, (off_t)off), 1u << 20);
	assert_int_equal(grist_io_resident_share(fx->fd, FILE_SIZE, &share), 0);
	assert_true(share > 0.99);
	assert_int_equal(grist_io_open_file(fx->path, GRIST_IO_MODE_AUTO, &info), 0);
	assert_true(info.resident);
	assert_false(info.direct);
	assert_non_null(strstr(info.note, "mmap"));
	close(info.fd);
	/* explicit modes never probe */
	assert_int_equal(grist_io_open_file(fx->path, GRIST_IO_MODE_BUFFERED, &info), 0);
	assert_false(info.resident);
	close(info.fd);

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	t_fill(buf, 1u << 20, 7);
	for (off = 0; off < big; off += 1u << 20)
		assert_int_equal(pwrite(fd, buf, 1u << 20, (off_t)off), 1u << 20);
	assert_int_equal(grist_io_resident_share(fd, big, &share), 0);
	assert_true(share > 0.99);
	if (!evict(fd, big) || !evict(fx->fd, FILE_SIZE)) {
		close(fd);
		unlink(path);
		free(buf);
		skip(); /* the file system keeps its pages (tmpfs): nothing more to see */
	}
	assert_int_equal(grist_io_open_file(fx->path, GRIST_IO_MODE_AUTO, &info), 0);
	assert_false(info.resident);
	assert_non_null(strstr(info.note, "buffered"));
	close(info.fd);
	/* half of the large file read back: the sample sees about half */
	for (off = 0; off < big / 2; off += 1u << 20)
		assert_int_equal(pread(fd, buf, 1u << 20, (off_t)off), 1u << 20);
	assert_int_equal(grist_io_resident_share(fd, big, &share), 0);
	assert_true(share > 0.4 && share < 0.7);
	assert_int_equal(grist_io_open_file(path, GRIST_IO_MODE_AUTO, &info), 0);
	assert_false(info.resident);
	close(info.fd);
	close(fd);
	unlink(path);
	free(buf);
}

static void test_bad_config_and_files(void **state)
{
	struct fixture *fx = *state;
	struct grist_io_fault bad[] = { { .seq = 0, .type = GRIST_IO_FAULT_SHORT, .arg = 0 } };
	struct grist_io_config cfg = { .queue_depth = 1u << 30 };
	struct grist_io *io;
	uint32_t slot;

	assert_int_equal(grist_io_create(GRIST_IO_PREAD, &cfg, &io), -EINVAL);
	cfg = (struct grist_io_config){ .fixed_buf_len = 10 };
	assert_int_equal(grist_io_create(GRIST_IO_PREAD, &cfg, &io), -EINVAL);
	cfg = (struct grist_io_config){ .fault = { GRIST_IO_PREAD, bad, 1 } };
	assert_int_equal(grist_io_create(GRIST_IO_FAULT, &cfg, &io), -EINVAL);
	cfg = (struct grist_io_config){ .fault = { GRIST_IO_FAULT, NULL, 0 } };
	assert_int_equal(grist_io_create(GRIST_IO_FAULT, &cfg, &io), -EINVAL);
	assert_int_equal(grist_io_create((enum grist_io_kind)99, NULL, &io), -EINVAL);

	cfg = (struct grist_io_config){ .max_files = 2 };
	io = make_io(GRIST_IO_PREAD, &cfg);
	assert_int_equal(grist_io_add_file(io, fx->fd, "a", &slot), 0);
	assert_int_equal(slot, 0);
	assert_int_equal(grist_io_add_file(io, fx->fd, "b", &slot), 0);
	assert_int_equal(slot, 1);
	assert_int_equal(grist_io_add_file(io, fx->fd, "c", &slot), -ENOSPC);
	assert_int_equal(grist_io_add_file(io, -1, "d", &slot), -EINVAL);
	grist_io_destroy(io);
	grist_io_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uring_random_reads),
		cmocka_unit_test(test_pread_random_reads),
		cmocka_unit_test(test_auto_random_reads),
		cmocka_unit_test(test_uring_plain_fds),
		cmocka_unit_test(test_uring_driven_from_other_thread),
		cmocka_unit_test(test_uring_direct),
		cmocka_unit_test(test_pread_direct),
		cmocka_unit_test(test_eof_extents),
		cmocka_unit_test(test_short_reads_uring),
		cmocka_unit_test(test_short_reads_pread),
		cmocka_unit_test(test_eagain_retried_then_bounded),
		cmocka_unit_test(test_eio_names_file_and_offset),
		cmocka_unit_test(test_real_error_surfaces),
		cmocka_unit_test(test_caps_uring),
		cmocka_unit_test(test_caps_pread),
		cmocka_unit_test(test_destroy_in_flight_uring),
		cmocka_unit_test(test_destroy_in_flight_pread),
		cmocka_unit_test(test_destroy_in_flight_fault),
		cmocka_unit_test(test_fixed_buffer_memlock_fallback),
		cmocka_unit_test(test_fixed_buffer_used),
		cmocka_unit_test(test_auto_falls_back_without_uring),
		cmocka_unit_test(test_open_and_align),
		cmocka_unit_test(test_resident_probe),
		cmocka_unit_test(test_bad_config_and_files),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
