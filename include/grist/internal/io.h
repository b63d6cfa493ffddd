/*
 * grist/internal/io.h - UNSTABLE: the io stage's interface to its callers (the engine, the
 * fetcher, and bench/bench_io.c, which times the backends against each other). Backends see
 * more (src/io/io.h includes this and adds the ops table).
 *
 * Internal API, declared as such: not installed, not exported from libgrist.so (link
 * libgrist.a), no API or ABI promise; it may change in any commit. Define GRIST_INTERNAL
 * before including it to say you know. Errors follow grist/error.h.
 */
#ifndef GRIST_INTERNAL_IO_H
#define GRIST_INTERNAL_IO_H

#ifndef GRIST_INTERNAL
#error "grist/internal/io.h is grist's unstable internal API: define GRIST_INTERNAL to use it"
#endif

/*
 * Overview. An io object reads extents of the files registered with it into
 * buffers the caller owns. The caller (the engine, one io object per engine
 * thread) drives it in a loop: grist_io_submit() a batch of requests,
 * grist_io_reap() the completed ones, repeat. Requests complete in any order.
 *
 * Backends are files filling one struct grist_io_ops: io_uring (uring.c), a
 * pread thread pool (pread_pool.c), ranged GETs (http.c) and a fault injector
 * wrapping either local one (fault.c); grist_io_create() (backends.c) picks
 * one for a kind. The core (io.c) validates requests, enforces the queue-depth
 * and bytes-in-flight caps and keeps the file table; backends only move bytes.
 *
 * Completion semantics, the same for every backend: a request comes back
 * with result == len, or 0 <= result < len only when end of file was reached,
 * or result = -errno. Short reads are resubmitted for the rest inside the
 * backend; -EAGAIN and -EINTR are retried up to GRIST_IO_MAX_RETRIES times.
 *
 * Thread-safety: an io object is driven by one thread at a time. The io_uring
 * backend goes further: from the first submit on, every call on the object
 * (add_file, submit, reap, destroy) must come from that same thread
 * (IORING_SETUP_SINGLE_ISSUER), unless it was created with cfg.any_thread.
 * Create it anywhere.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/error.h"

/* How often a request is retried on -EAGAIN / -EINTR before it fails. */
#define GRIST_IO_MAX_RETRIES 32

struct grist_io;
struct grist_remote_counters;

/*
 * One read. Owned by the caller until it comes back from grist_io_reap();
 * the backend may not touch it afterwards and the caller may not touch it
 * (nor its buffer) while it is in flight.
 */
struct grist_io_req {
	uint32_t file;       /* slot returned by grist_io_add_file() */
	uint32_t len;        /* bytes wanted, 1..INT32_MAX */
	uint64_t offset;     /* file offset of the first byte */
	uint8_t *buf;        /* destination; aligned when the file is O_DIRECT */
	uint64_t user_data;  /* the caller's tag, never read by grist */
	int32_t result;      /* on completion: bytes read (< len only at EOF) or -errno */

	/* Backend-private progress, reset by grist_io_submit(). */
	uint32_t done;       /* bytes already read; the next read starts at offset + done */
	uint16_t retries;    /* -EAGAIN / -EINTR seen so far */
	uint16_t flags;      /* GRIST_IO_REQ_* below */
	struct grist_io_req *next; /* intrusive link for backend queues */
	uint64_t seq;        /* the GET scheduler's: its last piece's place in the order of arrival */
};

/* Set in req->flags when a short read made the backend read the rest again. */
#define GRIST_IO_REQ_RESUBMITTED 0x1u

enum grist_io_kind {
	GRIST_IO_AUTO = 0, /* io_uring when grist_io_probe() says usable, else the pread pool */
	GRIST_IO_URING,
	GRIST_IO_PREAD,
	GRIST_IO_FAULT,    /* the fault injector; wraps cfg->fault.inner */
	GRIST_IO_HTTP,     /* ranged GETs of s3://, gs://, http(s):// objects (src/io/http.c); local
			      files registered with it are read with pread at submit */
};

