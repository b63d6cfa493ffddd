/* fetch.c - random access by index: a request's chunk reads in one batched submission, each chunk decoded once. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/thread.h"
#include "common/map_guard.h"
#include "format/chunk_decode.h"
#include "format/dataset.h"
#include "grist/fetch.h"
#include "io/io.h"
#include "io/remote.h"
#include "plan/read_plan.h"

#define DEFAULT_QUEUE_DEPTH 256
#define DEFAULT_MAX_READ_BYTES ((size_t)64 << 20)
#define REAP_MAX 64
#define MAX_THREADS 64
#define SHARE_MIN_JOBS 8            /* a wave of fewer chunks is decoded by the caller alone */

/* One requested position, sorted by where its record lives. */
struct want {
	uint32_t file;
	uint64_t chunk;
	uint64_t rec;            /* record within the chunk */
	size_t pos;              /* position in the request */
};

/* One chunk of a request: the run wants[first, last) of records in it. */
struct job {
	uint32_t file;
	uint64_t chunk;
	uint64_t begin, end;     /* the chunk's extent */
	size_t first, last;
	size_t region;
};

/* One read: adjacent chunk extents of a file, coalesced. */
struct region {
	uint32_t file;
	uint64_t offset, len;
	size_t buf_off;
	uint64_t got;            /* bytes read (less than len only at end of file) */
	const uint8_t *data;     /* the bytes: in buf, or in the file's mapping */
};

/*
 * One decoding thread's own things: its decoder and the arena its records are copied to.
 * ctx[0] is the calling thread's; ctx[1..] belong to helper threads.
 */
struct decode_ctx {
	struct grist_fetcher *f;
	unsigned id;
	struct grist_chunk_decoder *dec;
	struct grist_buf arena;  /* data NULL until a record of some length is copied */
	pthread_t thread;
	bool started;
};

/*
 * The decode share of a wave. Jobs are claimed one at a time under the lock, so a helper
 * that wakes late finds nothing left and the caller never waits for a thread to start,
 * only for jobs already claimed. next/end/done change only under the lock, and the caller
 * resets them only after done == end - begin, when no helper holds a job of the old wave.
 * Invariant: a helper touches the fetcher's per-request arrays only between claiming a
 * job and counting it done.
 */
struct share {
	pthread_mutex_t lock;
	pthread_cond_t work_cv, done_cv;
	size_t next, end, total, done;
	bool stop;
	int err;                 /* the error of the failed job with the lowest index */
	size_t err_job;
	char err_msg[1024];
};

struct grist_fetcher {
	const struct grist_reader *r;
	struct grist_io *io;
	uint32_t *slot;          /* io file slot per file of the reader */
	size_t nfiles;
	struct grist_map_range *maps; /* per file: its mapping (base NULL: read it), see map_files() */
	struct decode_ctx ctx[MAX_THREADS];
	unsigned nthreads;
	struct share sh;         /* used when nthreads > 1 */
	struct grist_fetch_record *share_out; /* the request's output, under sh.lock */
	size_t max_read_bytes;
	int broken;              /* an io stage failure: every later call returns it */
	int read_err;            /* a wave's failed read of the lowest region, and its message */
	uint64_t read_err_region;
	char read_err_msg[1024];
	struct grist_fetcher_stats st;
	struct grist_remote_counters remote; /* the http backend's counters, when the dataset has URLs */

	/* per-request scratch, kept between calls so steady state allocates nothing */
	struct want *wants;
	size_t wants_cap;
	struct job *jobs;
	size_t jobs_cap;
	struct region *regions;
	size_t regions_cap;
	struct grist_io_req *reqs;
	size_t reqs_cap;
	struct grist_io_req **reqp;
	size_t reqp_cap;
	uint8_t *buf;
	size_t buf_cap;
	size_t *offs;            /* per position: offset in its arena until the pointers are fixed */
	size_t offs_cap;
	uint8_t *arena_of;       /* per position: which ctx's arena holds its record */
	size_t arena_of_cap;
};

static int decode_job(struct decode_ctx *c, const struct job *j, struct grist_fetch_record *res);
static void *helper_main(void *arg);

/*
 * AUTO maps a small dataset of small chunks (grist_io_map_small(), as the loader does):
 * a request for one record then costs no io submission, no syscall and no copy, which
 * was a third of src[i]'s time for a TFDS MNIST record. A file that cannot be mapped is
 * read as before: the mapping is AUTO's choice, not the caller's (grist_io_map_file()).
 */
