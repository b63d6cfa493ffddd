/* The device stage's slot ring: create/destroy, acquire/submit for the producer, next/release for the consumer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/error.h"
#include "device/stage.h"

#define GRIST_DEVICE_MAX_SLOTS 4096

#define now_ns grist_device_now_ns

const char *grist_device_strategy_name(enum grist_device_strategy strategy)
{
	switch (strategy) {
	case GRIST_DEVICE_STAGING:
		return "staging";
	case GRIST_DEVICE_MAPPED:
		return "mapped";
	default:
		return "auto";
	}
}

/* The config's strategy, else GRIST_DEVICE_STRATEGY, else what the devices report. */
static int choose_strategy(const struct grist_device_config *cfg, cl_device_id *devs, unsigned n,
			   enum grist_device_strategy *out)
{
	const char *env = getenv("GRIST_DEVICE_STRATEGY");
	unsigned k;

	if (cfg->strategy == GRIST_DEVICE_STAGING || cfg->strategy == GRIST_DEVICE_MAPPED) {
		*out = cfg->strategy;
		return 0;
	}
	if (cfg->strategy != GRIST_DEVICE_AUTO)
		return grist_fail(-EINVAL, "unknown device strategy %d", (int)cfg->strategy);
	if (env && *env && strcasecmp(env, "auto") != 0) {
		if (strcasecmp(env, "staging") == 0)
			*out = GRIST_DEVICE_STAGING;
		else if (strcasecmp(env, "mapped") == 0)
			*out = GRIST_DEVICE_MAPPED;
		else
			return grist_fail(-EINVAL, "GRIST_DEVICE_STRATEGY='%s': want staging, mapped or auto", env);
		return 0;
	}
	/* Mapping in place only saves the copy when the device reads host memory. */
	*out = GRIST_DEVICE_MAPPED;
	for (k = 0; k < n; k++) {
		cl_bool unified = CL_FALSE;
		cl_device_type type = 0;

		clGetDeviceInfo(devs[k], CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof(unified), &unified, NULL);
		clGetDeviceInfo(devs[k], CL_DEVICE_TYPE, sizeof(type), &type, NULL);
		if (!unified && !(type & CL_DEVICE_TYPE_CPU))
			*out = GRIST_DEVICE_STAGING;
	}
	return 0;
}

static int check_config(const struct grist_device_config *cfg)
{
	if (!cfg)
		return grist_fail(-EINVAL, "device stage config is NULL");
	if (cfg->slots < 2 || cfg->slots > GRIST_DEVICE_MAX_SLOTS)
		return grist_fail(-EINVAL, "device stage slots = %u: need 2..%u (one fills while one is read)",
				  cfg->slots, GRIST_DEVICE_MAX_SLOTS);
	if (cfg->slot_bytes == 0)
		return grist_fail(-EINVAL, "device stage slot_bytes must be > 0");
	if (cfg->max_rows == 0 || cfg->max_rows > SIZE_MAX / sizeof(uint64_t) / GRIST_DEVICE_MAX_SLOTS - 1)
		return grist_fail(-EINVAL, "device stage max_rows = %zu: must be 1..%zu", cfg->max_rows,
				  SIZE_MAX / sizeof(uint64_t) / GRIST_DEVICE_MAX_SLOTS - 1);
	return 0;
}

/*
 * The offsets region in front of the rows: each device's offsets start on the
 * sub-buffer alignment every device asks for (CL_DEVICE_MEM_BASE_ADDR_ALIGN,
 * in bits), and so do the rows, which keeps the producer's pointer page-aligned.
 */
static int layout_region(struct grist_device_stage *s)
{
	size_t align = 4096, offsets = (s->max_rows + 1) * sizeof(uint64_t);
	unsigned k;

	for (k = 0; k < s->num_devices; k++) {
		cl_uint bits = 0;
		cl_int err;

		err = clGetDeviceInfo(s->devices[k], CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof(bits), &bits, NULL);
		if (err != CL_SUCCESS)
			return grist_cl_fail(err, "clGetDeviceInfo(CL_DEVICE_MEM_BASE_ADDR_ALIGN)");
		if (bits / 8 > align)
			align = bits / 8;
	}
	s->stride = (offsets + align - 1) / align * align;
	s->region = s->ops->strategy == GRIST_DEVICE_MAPPED ? s->num_devices * s->stride : s->stride;
	return 0;
}

