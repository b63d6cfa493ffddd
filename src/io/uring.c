/* The io_uring backend: one ring per io object, batched submission, fixed files and buffers. */
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/error.h"
#include "io/io.h"
#include "io/io_config.h"

/* The kernel refuses registered buffers larger than 1 GiB per iovec. */
#define FIXED_BUF_PIECE (1ull << 30)
/* Bound on back-to-back -EINTR/-EAGAIN/-EBUSY from io_uring_enter before giving up. */
#define MAX_ENTER_RETRIES 1000

#ifndef IORING_SETUP_SUBMIT_ALL
#define IORING_SETUP_SUBMIT_ALL (1U << 7)
#endif
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

struct uring_io {
	struct grist_io base;
	struct io_uring ring;
	unsigned setup_flags;
	/* Created with R_DISABLED so the thread that first drives it becomes the single issuer. */
	bool disabled;
	bool fixed_files;
	bool *file_fixed;         /* per slot: registered in the sparse table */
	struct iovec *bufs;       /* registered arena pieces, or NULL */
	unsigned nr_bufs;
	int fixed_bufs_err;
	uint64_t fixed_reads;
	/* Reads the kernel owes a CQE for, resubmissions included; every wait is bounded by it. */
	unsigned kinflight;
	struct grist_io_queue ready; /* completed, not yet handed back */
};

static struct uring_io *to_uring(struct grist_io *io)
{
	return (struct uring_io *)io;
}

/* Which registered piece holds [buf, buf+len) entirely; -1 when none. */
static int fixed_index(const struct uring_io *u, const uint8_t *buf, uint32_t len)
{
	unsigned i;

	for (i = 0; i < u->nr_bufs; i++) {
		const uint8_t *b = u->bufs[i].iov_base;

		if (buf >= b && (size_t)(buf - b) <= u->bufs[i].iov_len &&
		    len <= u->bufs[i].iov_len - (size_t)(buf - b))
			return (int)i;
	}
	return -1;
}

/* Queue one SQE for what is left of @req. The SQ has room: at most queue_depth reads are owed. */
static int queue_read(struct uring_io *u, struct grist_io_req *req)
{
	const struct grist_io_file *f = &u->base.files[req->file];
	uint8_t *buf = req->buf + req->done;
	uint32_t len = req->len - req->done;
	uint64_t off = req->offset + req->done;
	struct io_uring_sqe *sqe;
	int fd = f->fd, idx;

	sqe = io_uring_get_sqe(&u->ring);
	if (!sqe) {
		io_uring_submit(&u->ring);
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe)
			return grist_fail_at(-EBUSY, f->path, off, "io_uring submission queue is full");
	}
	if (u->fixed_files && u->file_fixed[req->file])
		fd = (int)req->file; /* an index into the registered table */
	idx = fixed_index(u, buf, len);
	if (idx >= 0) {
		io_uring_prep_read_fixed(sqe, fd, buf, len, off, idx);
		u->fixed_reads++;
	} else {
		io_uring_prep_read(sqe, fd, buf, len, off);
	}
	if (u->fixed_files && u->file_fixed[req->file])
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data(sqe, req);
	u->kinflight++;
	return 0;
}

static int enter_error(int ret, const char *what)
{
	return grist_fail(ret, "io_uring %s: %s", what, grist_strerror(ret));
}

/* With R_DISABLED the issuer is whoever enables the ring: do it on the driving thread. */
static int enable_ring(struct uring_io *u)
{
	long ret;

	if (!u->disabled)
		return 0;
	ret = syscall(__NR_io_uring_register, u->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	if (ret < 0)
		return grist_fail(-errno, "io_uring enable ring: %s", strerror(errno));
	u->disabled = false;
#if GRIST_HAVE_URING_REGISTER_RING_FD
	/* Saves an fget per enter; per task, so it belongs here. Optional. */
	io_uring_register_ring_fd(&u->ring);
#endif
	return 0;
}

/* Push SQEs to the kernel. -EAGAIN/-EBUSY leave them queued; the next enter carries them. */
static int flush_sq(struct uring_io *u)
{
	int ret, tries = 0;

	while (io_uring_sq_ready(&u->ring)) {
		ret = io_uring_submit(&u->ring);
		if (ret >= 0 || ret == -EAGAIN || ret == -EBUSY)
			return 0;
		if (ret != -EINTR || ++tries > MAX_ENTER_RETRIES)
			return enter_error(ret, "submit");
	}
	return 0;
}

static int uring_submit(struct grist_io *io, struct grist_io_req **reqs, unsigned n)
{
	struct uring_io *u = to_uring(io);
	unsigned i;
	int ret;

	ret = enable_ring(u);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		ret = queue_read(u, reqs[i]);
		if (ret)
			return ret;
	}
	/* plugged: the next reap's poll or wait carries them (grist_io_plug()) */
	return io->plugged ? 0 : flush_sq(u);
}