static void map_files(struct grist_fetcher *f)
{
	uint64_t bytes = 0, chunks = 0;
	bool told = false; /* a file that cannot be mapped was logged */
	size_t i;

	for (i = 0; i < f->nfiles; i++) {
		const struct grist_file_geom *g = grist_reader_file_geom(f->r, i);

		bytes += g->size;
		chunks += g->num_chunks;
	}
	if (!grist_io_map_small(bytes, chunks))
		return;
	f->maps = calloc(f->nfiles, sizeof(*f->maps));
	for (i = 0; f->maps && i < f->nfiles; i++) {
		const struct grist_file_geom *g = grist_reader_file_geom(f->r, i);
		void *m = NULL;

		/* optional, so it cannot fail: a file it cannot map is read */
		if (!g->remote)
			grist_io_map_file(g->fd, g->size, g->path, false, &told, &m);
		if (!m)
			continue;
		madvise(m, (size_t)g->size, MADV_WILLNEED); /* advice only */
		f->maps[i] = (struct grist_map_range){ .base = m, .len = (size_t)g->size, .path = g->path };
		f->st.mapped_files++;
	}
}

GRIST_API int grist_fetcher_create(const struct grist_reader *r, const struct grist_fetcher_options *opts,
				   struct grist_fetcher **out)
{
	struct grist_fetcher_options o = { .size = sizeof(o) };
	struct grist_io_config ioc = { 0 };
	struct grist_io_stats ios;
	struct grist_fetcher *f;
	enum grist_io_kind kind;
	size_t i;
	int ret;

	*out = NULL;
	if (!r)
		return grist_fail(-EINVAL, "fetcher: no reader");
	if (opts && (ret = grist_sized_in(&o, sizeof(o), opts, "grist_fetcher_options")))
		return ret;
	if (o.io != GRIST_FETCH_IO_AUTO && o.io != GRIST_FETCH_IO_URING && o.io != GRIST_FETCH_IO_PREAD)
		return grist_fail(-EINVAL, "fetcher: unknown io kind %d", (int)o.io);
	f = calloc(1, sizeof(*f));
	if (!f)
		return grist_fail(-ENOMEM, "fetcher: out of memory");
	f->r = r;
	f->max_read_bytes = o.max_read_bytes ? o.max_read_bytes : DEFAULT_MAX_READ_BYTES;
	f->nfiles = grist_reader_num_files(r);
	f->slot = calloc(f->nfiles ? f->nfiles : 1, sizeof(*f->slot));
	if (!f->slot) {
		ret = grist_fail(-ENOMEM, "fetcher: out of memory");
		goto fail;
	}
	ioc.queue_depth = o.queue_depth ? o.queue_depth : DEFAULT_QUEUE_DEPTH;
	ioc.threads = o.pread_threads;
	ioc.max_files = f->nfiles > 256 ? (unsigned)f->nfiles : 0;
	/* a Python reader passes its fetcher from thread to thread (one at a time) */
	ioc.any_thread = true;
	/* AUTO is the io core's own: io_uring when its probe succeeds, else the pread pool */
	kind = o.io == GRIST_FETCH_IO_URING ? GRIST_IO_URING
	       : o.io == GRIST_FETCH_IO_PREAD ? GRIST_IO_PREAD
					      : GRIST_IO_AUTO;
	for (i = 0; i < f->nfiles; i++)
		if (grist_reader_file_geom(r, i)->remote) {
			kind = GRIST_IO_HTTP; /* URLs: ranged GETs (local files of the dataset: pread) */
			/* the stats count the GETs that opened the files too, not only the reads' */
			grist_remote_count_opening(&f->remote, grist_reader_file_geom(r, i)->remote);
		}
	ioc.remote_counters = &f->remote;
	ret = grist_io_create(kind, &ioc, &f->io);
	if (ret)
		goto fail;
	grist_io_get_stats(f->io, &ios);
	f->st.backend = ios.backend; /* the backend's static name: "uring" or "pread" */
	for (i = 0; i < f->nfiles; i++) {
		const struct grist_file_geom *g = grist_reader_file_geom(r, i);

		ret = g->remote ? grist_io_add_remote(f->io, g->remote, &f->slot[i])
				: grist_io_add_file(f->io, g->fd, g->path, &f->slot[i]);
		if (ret)
			goto fail;
	}
	if (o.io == GRIST_FETCH_IO_AUTO && !o.never_map)
		map_files(f);
	if (o.decode_threads > MAX_THREADS) {
		ret = grist_fail(-EINVAL, "fetcher: %u decode threads; at most %d", o.decode_threads, MAX_THREADS);
		goto fail;
	}
	f->nthreads = o.decode_threads ? o.decode_threads : 1;
	pthread_mutex_init(&f->sh.lock, NULL);
	pthread_cond_init(&f->sh.work_cv, NULL);
	pthread_cond_init(&f->sh.done_cv, NULL);
	for (i = 0; i < f->nthreads; i++) {
		f->ctx[i].f = f;
		f->ctx[i].id = (unsigned)i;
		ret = grist_chunk_decoder_create(&f->ctx[i].dec);
		if (ret) {
			ret = grist_fail(ret, "fetcher: cannot make a chunk decoder");
			goto fail;
		}
		grist_chunk_decoder_check_data(f->ctx[i].dec, grist_reader_verify(r) == GRIST_VERIFY_ALL);
	}
	for (i = 1; i < f->nthreads; i++) {
		ret = grist_thread_start(&f->ctx[i].thread, helper_main, &f->ctx[i]);
		if (ret) {
			ret = grist_fail(ret, "fetcher: cannot start a decode thread: %s", grist_strerror(ret));
			goto fail;
		}
		f->ctx[i].started = true;
	}
	*out = f;
	return 0;
fail:
	grist_fetcher_destroy(f);
	return ret;
}

