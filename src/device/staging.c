/* Staging strategy: a pinned host buffer per slot, copied to per-device buffers by non-blocking writes. */
#include "common/error.h"
#include "device/stage.h"

static int staging_init_slot(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	unsigned k;
	cl_int err;

	/* ALLOC_HOST_PTR is how OpenCL asks for page-locked memory a DMA engine can read. */
	slot->staging = clCreateBuffer(s->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, s->slot_bytes,
				       NULL, &err);
	if (err != CL_SUCCESS)
		return grist_cl_fail(err, "clCreateBuffer(pinned staging)");
	/* Mapped once for the stage's whole life: the producer's pointer never changes. */
	slot->host = clEnqueueMapBuffer(s->queues[0], slot->staging, CL_TRUE, CL_MAP_WRITE, 0, s->slot_bytes,
					0, NULL, NULL, &err);
	if (err != CL_SUCCESS) {
		slot->host = NULL;
		return grist_cl_fail(err, "clEnqueueMapBuffer(pinned staging)");
	}
	for (k = 0; k < s->num_devices; k++) {
		slot->data[k] = clCreateBuffer(s->ctx, CL_MEM_READ_ONLY, s->slot_bytes, NULL, &err);
		if (err != CL_SUCCESS)
			return grist_cl_fail(err, "clCreateBuffer(device batch)");
	}
	return 0;
}

/*
 * The staging memory is free once the last writes out of it finished. The
 * consumer's events are not waited for here: they guard the device buffers,
 * and publish() makes them prerequisites of the next writes instead.
 */
static int staging_begin_fill(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	return grist_cl_wait_release(slot->xfer, s->num_devices);
}

static int staging_publish(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	uint64_t t0 = grist_device_now_ns(), t1;
	unsigned k;
	cl_int err;
	int ret = 0;

	for (k = 0; k < s->num_devices; k++) {
		struct grist_device_part *p = &slot->parts[k];
		const char *src = (const char *)slot->host + p->offset;
		cl_event ev, oev;

		slot->commands += p->row_offsets ? 2 : 1;
		if (p->bytes)
			err = clEnqueueWriteBuffer(s->queues[k], slot->data[k], CL_FALSE, 0, p->bytes, src,
						   slot->num_done, slot->num_done ? slot->done : NULL, &ev);
		else
			err = clEnqueueMarkerWithWaitList(s->queues[k], slot->num_done,
							  slot->num_done ? slot->done : NULL, &ev);
		if (err != CL_SUCCESS) {
			ret = grist_cl_fail(err, "clEnqueueWriteBuffer(batch to device)");
			break;
		}
		if (p->row_offsets) {
			err = clEnqueueWriteBuffer(s->queues[k], slot->offsets_mem[k], CL_FALSE, 0,
						   (p->rows + 1) * sizeof(uint64_t), p->row_offsets, 0, NULL, &oev);
			clReleaseEvent(ev);
			if (err != CL_SUCCESS) {
				ret = grist_cl_fail(err, "clEnqueueWriteBuffer(row offsets to device)");
				break;
			}
			ev = oev;
		}
		slot->xfer[k] = ev;
		p->ready = ev;
		p->data = slot->data[k];
		p->offset = 0;
	}
	t1 = grist_device_now_ns();
	slot->enqueue_ns += t1 - t0;
	for (k = 0; k < s->num_devices; k++) {
		err = clFlush(s->queues[k]);
		if (err != CL_SUCCESS && !ret)
			ret = grist_cl_fail(err, "clFlush(transfer queue)");
	}
	slot->flush_ns += grist_device_now_ns() - t1;
	/* The enqueued writes hold their own references to the consumer's events. */
	grist_cl_release_events(slot->done, slot->num_done);
	slot->num_done = 0;
	return ret;
}

static void staging_fini_slot(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	unsigned k;

	if (slot->host) {
		clEnqueueUnmapMemObject(s->queues[0], slot->staging, slot->host, 0, NULL, NULL);
		clFinish(s->queues[0]);
		slot->host = NULL;
	}
	if (slot->staging)
		clReleaseMemObject(slot->staging);
	for (k = 0; slot->data && k < s->num_devices; k++)
		if (slot->data[k])
			clReleaseMemObject(slot->data[k]);
}

/* The staging memory stays mapped for the slot's life: nothing to undo. */
static int staging_abandon(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	(void)s;
	(void)slot;
	return 0;
}

const struct grist_device_ops grist_device_staging_ops = {
	.strategy = GRIST_DEVICE_STAGING,
	.init_slot = staging_init_slot,
	.begin_fill = staging_begin_fill,
	.publish = staging_publish,
	.abandon = staging_abandon,
	.fini_slot = staging_fini_slot,
};
