/* The io core: file table, request checks, in-flight caps, completion accounting, object references. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "io/io.h"
#include "io/remote.h"

#define DEFAULT_QUEUE_DEPTH 64
#define DEFAULT_MAX_BYTES (64ull << 20)
#define DEFAULT_THREADS 4
#define DEFAULT_MAX_FILES 256
/* Bounds that keep a bad config from asking for absurd rings, threads or tables. */
#define MAX_THREADS 1024
#define MAX_FILES 65536
#define MAX_FAULTS 65536

int grist_io_config_resolve(enum grist_io_kind kind, const struct grist_io_config *in, struct grist_io_config *out)
{
	unsigned most = kind == GRIST_IO_HTTP ? GRIST_IO_MAX_REMOTE_QUEUE_DEPTH : GRIST_IO_MAX_QUEUE_DEPTH;

	if (in)
		*out = *in;
	else
		memset(out, 0, sizeof(*out));
	if (!out->queue_depth)
		out->queue_depth = DEFAULT_QUEUE_DEPTH;
	if (!out->max_bytes_in_flight)
		out->max_bytes_in_flight = DEFAULT_MAX_BYTES;
	if (!out->threads)
		out->threads = DEFAULT_THREADS;
	if (!out->max_files)
		out->max_files = DEFAULT_MAX_FILES;
	if (out->queue_depth > most)
		return grist_fail(-EINVAL, "io queue depth %u is above the limit %u", out->queue_depth, most);
	if (out->threads > MAX_THREADS)
		return grist_fail(-EINVAL, "io threads %u is above the limit %u",
				  out->threads, MAX_THREADS);
	if (out->max_files > MAX_FILES)
		return grist_fail(-EINVAL, "io max_files %u is above the limit %u",
				  out->max_files, MAX_FILES);
	if (!out->fixed_buf != !out->fixed_buf_len)
		return grist_fail(-EINVAL, "io fixed buffer needs both an address and a length");
	if (out->fault.nr_faults > MAX_FAULTS)
		return grist_fail(-EINVAL, "io fault list of %u entries is above the limit %u",
				  out->fault.nr_faults, MAX_FAULTS);
	if (out->fault.nr_faults && !out->fault.faults)
		return grist_fail(-EINVAL, "io fault list is NULL but nr_faults is %u",
				  out->fault.nr_faults);
	return 0;
}

int grist_io_create_ops(const struct grist_io_ops *ops, const struct grist_io_config *cfg,
			struct grist_io **out)
{
	struct grist_io *io = NULL;
	int ret;

	ret = ops->create(cfg, &io);
	if (ret)
		return ret;
	io->ops = ops;
	io->cfg = *cfg;
	io->cfg.fault.faults = NULL; /* the injector keeps its own copy */
	io->files = calloc(cfg->max_files, sizeof(*io->files));
	if (!io->files) {
		ops->destroy(io);
		return grist_fail(-ENOMEM, "io file table of %u slots", cfg->max_files);
	}
	io->st.backend = ops->name;
	io->st.queue_depth = cfg->queue_depth;
	io->st.max_bytes_in_flight = cfg->max_bytes_in_flight;
	*out = io;
	return 0;
}

int grist_io_add_file(struct grist_io *io, int fd, const char *path, uint32_t *slot)
{
	struct grist_io_file *f;
	int flags, ret;

	if (!io || !slot || fd < 0)
		return grist_fail(-EINVAL, "grist_io_add_file: bad argument");
	if (io->nr_files >= io->cfg.max_files)
		return grist_fail(-ENOSPC, "%s: io file table is full (%u files)",
				  path ? path : "(unnamed)", io->cfg.max_files);
	flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return grist_fail(-errno, "%s: fcntl(F_GETFL): %s", path ? path : "(unnamed)",
				  strerror(errno));
	f = &io->files[io->nr_files];
	memset(f, 0, sizeof(*f));
	f->fd = fd;
	f->offset_align = 1;
	f->mem_align = 1;
	f->path = strdup(path ? path : "(unnamed)");
	if (!f->path)
		return grist_fail(-ENOMEM, "io file name");
	if (flags & O_DIRECT) {
		f->direct = true;
		ret = grist_io_dio_alignment(fd, &f->offset_align, &f->mem_align);
		if (ret)
			goto fail;
	}
	ret = io->ops->add_file ? io->ops->add_file(io, io->nr_files) : 0;
	if (ret)
		goto fail;
	*slot = io->nr_files++;
	return 0;
fail:
	free(f->path);
	f->path = NULL;
	return grist_fail_prefix(ret, "%s", path ? path : "(unnamed)");
}

