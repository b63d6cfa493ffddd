/*
 * Mapped strategy: the producer writes into the device buffer's own mapping; zero copy
 * on host-unified devices. The buffer is [every device's row offsets | rows]: the
 * offsets are copied into the mapping too, so a batch costs one unmap and no write.
 */
#include <string.h>

#include "common/error.h"
#include "device/stage.h"

static uint64_t mapped_slot_memory(const struct grist_device_stage *s, size_t cap)
{
	return (uint64_t)(s->region + cap);
}

static int mapped_init_slot(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	unsigned k;
	cl_int err;
	int ret;

	slot->whole[0] = clCreateBuffer(s->ctx, CL_MEM_READ_ONLY | CL_MEM_ALLOC_HOST_PTR, s->region + slot->cap,
					NULL, &err);
	if (err != CL_SUCCESS) {
		slot->whole[0] = NULL;
		return grist_cl_fail(err, "clCreateBuffer(host-unified batch)");
	}
	/* One rows sub-buffer read by every device (parts[k].offset says where its rows start). */
	ret = grist_cl_sub_buffer(slot->whole[0], s->region, slot->cap, &slot->data[0]);
	for (k = 0; !ret && k < s->num_devices; k++) {
		slot->data[k] = slot->data[0];
		ret = grist_cl_sub_buffer(slot->whole[0], k * s->stride, (s->max_rows + 1) * sizeof(uint64_t),
					  &slot->offsets_mem[k]);
	}
	return ret;
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
	slot->base = clEnqueueMapBuffer(s->queues[0], slot->whole[0], CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0,
					s->region + slot->cap, 0, NULL, NULL, &err);
	if (err != CL_SUCCESS) {
		slot->base = NULL;
		return grist_cl_fail(err, "clEnqueueMapBuffer(CL_MAP_WRITE_INVALIDATE_REGION)");
	}
	slot->host = (char *)slot->base + s->region;
	return 0;
}

/*
 * Offsets into the mapping, then unmap on device 0's queue; every other device's
 * ready event is a marker on its own queue that waits for that unmap, so each
 * consumer waits on an event of the device it runs on.
 */
static int mapped_publish(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	uint64_t t0 = grist_device_now_ns(), t1;
	cl_event unmap;
	unsigned k;
	cl_int err;
	int ret = 0;

	for (k = 0; k < s->num_devices; k++) {
		const struct grist_device_part *p = &slot->parts[k];

		if (p->row_offsets)
			memcpy((char *)slot->base + k * s->stride, p->row_offsets, (p->rows + 1) * sizeof(uint64_t));
	}
	slot->commands++;
	err = clEnqueueUnmapMemObject(s->queues[0], slot->whole[0], slot->base, 0, NULL, &unmap);
	if (err != CL_SUCCESS)
		return grist_cl_fail(err, "clEnqueueUnmapMemObject(batch)");
	slot->base = slot->host = NULL;
	for (k = 0; k < s->num_devices; k++) {
		struct grist_device_part *p = &slot->parts[k];
		cl_event ev;

		if (k) {
			slot->commands++;
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
		p->data = slot->data[k];
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
	unsigned k;

	if (slot->base) {
		/* Freed while the producer was filling: give the mapping back. */
		cl_event unmap;

		if (clEnqueueUnmapMemObject(s->queues[0], slot->whole[0], slot->base, 0, NULL, &unmap) == CL_SUCCESS)
			grist_cl_wait_release(&unmap, 1);
		slot->base = slot->host = NULL;
	}
	/* sub-buffers first: the rows one is shared by every device, so released once */
	if (slot->data[0])
		clReleaseMemObject(slot->data[0]);
	for (k = 0; k < s->num_devices; k++) {
		if (slot->offsets_mem[k])
			clReleaseMemObject(slot->offsets_mem[k]);
		slot->data[k] = slot->offsets_mem[k] = NULL;
	}
	if (slot->whole[0])
		clReleaseMemObject(slot->whole[0]);
	slot->whole[0] = NULL;
}

/* The mapping must end before the slot can be mapped again; nothing reads it. */
static int mapped_abandon(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	cl_event unmap;
	cl_int err;

	err = clEnqueueUnmapMemObject(s->queues[0], slot->whole[0], slot->base, 0, NULL, &unmap);
	if (err != CL_SUCCESS)
		return grist_cl_fail(err, "clEnqueueUnmapMemObject(abandoned batch)");
	slot->base = slot->host = NULL;
	return grist_cl_wait_release(&unmap, 1);
}

const struct grist_device_ops grist_device_mapped_ops = {
	.strategy = GRIST_DEVICE_MAPPED,
	.init_slot = mapped_init_slot,
	.begin_fill = mapped_begin_fill,
	.publish = mapped_publish,
	.abandon = mapped_abandon,
	.fini_slot = mapped_fini_slot,
	.slot_memory = mapped_slot_memory,
};
