/*
 * Every upload of the process, for one that ends (see upload.h): grist_upload_abort_all(),
 * from an ordinary thread (the CLI's signal thread, never a handler), stops every upload,
 * waits for a CreateMultipartUpload under way and the cancelled PUTs, then sends every
 * AbortMultipartUpload at once, all within its time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "io/remote.h"
#include "io/upload.h"
#include "io/upload_impl.h"

/* at most this many AbortMultipartUpload requests in flight at once */
#define ABORT_INFLIGHT 16

/*
 * Every upload from open to free. grist_upload_abort_all() holds live_lock for the whole
 * abort, so an upload it works on is not freed under it: its owner's
 * grist_upload_live_remove() waits. Once it ran, live_closed refuses new uploads: the
 * process is ending.
 */
static struct grist_upload *live_head;
static bool live_closed;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

int grist_upload_live_add(struct grist_upload *u)
{
	int ret = 0;

	pthread_mutex_lock(&live_lock);
	if (live_closed) {
		ret = grist_fail(-ECANCELED, "%s: not started: every upload of this process was aborted "
				 "(grist_writer_abort_all())", u->url);
	} else {
		u->live_next = live_head;
		if (live_head)
			live_head->live_prev = u;
		live_head = u;
		u->listed = true;
	}
	pthread_mutex_unlock(&live_lock);
	return ret;
}

void grist_upload_live_remove(struct grist_upload *u)
{
	if (!u->listed)
		return;
	pthread_mutex_lock(&live_lock);
	if (u->live_prev)
		u->live_prev->live_next = u->live_next;
	else
		live_head = u->live_next;
	if (u->live_next)
		u->live_next->live_prev = u->live_prev;
	pthread_mutex_unlock(&live_lock);
	u->listed = false;
}

struct abort_one {
	struct grist_remote_xfer x; /* first: on_aborted() gets the xfer */
	struct grist_sigv4_pair q[1];
	int error;
	char msg[sizeof(((struct grist_remote_xfer *)0)->msg)];
};

/* One AbortMultipartUpload ended: its failure is kept, and the others go on. */
static int on_aborted(struct grist_remote_xfer *x)
{
	struct abort_one *a = (struct abort_one *)x;

	/* gone already (the server dropped it after a refused part): nothing is left, as wanted */
	if (x->error && x->error != -ENOENT && x->error != -ESTALE) {
		a->error = x->error;
		snprintf(a->msg, sizeof(a->msg), "%s", x->msg);
	}
	x->error = 0;
	return 0;
}

/* Wait on @u's cv until @deadline_ns (grist_remote_now_ns()); false once it has passed. */
static bool wait_until(struct grist_upload *u, uint64_t deadline_ns)
{
	struct timespec ts;

	if (grist_remote_now_ns() >= deadline_ns)
		return false;
	ts.tv_sec = (time_t)(deadline_ns / 1000000000ull);
	ts.tv_nsec = (long)(deadline_ns % 1000000000ull);
	pthread_cond_timedwait(&u->cv, &u->lock, &ts);
	return true;
}

int grist_upload_abort_all(unsigned timeout_ms)
{
	uint64_t start = grist_remote_now_ns(), deadline = start + (uint64_t)timeout_ms * 1000000ull;
	/* the running PUTs get half the time to end: the aborts must have the rest */
	uint64_t puts_by = start + (uint64_t)timeout_ms * 500000ull;
	struct grist_remote_xfer **xs = NULL;
	struct abort_one *all = NULL, *bad = NULL;
	struct grist_upload *u;
	size_t n = 0, i, k = 0, nbad = 0;
	int ret = 0;

	pthread_mutex_lock(&live_lock);
	live_closed = true;
	/* every upload stops at once: no new part, no commit; the running PUTs are cancelled */
	for (u = live_head; u; u = u->live_next) {
		__atomic_store_n(&u->cancel, 1, __ATOMIC_RELEASE);
		pthread_mutex_lock(&u->lock);
		if (!u->error) {
			u->error = -ECANCELED;
			u->error_part = SIZE_MAX;
			snprintf(u->msg, sizeof(u->msg), "%s: upload aborted: the process is ending "
				 "(grist_writer_abort_all())", u->url);
		}
		pthread_cond_broadcast(&u->cv);
		pthread_mutex_unlock(&u->lock);
		n++;
	}
	all = calloc(n ? n : 1, sizeof(*all));
	xs = calloc(n ? n : 1, sizeof(*xs));
	if (!all || !xs) {
		ret = grist_fail(-ENOMEM, "out of memory aborting %zu uploads", n);
		goto out;
	}
	/*
	 * Abort each once its UploadId is known (a CreateMultipartUpload under way may have made
	 * one) and its PUTs have ended: a part that lands after the abort would be an orphan.
	 */
	for (u = live_head, i = 0; u; u = u->live_next, i++) {
		struct abort_one *a = &all[i];

		grist_upload_request_init(u, &a->x, "DELETE", a->q, 1);
		pthread_mutex_lock(&u->lock);
		while (u->creating && wait_until(u, deadline))
			;
		while (u->busy && wait_until(u, puts_by))
			;
		if (u->upload_id[0]) {
			a->q[0] = (struct grist_sigv4_pair){ "uploadId", u->upload_id };
			a->x.deadline_ns = deadline;
			xs[k++] = &a->x;
		} else if (u->creating) {
			a->error = -ETIMEDOUT;
			snprintf(a->msg, sizeof(a->msg), "CreateMultipartUpload not answered within %u ms: an upload "
				 "it made may be left", timeout_ms);
		}
		pthread_mutex_unlock(&u->lock);
	}
	ret = grist_remote_xfers_run(xs, k, ABORT_INFLIGHT, on_aborted, "AbortMultipartUpload");
	for (i = 0; i < k; i++)
		grist_remote_xfer_release(xs[i]);
	for (i = 0; !ret && i < n; i++)
		if (all[i].error && !nbad++)
			bad = &all[i];
	if (bad)
		ret = grist_fail(bad->error, "%s: AbortMultipartUpload: %s%s", bad->x.display, bad->msg,
				 nbad > 1 ? " (and more uploads not aborted)" : "");
out:
	pthread_mutex_unlock(&live_lock);
	free(all);
	free(xs);
	return ret;
}

