/* The io stage: read byte extents of registered files into caller buffers through one ops table. */
#ifndef GRIST_IO_IO_H
#define GRIST_IO_IO_H

/*
 * The callers' side (requests, configuration, the calls the engine makes, opening files)
 * is grist/internal/io.h; this header adds what backends and the core share.
 */
#include <pthread.h>

#ifndef GRIST_INTERNAL
#define GRIST_INTERNAL
#endif
#include "grist/internal/io.h"
#include "io/url.h"

/*
 * The table every backend fills. The core has validated the arguments and
 * applied the caps before a backend sees them.
 */
struct grist_io_ops {
	const char *name;
	bool remote;           /* reads the remote objects grist_io_add_remote() registers */
	/* Allocate the backend's object (its first member is struct grist_io). */
	int (*create)(const struct grist_io_config *cfg, struct grist_io **out);
	/* The core has stored fd/path in slot @slot; make the backend aware of it. */
	int (*add_file)(struct grist_io *io, uint32_t slot);
	/* Issue all @n requests (the core guarantees they fit the caps); 0 or -errno. */
	int (*submit)(struct grist_io *io, struct grist_io_req **reqs, unsigned n);
	/* Hand back up to @max completed requests, waiting until @min_wait are (<= in flight). */
	int (*reap)(struct grist_io *io, struct grist_io_req **done, unsigned max, unsigned min_wait);
	/* Wait for everything in flight, release all. No thread or buffer write survives. */
	void (*destroy)(struct grist_io *io);
	/* Fill backend-specific fields of @st (optional). */
	void (*stats)(struct grist_io *io, struct grist_io_stats *st);
	/* Enter the kernel with what submit() queued while plugged (optional: backends that honour the plug). */
	int (*flush)(struct grist_io *io);
	/* The caller is done with these reaped requests (optional: see grist_io_consumed()). */
	void (*consumed)(struct grist_io *io, const struct grist_io_req *reqs, size_t n);
};

/*
 * One remote object, opened (and pinned) once by grist_remote_open() (remote.c) and then
 * shared read-only by every thread that reads it. Its size and ETag come from the first GET (the last 64 KiB, which the
 * reader wants first anyway: the postscript), kept in tail[].
 */
struct grist_remote_object {
	char *url;                 /* as given, for messages */
	struct grist_url u;
	uint64_t size;
	char etag[256];            /* as the server sent it, quotes included; "" when none */
	uint8_t *tail;             /* the bytes [tail_off, size) */
	uint64_t tail_off;
	/* Blocking reads (the reader's footers and chunks; remote_read.c): one io object, one at a time. */
	pthread_mutex_t sync_lock;
	struct grist_io *sync_io;
	uint32_t sync_slot;
	int refs;                  /* atomic */
	/*
	 * The GETs that opened it (its tail, and a dataset's footer read with it), counted into
	 * the remote stats of each loader or fetcher that reads it (grist_remote_count_opening()).
	 */
	struct grist_remote_counters *opening;
	/*
	 * Where redirects led (redirect.c): the newest first, read and published atomically (a
	 * signed target that expires is replaced while other threads read); all freed with it.
	 */
	struct grist_remote_target *target;
};

/*
 * The object's references: its opener's, and one per io file table that registered it.
 * The last unref frees it, with the io object of its blocking reads (remote_read.c). The
 * core keeps this, not remote.c, because an io object holds objects and an object holds
 * an io object: both ends of that tie are the core's own.
 */
struct grist_remote_object *grist_remote_ref(struct grist_remote_object *o);
void grist_remote_unref(struct grist_remote_object *o);

struct grist_io_file {
	int fd;
	bool direct;           /* opened with O_DIRECT: offsets, lengths, buffers are checked */
	uint32_t offset_align; /* O_DIRECT alignment of offset and length */
	uint32_t mem_align;    /* O_DIRECT alignment of the buffer address */
	char *path;            /* for messages */
	struct grist_remote_object *remote; /* a URL (fd is -1), referenced while registered */
	char *error;           /* the backend's last detailed failure on this file (URL, HTTP
				  status, service code), used by grist_io_req_error(); or NULL */
};

/* The part every backend object starts with. Backends read it; the core writes it. */
struct grist_io {
	const struct grist_io_ops *ops;
	struct grist_io_config cfg;  /* defaults resolved; fault list not owned here */
	struct grist_io_file *files;
	unsigned nr_files;
	unsigned inflight;
	uint64_t bytes_inflight;
	struct grist_io_stats st;
	bool plugged;                /* grist_io_plug(): submit() may queue without a system call */
};

/* ---- for backends only ---- */

enum grist_io_step {
	GRIST_IO_STEP_DONE,  /* req->result is final */
	GRIST_IO_STEP_AGAIN, /* issue the rest: offset + done, buf + done, len - done */
};

/*
 * grist_io_req_step() - fold one read's outcome @res (bytes or -errno) into
 * @req: advance done on data, finish at EOF (res == 0) or when complete,
 * retry -EAGAIN/-EINTR up to GRIST_IO_MAX_RETRIES, finish with -errno otherwise.
 * Touches only @req, so pool workers call it without a lock; the core
 * counts req->retries and GRIST_IO_REQ_RESUBMITTED when the request is reaped.
 */
enum grist_io_step grist_io_req_step(struct grist_io_req *req, int res);

/* A FIFO of requests linked through req->next; no allocation, so it cannot fail. */
struct grist_io_queue {
	struct grist_io_req *head, *tail;
	unsigned n;
};

static inline void grist_io_queue_push(struct grist_io_queue *q, struct grist_io_req *r)
{
	r->next = NULL;
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	q->n++;
}

static inline struct grist_io_req *grist_io_queue_pop(struct grist_io_queue *q)
{
	struct grist_io_req *r = q->head;

	if (r) {
		q->head = r->next;
		if (!q->head)
			q->tail = NULL;
		r->next = NULL;
		q->n--;
	}
	return r;
}

/* Move up to @max requests from @q into @out; returns how many. */
static inline unsigned grist_io_queue_drain(struct grist_io_queue *q, struct grist_io_req **out,
					    unsigned max)
{
	unsigned n = 0;

	while (n < max && q->head)
		out[n++] = grist_io_queue_pop(q);
	return n;
}

extern const struct grist_io_ops grist_io_uring_ops;
extern const struct grist_io_ops grist_io_pread_ops;
extern const struct grist_io_ops grist_io_fault_ops;
extern const struct grist_io_ops grist_io_http_ops;

/* Resolve defaults and check limits for a backend of @kind (grist_io_create() does, before it picks one). */
int grist_io_config_resolve(enum grist_io_kind kind, const struct grist_io_config *in, struct grist_io_config *out);

/*
 * grist_io_create_ops() - make an io object served by @ops, with @cfg as
 * grist_io_config_resolve() left it. grist_io_create() (backends.c, the one
 * file that names the backends) picks @ops for a kind and calls this.
 */
int grist_io_create_ops(const struct grist_io_ops *ops, const struct grist_io_config *cfg,
			struct grist_io **out);

/*
 * grist_io_fault_wrap() - give the injector @io (made with grist_io_fault_ops)
 * the io object it wraps, which it owns from then on. backends.c makes that
 * one too, so that the injector depends on no other backend.
 */
void grist_io_fault_wrap(struct grist_io *io, struct grist_io *inner);

#endif
