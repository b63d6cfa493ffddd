/*
 * grist_remote_read(): the blocking read of a remote object, the reader's pread() for a URL
 * (footers, chunks). It drives the object's own http io object through the io stage's front,
 * as any caller does, so it stands above the backends and the registry, not in remote.c
 * under them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "io/io.h"
#include "io/remote.h"
#include "io/remote_read.h"

int grist_remote_read(struct grist_remote_object *o, uint8_t *dst, uint64_t off, uint64_t len)
{
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
	pthread_mutex_unlock(&o->sync_lock);
out:
	free(reqs);
	free(ptrs);
	return ret;
}