GRIST_API void grist_fetcher_destroy(struct grist_fetcher *f)
{
	unsigned i;

	if (!f)
		return;
	if (f->nthreads) {
		pthread_mutex_lock(&f->sh.lock);
		f->sh.stop = true;
		pthread_cond_broadcast(&f->sh.work_cv);
		pthread_mutex_unlock(&f->sh.lock);
		for (i = 1; i < f->nthreads; i++)
			if (f->ctx[i].started)
				pthread_join(f->ctx[i].thread, NULL);
		for (i = 0; i < f->nthreads; i++) {
			grist_chunk_decoder_destroy(f->ctx[i].dec);
			grist_buf_free(&f->ctx[i].arena);
		}
		pthread_mutex_destroy(&f->sh.lock);
		pthread_cond_destroy(&f->sh.work_cv);
		pthread_cond_destroy(&f->sh.done_cv);
	}
	grist_io_destroy(f->io);
	for (i = 0; f->maps && i < f->nfiles; i++)
		if (f->maps[i].base)
			munmap((void *)f->maps[i].base, f->maps[i].len);
	free(f->maps);
	free(f->slot);
	free(f->wants);
	free(f->jobs);
	free(f->regions);
	free(f->reqs);
	free(f->reqp);
	free(f->buf);
	free(f->offs);
	free(f->arena_of);
	free(f);
}

GRIST_API void grist_fetcher_stats_sized(const struct grist_fetcher *f, struct grist_fetcher_stats *out, size_t size)
{
	struct grist_fetcher_stats st = f->st;

	grist_remote_counters_read(&f->remote, &st.remote, &st.remote_budget);
	grist_sized_out(out, size, &st, sizeof(st));
}

static int cmp_want(const void *a, const void *b)
{
	const struct want *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	if (x->chunk != y->chunk)
		return x->chunk < y->chunk ? -1 : 1;
	if (x->rec != y->rec)
		return x->rec < y->rec ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/*
 * Locate every index and sort the positions by file, chunk and record: the runs of one
 * chunk become the jobs, in file offset order (a file's chunks are stored in order).
 */
static int plan(struct grist_fetcher *f, const uint64_t *indices, size_t n, size_t *njobs)
{
	struct grist_record_loc loc;
	size_t i, nj = 0;
	int ret;

	ret = grist_array_reserve((void **)&f->wants, &f->wants_cap, n, sizeof(*f->wants));
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		ret = grist_reader_locate(f->r, indices[i], &loc);
		if (ret)
			return ret;
		f->wants[i] = (struct want){ .file = (uint32_t)loc.file, .chunk = loc.chunk,
					     .rec = loc.record_in_chunk, .pos = i };
	}
	qsort(f->wants, n, sizeof(*f->wants), cmp_want);
	for (i = 0; i < n; i++) {
		struct want *w = &f->wants[i];
		const struct grist_file_geom *g;

		if (nj && f->jobs[nj - 1].file == w->file && f->jobs[nj - 1].chunk == w->chunk) {
			f->jobs[nj - 1].last = i + 1;
			continue;
		}
		ret = grist_array_reserve((void **)&f->jobs, &f->jobs_cap, nj + 1, sizeof(*f->jobs));
		if (ret)
			return ret;
		g = grist_reader_file_geom(f->r, w->file);
		f->jobs[nj++] = (struct job){ .file = w->file, .chunk = w->chunk, .begin = g->chunk_offsets[w->chunk],
					      .end = g->chunk_offsets[w->chunk + 1], .first = i, .last = i + 1 };
	}
	*njobs = nj;
	return 0;
}

