/* Internal layout of the device stage: slots, the strategy ops table, OpenCL helpers. */
#ifndef GRIST_DEVICE_STAGE_H
#define GRIST_DEVICE_STAGE_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "grist/device.h"

enum grist_slot_state {
	GRIST_SLOT_IDLE,	/* free; may still have transfer / consumer events pending */
	GRIST_SLOT_FILLING,	/* the producer owns the host memory */
	GRIST_SLOT_READY,	/* submitted, queued for next() */
	GRIST_SLOT_HELD,	/* the consumer holds it */
};

/*
 * One ring entry. Ownership: state, releasing, seq, idle_since and held_since
 * are guarded by the stage lock; everything else belongs to whoever the state
 * names (FILLING: the producer thread inside acquire/submit; READY: nobody;
 * HELD: the consumer, which reads parts and, inside release(), retires the
 * finished transfer events; IDLE: nobody, and acquire() reads xfer under the
 * lock to prefer a slot with no transfer left).
 *
 * Memory is made on first use and only grows (to the largest batch asked for),
 * so a run allocates the slots it keeps busy, not the whole ring. Each buffer
 * is laid out as [row offsets region | rows], the region being s->region
 * bytes; the rows start at the producer's pointer.
 */
struct grist_device_slot {
	enum grist_slot_state state;
	bool releasing;		/* HELD, inside release(): a second release of the batch is refused */
	uint64_t seq;
	uint64_t idle_since;	/* release clock when it became IDLE */
	size_t cap;		/* rows bytes the buffers hold; 0 until first acquired */
	void *base;		/* host view of the buffer: mapped once (staging) or per fill (mapped) */
	void *host;		/* base + region: where the producer writes the rows */
	cl_mem staging;		/* STAGING: the pinned buffer behind @base */
	cl_mem *whole;		/* STAGING: one device buffer per device; MAPPED: [0], shared by all */
	cl_mem *data;		/* per device: sub-buffer of the rows (MAPPED: all the same one) */
	cl_mem *offsets_mem;	/* per device: sub-buffer of its (max_rows + 1) cl_ulong offsets */
	uint64_t *offsets_host;	/* per-device rebased offsets, num_devices * (max_rows + 1) */
	/*
	 * Per device: the last transfer command of the last submit, which is also
	 * the part's ready event. In-order queues make it complete only after
	 * every earlier command of that batch, so waiting on it frees the host
	 * memory (staging buffer, offsets_host) for reuse.
	 */
	cl_event *xfer;
	cl_event *done;		/* consumer events from release, not yet waited on */
	unsigned num_done, cap_done;
	struct grist_device_part *parts;
	size_t bytes, rows;
	/* publish() reports its OpenCL calls here (FILLING: the producer's alone) */
	uint64_t enqueue_ns, flush_ns;
	unsigned commands;
	uint64_t held_since;	/* next() clock, for stats.hold_ns */
};

struct grist_device_ops {
	enum grist_device_strategy strategy;
	/*
	 * Make the strategy's buffers for slot->cap bytes of rows: base/host (staging),
	 * whole, data and offsets_mem. On failure what was made is left for fini_slot.
	 */
	int (*init_slot)(struct grist_device_stage *s, struct grist_device_slot *slot);
	/* Make slot->host writable; the slot was just taken from IDLE and has its memory. */
	int (*begin_fill)(struct grist_device_stage *s, struct grist_device_slot *slot);
	/*
	 * Enqueue the transfers of slot->parts (bytes, rows, offset, host offsets
	 * already set), set slot->xfer[k] and parts[k].ready, consume slot->done.
	 */
	int (*publish)(struct grist_device_stage *s, struct grist_device_slot *slot);
	/* The producer gives a filled-in-part slot back unsubmitted: undo begin_fill. */
	int (*abandon)(struct grist_device_stage *s, struct grist_device_slot *slot);
	/* Free what init_slot and an unfinished begin_fill made (cap stays); waits as needed. */
	void (*fini_slot)(struct grist_device_stage *s, struct grist_device_slot *slot);
	/* Bytes of host and device memory one slot of @cap bytes of rows holds. */
	uint64_t (*slot_memory)(const struct grist_device_stage *s, size_t cap);
};

extern const struct grist_device_ops grist_device_staging_ops;
extern const struct grist_device_ops grist_device_mapped_ops;

struct grist_device_stage {
	const struct grist_device_ops *ops;
	cl_platform_id platform;
	cl_context ctx;
	unsigned num_devices;
	cl_device_id *devices;
	cl_command_queue *queues;	/* per device: in-order, transfers only */
	unsigned num_slots;
	size_t slot_bytes, max_rows;
	/*
	 * Every slot buffer starts with the row offsets: @stride bytes per device
	 * (its (max_rows + 1) cl_ulong rounded up to the devices' sub-buffer
	 * alignment), @region bytes in all (staging: one device's, each device has
	 * its own buffer; mapped: every device's, they share one).
	 */
	size_t stride, region;
	struct grist_device_slot *slots;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned *fifo;			/* READY slots in submission order */
	unsigned fifo_head, fifo_len;
	uint64_t next_seq, release_clock;
	unsigned in_state[4];		/* slots per enum grist_slot_state, for the occupancy stats */
	bool closed;
	int failed;			/* first OpenCL failure after create, sticky */
	char failed_msg[256];
	struct grist_device_stats stats;
};

static inline uint64_t grist_device_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A sub-buffer of @parent: [@origin, @origin + @size). */
int grist_cl_sub_buffer(cl_mem parent, size_t origin, size_t size, cl_mem *out);

/* Record "<what>: CL_NAME (n)" and return the negative errno that @err maps to. */
int grist_cl_fail(cl_int err, const char *what);
/* The CL_* name of an OpenCL error code, or "CL_UNKNOWN_ERROR". */
const char *grist_cl_error_name(cl_int err);
/* Wait for the non-NULL events of @ev, release them and set them to NULL. */
int grist_cl_wait_release(cl_event *ev, unsigned n);
/* Release the non-NULL events of @ev without waiting and set them to NULL. */
void grist_cl_release_events(cl_event *ev, unsigned n);
/*
 * Resolve a selector ("P:D", "P:D,D", "P:all", "all") into a platform and
 * a malloc'd device list. -EINVAL malformed, -ENODEV nonexistent (the message
 * lists the platforms and devices that exist).
 */
int grist_cl_select_devices(const char *selector, cl_platform_id *platform,
			    cl_device_id **devices, unsigned *num_devices);

#endif
