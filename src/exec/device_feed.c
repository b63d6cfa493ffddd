/*
 * The loader's device mode: batches go into device-stage slots (mapped device buffers
 * on host-unified devices, pinned staging otherwise), and each finished batch is
 * submitted, in order, as soon as it is ready, so its transfer runs ahead of the
 * consumer (Grain's two-stage device_put, without Python).
 *
 * Two ways in, picked at start:
 *  - provider: when the engine's units are batches (record granularity, the reference
 *    engine), workers decode straight into stage slots, which they acquire when the
 *    unit's decoding starts (the slot provider below). No byte is copied.
 *  - copy: when units are larger than batches (chunk granularity), the engine hands
 *    out views of its own slots, as in host mode, and helper threads copy each batch
 *    into a stage slot sized to it. The engine's own copy into a stage slot would run
 *    on the one thread that takes its batches in order, which on the H100 held the
 *    loader below host mode's rate (docs/tuning.md, "Chunk granularity copied on one
 *    thread").
 *
 * Threads: one feeder pulls batches from the engine in order (with its own struct
 * grist_pull, so it never touches the consumer's checkpoint position), publishes them
 * and queues them as jobs; helpers copy (copy mode) and submit the jobs in queue order,
 * whoever finishes the oldest one submitting it and every finished one behind it. So
 * the feeder, whose pace moves the engine's in-order window, makes no OpenCL call: on
 * a machine whose cores all decode, those calls take tens of microseconds each.
 *
 * Ownership of a device slot: provider mode, a worker acquires it (or the engine's
 * consumer side, for a batch it packs), copy mode, the feeder does; a helper submits
 * it; the consumer gets it from grist_device_stage_next(), its batch then held by the
 * loader's held table alone, and releases it with its own completion events; only then
 * can it be acquired again. A unit whose rows are
 * copied elsewhere (a filter shifted the batch boundaries) cancels its device slot.
 *
 * The feeder's end position reaches the consumer only through the join: the feeder
 * closes the stage after the last job is submitted, and the consumer joins it once
 * next() reports the stage drained.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grist_config.h"
#include "common/cpus.h"
#include "common/error.h"
#include "common/thread.h"
#include "exec/loader_internal.h"

#if GRIST_HAVE_OPENCL
#include <xxhash.h>

#include "format/dataset.h"
#include "grist/device.h"

#define MAX_HELPERS GRIST_ENGINE_MAX_HELPERS

/* One batch between the feeder and its submission. */
struct feed_job {
	struct grist_slot *s;   /* the engine's batch (published) */
	unsigned slot;          /* its stage slot */
	void *host;             /* copy mode: the stage slot's memory */
	bool ready;             /* copied (and digested): may be submitted */
};

struct grist_loader_device {
	struct grist_device_stage *stage;
	struct grist_slot_provider provider;
	bool copy;                    /* copy mode (see above) */
	/*
	 * Stage slot -> the loader slot submitted through it and not yet handed to the
	 * consumer. next() takes the entry out as it hands the batch over: from then on the
	 * caller's held table is its one owner, so whoever tears down (quiesce, for the
	 * batches nobody took; destroy, for the held ones) gives each back exactly once.
	 */
	struct grist_slot **by_slot;
	unsigned num_slots;
	size_t slot_bytes;
	pthread_t feeder;
	bool feeder_started;
	pthread_t helper[MAX_HELPERS];
	unsigned num_helpers, helpers_started;

	/*
	 * The job queue, under @lock: jobs [head, tail) are live, [head, claimed) taken
	 * by helpers, [head, tail) each hold a distinct stage slot, so the queue never
	 * holds more than num_slots.
	 */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct feed_job *jobs;
	uint64_t head, claimed, tail;
	bool submitting;              /* a helper is submitting finished jobs in order */
	bool feeding_done;            /* the feeder queues nothing more */
	bool stop;                    /* a failure or a shutdown: helpers stop, jobs left are undone */
	int error;                    /* the first failure, reported after the batches before it */
	char errmsg[512];