/* Chunks of one file whose extents touch become one region (jobs are in offset order): the read planner. */
static int build_regions(struct grist_fetcher *f, size_t njobs, size_t *nregions)
{
	struct region *rg = NULL;
	size_t i, nr = 0;
	int ret;

	for (i = 0; i < njobs; i++) {
		struct job *j = &f->jobs[i];

		if (!rg || rg->file != j->file || !grist_read_coalesce(rg->offset, &rg->len, j->begin, j->end)) {
			ret = grist_array_reserve((void **)&f->regions, &f->regions_cap, nr + 1, sizeof(*f->regions));
			if (ret)
				return ret;
			rg = &f->regions[nr++];
			*rg = (struct region){ .file = j->file, .offset = j->begin, .len = j->end - j->begin };
		}
		j->region = nr - 1;
	}
	*nregions = nr;
	return 0;
}

static void complete(struct grist_fetcher *f, struct grist_io_req *q)
{
	struct region *rg = &f->regions[q->user_data];

	if (q->result < 0) {
		/* the failed read of the lowest region reports, whatever order reads complete in */
		if (!f->read_err || q->user_data < f->read_err_region) {
			f->read_err = grist_io_req_error(f->io, q); /* names the file and offset */
			f->read_err_region = q->user_data;
			snprintf(f->read_err_msg, sizeof(f->read_err_msg), "%s", grist_last_error());
		}
		return;
	}
	rg->got += (uint64_t)q->result;
	f->st.bytes_read += (uint64_t)q->result;
}

/*
 * Read regions [r0, r1): every read is handed to the io stage in one batch; the core takes
 * what fits its queue depth and byte caps, and the rest follows as completions make room.
 * Returns only once nothing is in flight, so the buffers may be reused.
 */
static int read_wave(struct grist_fetcher *f, size_t r0, size_t r1)
{
	struct grist_io_req *done[REAP_MAX];
	size_t i, nreq = 0, buf_need = 0, submitted = 0, pending;
	uint64_t at;
	int ret = 0, k, n;

	for (i = r0; i < r1; i++) {
		struct region *rg = &f->regions[i];
		const struct grist_map_range *m = f->maps && f->maps[rg->file].base ? &f->maps[rg->file] : NULL;

		if (m) { /* mapped: the bytes are there (up to the file's end when it was opened) */
			rg->data = m->base + (rg->offset < m->len ? rg->offset : m->len);
			rg->got = rg->offset >= m->len ? 0 : m->len - rg->offset < rg->len ? m->len - rg->offset : rg->len;
			continue;
		}
		f->regions[i].buf_off = buf_need;
		buf_need += (size_t)f->regions[i].len;
		nreq += grist_read_pieces(f->regions[i].len);
	}
	if (buf_need > f->buf_cap) {
		free(f->buf);
		f->buf_cap = 0;
		/* zeroed once: valgrind cannot see io_uring's writes into it, and would flag every
		 * decode; the buffer is reused, so this costs nothing in steady state */
		f->buf = calloc(1, buf_need);
		if (!f->buf)
			return grist_fail(-ENOMEM, "fetcher: cannot allocate a %zu-byte read buffer", buf_need);
		f->buf_cap = buf_need;
	}
	ret = grist_array_reserve((void **)&f->reqs, &f->reqs_cap, nreq, sizeof(*f->reqs));
	if (!ret)
		ret = grist_array_reserve((void **)&f->reqp, &f->reqp_cap, nreq, sizeof(*f->reqp));
	if (ret)
		return ret;
	nreq = 0;
	for (i = r0; i < r1; i++) {
		struct region *rg = &f->regions[i];

		if (f->maps && f->maps[rg->file].base)
			continue;
		rg->got = 0;
		rg->data = f->buf + rg->buf_off;
		for (at = 0; at < rg->len; at += GRIST_READ_PIECE_MAX) {
			struct grist_io_req *q = &f->reqs[nreq];

			memset(q, 0, sizeof(*q));
			q->file = f->slot[rg->file];
			q->offset = rg->offset + at;
			q->len = grist_read_piece_len(rg->len, at);
			q->buf = f->buf + rg->buf_off + at;
			q->user_data = i;
			f->reqp[nreq++] = q;
		}
	}
	f->st.reads += nreq;
	f->read_err = 0;
	pending = nreq;
	while (pending) {
		if (submitted < nreq) {
			n = grist_io_submit(f->io, f->reqp + submitted, (unsigned)(nreq - submitted));
			if (n < 0) {
				ret = n;
				break;
			}
			if (n > 0)
				f->st.submissions++;
			submitted += (size_t)n;
		}
		if (submitted == nreq - pending)
			break; /* nothing in flight and nothing taken: the core broke its promise */
		n = grist_io_reap(f->io, done, REAP_MAX, 1);
		if (n < 0) {
			ret = n;
			break;
		}
		for (k = 0; k < n; k++)
			complete(f, done[k]);
		pending -= (size_t)n;
	}
	if (ret) {
		/* the io stage itself failed: what is in flight is waited for by destroy */
		f->broken = ret;
		return ret;
	}
	if (pending)
		return f->broken = grist_fail(-EIO, "fetcher: the io stage took no read with none in flight");
	/* a failed read fails the request: nothing of this wave is decoded */
	if (f->read_err)
		return grist_fail(f->read_err, "%s", f->read_err_msg);
	return 0;
}