static int uring_flush(struct grist_io *io)
{
	struct uring_io *u = to_uring(io);
	int ret = enable_ring(u);

	return ret ? ret : flush_sq(u);
}

/* Fold every posted CQE into its request: finished ones go to the ready list, the rest are requeued. */
static int harvest(struct uring_io *u, bool requeue)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	int ret = 0;

	io_uring_for_each_cqe(&u->ring, head, cqe) {
		struct grist_io_req *req = io_uring_cqe_get_data(cqe);

		seen++;
		u->kinflight--;
		if (grist_io_req_step(req, cqe->res) == GRIST_IO_STEP_AGAIN && requeue) {
			ret = queue_read(u, req);
			if (!ret)
				continue;
			req->result = ret;
		}
		grist_io_queue_push(&u->ready, req);
	}
	io_uring_cq_advance(&u->ring, seen);
	return ret;
}

static int uring_reap(struct grist_io *io, struct grist_io_req **done, unsigned max, unsigned min_wait)
{
	struct uring_io *u = to_uring(io);
	unsigned n, tries = 0;
	bool polled = false;
	int ret;

	ret = enable_ring(u);
	if (ret)
		return ret;
	for (;;) {
		harvest(u, true);
		if (u->ready.n >= min_wait && (u->ready.n || polled))
			break;
		if (!u->kinflight) /* nothing owed: waiting could only hang */
			break;
		if (min_wait > u->ready.n) {
			unsigned want = min_wait - u->ready.n;

			/* Wait for what is owed, never more. */
			ret = io_uring_submit_and_wait(&u->ring, want < u->kinflight ? want : u->kinflight);
		} else {
			/* A poll: runs deferred task work so finished reads post their CQEs. */
			ret = io_uring_submit_and_get_events(&u->ring);
			polled = true;
		}
		if (ret >= 0) {
			tries = 0;
			continue;
		}
		/* Interrupted, short of resources, or CQ overflow (-EBUSY): reap and go again, boundedly. */
		if (ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			return enter_error(ret, "wait");
		if (++tries > MAX_ENTER_RETRIES)
			return enter_error(ret, "wait keeps failing");
	}
	ret = flush_sq(u); /* requeued short reads start now, not at the next call */
	n = grist_io_queue_drain(&u->ready, done, max);
	return n ? (int)n : ret;
}

static int uring_add_file(struct grist_io *io, uint32_t slot)
{
	struct uring_io *u = to_uring(io);
	int fd = io->files[slot].fd;

	if (!u->fixed_files)
		return 0;
	/* A failed update only costs the fget per read: that file uses its plain fd. */
	u->file_fixed[slot] = io_uring_register_files_update(&u->ring, slot, &fd, 1) == 1;
	return 0;
}

static int setup_ring(struct uring_io *u, const struct grist_io_config *cfg)
{
	/* Newest first; each -EINVAL drops one flag (fio and t/io_uring do the same). */
	static const unsigned tries[] = {
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER |
			IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED,
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER |
			IORING_SETUP_R_DISABLED,
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN,
		IORING_SETUP_SUBMIT_ALL,
		0,
	};
	struct io_uring_params p;
	unsigned i;
	int ret = -EINVAL;

	/* the first two tries tie the ring to one thread; any_thread starts after them */
	for (i = cfg->any_thread ? 2 : 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		memset(&p, 0, sizeof(p));
		p.flags = tries[i] | IORING_SETUP_CQSIZE;
		/* Room for every owed CQE twice over, so the CQ cannot overflow in normal use. */
		p.cq_entries = 2 * cfg->queue_depth;
		ret = io_uring_queue_init_params(cfg->queue_depth, &u->ring, &p);
		if (ret != -EINVAL)
			break;
	}
	if (ret)
		return grist_fail(ret, "io_uring setup (queue depth %u): %s", cfg->queue_depth,
				  grist_strerror(ret));
	u->setup_flags = p.flags;
	u->disabled = p.flags & IORING_SETUP_R_DISABLED;
	return 0;
}

static int register_arena(struct uring_io *u, const struct grist_io_config *cfg)
{
	size_t left = cfg->fixed_buf_len, n, i;
	uint8_t *p = cfg->fixed_buf;

	n = (left + FIXED_BUF_PIECE - 1) / FIXED_BUF_PIECE;
	if (n > 1024)
		return grist_fail(-EINVAL, "io fixed buffer of %zu bytes is too large to register", left);
	u->bufs = calloc(n, sizeof(*u->bufs));
	if (!u->bufs)
		return grist_fail(-ENOMEM, "io fixed buffer table");
	for (i = 0; i < n; i++) {
		u->bufs[i].iov_base = p;
		u->bufs[i].iov_len = left < FIXED_BUF_PIECE ? left : FIXED_BUF_PIECE;
		p += u->bufs[i].iov_len;
		left -= u->bufs[i].iov_len;
	}
	/* Pinning is charged to RLIMIT_MEMLOCK; past it, plain reads into the same memory work. */
	u->fixed_bufs_err = io_uring_register_buffers(&u->ring, u->bufs, (unsigned)n);
	if (u->fixed_bufs_err) {
		free(u->bufs);
		u->bufs = NULL;
		return 0;
	}
	u->nr_bufs = (unsigned)n;
	return 0;
}

static void uring_destroy(struct grist_io *io);

static int uring_create(const struct grist_io_config *cfg, struct grist_io **out)
{
	struct uring_io *u;
	int ret;

	u = calloc(1, sizeof(*u));
	if (!u)
		return grist_fail(-ENOMEM, "io_uring backend");
	u->ring.ring_fd = -1;
	ret = setup_ring(u, cfg);
	if (ret) {
		free(u);
		return ret;
	}
	u->file_fixed = calloc(cfg->max_files, sizeof(*u->file_fixed));
	if (!u->file_fixed) {
		ret = grist_fail(-ENOMEM, "io_uring file table");
		goto fail;
	}
	if (!cfg->no_fixed_files)
		u->fixed_files = io_uring_register_files_sparse(&u->ring, cfg->max_files) == 0;
	if (cfg->fixed_buf) {
		ret = register_arena(u, cfg);
		if (ret)
			goto fail;
	}
	*out = &u->base;
	return 0;
fail:
	uring_destroy(&u->base);
	return ret;
}

static void uring_destroy(struct grist_io *io)
{
	struct uring_io *u = to_uring(io);
	unsigned tries = 0;
	int ret;

	/*
	 * Wait for every read the kernel still owes: once we return, the caller
	 * may free the buffers, so no completion may land in them afterwards.
	 */
	while (u->kinflight && !u->disabled) {
		harvest(u, false);
		if (!u->kinflight)
			break;
		ret = io_uring_submit_and_wait(&u->ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			break;
		if (++tries > MAX_ENTER_RETRIES)
			break;
	}
	if (u->ring.ring_fd >= 0)
		io_uring_queue_exit(&u->ring);
	free(u->bufs);
	free(u->file_fixed);
	free(u);
}

static void uring_stats(struct grist_io *io, struct grist_io_stats *st)
{
	struct uring_io *u = to_uring(io);

	st->ring_flags = u->setup_flags;
	st->fixed_files = u->fixed_files;
	for (unsigned i = 0; i < io->nr_files; i++)
		st->fixed_files = st->fixed_files && u->file_fixed[i];
	st->fixed_buffers = u->nr_bufs > 0;
	st->fixed_buffers_error = u->fixed_bufs_err;
	st->fixed_reads = u->fixed_reads;
}

const struct grist_io_ops grist_io_uring_ops = {
	.name = "uring",
	.create = uring_create,
	.flush = uring_flush,
	.add_file = uring_add_file,
	.submit = uring_submit,
	.reap = uring_reap,
	.destroy = uring_destroy,
	.stats = uring_stats,
};

static int read_sysctl(const char *path, int *val)
{
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -1;
	ok = fscanf(f, "%d", val) == 1;
	fclose(f);
	return ok ? 0 : -1;
}

int grist_io_probe(char *why, size_t why_len)
{
	struct io_uring_probe *probe;
	struct io_uring ring;
	char tmp[160];
	int disabled = 0, ret;

	ret = io_uring_queue_init(4, &ring, 0);
	if (ret) {
		if (ret == -EPERM && read_sysctl("/proc/sys/kernel/io_uring_disabled", &disabled) == 0 &&
		    disabled)
			snprintf(tmp, sizeof(tmp),
				 "io_uring blocked by kernel.io_uring_disabled=%d", disabled);
		else if (ret == -EPERM)
			snprintf(tmp, sizeof(tmp),
				 "io_uring_setup denied (-EPERM): a seccomp filter (container) blocks it");
		else if (ret == -ENOSYS)
			snprintf(tmp, sizeof(tmp), "kernel built without io_uring (-ENOSYS)");
		else
			snprintf(tmp, sizeof(tmp), "io_uring_setup failed: %s", grist_strerror(ret));
		goto out;
	}
	probe = io_uring_get_probe_ring(&ring);
	if (!probe || !io_uring_opcode_supported(probe, IORING_OP_READ)) {
		ret = -ENOTSUP;
		snprintf(tmp, sizeof(tmp), "io_uring lacks IORING_OP_READ (kernel older than 5.6)");
	} else {
		snprintf(tmp, sizeof(tmp), "io_uring usable");
	}
	if (probe)
		io_uring_free_probe(probe);
	io_uring_queue_exit(&ring);
out:
	if (why && why_len)
		snprintf(why, why_len, "%s", tmp);
	if (ret)
		grist_fail(ret, "%s", tmp);
	return ret;
}