enum grist_io_fault_type {
	GRIST_IO_FAULT_EIO = 1, /* complete with -EIO without reading */
	GRIST_IO_FAULT_SHORT,   /* first read returns only `arg` bytes; the rest must be resubmitted */
	GRIST_IO_FAULT_EAGAIN,  /* the read fails with -EAGAIN `arg` times before it is issued */
	GRIST_IO_FAULT_DELAY,   /* completion is held back for `arg` microseconds */
};

/* One injected fault: it hits the request with submission sequence number `seq` (0-based). */
struct grist_io_fault {
	uint64_t seq;
	enum grist_io_fault_type type;
	uint64_t arg;
};

/* The deepest ring an io object takes (the loader's queue_depth option is bounded by it). */
#define GRIST_IO_MAX_QUEUE_DEPTH 32768
/*
 * The most requests an http io object takes at once: it has no ring, only the GET
 * scheduler's list of waiting reads, and the engine's default for tiny chunks of a URL
 * dataset is its read-ahead bytes over their size (engine_sizing.c), beyond a ring's.
 */
#define GRIST_IO_MAX_REMOTE_QUEUE_DEPTH 262144

struct grist_io_config {
	unsigned queue_depth;         /* max requests in flight; 0 = 64, at most GRIST_IO_MAX_QUEUE_DEPTH
					 (GRIST_IO_MAX_REMOTE_QUEUE_DEPTH for GRIST_IO_HTTP) */
	uint64_t max_bytes_in_flight; /* cap on the sum of len in flight; 0 = 64 MiB */
	unsigned threads;             /* pread pool workers; 0 = 4 */
	unsigned max_files;           /* file slots (fixed-file table size); 0 = 256 */
	void *fixed_buf;              /* optional arena to register with io_uring */
	size_t fixed_buf_len;
	bool no_fixed_files;          /* io_uring: use plain fds */
	/* http: counters to add to (shared by several io objects); NULL keeps its own */
	struct grist_remote_counters *remote_counters;
	/* http: options for this object (checked at create); NULL: the process-wide ones */
	const struct grist_remote_options *remote_options;
	bool any_thread;              /* io_uring: the object may pass between threads (one at a time):
					 set up without SINGLE_ISSUER / DEFER_TASKRUN, which tie a
					 ring to the first thread that submits */
	struct {
		enum grist_io_kind inner;            /* backend under the injector (not FAULT) */
		const struct grist_io_fault *faults; /* copied at create */
		unsigned nr_faults;
	} fault;
};

/* What a backend ended up using, and counters since create. */
struct grist_io_stats {
	const char *backend;       /* "uring", "pread", "fault(uring)", ... */
	unsigned queue_depth;      /* resolved caps */
	uint64_t max_bytes_in_flight;
	unsigned ring_flags;       /* io_uring setup flags the kernel accepted */
	bool fixed_files;          /* io_uring: every file so far sits in the registered table */
	bool fixed_buffers;        /* io_uring: arena registered, read_fixed used inside it */
	int fixed_buffers_error;   /* why registration failed (-ENOMEM, -EPERM), or 0 */
	uint64_t submitted;        /* requests taken by submit */
	uint64_t completed;        /* requests handed back by reap */
	uint64_t bytes;            /* bytes read by completed requests */
	uint64_t resubmitted;      /* completed requests that needed a read of the rest after a short read */
	uint64_t retries;          /* reads issued again after -EAGAIN / -EINTR (summed at reap) */
	uint64_t errors;           /* requests completed with result < 0 */
	uint64_t fixed_reads;      /* reads issued as read_fixed */
	unsigned inflight;         /* now */
	uint64_t bytes_inflight;   /* now */
};

/* ---- the calls the engine makes ---- */

/*
 * grist_io_create() - make an io object of @kind with @cfg (NULL = defaults).
 * AUTO picks io_uring when grist_io_probe() succeeds, else the pread pool.
 * Return: 0, -EINVAL (bad config), -ENOMEM, or the io_uring setup error
 * (-EPERM, -ENOSYS, ...) when URING was asked for and cannot be had.
 */
int grist_io_create(enum grist_io_kind kind, const struct grist_io_config *cfg,
		    struct grist_io **out);

