/*
 * Staging strategy: a pinned host buffer per slot, copied to per-device buffers by
 * non-blocking writes. Both are laid out as [row offsets region | rows], so with one
 * device a ragged batch goes over in a single write: on a discrete GPU each command
 * costs microseconds of driver time on the submitting thread, which the loader's
 * in-order pipeline feels at every batch (docs/tuning.md, the H100 section).
 */
#include <string.h>

#include "common/error.h"
#include "device/stage.h"

static uint64_t staging_slot_memory(const struct grist_device_stage *s, size_t cap)
{
	/* the pinned host buffer and one device buffer per device */
	return (uint64_t)(s->region + cap) * (1 + s->num_devices);
}

static int staging_init_slot(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	size_t size = s->region + slot->cap;
	unsigned k;
	cl_int err;
	int ret;

	/* ALLOC_HOST_PTR is how OpenCL asks for page-locked memory a DMA engine can read. */
	slot->staging = clCreateBuffer(s->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, NULL, &err);
	if (err != CL_SUCCESS) {
		slot->staging = NULL;
		return grist_cl_fail(err, "clCreateBuffer(pinned staging)");
	}
	/* Mapped once for the slot's memory's whole life: the producer's pointer never changes. */
	slot->base = clEnqueueMapBuffer(s->queues[0], slot->staging, CL_TRUE, CL_MAP_WRITE, 0, size, 0, NULL, NULL,
					&err);
	if (err != CL_SUCCESS) {
		slot->base = NULL;
		return grist_cl_fail(err, "clEnqueueMapBuffer(pinned staging)");
	}
	slot->host = (char *)slot->base + s->region;
	for (k = 0; k < s->num_devices; k++) {
		slot->whole[k] = clCreateBuffer(s->ctx, CL_MEM_READ_ONLY, size, NULL, &err);
		if (err != CL_SUCCESS) {
			slot->whole[k] = NULL;
			return grist_cl_fail(err, "clCreateBuffer(device batch)");
		}
		ret = grist_cl_sub_buffer(slot->whole[k], s->region, slot->cap, &slot->data[k]);
		if (!ret)
			ret = grist_cl_sub_buffer(slot->whole[k], 0, (s->max_rows + 1) * sizeof(uint64_t),
						  &slot->offsets_mem[k]);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * The staging memory is free once the last writes out of it finished (nothing to
 * wait for when release() saw them finish). The consumer's events are not waited
 * for here: they guard the device buffers, and publish() makes them prerequisites
 * of the next writes instead.
 */
static int staging_begin_fill(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	return grist_cl_wait_release(slot->xfer, s->num_devices);
}

static int staging_publish(struct grist_device_stage *s, struct grist_device_slot *slot)
{
	const size_t region = s->region;
	uint64_t t0 = grist_device_now_ns(), t1;
	cl_uint nwait = slot->num_done;
	const cl_event *wait = nwait ? slot->done : NULL;
	unsigned k;
	cl_int err;
	int ret = 0;

	for (k = 0; k < s->num_devices && !ret; k++) {
		struct grist_device_part *p = &slot->parts[k];
		cl_event ev = NULL, oev;

		if (s->num_devices == 1 && p->row_offsets) {
			/* One write: the offsets go into the region just in front of the rows. */
			memcpy(slot->base, p->row_offsets, (p->rows + 1) * sizeof(uint64_t));
			err = clEnqueueWriteBuffer(s->queues[0], slot->whole[0], CL_FALSE, 0, region + p->bytes,
						   slot->base, nwait, wait, &ev);
			slot->commands++;
		} else if (p->bytes) {
			err = clEnqueueWriteBuffer(s->queues[k], slot->whole[k], CL_FALSE, region, p->bytes,
						   (const char *)slot->host + p->offset, nwait, wait, &ev);
			slot->commands++;
		} else {
			err = clEnqueueMarkerWithWaitList(s->queues[k], nwait, wait, &ev);
			slot->commands++;
		}
		if (err != CL_SUCCESS) {
			ret = grist_cl_fail(err, "clEnqueueWriteBuffer(batch to device)");
			break;
		}
		if (p->row_offsets && s->num_devices > 1) {
			/* Split: each device's rebased offsets are not next to its rows in staging. */
			err = clEnqueueWriteBuffer(s->queues[k], slot->whole[k], CL_FALSE, 0,
						   (p->rows + 1) * sizeof(uint64_t), p->row_offsets, 0, NULL, &oev);
			slot->commands++;
			clReleaseEvent(ev);
			ev = oev;
			if (err != CL_SUCCESS) {
				ret = grist_cl_fail(err, "clEnqueueWriteBuffer(row offsets to device)");
				break;
			}
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

	if (slot->base) {
		cl_event unmap;

		if (clEnqueueUnmapMemObject(s->queues[0], slot->staging, slot->base, 0, NULL, &unmap) == CL_SUCCESS)
			grist_cl_wait_release(&unmap, 1);
		slot->base = slot->host = NULL;
	}
	if (slot->staging)
		clReleaseMemObject(slot->staging);
	slot->staging = NULL;
	for (k = 0; k < s->num_devices; k++) {
		/* sub-buffers first; buffers still read by enqueued commands are freed once those finish */
		if (slot->data[k])
			clReleaseMemObject(slot->data[k]);
		if (slot->offsets_mem[k])
			clReleaseMemObject(slot->offsets_mem[k]);
		if (slot->whole[k])
			clReleaseMemObject(slot->whole[k]);
		slot->data[k] = slot->offsets_mem[k] = slot->whole[k] = NULL;
	}
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
	.slot_memory = staging_slot_memory,
};
