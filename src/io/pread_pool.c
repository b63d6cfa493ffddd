/* The pread pool backend: worker threads run blocking preads, so cached reads copy in parallel. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/thread.h"
#include "io/io.h"

/*
 * Invariant: every request the core counts as in flight is on exactly one of
 * the queue, a worker's stack, or the ready list. The queue is bounded by the
 * core's queue-depth cap, so it needs no allocation.
 */
struct pool_io {
	struct grist_io base;
	pthread_mutex_t lock;
	pthread_cond_t work_cv; /* a read was queued, or stop */
	pthread_cond_t done_cv; /* a read finished */
	struct grist_io_queue queue;
	struct grist_io_queue ready;
	bool stop;
	pthread_t *threads;
	unsigned nr_threads;
};

static struct pool_io *to_pool(struct grist_io *io)
{
	return (struct pool_io *)io;
}

/* The whole read of one request: short reads continue, EINTR/EAGAIN retry (bounded), 0 is EOF. */
static void read_all(int fd, struct grist_io_req *req)
{
	enum grist_io_step step;

	do {
		ssize_t r = pread(fd, req->buf + req->done, req->len - req->done,
				  (off_t)(req->offset + req->done));
		int res = r < 0 ? -errno : (int)r;

		step = grist_io_req_step(req, res);
		if (step == GRIST_IO_STEP_AGAIN && res == -EAGAIN)
			sched_yield();
	} while (step == GRIST_IO_STEP_AGAIN);
}

static void *worker(void *arg)
{
	struct pool_io *p = arg;
	struct grist_io_req *req;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && !p->queue.head)
			pthread_cond_wait(&p->work_cv, &p->lock);
		if (p->stop)
			break;
		req = grist_io_queue_pop(&p->queue);
		pthread_mutex_unlock(&p->lock);
		/* add_file never moves the table, and a slot is set before any request names it. */
		read_all(p->base.files[req->file].fd, req);
		pthread_mutex_lock(&p->lock);
		grist_io_queue_push(&p->ready, req);
		pthread_cond_signal(&p->done_cv);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static int pool_submit(struct grist_io *io, struct grist_io_req **reqs, unsigned n)
{
	struct pool_io *p = to_pool(io);
	unsigned i;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < n; i++)
		grist_io_queue_push(&p->queue, reqs[i]);
	if (n == 1)
		pthread_cond_signal(&p->work_cv);
	else
		pthread_cond_broadcast(&p->work_cv);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static int pool_reap(struct grist_io *io, struct grist_io_req **done, unsigned max, unsigned min_wait)
{
	struct pool_io *p = to_pool(io);
	unsigned n;

	pthread_mutex_lock(&p->lock);
	/* min_wait <= in flight (the core clamps it), and workers finish every queued read. */
	while (p->ready.n < min_wait)
		pthread_cond_wait(&p->done_cv, &p->lock);
	n = grist_io_queue_drain(&p->ready, done, max);
	pthread_mutex_unlock(&p->lock);
	return (int)n;
}

static void pool_destroy(struct grist_io *io)
{
	struct pool_io *p = to_pool(io);
	unsigned i;

	/* Workers finish the read in hand and exit; queued reads are dropped, never started. */
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work_cv);
	pthread_mutex_unlock(&p->lock);
	for (i = 0; i < p->nr_threads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->done_cv);
	pthread_cond_destroy(&p->work_cv);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
}

static int pool_create(const struct grist_io_config *cfg, struct grist_io **out)
{
	struct pool_io *p;
	unsigned i;
	int ret;

	p = calloc(1, sizeof(*p));
	if (!p)
		return grist_fail(-ENOMEM, "pread pool");
	p->threads = calloc(cfg->threads, sizeof(*p->threads));
	if (!p->threads) {
		free(p);
		return grist_fail(-ENOMEM, "pread pool of %u threads", cfg->threads);
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work_cv, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	for (i = 0; i < cfg->threads; i++) {
		ret = -grist_thread_start(&p->threads[i], worker, p);
		if (ret) {
			grist_fail(-ret, "pread pool: starting thread %u of %u: %s", i + 1,
				   cfg->threads, strerror(ret));
			goto fail;
		}
		p->nr_threads++;
	}
	*out = &p->base;
	return 0;
fail:
	pool_destroy(&p->base);
	return -ret;
}

const struct grist_io_ops grist_io_pread_ops = {
	.name = "pread",
	.create = pool_create,
	.submit = pool_submit,
	.reap = pool_reap,
	.destroy = pool_destroy,
};
