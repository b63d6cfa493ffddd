/* Mapped strategy: the producer writes into the device buffer's own mapping; zero copy on host-unified devices. */
#include "common/error.h"
#include "device/stage.h"

static int mapped_init_slot(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	cl_int err;

	slot->shared = clCreateBuffer(s->ctx, CL_MEM_READ_ONLY | CL_MEM_ALLOC_HOST_PTR, s->slot_bytes, NULL,
				      &err);
	if (err != CL_SUCCESS)
		return grist_cl_fail(err, "clCreateBuffer(host-unified batch)");
	return 0;
}

/*
 * The producer is about to write the very bytes the consumer read, so wait for
 * the consumer's events and the last unmap first. WRITE_INVALIDATE_REGION
 * tells the runtime the old contents are dead: nothing is copied to the host.
 */
static int mapped_begin_fill(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	cl_int err;
	int ret, ret2;

	ret = grist_cl_wait_release(slot->xfer, s->num_devices);
	ret2 = grist_cl_wait_release(slot->done, slot->num_done);
	slot->num_done = 0;
	if (!ret)
		ret = ret2;
	if (ret)
		return ret;
	slot->host = clEnqueueMapBuffer(s->queues[0], slot->shared, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0,
					s->slot_bytes, 0, NULL, NULL, &err);
	if (err != CL_SUCCESS) {
		slot->host = NULL;
		return grist_cl_fail(err, "clEnqueueMapBuffer(CL_MAP_WRITE_INVALIDATE_REGION)");
	}
	return 0;
}

/*
 * Unmap on device 0's queue; every other device's ready event is a command on
 * its own queue that waits for that unmap, so each consumer waits on an event
 * of the device it runs on.
 */
static int mapped_publish(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	uint64_t t0 = grist_device_now_ns(), t1;
	cl_event unmap;
	unsigned k;
	cl_int err;
	int ret = 0;

	slot->commands++;
	err = clEnqueueUnmapMemObject(s->queues[0], slot->shared, slot->host, 0, NULL, &unmap);
	if (err != CL_SUCCESS)
		return grist_cl_fail(err, "clEnqueueUnmapMemObject(batch)");
	slot->host = NULL;
	for (k = 0; k < s->num_devices; k++) {
		struct grist_device_part *p = &slot->parts[k];
		cl_uint nwait = k ? 1 : 0;
		cl_event ev;

		slot->commands += p->row_offsets || k;
		if (p->row_offsets) {
			err = clEnqueueWriteBuffer(s->queues[k], slot->offsets_mem[k], CL_FALSE, 0,
						   (p->rows + 1) * sizeof(uint64_t), p->row_offsets, nwait,
						   nwait ? &unmap : NULL, &ev);
		} else if (k) {
			err = clEnqueueMarkerWithWaitList(s->queues[k], 1, &unmap, &ev);
		} else {
			clRetainEvent(unmap);
			ev = unmap;
			err = CL_SUCCESS;
		}
		if (err != CL_SUCCESS) {
			ret = grist_cl_fail(err, "enqueueing the batch's ready event");
			break;
		}
		slot->xfer[k] = ev;
		p->ready = ev;
		p->data = slot->shared;
	}
	clReleaseEvent(unmap);
	t1 = grist_device_now_ns();
	slot->enqueue_ns += t1 - t0;
	for (k = 0; k < s->num_devices; k++) {
		err = clFlush(s->queues[k]);
		if (err != CL_SUCCESS && !ret)
			ret = grist_cl_fail(err, "clFlush(transfer queue)");
	}
	slot->flush_ns += grist_device_now_ns() - t1;
	return ret;
}

static void mapped_fini_slot(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	if (slot->host) {
		/* Destroyed while the producer was filling: give the mapping back. */
		clEnqueueUnmapMemObject(s->queues[0], slot->shared, slot->host, 0, NULL, NULL);
		clFinish(s->queues[0]);
		slot->host = NULL;
	}
	if (slot->shared)
		clReleaseMemObject(slot->shared);
}

/* The mapping must end before the slot can be mapped again; nothing reads it. */
static int mapped_abandon(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	cl_event unmap;
	cl_int err;

	err = clEnqueueUnmapMemObject(s->queues[0], slot->shared, slot->host, 0, NULL, &unmap);
	if (err != CL_SUCCESS)
		return grist_cl_fail(err, "clEnqueueUnmapMemObject(abandoned batch)");
	slot->host = NULL;
	return grist_cl_wait_release(&unmap, 1);
}

const struct grist_device_ops grist_device_mapped_ops = {
	.strategy = GRIST_DEVICE_MAPPED,
	.init_slot = mapped_init_slot,
	.begin_fill = mapped_begin_fill,
	.publish = mapped_publish,
	.abandon = mapped_abandon,
	.fini_slot = mapped_fini_slot,
};