int grist_io_add_remote(struct grist_io *io, struct grist_remote_object *obj, uint32_t *slot)
{
	struct grist_io_file *f;
	int ret;

	if (!io || !obj || !slot)
		return grist_fail(-EINVAL, "grist_io_add_remote: bad argument");
	if (!io->ops->remote)
		return grist_fail(-EINVAL, "%s: the %s io backend reads local files only", obj->url, io->ops->name);
	if (io->nr_files >= io->cfg.max_files)
		return grist_fail(-ENOSPC, "%s: io file table is full (%u files)", obj->url, io->cfg.max_files);
	f = &io->files[io->nr_files];
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->offset_align = 1;
	f->mem_align = 1;
	f->path = strdup(obj->url);
	if (!f->path)
		return grist_fail(-ENOMEM, "io file name");
	f->remote = grist_remote_ref(obj);
	ret = io->ops->add_file ? io->ops->add_file(io, io->nr_files) : 0;
	if (ret) {
		grist_remote_unref(f->remote);
		free(f->path);
		memset(f, 0, sizeof(*f));
		return ret;
	}
	*slot = io->nr_files++;
	return 0;
}

static int check_req(struct grist_io *io, const struct grist_io_req *r)
{
	const struct grist_io_file *f;

	if (!r)
		return grist_fail(-EINVAL, "io request is NULL");
	if (r->file >= io->nr_files)
		return grist_fail(-EINVAL, "io request names file slot %u, only %u registered",
				  r->file, io->nr_files);
	f = &io->files[r->file];
	if (!r->buf || !r->len || r->len > INT32_MAX)
		return grist_fail_at(-EINVAL, f->path, r->offset,
				     "io request of %u bytes (buffer %p) is not readable",
				     r->len, (void *)r->buf);
	if (r->offset > (uint64_t)INT64_MAX - r->len)
		return grist_fail_at(-EINVAL, f->path, r->offset,
				     "io request of %u bytes runs past the largest file offset", r->len);
	if (f->direct && (r->offset % f->offset_align || r->len % f->offset_align ||
			  (uintptr_t)r->buf % f->mem_align))
		return grist_fail_at(-EINVAL, f->path, r->offset,
				     "O_DIRECT read of %u bytes into %p is not aligned (offset and "
				     "length to %u, buffer to %u)",
				     r->len, (void *)r->buf, f->offset_align, f->mem_align);
	return 0;
}

int grist_io_submit(struct grist_io *io, struct grist_io_req **reqs, unsigned n)
{
	uint64_t bytes = io ? io->bytes_inflight : 0;
	unsigned take = 0, i;
	int ret;

	if (!io || (n && !reqs))
		return grist_fail(-EINVAL, "grist_io_submit: bad argument");
	for (i = 0; i < n; i++) {
		ret = check_req(io, reqs[i]);
		if (ret)
			return ret;
	}
	/* Take the longest prefix that fits both caps; a lone oversized read still goes alone. */
	while (take < n && io->inflight + take < io->cfg.queue_depth) {
		uint64_t len = reqs[take]->len;

		if (bytes + len > io->cfg.max_bytes_in_flight && (io->inflight + take) > 0)
			break;
		bytes += len;
		take++;
	}
	for (i = 0; i < take; i++) {
		reqs[i]->result = 0;
		reqs[i]->done = 0;
		reqs[i]->retries = 0;
		reqs[i]->flags = 0;
		reqs[i]->next = NULL;
	}
	if (!take)
		return 0;
	ret = io->ops->submit(io, reqs, take);
	if (ret < 0)
		return ret;
	io->inflight += take;
	io->bytes_inflight = bytes;
	io->st.submitted += take;
	return (int)take;
}