/* Every device must be able to hold a whole batch: one device may get all ragged bytes. */
static int check_device_limits(struct grist_device_stage *s)
{
	unsigned k;

	for (k = 0; k < s->num_devices; k++) {
		cl_ulong max_alloc = 0;
		cl_int err;

		err = clGetDeviceInfo(s->devices[k], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max_alloc),
				      &max_alloc, NULL);
		if (err != CL_SUCCESS)
			return grist_cl_fail(err, "clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)");
		if (s->slot_bytes > max_alloc || s->region > max_alloc - s->slot_bytes)
			return grist_fail(-EINVAL, "device %u allocates at most %llu bytes per buffer; "
					  "slot_bytes = %zu, max_rows = %zu do not fit", k,
					  (unsigned long long)max_alloc, s->slot_bytes, s->max_rows);
	}
	return 0;
}

/* The host-side bookkeeping of a slot; its buffers come on first use (make_memory). */
static int init_slot(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	unsigned n = s->num_devices, k;

	slot->parts = calloc(n, sizeof(*slot->parts));
	slot->whole = calloc(n, sizeof(*slot->whole));
	slot->data = calloc(n, sizeof(*slot->data));
	slot->offsets_mem = calloc(n, sizeof(*slot->offsets_mem));
	slot->xfer = calloc(n, sizeof(*slot->xfer));
	slot->offsets_host = calloc((size_t)n * (s->max_rows + 1), sizeof(uint64_t));
	slot->cap_done = 2 * n;
	slot->done = calloc(slot->cap_done, sizeof(*slot->done));
	if (!slot->parts || !slot->whole || !slot->data || !slot->offsets_mem || !slot->xfer ||
	    !slot->offsets_host || !slot->done)
		return grist_fail(-ENOMEM, "out of memory allocating device stage slots");
	for (k = 0; k < n; k++)
		slot->parts[k].device = s->devices[k];
	return 0;
}

static void fini_slot(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	if (slot->xfer)
		grist_cl_wait_release(slot->xfer, s->num_devices);
	if (slot->done)
		grist_cl_wait_release(slot->done, slot->num_done);
	if (slot->whole && slot->data && slot->offsets_mem)
		s->ops->fini_slot(s, slot);
	free(slot->parts);
	free(slot->whole);
	free(slot->data);
	free(slot->offsets_mem);
	free(slot->xfer);
	free(slot->offsets_host);
	free(slot->done);
}

void grist_device_stage_destroy(struct grist_device_stage *s)
{
	unsigned i;

	if (!s)
		return;
	for (i = 0; s->slots && i < s->num_slots; i++)
		fini_slot(s, &s->slots[i]);
	for (i = 0; s->queues && i < s->num_devices; i++)
		if (s->queues[i])
			clReleaseCommandQueue(s->queues[i]);
	if (s->ctx)
		clReleaseContext(s->ctx);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s->slots);
	free(s->fifo);
	free(s->queues);
	free(s->devices);
	free(s);
}