	/*
	 * The feeder's own state, set before it starts and then touched by the feeder
	 * alone: it never reads or writes the consumer's fields of the loader (consumed,
	 * batches), which move on the consumer's thread while it runs. The consumer reads
	 * pull.end only after joining it.
	 */
	struct grist_pull pull;
	const struct grist_layout *layout; /* immutable after create */
	uint64_t seq;                       /* sequence number of the next batch it publishes */
	bool host_digest;
	uint64_t batch_size;
};

static int provider_acquire(void *ctx, struct grist_slot *s)
{
	struct grist_loader_device *d = ctx;
	void *host;
	unsigned k;
	int ret;

	ret = grist_device_stage_acquire(d->stage, &k, &host);
	if (ret)
		return ret;
	grist_slot_bind(s, host, d->slot_bytes, k);
	return 0;
}

static void provider_cancel(void *ctx, struct grist_slot *s)
{
	struct grist_loader_device *d = ctx;

	/* A failure here fails the stage, which every later call then reports. */
	grist_device_stage_cancel(d->stage, s->handle);
	grist_slot_unbind(s);
}

/* How many bytes a batch can need: exact for fixed rows, an upper bound from the footers otherwise. */
static int slot_bytes_for(const struct grist_loader *l, const struct grist_engine_geometry *g, size_t *out)
{
	const struct grist_loader_config *c = &l->cfg;
	uint64_t max_record = g->max_chunk_decoded, bytes;

	if (c->device_slot_bytes) {
		*out = c->device_slot_bytes;
		return 0;
	}
	if (c->layout != GRIST_LAYOUT_RAGGED) {
		*out = c->batch_size * c->record_bytes;
		return 0;
	}
	if (c->map) {
		*out = c->batch_size * c->map_out_max;
		return 0;
	}
	if (max_record == 0)
		max_record = 1;
	if (max_record > (1ull << 40) / c->batch_size)
		return grist_fail(-EINVAL, "loader: batches of %llu records of up to %llu bytes are too large for "
				  "device slots; set device_slot_bytes", (unsigned long long)c->batch_size,
				  (unsigned long long)max_record);
	bytes = c->batch_size * max_record;
	*out = (size_t)bytes;
	return 0;
}

/* "opencl", "opencl:P:D" or "opencl:all" -> the stage's selector (NULL = its default). */
static int parse_device(const char *spec, const char **selector)
{
	if (!strcmp(spec, "opencl")) {
		*selector = NULL;
		return 0;
	}
	if (!strncmp(spec, "opencl:", 7) && spec[7]) {
		*selector = spec + 7;
		return 0;
	}
	return grist_fail(-EINVAL, "device '%s': expected opencl, opencl:PLATFORM:DEVICE or opencl:all", spec);
}

int grist_loader_device_start(struct grist_loader *l)
{
	struct grist_device_config dc = { .size = sizeof(dc) };
	struct grist_loader_device *d;
	struct grist_engine_geometry geom;
	struct grist_engine_sizes sizes;
	unsigned ndev;
	int ret;

	d = calloc(1, sizeof(*d));
	if (!d)
		return grist_fail(-ENOMEM, "loader: out of memory");
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	l->device = d;
	/* the engine's own sizing: the slot ring holds what its windows can have out at once */
	grist_engine_geometry_read(&l->params, grist_cpus_allowed(), &geom);
	grist_engine_size(&l->params, &geom, &sizes);
	ret = parse_device(l->cfg.device, &dc.selector);
	if (!ret)
		ret = slot_bytes_for(l, &geom, &dc.slot_bytes);
	if (ret)
		return ret;
	d->copy = sizes.device_copy;
	d->num_helpers = sizes.device_helpers;
	/* copy mode: batches are at most max_batch_bytes, and each slot grows only to the largest one */
	if (d->copy && l->cfg.max_batch_bytes && dc.slot_bytes > l->cfg.max_batch_bytes)
		dc.slot_bytes = l->cfg.max_batch_bytes;
	dc.slots = sizes.device_slots;
	dc.max_rows = l->cfg.batch_size;
	ret = grist_device_stage_create(&dc, &d->stage);
	if (ret)
		return grist_fail_prefix(ret, "device %s", l->cfg.device);
	ndev = grist_device_stage_num_devices(d->stage);
	if (l->cfg.batch_size % ndev)
		return grist_fail(-EINVAL, "batch size %llu does not split evenly across %u devices",
				  (unsigned long long)l->cfg.batch_size, ndev);
	d->num_slots = dc.slots;
	d->slot_bytes = dc.slot_bytes;
	d->by_slot = calloc(dc.slots, sizeof(*d->by_slot));
	d->jobs = calloc(dc.slots, sizeof(*d->jobs));
	if (!d->by_slot || !d->jobs)
		return grist_fail(-ENOMEM, "loader: out of memory");
	if (!d->copy) {
		d->provider = (struct grist_slot_provider){ .acquire = provider_acquire, .cancel = provider_cancel,
							    .ctx = d };
		l->provider = &d->provider;
		l->params.deliver = l->provider;
	}
	return 0;
}

