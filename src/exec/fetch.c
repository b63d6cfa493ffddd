/* fetch.c - random access by index: a request's chunk reads in one batched submission, each chunk decoded once. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "format/chunk_decode.h"
#include "format/dataset.h"
#include "grist/fetch.h"
#include "io/io.h"

#define DEFAULT_QUEUE_DEPTH 256
#define DEFAULT_MAX_READ_BYTES ((size_t)64 << 20)
#define READ_PIECE_MAX (8u << 20)   /* bytes per io request; larger regions are split */
#define REGION_MAX (32ull << 20)    /* coalescing stops here, so one region never dwarfs a wave */
#define REAP_MAX 64

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
	int error;               /* the first failed read's code, its message already recorded */
};

struct grist_fetcher {
	const struct grist_reader *r;
	struct grist_io *io;
	uint32_t *slot;          /* io file slot per file of the reader */
	size_t nfiles;
	struct grist_chunk_decoder *dec;
	size_t max_read_bytes;
	int broken;              /* an io stage failure: every later call returns it */
	struct grist_fetcher_stats st;

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
	uint8_t *arena;          /* the records returned */
	size_t arena_used, arena_cap;
	size_t *offs;            /* per position: offset in arena until the pointers are fixed */
	size_t offs_cap;
};

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * size);
	if (!q)
		return grist_fail(-ENOMEM, "fetcher: cannot allocate %zu entries of %zu bytes", n, size);
	*p = q;
	*cap = n;
	return 0;
}

GRIST_API int grist_fetcher_create(const struct grist_reader *r, const struct grist_fetcher_options *opts,
				   struct grist_fetcher **out)
{
	struct grist_fetcher_options o = { 0 };
	struct grist_io_config ioc = { 0 };
	struct grist_fetcher *f;
	enum grist_io_kind kind;
	size_t i;
	int ret;

	*out = NULL;
	if (!r)
		return grist_fail(-EINVAL, "fetcher: no reader");
	if (opts)
		o = *opts;
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
	kind = o.io == GRIST_FETCH_IO_URING ? GRIST_IO_URING
	       : o.io == GRIST_FETCH_IO_PREAD ? GRIST_IO_PREAD
	       : grist_io_probe(NULL, 0) == 0 ? GRIST_IO_URING
					      : GRIST_IO_PREAD;
	ret = grist_io_create(kind, &ioc, &f->io);
	if (ret)
		goto fail;
	f->st.backend = kind == GRIST_IO_URING ? "uring" : "pread";
	for (i = 0; i < f->nfiles; i++) {
		const struct grist_file_geom *g = grist_reader_file_geom(r, i);

		ret = grist_io_add_file(f->io, g->fd, g->path, &f->slot[i]);
		if (ret)
			goto fail;
	}
	ret = grist_chunk_decoder_create(&f->dec);
	if (ret) {
		ret = grist_fail(ret, "fetcher: cannot make a chunk decoder");
		goto fail;
	}
	*out = f;
	return 0;
fail:
	grist_fetcher_destroy(f);
	return ret;
}

GRIST_API void grist_fetcher_destroy(struct grist_fetcher *f)
{
	if (!f)
		return;
	grist_io_destroy(f->io);
	grist_chunk_decoder_destroy(f->dec);
	free(f->slot);
	free(f->wants);
	free(f->jobs);
	free(f->regions);
	free(f->reqs);
	free(f->reqp);
	free(f->buf);
	free(f->arena);
	free(f->offs);
	free(f);
}

GRIST_API void grist_fetcher_stats(const struct grist_fetcher *f, struct grist_fetcher_stats *out)
{
	*out = f->st;
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

	ret = grow((void **)&f->wants, &f->wants_cap, n, sizeof(*f->wants));
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
		ret = grow((void **)&f->jobs, &f->jobs_cap, nj + 1, sizeof(*f->jobs));
		if (ret)
			return ret;
		g = grist_reader_file_geom(f->r, w->file);
		f->jobs[nj++] = (struct job){ .file = w->file, .chunk = w->chunk, .begin = g->chunk_offsets[w->chunk],
					      .end = g->chunk_offsets[w->chunk + 1], .first = i, .last = i + 1 };
	}
	*njobs = nj;
	return 0;
}