/*
 * Decode job @j once it was read, and copy the records its positions want into @c's arena:
 * @res[pos].len, f->offs[pos] and f->arena_of[pos] are set (the arena may still move).
 * Runs on any decoding thread; it writes only @c and the entries of its own positions.
 */
static int decode_job_bytes(struct decode_ctx *c, const struct job *j, struct grist_fetch_record *res);

/*
 * A mapped file that shrank since it was opened faults (SIGBUS) where its pages are gone:
 * the guard turns that into this job's error naming the file and byte. Nothing here holds
 * a lock; an arena left half-grown is only reused by the next request.
 */
static int decode_job(struct decode_ctx *c, const struct job *j, struct grist_fetch_record *res)
{
	struct grist_fetcher *f = c->f;
	struct grist_map_guard guard;
	int ret;

	if (!f->maps || !f->maps[j->file].base)
		return decode_job_bytes(c, j, res);
	grist_map_guard_push(&guard, &f->maps[j->file], 1);
	if (sigsetjmp(guard.env, 0))
		return grist_map_guard_fail(&guard);
	ret = decode_job_bytes(c, j, res);
	grist_map_guard_pop(&guard);
	return ret;
}

static int decode_job_bytes(struct decode_ctx *c, const struct job *j, struct grist_fetch_record *res)
{
	struct grist_fetcher *f = c->f;
	const struct region *rg = &f->regions[j->region];
	const struct grist_file_geom *g = grist_reader_file_geom(f->r, j->file);
	struct grist_decoded_chunk out;
	uint64_t prev = UINT64_MAX;
	size_t i, len = 0, off = 0;
	int ret;

	if (rg->offset + rg->got < j->end)
		return grist_fail_at(-EBADMSG, g->path, rg->offset + rg->got,
				     "file ends inside the chunk at byte %llu (it should end at %llu): truncated?",
				     (unsigned long long)j->begin, (unsigned long long)j->end);
	ret = grist_chunk_decode(c->dec, rg->data, rg->offset, (size_t)rg->got, j->begin, j->end,
				 g->path, &out);
	if (ret)
		return ret;
	ret = grist_file_check_chunk_records(g, j->chunk, out.chunk_type, out.num_records);
	if (ret)
		return ret;
	for (i = j->first; i < j->last; i++) {
		const struct want *w = &f->wants[i];

		/* wants are sorted by record: a repeated index shares the copy before it */
		if (w->rec != prev) {
			len = (size_t)(out.offsets[w->rec + 1] - out.offsets[w->rec]);
			off = c->arena.len;
			/* an empty record may come with no values at all: nothing to point into */
			ret = len ? grist_buf_append(&c->arena, out.values + out.offsets[w->rec], len) : 0;
			if (ret)
				return ret;
			prev = w->rec;
		}
		f->offs[w->pos] = off;
		f->arena_of[w->pos] = (uint8_t)c->id;
		res[w->pos].len = len;
	}
	return 0;
}

