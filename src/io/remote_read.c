/*
 * grist_remote_read(): the blocking read of a remote object, the reader's pread() for a URL
 * (footers, chunks). It drives the object's own http io object through the io stage's front,
 * as any caller does, so it stands above the backends and the registry, not in remote.c
 * under them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "io/io.h"
#include "io/remote.h"
#include "io/remote_read.h"

/*
 * The objects whose io object is kept, most recently read first, each with a counted
 * reference. A reader over many URLs reads each one's footer through its io object, and
 * one kept per object held 4 descriptors (epoll, curl's wakeup pair, a keep-alive socket)
 * and ~0.5 MB of libcurl handles for the object's life: 250 shards exhausted the usual
 * 1,024 descriptors. So at most SYNC_KEPT are kept: the objects read lately keep their
 * connections, and an object read again after its eviction makes a new io object.
 */
#define SYNC_KEPT 16

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct grist_remote_object *kept[SYNC_KEPT + 1];
static unsigned nkept;

/* Destroy @o's io object (a later read makes another). */
static void release_sync(struct grist_remote_object *o)
{
	pthread_mutex_lock(&o->sync_lock);
	if (o->sync_io) {
		o->sync_io->files[o->sync_slot].remote = NULL; /* its uncounted reference, see below */
		grist_io_destroy(o->sync_io);
		o->sync_io = NULL;
	}
	pthread_mutex_unlock(&o->sync_lock);
}

/* @o, whose io object was just used, goes first in kept[]; the one pushed out is released. */
static void keep(struct grist_remote_object *o)
{
	struct grist_remote_object *out = NULL;
	unsigned i;

	pthread_mutex_lock(&kept_lock);
	for (i = 0; i < nkept && kept[i] != o; i++)
		;
	if (i == nkept)
		kept[nkept++] = grist_remote_ref(o); /* nkept <= SYNC_KEPT before: room for one */
	for (; i > 0; i--)
		kept[i] = kept[i - 1];
	kept[0] = o;
	if (nkept > SYNC_KEPT)
		out = kept[--nkept];
	pthread_mutex_unlock(&kept_lock);
	/* no lock held: the evicted object's own lock waits for a read of it in progress */
	if (out) {
		release_sync(out);
		grist_remote_unref(out);
	}
}

int grist_remote_read(struct grist_remote_object *o, uint8_t *dst, uint64_t off, uint64_t len)
{
	bool has_io;
	struct grist_io_req *reqs = NULL, **ptrs = NULL, *done[64];
	struct grist_remote_options opt;
	uint64_t piece, k, n, sent = 0, got = 0;
	int ret = 0;

	if (off > o->size || len > o->size - off)
		return grist_fail_at(-EBADMSG, o->url, off, "read of %llu bytes runs past the object's end (%llu "
				     "bytes; was it truncated?)", (unsigned long long)len,
				     (unsigned long long)o->size);
	if (!len)
		return 0;
	if (off >= o->tail_off) {
		/* the opening GET already brought these bytes (the postscript, small footers) */
		memcpy(dst, o->tail + (off - o->tail_off), (size_t)len);
		return 0;
	}
	grist_remote_options_current(&opt);
	piece = opt.split_bytes;
	n = (len + piece - 1) / piece;
	reqs = calloc(n, sizeof(*reqs));
	ptrs = calloc(n, sizeof(*ptrs));
	if (!reqs || !ptrs) {
		ret = grist_fail(-ENOMEM, "%s: out of memory for a read of %llu bytes", o->url, (unsigned long long)len);
		goto out;
	}
	for (k = 0; k < n; k++) {
		reqs[k].offset = off + k * piece;
		reqs[k].len = (uint32_t)(len - k * piece < piece ? len - k * piece : piece);
		reqs[k].buf = dst + k * piece;
		ptrs[k] = &reqs[k];
	}
	pthread_mutex_lock(&o->sync_lock);
	if (!o->sync_io) {
		struct grist_io_config cfg = { .queue_depth = 1024, .max_bytes_in_flight = 1ull << 30, .any_thread = true };

		ret = grist_io_create(GRIST_IO_HTTP, &cfg, &o->sync_io);
		if (!ret)
			ret = grist_io_add_remote(o->sync_io, o, &o->sync_slot);
		if (!ret)
			/* the object owns its io object: the io's reference back would be a cycle */
			__atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL);
		if (ret) {
			grist_io_destroy(o->sync_io);
			o->sync_io = NULL;
		}
	}
	for (k = 0; !ret && k < n; k++)
		reqs[k].file = o->sync_slot;
	/* bounded: every request comes back (done or failed) within its timeouts and retries */
	while (!ret && got < n) {
		int r;

		if (sent < n) {
			r = grist_io_submit(o->sync_io, ptrs + sent, (unsigned)(n - sent > 1024 ? 1024 : n - sent));
			if (r < 0) {
				ret = r;
				break;
			}
			sent += (uint64_t)r;
		}
		r = grist_io_reap(o->sync_io, done, 64, 1);
		if (r < 0) {
			ret = r;
			break;
		}
		for (k = 0; k < (uint64_t)r; k++) {
			if (done[k]->result < 0 && !ret)
				ret = grist_io_req_error(o->sync_io, done[k]);
			else if (!ret && done[k]->result != (int32_t)done[k]->len)
				ret = grist_fail_at(-EBADMSG, o->url, done[k]->offset + (uint64_t)done[k]->result,
						    "the object ends early (was it truncated?)");
		}
		got += (uint64_t)r;
	}
	/* after an error, wait for the rest so that no GET writes into @dst after we return */
	while (got < sent) {
		int r = grist_io_reap(o->sync_io, done, 64, 1);

		if (r <= 0)
			break;
		got += (uint64_t)r;
	}
	has_io = o->sync_io != NULL;
	pthread_mutex_unlock(&o->sync_lock);
	if (has_io)
		keep(o);
out:
	free(reqs);
	free(ptrs);
	return ret;
}