/*
 * grist_io_add_file() - register an open fd (not taken over: the caller
 * closes it after destroy); @path names it in messages. O_DIRECT is detected
 * from the fd's flags and its alignment looked up (statx STATX_DIOALIGN).
 * Return: 0 and the slot in *@slot, -EINVAL, -ENOSPC when max_files are used.
 */
int grist_io_add_file(struct grist_io *io, int fd, const char *path, uint32_t *slot);

/*
 * grist_io_add_remote() - register an opened remote object (referenced until destroy);
 * only the http backend reads them. Return: 0 and the slot, -EINVAL for another
 * backend, -ENOSPC when max_files are used.
 */
struct grist_remote_object;
int grist_io_add_remote(struct grist_io *io, struct grist_remote_object *obj, uint32_t *slot);

/*
 * grist_io_submit() - hand over up to @n requests, in order. Takes as many as
 * fit under queue_depth and max_bytes_in_flight (one request larger than the
 * byte cap is taken when nothing else is in flight).
 * Return: how many were taken (0 when full; reap first), or -EINVAL (taking
 * none) when a request is malformed or misaligned for O_DIRECT, or a fatal
 * backend error.
 */
int grist_io_submit(struct grist_io *io, struct grist_io_req **reqs, unsigned n);

/*
 * grist_io_plug() - while @on, grist_io_submit() may queue requests without a system
 * call (io_uring does; the other backends issue at once), and the next grist_io_reap()
 * hands them to the kernel in the system call that polls or waits. Unplugging flushes
 * what is queued. Return: 0 or a fatal backend error (-errno).
 */
int grist_io_plug(struct grist_io *io, bool on);

/*
 * grist_io_consumed() - the caller is done with @reqs[0..@n) (reaped before): its
 * consumer has used their bytes. A remote backend tells its GET scheduler where its
 * consumer is, so reads wait there for more to merge with while the consumer has landed
 * reads enough before it (src/io/sched_launch.c); the other backends ignore it.
 */
void grist_io_consumed(struct grist_io *io, const struct grist_io_req *reqs, size_t n);

/*
 * grist_io_reap() - collect up to @max completed requests into @done, waiting
 * until at least min(@min_wait, in flight) are ready; never waits when
 * nothing is in flight. For each request with result < 0 the message of
 * the first such request is recorded (see grist_io_req_error()).
 * Return: the number collected, or a fatal backend error (-errno).
 */
int grist_io_reap(struct grist_io *io, struct grist_io_req **done, unsigned max, unsigned min_wait);

/*
 * grist_io_req_error() - record "<path>: byte <offset>: read of N bytes
 * failed: <reason>" for a request that came back with result < 0.
 * Return: req->result.
 */
int grist_io_req_error(struct grist_io *io, const struct grist_io_req *req);

/* grist_io_get_stats() - copy the counters and what the backend uses. */
void grist_io_get_stats(struct grist_io *io, struct grist_io_stats *st);

/* grist_io_destroy() - wait for in-flight reads, free everything. NULL is fine. */
void grist_io_destroy(struct grist_io *io);

/*
 * grist_io_probe() - is io_uring usable here? Sets up and tears down a small
 * ring and checks IORING_OP_READ. @why (may be NULL) gets a one-line reason
 * either way, e.g. "io_uring blocked (kernel.io_uring_disabled=2)".
 * Return: 0 when usable, else -EPERM, -ENOSYS, -ENOTSUP (no OP_READ) or the
 * setup error. Thread-safety: any thread.
 */
int grist_io_probe(char *why, size_t why_len);

/* ---- opening files ---- */

enum grist_io_mode {
	GRIST_IO_MODE_AUTO = 0, /* resident when the page cache holds the file; else direct when the
				   file is > half of RAM and O_DIRECT works; else buffered */
	GRIST_IO_MODE_DIRECT,
	GRIST_IO_MODE_BUFFERED,
};

struct grist_io_open_info {
	int fd;
	bool direct;
	uint32_t offset_align; /* 1 when buffered */
	uint32_t mem_align;    /* 1 when buffered */
	uint64_t size;
	bool resident;         /* AUTO: the page cache holds the file (fd is buffered): map it, do not read it */
	char note[160];        /* why AUTO chose what it chose, or "" */
};

