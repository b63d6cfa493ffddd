/*
 * The loader's device mode: batches are assembled straight into device-stage slots
 * (mapped device buffers on host-unified devices, pinned staging otherwise), and a
 * feeder thread submits each finished batch, in order, as soon as it is ready, so its
 * transfer runs ahead of the consumer (Grain's two-stage device_put, without Python).
 *
 * Ownership of a device slot: a worker acquires it when it claims the unit that will
 * become the batch (or the consumer's packer does), the feeder submits it, the
 * consumer gets it from grist_device_stage_next() and releases it with its own
 * completion events; only then can a worker acquire it again. A unit whose rows are
 * copied elsewhere (a filter shifted the batch boundaries) cancels its slot.
 *
 * The feeder pulls with its own struct grist_pull (pull.c) and calls nothing in
 * loader.c: the consumer's position (consumed, batches) moves on the consumer's
 * thread alone, and the feeder's end position reaches it only through the join.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "grist_config.h"
#include "common/error.h"
#include "exec/loader_internal.h"

#if GRIST_HAVE_OPENCL
#include <xxhash.h>

#include "format/dataset.h"
#include "grist/device.h"

struct grist_loader_device {
	struct grist_device_stage *stage;
	struct grist_slot_provider provider;
	struct grist_slot **by_slot;  /* stage slot -> the loader slot bound to it */
	unsigned num_slots;
	size_t slot_bytes;
	pthread_t feeder;
	bool feeder_started;
	pthread_mutex_t lock;
	int error;                    /* the feeder's failure, reported after the batches before it */
	char errmsg[512];
	bool stopping;

	/*
	 * The feeder's own state, set before it starts and then touched by the feeder
	 * alone: it never reads or writes the consumer's fields of the loader (consumed,
	 * batches), which move on the consumer's thread while it runs. The consumer reads
	 * pull.end only after joining it.
	 */
	struct grist_pull pull;
	const struct grist_layout *layout; /* immutable after create */
	uint64_t seq;                       /* sequence number of the next batch it submits */
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
static int slot_bytes_for(const struct grist_loader *l, size_t *out)
{
	const struct grist_loader_config *c = &l->cfg;
	uint64_t max_record = 0, bytes;
	size_t d, f;

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
	for (d = 0; d < l->num_sources; d++) {
		for (f = 0; f < l->sources[d].num_files; f++) {
			const struct grist_file_geom *g = grist_reader_file_geom(l->sources[d].reader, f);

			if (g && g->max_chunk_decoded > max_record)
				max_record = g->max_chunk_decoded;
		}
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
	struct grist_device_config dc = { 0 };
	struct grist_loader_device *d;
	unsigned workers, ndev;
	int ret;

	d = calloc(1, sizeof(*d));
	if (!d)
		return grist_fail(-ENOMEM, "loader: out of memory");
	pthread_mutex_init(&d->lock, NULL);
	l->device = d;
	ret = parse_device(l->cfg.device, &dc.selector);
	if (!ret)
		ret = slot_bytes_for(l, &dc.slot_bytes);
	if (ret)
		return ret;
	/*
	 * Enough slots that a worker never waits for one while the consumer waits for
	 * that worker: the units in flight (prefetch + 2 per worker), the packer's batch,
	 * the batches the consumer may hold (prefetch, see free_hold() in loader.c) and one
	 * submitted ahead.
	 */
	workers = l->cfg.engine == GRIST_ENGINE_REF ? 1 : (l->cfg.threads ? l->cfg.threads : (unsigned)get_nprocs());
	dc.slots = 2 * l->cfg.prefetch + 2 * workers + 2;
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
	if (!d->by_slot)
		return grist_fail(-ENOMEM, "loader: out of memory");
	d->provider = (struct grist_slot_provider){ .acquire = provider_acquire, .cancel = provider_cancel, .ctx = d };
	l->provider = &d->provider;
	return 0;
}

static void feeder_fail(struct grist_loader_device *d, int code)
{
	pthread_mutex_lock(&d->lock);
	if (!d->error) {
		d->error = code;
		snprintf(d->errmsg, sizeof(d->errmsg), "%s", grist_last_error());
	}
	pthread_mutex_unlock(&d->lock);
}

/* Pull batches from the engine in order and start their transfers. */
static void *feeder_main(void *arg)
{
	struct grist_loader_device *d = arg;
	const uint64_t *offsets;
	struct grist_slot *s;
	int ret;

	for (;;) {
		ret = grist_pull_next(&d->pull, &s);
		if (ret || !s)
			break;
		ret = grist_slot_publish(s, d->layout, d->seq++);
		if (!ret && d->host_digest)
			s->host_digest = XXH64(s->data, s->batch.bytes, 0);
		offsets = d->layout->kind == GRIST_LAYOUT_RAGGED ? s->offsets : NULL;
		d->by_slot[s->handle] = s;
		if (!ret)
			ret = grist_device_stage_submit(d->stage, s->handle, s->batch.bytes, s->batch.num_rows, offsets);
		/*
		 * The stage's -EINVAL says this call's arguments were wrong; for the loader the
		 * batch came from the data (how many records the files hold), so it is not.
		 */
		if (ret == -EINVAL && s->batch.num_rows < d->batch_size)
			ret = grist_fail(-EMSGSIZE, "the final batch has %zu rows, which do not split evenly across %u "
					 "devices; drop it (drop_remainder) or pick a batch count that divides",
					 s->batch.num_rows, grist_device_stage_num_devices(d->stage));
		else if (ret == -EINVAL)
			ret = grist_fail_prefix(-EIO, "device stage refused batch %llu", (unsigned long long)(d->seq - 1));
		if (ret) {
			d->by_slot[s->handle] = NULL;
			provider_cancel(d, s);
			d->pull.ops->release(d->pull.engine, s);
			break;
		}
	}
	if (ret && ret != -ECANCELED)
		feeder_fail(d, ret);
	grist_device_stage_close(d->stage);
	return NULL;
}

int grist_loader_device_run(struct grist_loader *l)
{
	struct grist_loader_device *d = l->device;
	int ret;

	d->pull = l->pull; /* a copy: from here on the feeder is the only puller */
	d->layout = &l->layout;
	d->seq = l->batches;
	d->host_digest = l->cfg.device_host_digest;
	d->batch_size = l->cfg.batch_size;
	ret = -pthread_create(&d->feeder, NULL, feeder_main, d);
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
		if (d->error)
			return grist_fail(d->error, "%s", d->errmsg);
		*end = d->pull.end; /* safe: the feeder has been joined */
		return 0;
	}
	s = d->by_slot[db.slot];
	if (!s)
		return grist_fail(-EIO, "device stage returned slot %u, which holds no batch", db.slot);
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

	/* forget the binding first: once released, the slot may be bound to another batch at once */
	d->by_slot[s->handle] = NULL;
	ret = grist_device_stage_release(d->stage, &s->device_batch, n, (const cl_event *)events);
	l->ops->release(l->engine, s); /* the engine unbinds the slot from the stage's memory */
	return ret;
}

void grist_loader_device_quiesce(struct grist_loader *l)
{
	struct grist_loader_device *d = l->device;
	unsigned k;

	if (!d)
		return;
	if (d->stage)
		grist_device_stage_close(d->stage); /* workers blocked in acquire give up */
	if (d->feeder_started)
		pthread_join(d->feeder, NULL);
	d->feeder_started = false;
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
	grist_device_stage_destroy(d->stage);
	free(d->by_slot);
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