int grist_io_req_error(struct grist_io *io, const struct grist_io_req *req)
{
	const char *path = req->file < io->nr_files ? io->files[req->file].path : NULL;
	const char *detail = req->file < io->nr_files ? io->files[req->file].error : NULL;

	if (req->result >= 0)
		return req->result;
	if (detail)
		return grist_fail_at(req->result, path, req->offset, "read of %u bytes failed: %s", req->len,
				     detail);
	if (req->retries >= GRIST_IO_MAX_RETRIES &&
	    (req->result == -EAGAIN || req->result == -EINTR))
		return grist_fail_at(req->result, path, req->offset + req->done,
				     "read of %u bytes still failing after %u retries: %s",
				     req->len - req->done, (unsigned)req->retries,
				     grist_strerror(req->result));
	return grist_fail_at(req->result, path, req->offset + req->done,
			     "read of %u bytes failed: %s", req->len - req->done,
			     grist_strerror(req->result));
}

int grist_io_reap(struct grist_io *io, struct grist_io_req **done, unsigned max, unsigned min_wait)
{
	bool noted = false;
	int ret, i;

	if (!io || (max && !done))
		return grist_fail(-EINVAL, "grist_io_reap: bad argument");
	if (!max || !io->inflight)
		return 0;
	if (min_wait > max)
		min_wait = max;
	if (min_wait > io->inflight)
		min_wait = io->inflight;
	ret = io->ops->reap(io, done, max, min_wait);
	if (ret < 0)
		return ret;
	for (i = 0; i < ret; i++) {
		struct grist_io_req *r = done[i];

		io->inflight--;
		io->bytes_inflight -= r->len;
		io->st.completed++;
		io->st.retries += r->retries;
		if (r->flags & GRIST_IO_REQ_RESUBMITTED)
			io->st.resubmitted++;
		if (r->result < 0) {
			io->st.errors++;
			if (!noted)
				grist_io_req_error(io, r);
			noted = true;
		} else {
			io->st.bytes += (uint64_t)r->result;
		}
	}
	return ret;
}

enum grist_io_step grist_io_req_step(struct grist_io_req *req, int res)
{
	if (res > 0) {
		req->done += (uint32_t)res;
		if (req->done >= req->len) {
			req->result = (int32_t)req->len;
			return GRIST_IO_STEP_DONE;
		}
		/* Short but not at EOF: read the rest where this one stopped. */
		req->flags |= GRIST_IO_REQ_RESUBMITTED;
		return GRIST_IO_STEP_AGAIN;
	}
	if (res == 0) {
		/* End of file: the request ends with what was there. */
		req->result = (int32_t)req->done;
		return GRIST_IO_STEP_DONE;
	}
	if ((res == -EAGAIN || res == -EINTR) && req->retries < GRIST_IO_MAX_RETRIES) {
		req->retries++;
		return GRIST_IO_STEP_AGAIN;
	}
	req->result = res;
	return GRIST_IO_STEP_DONE;
}

int grist_io_plug(struct grist_io *io, bool on)
{
	io->plugged = on && io->ops->flush;
	return !on && io->ops->flush ? io->ops->flush(io) : 0;
}

void grist_io_consumed(struct grist_io *io, const struct grist_io_req *reqs, size_t n)
{
	if (io->ops->consumed && n)
		io->ops->consumed(io, reqs, n);
}

void grist_io_get_stats(struct grist_io *io, struct grist_io_stats *st)
{
	*st = io->st;
	st->inflight = io->inflight;
	st->bytes_inflight = io->bytes_inflight;
	if (io->ops->stats)
		io->ops->stats(io, st);
}

void grist_io_destroy(struct grist_io *io)
{
	struct grist_io_file *files;
	unsigned i, n;

	if (!io)
		return;
	files = io->files;
	n = io->nr_files;
	/* The backend waits for reads in flight first, so no buffer is written after we return. */
	io->ops->destroy(io);
	for (i = 0; i < n; i++) {
		free(files[i].path);
		free(files[i].error);
		grist_remote_unref(files[i].remote);
	}
	free(files);
}

/* ---- remote objects: their references (see io.h) ---- */

struct grist_remote_object *grist_remote_ref(struct grist_remote_object *o)
{
	if (o)
		__atomic_fetch_add(&o->refs, 1, __ATOMIC_RELAXED);
	return o;
}

void grist_remote_unref(struct grist_remote_object *o)
{
	if (!o || __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL))
		return;
	if (o->sync_io) {
		o->sync_io->files[o->sync_slot].remote = NULL; /* its uncounted reference, see grist_remote_read() */
		grist_io_destroy(o->sync_io);
	}
	pthread_mutex_destroy(&o->sync_lock);
	grist_redirect_free_targets(o->target);
	free(o->opening);
	grist_url_free(&o->u);
	free(o->tail);
	free(o->url);
	free(o);
}