/*
 * grist_io_open_file() - open @path read-only in @mode. DIRECT fails with
 * -ENOTSUP when the filesystem refuses O_DIRECT; AUTO then falls back to
 * buffered and says so in info->note. AUTO first asks grist_io_resident_share(): a file
 * of which at least GRIST_IO_RESIDENT_SHARE is cached is opened buffered with
 * info->resident set, for the caller to map (decoding straight out of the page cache
 * costs no read copies and no syscalls; a page evicted since costs a page fault).
 * Return: 0, or -errno from open/statx (-ENOENT, -EACCES, ...).
 */
int grist_io_open_file(const char *path, enum grist_io_mode mode, struct grist_io_open_info *info);

/*
 * grist_io_map_small() - whether a whole dataset of @bytes in @chunks is better mapped
 * than read, cached or not: at most 1/8 of RAM, with chunks of at most 16 KiB on average.
 * One read per chunk of a few hundred bytes (a TFDS image dataset writes one record per
 * chunk) costs a request, a page-cache lookup and a copy per record, which was 20% of the
 * CPU of a dict Loader over MNIST (perf), while a mapped page costs one fault for every
 * chunk in it. The residency probe alone cannot be trusted for such a dataset: a cache
 * dropped before the run (by a neighbour, or between runs) sent it down the per-chunk
 * read path for its whole life, although it is cached again after one epoch; and pages
 * mapped in use are not dropped. Callers map with MADV_WILLNEED, so a cold start reads
 * ahead instead of faulting page by page.
 */
bool grist_io_map_small(uint64_t bytes, uint64_t chunks);

/*
 * grist_io_map_file() - map the first @size bytes of open @fd read-only and shared, to
 * decode straight out of the page cache. Every caller that maps a data file goes through
 * here, so one rule holds everywhere. A mapping grist chose (AUTO: a cached file, a small
 * dataset) is an optimisation: where it fails (a file system that refuses mmap, as FUSE
 * with direct I/O does with ENODEV; an exhausted address space) the file is read instead,
 * *@map NULL, and the log callback hears why (INFO) once per *@told: a caller opening
 * many files passes one flag for all, so a thousand shards on such a file system make one
 * line, not a thousand. A mapping the caller asked for (@required: GRIST_READ_MMAP,
 * `--io mmap`) fails instead, naming @path.
 * Return: 0 (*@map the mapping, or NULL: @size 0, or a failed optional mapping), or,
 * @required only, the negative errno of mmap with a message.
 */
int grist_io_map_file(int fd, uint64_t size, const char *path, bool required, bool *told, void **map);

/* The cached share from which AUTO treats a file as resident. */
#define GRIST_IO_RESIDENT_SHARE 0.95

/*
 * grist_io_resident_share() - the share of the first @size bytes of open @fd that the
 * page cache holds, from mincore() over a temporary read-only mapping: every page of a
 * file up to 16 MiB, else 256 runs of 16 pages spread evenly over it (4096 pages, so a
 * terabyte file costs the same as a 16 MiB one). Maps nothing in, reads nothing.
 * Return: 0 with *@share in [0, 1] (1 for an empty file), or -errno from mmap/mincore
 * (message recorded). Thread-safety: any thread.
 */
int grist_io_resident_share(int fd, uint64_t size, double *share);

/*
 * grist_io_dio_alignment() - the O_DIRECT alignment of open @fd: statx
 * STATX_DIOALIGN, else the device's logical block size (BLKSSZGET or sysfs),
 * else 4096; the memory alignment is never below 512.
 * Return: 0, -ENOTSUP when the file does not support direct I/O, or -errno.
 */
int grist_io_dio_alignment(int fd, uint32_t *offset_align, uint32_t *mem_align);

/*
 * grist_io_align_extent() - round [@offset, @offset + @len) out to @align (a
 * power of two): *@aligned_off <= offset and the aligned extent covers it.
 * Return: 0, or -EINVAL for a bad alignment or an extent that overflows.
 */
int grist_io_align_extent(uint64_t offset, uint64_t len, uint32_t align,
			  uint64_t *aligned_off, uint64_t *aligned_len);

#endif