/* Lock held. Claim and decode jobs of the current share until none is left. */
static void share_work(struct decode_ctx *c, struct grist_fetch_record *res)
{
	struct share *sh = &c->f->sh;
	size_t j;
	int ret;

	while (sh->next < sh->end) {
		j = sh->next++;
		pthread_mutex_unlock(&sh->lock);
		ret = decode_job(c, &c->f->jobs[j], res);
		pthread_mutex_lock(&sh->lock);
		if (ret && (!sh->err || j < sh->err_job)) {
			/* the message is this thread's; keep it for the caller's thread */
			sh->err = ret;
			sh->err_job = j;
			snprintf(sh->err_msg, sizeof(sh->err_msg), "%s", grist_last_error());
		}
		if (++sh->done == sh->total)
			pthread_cond_signal(&sh->done_cv);
	}
}

static void *helper_main(void *arg)
{
	struct decode_ctx *c = arg;
	struct share *sh = &c->f->sh;

	pthread_mutex_lock(&sh->lock);
	while (!sh->stop) {
		if (sh->next < sh->end)
			share_work(c, c->f->share_out);
		else
			pthread_cond_wait(&sh->work_cv, &sh->lock);
	}
	pthread_mutex_unlock(&sh->lock);
	return NULL;
}

/* Decode jobs [jb, je): alone, or shared with the helper threads when there are enough. */
static int decode_jobs(struct grist_fetcher *f, size_t jb, size_t je, struct grist_fetch_record *res)
{
	struct share *sh = &f->sh;
	size_t j;
	int ret = 0;

	if (f->nthreads == 1 || je - jb < SHARE_MIN_JOBS) {
		for (j = jb; j < je && !ret; j++)
			ret = decode_job(&f->ctx[0], &f->jobs[j], res);
		return ret;
	}
	pthread_mutex_lock(&sh->lock);
	f->share_out = res;
	sh->next = jb;
	sh->end = je;
	sh->total = je - jb;
	sh->done = 0;
	sh->err = 0;
	pthread_cond_broadcast(&sh->work_cv);
	share_work(&f->ctx[0], res);
	while (sh->done < sh->total)
		pthread_cond_wait(&sh->done_cv, &sh->lock);
	sh->next = sh->end = 0;
	ret = sh->err;
	pthread_mutex_unlock(&sh->lock);
	if (ret)
		return grist_fail(ret, "%s", sh->err_msg);
	return 0;
}

GRIST_API int grist_fetcher_read(struct grist_fetcher *f, const uint64_t *indices, size_t n,
				 struct grist_fetch_record *out)
{
	static const uint8_t empty[1];
	size_t njobs = 0, nregions = 0, r0, r1, jb = 0, je, i, wave;
	int ret;

	if (f->broken)
		return grist_fail(f->broken, "fetcher: the io stage failed earlier (%s)", grist_strerror(f->broken));
	if (n && (!indices || !out))
		return grist_fail(-EINVAL, "fetcher: %zu indices and no %s", n, indices ? "output" : "indices");
	f->st.requests++;
	for (i = 0; i < f->nthreads; i++)
		f->ctx[i].arena.len = 0;
	if (!n)
		return 0;
	ret = grist_array_reserve((void **)&f->offs, &f->offs_cap, n, sizeof(*f->offs));
	if (!ret)
		ret = grist_array_reserve((void **)&f->arena_of, &f->arena_of_cap, n, sizeof(*f->arena_of));
	if (!ret)
		ret = plan(f, indices, n, &njobs);
	if (!ret)
		ret = build_regions(f, njobs, &nregions);
	if (ret)
		return ret;
	/* waves of regions whose buffers fit max_read_bytes (a larger region goes alone) */
	for (r0 = 0; r0 < nregions; r0 = r1) {
		wave = (size_t)f->regions[r0].len;
		for (r1 = r0 + 1; r1 < nregions && wave + f->regions[r1].len <= f->max_read_bytes; r1++)
			wave += (size_t)f->regions[r1].len;
		ret = read_wave(f, r0, r1);
		if (ret)
			return ret;
		for (je = jb; je < njobs && f->jobs[je].region < r1; je++)
			;
		ret = decode_jobs(f, jb, je, out);
		if (ret)
			return ret;
		f->st.chunks_decoded += je - jb;
		jb = je;
	}
	/* the arena may have moved while it grew: pointers are made only now */
	for (i = 0; i < n; i++) {
		const uint8_t *a = f->ctx[f->arena_of[i]].arena.data;

		out[i].data = a ? a + f->offs[i] : empty;
	}
	f->st.records += n;
	return 0;
}