int grist_device_stage_create(const struct grist_device_config *caller_cfg, struct grist_device_stage **out)
{
	enum grist_device_strategy strategy = GRIST_DEVICE_AUTO;
	struct grist_device_config copy, *cfg = &copy;
	struct grist_device_stage *s;
	uint64_t t0 = now_ns();
	unsigned i;
	cl_int err;
	int ret;

	ret = grist_sized_in(&copy, sizeof(copy), caller_cfg, "grist_device_config");
	if (ret)
		return ret;
	ret = check_config(cfg);
	if (ret)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s)
		return grist_fail(-ENOMEM, "out of memory allocating the device stage");
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->num_slots = cfg->slots;
	s->in_state[GRIST_SLOT_IDLE] = cfg->slots;
	s->slot_bytes = cfg->slot_bytes;
	s->max_rows = cfg->max_rows;

	ret = grist_cl_select_devices(cfg->selector, &s->platform, &s->devices, &s->num_devices);
	if (ret)
		goto fail;
	ret = choose_strategy(cfg, s->devices, s->num_devices, &strategy);
	if (ret)
		goto fail;
	s->ops = strategy == GRIST_DEVICE_MAPPED ? &grist_device_mapped_ops : &grist_device_staging_ops;
	ret = layout_region(s);
	if (!ret)
		ret = check_device_limits(s);
	if (ret)
		goto fail;

	{
		cl_context_properties props[] = { CL_CONTEXT_PLATFORM, (cl_context_properties)s->platform, 0 };

		s->ctx = clCreateContext(props, s->num_devices, s->devices, NULL, NULL, &err);
	}
	if (err != CL_SUCCESS) {
		ret = grist_cl_fail(err, "clCreateContext");
		goto fail;
	}
	s->queues = calloc(s->num_devices, sizeof(*s->queues));
	s->slots = calloc(s->num_slots, sizeof(*s->slots));
	s->fifo = calloc(s->num_slots, sizeof(*s->fifo));
	if (!s->queues || !s->slots || !s->fifo) {
		ret = grist_fail(-ENOMEM, "out of memory allocating the device stage");
		goto fail;
	}
	for (i = 0; i < s->num_devices; i++) {
		/* In order on purpose: a batch's last command completing implies the rest did. */
		s->queues[i] = clCreateCommandQueue(s->ctx, s->devices[i], 0, &err);
		if (err != CL_SUCCESS) {
			ret = grist_cl_fail(err, "clCreateCommandQueue(transfer queue)");
			goto fail;
		}
	}
	for (i = 0; i < s->num_slots; i++) {
		ret = init_slot(s, &s->slots[i]);
		if (ret)
			goto fail;
	}
	s->stats.slots = s->num_slots;
	s->stats.create_ns = now_ns() - t0;
	*out = s;
	return 0;
fail:
	grist_device_stage_destroy(s);
	return ret;
}

unsigned grist_device_stage_num_devices(const struct grist_device_stage *s)
{
	return s->num_devices;
}

cl_device_id grist_device_stage_device(const struct grist_device_stage *s, unsigned k)
{
	return k < s->num_devices ? s->devices[k] : NULL;
}

cl_context grist_device_stage_context(const struct grist_device_stage *s)
{
	return s->ctx;
}

enum grist_device_strategy grist_device_stage_strategy(const struct grist_device_stage *s)
{
	return s->ops->strategy;
}

/* Called locked: move @slot to @state, keeping the per-state counts for the stats. */
static void set_state_locked(struct grist_device_stage *s, struct grist_device_slot *slot,
			     enum grist_slot_state state)
{
	s->in_state[slot->state]--;
	s->in_state[state]++;
	slot->state = state;
}

static void add_max(uint64_t *sum, uint64_t *max, uint64_t v)
{
	*sum += v;
	if (v > *max)
		*max = v;
}

/*
 * An IDLE staging slot whose transfer events release() (or a cancel) found finished
 * and retired: acquire() may reuse it without an OpenCL call. A mapped slot always
 * maps again, so it is never clean. Called locked.
 */
static bool clean_locked(const struct grist_device_stage *s, const struct grist_device_slot *slot)
{
	unsigned k;

	if (s->ops->strategy != GRIST_DEVICE_STAGING)
		return false;
	for (k = 0; k < s->num_devices; k++)
		if (slot->xfer[k])
			return false;
	return true;
}

/*
 * Release @ev if every one of them completed; otherwise (or on a failed
 * command, which the next wait reports) leave them all.
 */
static void retire_finished(cl_event *ev, unsigned n)
{
	unsigned k;

	for (k = 0; k < n; k++) {
		cl_int status = CL_QUEUED;

		if (ev[k] && (clGetEventInfo(ev[k], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
					     NULL) != CL_SUCCESS || status != CL_COMPLETE))
			return;
	}
	grist_cl_release_events(ev, n);
}