/* Chunks of one file whose extents touch become one region (jobs are in offset order). */
static int build_regions(struct grist_fetcher *f, size_t njobs, size_t *nregions)
{
	struct region *rg = NULL;
	size_t i, nr = 0;
	int ret;

	for (i = 0; i < njobs; i++) {
		struct job *j = &f->jobs[i];

		if (rg && rg->file == j->file && j->begin <= rg->offset + rg->len &&
		    j->end - rg->offset <= REGION_MAX) {
			if (j->end > rg->offset + rg->len)
				rg->len = j->end - rg->offset;
		} else {
			ret = grow((void **)&f->regions, &f->regions_cap, nr + 1, sizeof(*f->regions));
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
		if (!rg->error)
			rg->error = grist_io_req_error(f->io, q); /* names the file and offset */
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
		f->regions[i].buf_off = buf_need;
		buf_need += (size_t)f->regions[i].len;
		nreq += (size_t)((f->regions[i].len + READ_PIECE_MAX - 1) / READ_PIECE_MAX);
	}
	if (buf_need > f->buf_cap) {
		free(f->buf);
		f->buf_cap = 0;
		f->buf = malloc(buf_need);
		if (!f->buf)
			return grist_fail(-ENOMEM, "fetcher: cannot allocate a %zu-byte read buffer", buf_need);
		f->buf_cap = buf_need;
	}
	ret = grow((void **)&f->reqs, &f->reqs_cap, nreq, sizeof(*f->reqs));
	if (!ret)
		ret = grow((void **)&f->reqp, &f->reqp_cap, nreq, sizeof(*f->reqp));
	if (ret)
		return ret;
	nreq = 0;
	for (i = r0; i < r1; i++) {
		struct region *rg = &f->regions[i];

		rg->got = 0;
		rg->error = 0;
		for (at = 0; at < rg->len; at += READ_PIECE_MAX) {
			struct grist_io_req *q = &f->reqs[nreq];

			memset(q, 0, sizeof(*q));
			q->file = f->slot[rg->file];
			q->offset = rg->offset + at;
			q->len = (uint32_t)(rg->len - at < READ_PIECE_MAX ? rg->len - at : READ_PIECE_MAX);
			q->buf = f->buf + rg->buf_off + at;
			q->user_data = i;
			f->reqp[nreq++] = q;
		}
	}
	f->st.reads += nreq;
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
	return 0;
}

/*
 * Decode job @j once it was read, and copy the records its positions want into the arena:
 * @res[pos].len is set and f->offs[pos] holds the offset (the arena may still move).
 */
static int decode_job(struct grist_fetcher *f, const struct job *j, struct grist_fetch_record *res)
{
	const struct region *rg = &f->regions[j->region];
	const struct grist_file_geom *g = grist_reader_file_geom(f->r, j->file);
	struct grist_decoded_chunk out;
	uint64_t want_records, prev = UINT64_MAX;
	size_t i, len = 0, off = 0;
	int ret;

	if (rg->error)
		return rg->error;
	if (rg->offset + rg->got < j->end)
		return grist_fail_at(-EBADMSG, g->path, rg->offset + rg->got,
				     "file ends inside the chunk at byte %llu (it should end at %llu): truncated?",
				     (unsigned long long)j->begin, (unsigned long long)j->end);
	ret = grist_chunk_decode(f->dec, f->buf + rg->buf_off, rg->offset, (size_t)rg->got, j->begin, j->end,
				 g->path, &out);
	if (ret)
		return ret;
	want_records = grist_file_chunk_records(g, j->chunk);
	if (out.chunk_type != 'r' || out.num_records != want_records)
		return grist_fail_at(-EBADMSG, g->path, j->begin,
				     "chunk %llu holds %llu records (type 0x%02x), the footer implies %llu",
				     (unsigned long long)j->chunk, (unsigned long long)out.num_records, out.chunk_type,
				     (unsigned long long)want_records);
	f->st.chunks_decoded++;
	for (i = j->first; i < j->last; i++) {
		const struct want *w = &f->wants[i];

		/* wants are sorted by record: a repeated index shares the copy before it */
		if (w->rec != prev) {
			len = (size_t)(out.offsets[w->rec + 1] - out.offsets[w->rec]);
			ret = grow((void **)&f->arena, &f->arena_cap, f->arena_used + len, 1);
			if (ret)
				return ret;
			off = f->arena_used;
			memcpy(f->arena + off, out.values + out.offsets[w->rec], len);
			f->arena_used += len;
			prev = w->rec;
		}
		f->offs[w->pos] = off;
		res[w->pos].len = len;
	}
	return 0;
}

GRIST_API int grist_fetcher_read(struct grist_fetcher *f, const uint64_t *indices, size_t n,
				 struct grist_fetch_record *out)
{
	static const uint8_t empty[1];
	size_t njobs = 0, nregions = 0, r0, r1, jb = 0, i, wave;
	int ret;

	if (f->broken)
		return grist_fail(f->broken, "fetcher: the io stage failed earlier (%s)", grist_strerror(f->broken));
	if (n && (!indices || !out))
		return grist_fail(-EINVAL, "fetcher: %zu indices and no %s", n, indices ? "output" : "indices");
	f->st.requests++;
	f->arena_used = 0;
	if (!n)
		return 0;
	ret = grow((void **)&f->offs, &f->offs_cap, n, sizeof(*f->offs));
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
		for (; jb < njobs && f->jobs[jb].region < r1; jb++) {
			ret = decode_job(f, &f->jobs[jb], out);
			if (ret)
				return ret;
		}
	}
	/* the arena may have moved while it grew: pointers are made only now */
	for (i = 0; i < n; i++)
		out[i].data = f->arena ? f->arena + f->offs[i] : empty;
	f->st.records += n;
	return 0;
}
