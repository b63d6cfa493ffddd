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
 * One ring entry. Ownership: the state field, seq and idle_since are guarded by
 * the stage lock; everything else belongs to whoever the state names
 * (FILLING: the producer thread inside acquire/submit; READY/HELD: read-only).
 */
struct grist_device_slot {
	enum grist_slot_state state;
	uint64_t seq;
	uint64_t idle_since;	/* release clock when it became IDLE: oldest is reused first */
	void *host;		/* producer memory: mapped once (staging) or per fill (mapped) */
	cl_mem staging;		/* STAGING: the pinned buffer behind @host */
	cl_mem shared;		/* MAPPED: the one buffer all devices read */
	cl_mem *data;		/* STAGING: per-device buffer */
	cl_mem *offsets_mem;	/* per-device (max_rows + 1) cl_ulong */
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
	uint64_t held_since;	/* next() clock, for stats.hold_ns (under the stage lock) */
};

struct grist_device_ops {
	enum grist_device_strategy strategy;
	/* Allocate the strategy's buffers of one slot (after the common ones). */
	int (*init_slot)(struct grist_device_stage *s, struct grist_device_slot *slot);
	/* Make slot->host writable; the slot was just taken from IDLE. */
	int (*begin_fill)(struct grist_device_stage *s, struct grist_device_slot *slot);
	/*
	 * Enqueue the transfers of slot->parts (bytes, rows, offset, host offsets
	 * already set), set slot->xfer[k] and parts[k].ready, consume slot->done.
	 */
	int (*publish)(struct grist_device_stage *s, struct grist_device_slot *slot);
	/* The producer gives a filled-in-part slot back unsubmitted: undo begin_fill. */
	int (*abandon)(struct grist_device_stage *s, struct grist_device_slot *slot);
	/* Undo what init_slot and an unfinished begin_fill did; waits as needed. */
	void (*fini_slot)(struct grist_device_stage *s, struct grist_device_slot *slot);
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
	struct grist_device_slot *slots;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned *fifo;			/* READY slots in submission order */
	unsigned fifo_head, fifo_len;
	uint64_t next_seq, release_clock;
	unsigned in_state[4];		/* slots per enum grist_slot_state, for the occupancy stats */
	uint64_t last_submit_end;	/* when the last submit() returned, for stats.submit_gap_ns */
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