/*
 * Keep the first failure (its message too) and make everyone stop. Closing the stage
 * wakes a feeder or worker blocked in acquire() while the jobs that hold the slots
 * will never be submitted; the consumer still gets the batches submitted before, then
 * the failure. Lock held (the stage's own lock is only ever taken inside it).
 */
static void fail_locked(struct grist_loader_device *d, int code)
{
	if (!d->error && code != -ECANCELED) {
		d->error = code;
		snprintf(d->errmsg, sizeof(d->errmsg), "%s", grist_last_error());
	}
	d->stop = true;
	grist_device_stage_close(d->stage);
	pthread_cond_broadcast(&d->cond);
}

/* A job that will not be submitted: its stage slot goes back unsubmitted, its batch to the engine. */
static void undo_job(struct grist_loader_device *d, const struct feed_job *j)
{
	if (d->copy)
		grist_device_stage_cancel(d->stage, j->slot); /* a failure here fails the stage */
	else
		provider_cancel(d, j->s);
	d->pull.ops->release(d->pull.engine, j->s);
}

/* Submit one job's batch; on failure the job is undone. */
static int submit_job(struct grist_loader_device *d, const struct feed_job *j)
{
	struct grist_slot *s = j->s;
	const uint64_t *offsets = d->layout->kind == GRIST_LAYOUT_RAGGED ? s->batch.offsets : NULL;
	int ret;

	d->by_slot[j->slot] = s;
	ret = grist_device_stage_submit(d->stage, j->slot, s->batch.bytes, s->batch.num_rows, offsets);
	/*
	 * The stage's -EINVAL says this call's arguments were wrong; for the loader the
	 * batch came from the data (how many records the files hold), so it is not.
	 */
	if (ret == -EINVAL && s->batch.num_rows < d->batch_size)
		ret = grist_fail(-EMSGSIZE, "the final batch has %zu rows, which do not split evenly across %u "
				 "devices; drop it (drop_remainder) or pick a batch count that divides",
				 s->batch.num_rows, grist_device_stage_num_devices(d->stage));
	else if (ret == -EINVAL)
		ret = grist_fail_prefix(-EIO, "device stage refused batch %llu", (unsigned long long)s->batch.sequence);
	if (ret) {
		d->by_slot[j->slot] = NULL;
		undo_job(d, j);
	}
	return ret;
}

/*
 * Copy (copy mode) and digest jobs; submit them in queue order. A helper that finds
 * the oldest job ready submits it and every ready one behind it; one still being
 * copied stops it there, and its helper carries on once done, so no job waits for
 * a helper that has gone back to sleep.
 */