/* Make the stage fail for every thread; keeps the first failure. Called unlocked. */
static int stage_fail(struct grist_device_stage *s, int code)
{
	pthread_mutex_lock(&s->lock);
	if (!s->failed) {
		s->failed = code;
		snprintf(s->failed_msg, sizeof(s->failed_msg), "%s", grist_last_error());
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return code;
}

/* Called locked: report the sticky failure on this thread too. */
static int failed_locked(struct grist_device_stage *s)
{
	return grist_fail(s->failed, "device stage failed earlier: %s", s->failed_msg);
}

/*
 * Called locked: the IDLE slot to fill with a batch of @need bytes, or NULL.
 * In this order: a clean slot (its transfer known finished, so no OpenCL call
 * is needed before writing it), the one released last, so a run keeps reusing
 * the few slots it needs and their memory stays warm; else the slot released
 * longest ago, whose transfer most likely finished; else one whose memory
 * must grow (remade larger, so the memory held stays what the batches in
 * flight need); else one that has no memory yet.
 */
static struct grist_device_slot *pick_idle_locked(struct grist_device_stage *s, size_t need)
{
	struct grist_device_slot *clean = NULL, *old = NULL, *fresh = NULL, *small = NULL;
	unsigned i;

	for (i = 0; i < s->num_slots; i++) {
		struct grist_device_slot *slot = &s->slots[i];

		if (slot->state != GRIST_SLOT_IDLE)
			continue;
		if (slot->cap == 0) {
			if (!fresh)
				fresh = slot;
		} else if (slot->cap < need) {
			if (!small || slot->idle_since < small->idle_since)
				small = slot;
		} else if (clean_locked(s, slot)) {
			if (!clean || slot->idle_since > clean->idle_since)
				clean = slot;
		} else if (!old || slot->idle_since < old->idle_since) {
			old = slot;
		}
	}
	return clean ? clean : old ? old : small ? small : fresh;
}

/* Memory for @need bytes of rows: a quarter more, in 64 KiB steps, so a run of ragged batches grows it rarely. */
static size_t grown_cap(const struct grist_device_stage *s, size_t need)
{
	size_t step = 64u << 10, cap;

	if (need >= s->slot_bytes - s->slot_bytes / 5)
		return s->slot_bytes;
	cap = (need + need / 4 + step - 1) / step * step;
	if (cap < step)
		cap = step;
	return cap < s->slot_bytes ? cap : s->slot_bytes;
}

/*
 * FILLING, so this thread alone touches the slot: give it memory for @need
 * bytes, freeing what it had once its last transfer and the consumer's
 * events are done (the buffers are about to go).
 */
static int make_memory(struct grist_device_stage *s, struct grist_device_slot *slot, size_t need)
{
	size_t old = slot->cap;
	int ret, ret2;

	ret = grist_cl_wait_release(slot->xfer, s->num_devices);
	ret2 = grist_cl_wait_release(slot->done, slot->num_done);
	slot->num_done = 0;
	if (ret || ret2)
		return ret ? ret : ret2;
	if (old)
		s->ops->fini_slot(s, slot);
	slot->cap = grown_cap(s, need);
	ret = s->ops->init_slot(s, slot);
	if (ret) {
		grist_fail_prefix(ret, "device stage slot %u (%zu bytes, %s strategy)", (unsigned)(slot - s->slots),
				  slot->cap, grist_device_strategy_name(s->ops->strategy));
		s->ops->fini_slot(s, slot);
		slot->cap = 0;
	}
	pthread_mutex_lock(&s->lock);
	if (old) {
		s->stats.slots_allocated--;
		s->stats.memory_bytes -= s->ops->slot_memory(s, old);
	}
	if (slot->cap) {
		s->stats.slots_allocated++;
		s->stats.memory_bytes += s->ops->slot_memory(s, slot->cap);
		s->stats.slots_grown++;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int grist_device_stage_acquire(struct grist_device_stage *s, unsigned *slot_out, void **host_ptr)
{
	return grist_device_stage_acquire_bytes(s, s->slot_bytes, slot_out, host_ptr);
}

int grist_device_stage_acquire_bytes(struct grist_device_stage *s, size_t bytes, unsigned *slot_out,
				     void **host_ptr)
{
	struct grist_device_slot *slot;
	uint64_t t0 = now_ns(), t1, t2;
	bool blocked = false;
	int ret;

	if (!slot_out || !host_ptr)
		return grist_fail(-EINVAL, "grist_device_stage_acquire: NULL output pointer");
	if (bytes > s->slot_bytes)
		return grist_fail(-EINVAL, "a batch of %zu bytes asked for, more than slot_bytes (%zu)", bytes,
				  s->slot_bytes);
	pthread_mutex_lock(&s->lock);
	while (!s->failed && !s->closed && !(slot = pick_idle_locked(s, bytes))) {
		blocked = true;
		pthread_cond_wait(&s->cond, &s->lock);
	}
	if (s->failed) {
		ret = failed_locked(s);
		pthread_mutex_unlock(&s->lock);
		return ret;
	}
	if (s->closed) {
		pthread_mutex_unlock(&s->lock);
		return grist_fail(-ECANCELED, "device stage is closed: no more batches may be acquired");
	}
	set_state_locked(s, slot, GRIST_SLOT_FILLING);
	pthread_mutex_unlock(&s->lock);

	/* FILLING: this thread alone touches the slot's events and memory now. */
	t1 = now_ns();
	ret = slot->cap < (bytes ? bytes : 1) ? make_memory(s, slot, bytes) : 0;
	if (!ret)
		ret = s->ops->begin_fill(s, slot);
	if (ret)
		return stage_fail(s, ret);
	*slot_out = (unsigned)(slot - s->slots);
	*host_ptr = slot->host;
	t2 = now_ns();
	pthread_mutex_lock(&s->lock);
	s->stats.acquires++;
	s->stats.acquires_blocked += blocked;
	if (blocked)
		s->stats.slot_wait_ns += t1 - t0;
	s->stats.fill_wait_ns += t2 - t1;
	s->stats.producer_wait_ns += t2 - t0;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int check_batch(const struct grist_device_stage *s, unsigned slot, size_t bytes, size_t rows,
		       const uint64_t *offs)
{
	size_t r;

	if (bytes > s->slot_bytes)
		return grist_fail(-EINVAL, "slot %u: batch of %zu bytes exceeds slot_bytes %zu", slot, bytes,
				  s->slot_bytes);
	if (rows == 0 || rows > s->max_rows)
		return grist_fail(-EINVAL, "slot %u: batch of %zu rows, need 1..%zu (max_rows)", slot, rows,
				  s->max_rows);
	if (rows % s->num_devices)
		return grist_fail(-EINVAL, "slot %u: %zu rows cannot be split evenly across %u devices "
				  "(rows must be a multiple of the device count)", slot, rows, s->num_devices);
	if (!offs) {
		if (bytes % rows)
			return grist_fail(-EINVAL, "slot %u: %zu bytes is not a whole number of %zu fixed-size "
					  "rows (pass row_offsets for ragged rows)", slot, bytes, rows);
		return 0;
	}
	if (offs[0] != 0)
		return grist_fail(-EINVAL, "slot %u: row_offsets[0] = %llu, must be 0", slot,
				  (unsigned long long)offs[0]);
	for (r = 0; r < rows; r++)
		if (offs[r + 1] < offs[r])
			return grist_fail(-EINVAL, "slot %u: row_offsets[%zu] = %llu is below row_offsets[%zu] "
					  "= %llu", slot, r + 1, (unsigned long long)offs[r + 1], r,
					  (unsigned long long)offs[r]);
	if (offs[rows] != bytes)
		return grist_fail(-EINVAL, "slot %u: row_offsets[%zu] = %llu, must equal the batch size %zu",
				  slot, rows, (unsigned long long)offs[rows], bytes);
	return 0;
}

/* Device k's share: rows [k*rows/N, (k+1)*rows/N) and its rebased offsets. */
static void split_batch(struct grist_device_stage *s, struct grist_device_slot *slot, size_t bytes,
			size_t rows, const uint64_t *offs)
{
	size_t per = rows / s->num_devices, row_bytes = bytes / rows;
	unsigned k;

	slot->bytes = bytes;
	slot->rows = rows;
	for (k = 0; k < s->num_devices; k++) {
		struct grist_device_part *p = &slot->parts[k];
		uint64_t *dst = slot->offsets_host + (size_t)k * (s->max_rows + 1);
		size_t r0 = (size_t)k * per, i;

		p->rows = per;
		if (!offs) {
			p->offset = r0 * row_bytes;
			p->bytes = per * row_bytes;
			p->row_offsets = NULL;
			p->row_offsets_mem = NULL;
			continue;
		}
		p->offset = (size_t)offs[r0];
		p->bytes = (size_t)(offs[r0 + per] - offs[r0]);
		for (i = 0; i <= per; i++)
			dst[i] = offs[r0 + i] - offs[r0];
		p->row_offsets = dst;
		p->row_offsets_mem = slot->offsets_mem[k];
	}
}

int grist_device_stage_submit(struct grist_device_stage *s, unsigned slot_index, size_t bytes, size_t rows,
			      const uint64_t *row_offsets)
{
	struct grist_device_slot *slot;
	int ret;

	if (slot_index >= s->num_slots)
		return grist_fail(-EINVAL, "slot %u does not exist (the stage has %u)", slot_index, s->num_slots);
	slot = &s->slots[slot_index];
	pthread_mutex_lock(&s->lock);
	ret = s->failed ? failed_locked(s) : 0;
	if (!ret && slot->state != GRIST_SLOT_FILLING)
		ret = grist_fail(-EINVAL, "slot %u was not acquired (or is already submitted)", slot_index);
	pthread_mutex_unlock(&s->lock);
	if (ret)
		return ret;
	ret = check_batch(s, slot_index, bytes, rows, row_offsets);
	if (ret)
		return ret;
	split_batch(s, slot, bytes, rows, row_offsets);
	slot->enqueue_ns = slot->flush_ns = 0;
	slot->commands = 0;
	ret = s->ops->publish(s, slot);
	if (ret)
		return stage_fail(s, ret);

	pthread_mutex_lock(&s->lock);
	set_state_locked(s, slot, GRIST_SLOT_READY);
	slot->seq = s->next_seq++;
	s->fifo[(s->fifo_head + s->fifo_len++) % s->num_slots] = slot_index;
	s->stats.batches++;
	s->stats.bytes += bytes;
	s->stats.commands += slot->commands;
	add_max(&s->stats.enqueue_ns, &s->stats.enqueue_max_ns, slot->enqueue_ns);
	add_max(&s->stats.flush_ns, &s->stats.flush_max_ns, slot->flush_ns);
	add_max(&s->stats.in_flight_sum, &s->stats.in_flight_max,
		s->in_state[GRIST_SLOT_READY] + s->in_state[GRIST_SLOT_HELD]);
	add_max(&s->stats.filling_sum, &s->stats.filling_max, s->in_state[GRIST_SLOT_FILLING]);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int grist_device_stage_cancel(struct grist_device_stage *s, unsigned slot_index)
{
	struct grist_device_slot *slot;
	int ret;

	if (slot_index >= s->num_slots)
		return grist_fail(-EINVAL, "slot %u does not exist (the stage has %u)", slot_index, s->num_slots);
	slot = &s->slots[slot_index];
	pthread_mutex_lock(&s->lock);
	ret = slot->state != GRIST_SLOT_FILLING
		      ? grist_fail(-EINVAL, "slot %u was not acquired (or is already submitted)", slot_index)
		      : 0;
	pthread_mutex_unlock(&s->lock);
	if (ret)
		return ret;
	ret = s->ops->abandon(s, slot);
	if (ret)
		return stage_fail(s, ret);
	pthread_mutex_lock(&s->lock);
	set_state_locked(s, slot, GRIST_SLOT_IDLE);
	slot->idle_since = ++s->release_clock;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void grist_device_stage_close(struct grist_device_stage *s)
{
	pthread_mutex_lock(&s->lock);
	s->closed = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

int grist_device_stage_next(struct grist_device_stage *s, struct grist_device_batch *out)
{
	struct grist_device_slot *slot;
	uint64_t t0 = now_ns();
	unsigned index;
	int ret;

	if (!out)
		return grist_fail(-EINVAL, "grist_device_stage_next: NULL batch");
	pthread_mutex_lock(&s->lock);
	while (!s->failed && !s->closed && s->fifo_len == 0)
		pthread_cond_wait(&s->cond, &s->lock);
	s->stats.consumer_wait_ns += now_ns() - t0;
	if (s->failed) {
		ret = failed_locked(s);
		pthread_mutex_unlock(&s->lock);
		return ret;
	}
	if (s->fifo_len == 0) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	index = s->fifo[s->fifo_head];
	s->fifo_head = (s->fifo_head + 1) % s->num_slots;
	s->fifo_len--;
	slot = &s->slots[index];
	set_state_locked(s, slot, GRIST_SLOT_HELD);
	slot->held_since = now_ns();
	out->slot = index;
	out->seq = slot->seq;
	out->bytes = slot->bytes;
	out->rows = slot->rows;
	out->num_parts = s->num_devices;
	out->parts = slot->parts;
	pthread_mutex_unlock(&s->lock);
	return 1;
}

int grist_device_stage_release(struct grist_device_stage *s, const struct grist_device_batch *b,
			       unsigned num_done, const cl_event *done)
{
	struct grist_device_slot *slot;
	unsigned i;
	int ret = 0;

	if (!b || b->slot >= s->num_slots)
		return grist_fail(-EINVAL, "release of a batch that is not from this stage");
	if (num_done && !done)
		return grist_fail(-EINVAL, "release of batch %llu: %u done events but a NULL list",
				  (unsigned long long)b->seq, num_done);
	for (i = 0; i < num_done; i++)
		if (!done[i])
			return grist_fail(-EINVAL, "release of batch %llu: done event %u is NULL",
					  (unsigned long long)b->seq, i);
	slot = &s->slots[b->slot];
	pthread_mutex_lock(&s->lock);
	if (slot->state != GRIST_SLOT_HELD || slot->releasing || slot->seq != b->seq) {
		ret = grist_fail(-EINVAL, "batch %llu (slot %u) is not held by the consumer: released twice?",
				 (unsigned long long)b->seq, b->slot);
		goto out;
	}
	if (slot->num_done + num_done > slot->cap_done) {
		unsigned cap = slot->num_done + num_done;
		cl_event *grown = realloc(slot->done, cap * sizeof(*grown));

		if (!grown) {
			ret = grist_fail(-ENOMEM, "out of memory keeping %u consumer events", cap);
			goto out;
		}
		slot->done = grown;
		slot->cap_done = cap;
	}
	for (i = 0; i < num_done; i++) {
		clRetainEvent(done[i]);
		slot->done[slot->num_done++] = done[i];
	}
	slot->releasing = true;
	pthread_mutex_unlock(&s->lock);

	/*
	 * Still this consumer's slot: retire its transfer events if they finished, so
	 * that acquire() can hand it out again without an OpenCL call on the
	 * producer's thread (decode workers, which must not queue up on the driver).
	 */
	if (s->ops->strategy == GRIST_DEVICE_STAGING)
		retire_finished(slot->xfer, s->num_devices);

	pthread_mutex_lock(&s->lock);
	slot->releasing = false;
	set_state_locked(s, slot, GRIST_SLOT_IDLE);
	slot->idle_since = ++s->release_clock;
	s->stats.hold_ns += now_ns() - slot->held_since;
	pthread_cond_broadcast(&s->cond);
out:
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void grist_device_stage_stats_sized(struct grist_device_stage *s, struct grist_device_stats *out, size_t size)
{
	struct grist_device_stats st;

	pthread_mutex_lock(&s->lock);
	st = s->stats;
	pthread_mutex_unlock(&s->lock);
	grist_sized_out(out, size, &st, sizeof(st));
}
