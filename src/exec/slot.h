/* Batch slots: pinned, growable memory for one batch, and the one routine that lays records into it. */
#ifndef GRIST_EXEC_SLOT_H
#define GRIST_EXEC_SLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/loader.h"
#include "grist_config.h"
#if GRIST_HAVE_OPENCL
#include "grist/device.h"
#endif

/*
 * How records become rows. Built once from the loader configuration and shared,
 * read-only, by every thread that assembles batches.
 */
struct grist_layout {
	enum grist_batch_layout kind;
	size_t record_bytes; /* fixed / padded */
	uint8_t pad_value;
	grist_map_fn map;
	void *map_ctx;
	size_t map_out_max;  /* ragged + map */
	size_t batch_size;
	size_t max_batch_bytes; /* no delivered batch is larger; bounds every slot's memory */
};

struct grist_slot;

/*
 * An engine's account of its slots, kept by the slots themselves (relaxed atomics, read
 * by stats() from another thread): the bytes they own now, and how many data buffers
 * they have mapped. Each mapping is fresh memory whose first touch costs a page fault
 * per page (on a VM, possibly a host fault too), so a steady state maps none.
 */
struct grist_slot_tally {
	uint64_t memory;
	uint64_t maps;
};

/*
 * Where delivered batches live when it is not the engine's own pinned memory: the
 * device stage lends its slots (mapped device buffers or pinned staging), so batches
 * are assembled straight into memory the device reads.
 */
struct grist_slot_provider {
	/* Bind a free buffer to @s (may block until one is free); sets data, cap, handle. */
	int (*acquire)(void *ctx, struct grist_slot *s);
	/* Give the buffer bound to @s back without delivering it. */
	void (*cancel)(void *ctx, struct grist_slot *s);
	void *ctx;
};

/*
 * One batch's memory. Invariant: rows [0, count) are complete; for ragged layouts
 * offsets[0..count] are valid and offsets[count] == bytes. The data buffer only ever
 * grows (to the largest batch seen), so steady state allocates nothing. When the
 * memlock limit allows, the data is mlock'd (pinned) so a device can DMA from it.
 */
struct grist_slot {
	uint8_t *data;
	size_t cap;
	bool pinned;
	bool external;       /* data is lent by a slot provider (fixed cap, not ours to free) */
	bool provider_wrapper; /* this slot only ever holds provider memory */
	unsigned handle;     /* the provider's buffer number while external */
	uint64_t host_digest; /* XXH64 of the batch bytes, when the loader asks for it */
	/*
	 * A view: rows [view_first, view_first + count) of @parent delivered as a batch
	 * without copying them (only the ragged offsets are rebased into this slot). The
	 * parent stays alive while refs > 0; detached means its unit is done with it.
	 */
	struct grist_slot *parent;
	size_t view_first;
	unsigned refs;
	bool detached;
	struct grist_slot_tally *tally; /* optional: what this slot owns and maps is added here */
	bool with_caller;    /* the async engine counts it as held by the caller until it is pooled again */
	uint64_t *offsets;   /* rows_cap + 1 */
	uint64_t *indices;   /* rows_cap */
	uint32_t *datasets;  /* rows_cap */
	uint64_t *epochs;    /* rows_cap: each record's epoch of its dataset */
	uint64_t *positions; /* rows_cap: shard stream position of each row (for checkpoints) */
	size_t rows_cap;
	size_t count;        /* records in the slot */
	size_t bytes;        /* bytes used */
	uint64_t stream_end; /* shard stream position just after the last item this slot consumed */
	uint64_t filtered;   /* items the map dropped while filling this slot */
	struct grist_batch batch; /* the caller's view, filled by grist_slot_publish() */
#if GRIST_HAVE_OPENCL
	struct grist_device_batch device_batch; /* device mode: where the batch went */
#endif
};

/* Allocate a slot for up to @rows records (and @bytes_hint bytes to start with). 0 or -ENOMEM. */
int grist_slot_init(struct grist_slot *s, size_t rows, size_t bytes_hint);
void grist_slot_free(struct grist_slot *s);
/* Empty the slot for reuse; memory is kept. */
void grist_slot_reset(struct grist_slot *s);
/* Lend @s a provider's buffer @data of @cap bytes, the provider's number @handle. */
void grist_slot_bind(struct grist_slot *s, uint8_t *data, size_t cap, unsigned handle);
/* Forget a lent buffer (delivered or cancelled): the slot holds no data memory again. */
void grist_slot_unbind(struct grist_slot *s);

/* Make room for @bytes bytes in total. 0 or -ENOMEM. */
int grist_slot_reserve(struct grist_slot *s, size_t bytes);

/*
 * grist_slot_add() - run the map (or the identity) on one record and append the
 * result as the next row. Return: 1 appended, 0 dropped by the map, or a negative
 * error (a record that does not fit the fixed/padded row size, a map failure).
 */
int grist_slot_add(struct grist_slot *s, const struct grist_layout *L, const struct grist_map_input *in,
		   uint64_t position);

/*
 * Identity rows in two steps, for an engine that knows every record's size before it
 * has the bytes: grist_slot_shape_row() appends the row's metadata and room (checking
 * the size against a fixed/padded layout, with the same error as grist_slot_add())
 * and returns where its bytes go; grist_slot_fill_row() writes them there later, in
 * any order. Only for loaders without a map. 0 or a negative error.
 */
int grist_slot_shape_row(struct grist_slot *s, const struct grist_layout *L, const struct grist_map_input *in,
			 uint64_t position, size_t *dst_offset);
void grist_slot_fill_row(struct grist_slot *s, const struct grist_layout *L, size_t dst_offset,
			 const uint8_t *data, size_t len);
/* Order the streaming stores of grist_slot_fill_row() before the slot is handed on. */
void grist_slot_fill_done(void);

/* Append row @i of @src to @dst as-is (the packer's copy when a filter shifted batch boundaries). */
int grist_slot_copy_row(struct grist_slot *dst, const struct grist_layout *L, const struct grist_slot *src, size_t i);

/* Make @s a view of rows [first, first + rows) of @parent (a full batch of a larger slot). */
void grist_slot_make_view(struct grist_slot *s, struct grist_slot *parent, size_t first, size_t rows);

/* Fill s->batch for the caller (padded layout: pad a short batch to batch_size rows). */
int grist_slot_publish(struct grist_slot *s, const struct grist_layout *L, uint64_t sequence);

/* Bytes of memory the slot owns (lent provider memory is not counted). */
size_t grist_slot_memory(const struct grist_slot *s);

/* Count the slot's memory and mappings, now and as it grows, in *@tally (an engine's total). */
void grist_slot_account(struct grist_slot *s, struct grist_slot_tally *tally);

#endif