static void *helper_main(void *arg)
{
	struct grist_loader_device *d = arg;
	struct feed_job *j, job;
	int ret;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (!d->stop && d->claimed == d->tail && !d->feeding_done)
			pthread_cond_wait(&d->cond, &d->lock);
		if (d->stop || d->claimed == d->tail)
			break;
		j = &d->jobs[d->claimed++ % d->num_slots];
		pthread_mutex_unlock(&d->lock);
		/* [head, tail) are not reused before they are submitted: *j is this helper's */
		if (d->copy)
			memcpy(j->host, j->s->batch.data, j->s->batch.bytes);
		if (d->host_digest)
			j->s->host_digest = XXH64(d->copy ? j->host : j->s->batch.data, j->s->batch.bytes, 0);
		pthread_mutex_lock(&d->lock);
		j->ready = true;
		if (d->submitting)
			continue;
		d->submitting = true;
		while (!d->stop && d->head < d->claimed && d->jobs[d->head % d->num_slots].ready) {
			job = d->jobs[d->head % d->num_slots];
			pthread_mutex_unlock(&d->lock);
			ret = submit_job(d, &job);
			pthread_mutex_lock(&d->lock);
			d->head++;
			if (ret)
				fail_locked(d, ret);
		}
		d->submitting = false;
		pthread_cond_broadcast(&d->cond); /* the feeder may wait for the queue to drain */
	}
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* Queue @s (published) with its stage slot; 0, or -ECANCELED when the helpers stopped. */
static int queue_job(struct grist_loader_device *d, struct grist_slot *s, unsigned slot, void *host)
{
	struct feed_job *j;

	pthread_mutex_lock(&d->lock);
	if (d->stop) {
		pthread_mutex_unlock(&d->lock);
		return -ECANCELED;
	}
	/* each live job holds its own stage slot, so the queue (num_slots long) has room */
	j = &d->jobs[d->tail++ % d->num_slots];
	*j = (struct feed_job){ .s = s, .slot = slot, .host = host };
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* Take the next batch from the engine and queue it; 1 queued, 0 at the end, or an error. */
static int feed_one(struct grist_loader_device *d)
{
	struct grist_slot *s;
	unsigned slot;
	void *host = NULL;
	int ret;

	ret = grist_pull_next(&d->pull, &s);
	if (ret || !s)
		return ret;
	ret = grist_slot_publish(s, d->layout, d->seq++);
	if (ret) {
		if (!d->copy)
			provider_cancel(d, s);
		d->pull.ops->release(d->pull.engine, s);
		return ret;
	}
	if (d->copy) {
		ret = grist_device_stage_acquire_bytes(d->stage, s->batch.bytes, &slot, &host);
		if (ret == -EINVAL)
			ret = grist_fail(-EMSGSIZE, "batch %llu holds %zu bytes, more than a device slot's %zu; raise "
					 "device_slot_bytes", (unsigned long long)s->batch.sequence, s->batch.bytes,
					 d->slot_bytes);
		if (ret) {
			d->pull.ops->release(d->pull.engine, s);
			return ret;
		}
	} else {
		slot = s->handle;
	}
	ret = queue_job(d, s, slot, host);
	if (ret) {
		const struct feed_job j = { .s = s, .slot = slot };

		undo_job(d, &j);
		return ret;
	}
	return 1;
}

/* Pull batches from the engine in order and queue them for the helpers. */
static void *feeder_main(void *arg)
{
	struct grist_loader_device *d = arg;
	int ret;

	while ((ret = feed_one(d)) == 1)
		;
	pthread_mutex_lock(&d->lock);
	/* the batches queued before the end (or a failure) are submitted first, in order */
	d->feeding_done = true;
	pthread_cond_broadcast(&d->cond);
	while (!d->stop && d->head < d->tail)
		pthread_cond_wait(&d->cond, &d->lock);
	if (ret)
		fail_locked(d, ret);
	pthread_mutex_unlock(&d->lock);
	grist_device_stage_close(d->stage);
	return NULL;
}

/* Join the helpers, then undo the jobs a stop left behind. Feeder joined or never started. */
static void join_helpers(struct grist_loader_device *d)
{
	unsigned i;

	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	for (i = 0; i < d->helpers_started; i++)
		pthread_join(d->helper[i], NULL);
	d->helpers_started = 0;
	while (d->head < d->tail)
		undo_job(d, &d->jobs[d->head++ % d->num_slots]);
	d->claimed = d->head;
}

int grist_loader_device_run(struct grist_loader *l)
{
	struct grist_loader_device *d = l->device;
	unsigned i;
	int ret;

	d->pull = l->pull; /* a copy: from here on the feeder is the only puller */
	d->layout = &l->layout;
	d->seq = l->batches;
	d->host_digest = l->cfg.device_host_digest;
	d->batch_size = l->cfg.batch_size;
	for (i = 0; i < d->num_helpers; i++) {
		ret = grist_thread_start(&d->helper[i], helper_main, d);
		if (ret)
			return grist_fail(ret, "loader: cannot start a device helper thread");
		d->helpers_started++;
	}
	ret = grist_thread_start(&d->feeder, feeder_main, d);
	if (ret)
		return grist_fail(ret, "loader: cannot start the device feeder thread");
	d->feeder_started = true;
	return 0;
}

int grist_loader_device_next(struct grist_loader *l, struct grist_slot **out, uint64_t *end)
{
	struct grist_loader_device *d = l->device;
	struct grist_device_batch db;
	struct grist_slot *s;
	int ret;

	*out = NULL;
	*end = 0;
	ret = grist_device_stage_next(d->stage, &db);
	if (ret < 0)
		return ret;
	if (ret == 0) {
		/* drained: the feeder has stopped; report its failure if that is why */
		pthread_join(d->feeder, NULL);
		d->feeder_started = false;
		join_helpers(d);
		if (d->error)
			return grist_fail(d->error, "%s", d->errmsg);
		*end = d->pull.end; /* safe: the feeder has been joined */
		return 0;
	}
	s = d->by_slot[db.slot];
	if (!s)
		return grist_fail(-EIO, "device stage returned slot %u, which holds no batch", db.slot);
	d->by_slot[db.slot] = NULL; /* the caller owns it now (see by_slot) */
	s->device_batch = db;
	s->batch.device = &s->device_batch;
	s->batch.data = NULL; /* the bytes now belong to the device */
	s->batch.host_digest = s->host_digest;
	*out = s;
	return 0;
}

int grist_loader_device_release(struct grist_loader *l, struct grist_slot *s, unsigned n, void *const *events)
{
	struct grist_loader_device *d = l->device;
	int ret;

	ret = grist_device_stage_release(d->stage, &s->device_batch, n, (const cl_event *)events);
	l->ops->release(l->engine, s); /* provider mode: the engine unbinds the slot from the stage's memory */
	return ret;
}

void grist_loader_device_quiesce(struct grist_loader *l)
{
	struct grist_loader_device *d = l->device;
	unsigned k;

	if (!d)
		return;
	if (d->stage)
		grist_device_stage_close(d->stage); /* workers and the feeder blocked in acquire give up */
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	if (d->feeder_started)
		pthread_join(d->feeder, NULL);
	d->feeder_started = false;
	if (d->jobs)
		join_helpers(d);
	/* batches submitted but never taken: their wrappers go back to the engine */
	for (k = 0; d->by_slot && k < d->num_slots; k++) {
		if (d->by_slot[k]) {
			if (l->ops)
				l->ops->release(l->engine, d->by_slot[k]);
			d->by_slot[k] = NULL;
		}
	}
}

void grist_loader_device_stop(struct grist_loader *l)
{
	struct grist_loader_device *d = l->device;

	if (!d)
		return;
	grist_loader_device_quiesce(l);
	l->provider = NULL;
	l->params.deliver = NULL;
	grist_device_stage_destroy(d->stage);
	free(d->by_slot);
	free(d->jobs);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
	l->device = NULL;
}

void *grist_loader_device_handle(const struct grist_loader *l)
{
	return l->device->stage;
}

#else /* !GRIST_HAVE_OPENCL */

int grist_loader_device_start(struct grist_loader *l)
{
	return grist_fail(-ENOTSUP, "device %s: this grist was built without OpenCL (meson -Dopencl=enabled)",
			  l->cfg.device);
}

int grist_loader_device_run(struct grist_loader *l)
{
	(void)l;
	return -ENOTSUP;
}

int grist_loader_device_next(struct grist_loader *l, struct grist_slot **out, uint64_t *end)
{
	(void)l;
	*out = NULL;
	*end = 0;
	return -ENOTSUP;
}

int grist_loader_device_release(struct grist_loader *l, struct grist_slot *s, unsigned n, void *const *events)
{
	(void)n;
	(void)events;
	l->ops->release(l->engine, s);
	return 0;
}

void grist_loader_device_quiesce(struct grist_loader *l)
{
	(void)l;
}

void grist_loader_device_stop(struct grist_loader *l)
{
	(void)l;
}

void *grist_loader_device_handle(const struct grist_loader *l)
{
	(void)l;
	return NULL;
}
#endif
