/* Batch slot memory (pinned when the memlock limit allows) and record layout. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/copy.h"
#include "common/error.h"
#include "exec/slot.h"

/*
 * Slot data is mmap'd: page-aligned, DMA- and mlock-friendly. In small pages, like the
 * read arenas larger than 16 MiB (engine_async_read.c, arena_map(), says why small arenas
 * differ), and deliberately not MADV_HUGEPAGE (issue 22): a huge page needs a free
 * 2 MiB block, and on a VM with free page reporting (virtio-balloon) every such block
 * has been handed back to the host 2 s after it was freed, so faulting it in costs a
 * host fault per 4 KiB on top of the guest's; small pages come first from the smaller
 * free fragments, which are never reported. On the development VM, loop device, 1 MiB
 * records (6 alternating pairs each): huge-page slots took 2.2x the CPU per GB of small
 * ones at batch 256 in one epoch (0.90 against 0.41 s), 2.1x over three epochs, and 1.35x
 * at batch 16 over three, and were slower in all three; with THP `madvise` and `defrag`
 * madvise, a huge-page fault may also compact memory in the faulting thread. A system
 * with THP `always` still gives them huge pages.
 */
static uint8_t *pinned_alloc(size_t len, bool *pinned)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* mlock fails past RLIMIT_MEMLOCK (8 MiB by default): the slot then stays pageable. */
	*pinned = mlock(p, len) == 0;
	return p;
}

static void pinned_free(uint8_t *p, size_t len, bool pinned)
{
	if (!p)
		return;
	if (pinned)
		munlock(p, len);
	munmap(p, len);
}

static size_t page_round(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

int grist_slot_init(struct grist_slot *s, size_t rows, size_t bytes_hint)
{
	memset(s, 0, sizeof(*s));
	if (rows == 0 || rows > (SIZE_MAX / 16))
		return grist_fail(-EINVAL, "batch slot: bad row count %zu", rows);
	s->offsets = calloc(rows + 1, sizeof(*s->offsets));
	s->indices = calloc(rows, sizeof(*s->indices));
	s->datasets = calloc(rows, sizeof(*s->datasets));
	s->epochs = calloc(rows, sizeof(*s->epochs));
	s->positions = calloc(rows, sizeof(*s->positions));
	if (!s->offsets || !s->indices || !s->datasets || !s->epochs || !s->positions) {
		grist_slot_free(s);
		return grist_fail(-ENOMEM, "batch slot: cannot allocate index arrays for %zu rows", rows);
	}
	s->rows_cap = rows;
	return bytes_hint ? grist_slot_reserve(s, bytes_hint) : 0;
}

static void account(struct grist_slot *s, int64_t delta, unsigned maps)
{
	if (!s->tally)
		return;
	__atomic_add_fetch(&s->tally->memory, (uint64_t)delta, __ATOMIC_RELAXED);
	if (maps)
		__atomic_add_fetch(&s->tally->maps, maps, __ATOMIC_RELAXED);
}

void grist_slot_account(struct grist_slot *s, struct grist_slot_tally *tally)
{
	s->tally = tally;
	account(s, (int64_t)grist_slot_memory(s), s->cap && !s->external);
}

void grist_slot_free(struct grist_slot *s)
{
	account(s, -(int64_t)grist_slot_memory(s), 0);
	if (!s->external)
		pinned_free(s->data, s->cap, s->pinned);
	free(s->offsets);
	free(s->indices);
	free(s->datasets);
	free(s->epochs);
	free(s->positions);
	memset(s, 0, sizeof(*s));
}

void grist_slot_reset(struct grist_slot *s)
{
	s->count = 0;
	s->bytes = 0;
	s->filtered = 0;
	s->offsets[0] = 0;
}

void grist_slot_bind(struct grist_slot *s, uint8_t *data, size_t cap, unsigned handle)
{
	s->data = data;
	s->cap = cap;
	s->handle = handle;
	s->external = true;
	s->pinned = true; /* provider memory is pinned or device-mapped by construction */
}

void grist_slot_unbind(struct grist_slot *s)
{
	s->data = NULL;
	s->cap = 0;
	s->external = false;
}

int grist_slot_reserve(struct grist_slot *s, size_t bytes)
{
	size_t ncap;
	uint8_t *p;
	bool pinned;

	if (bytes <= s->cap)
		return 0;
	if (s->external)
		return grist_fail(-ENOMEM, "a batch needs %zu bytes but device slots hold %zu; "
				  "raise the device slot size", bytes, s->cap);
	/*
	 * A fresh slot maps what is asked (a typical unit's bytes, or its first row): its
	 * memory is pinned whole at once, so rounding up to a power of two would fault in up
	 * to twice what its batches use (256 rows of 70,000 bytes: 32 MiB for 17.9 MB, issue
	 * 37). A slot that has to grow doubles, so growing row by row stays amortised.
	 */
	ncap = s->cap ? s->cap : bytes > 65536 ? bytes : 65536;
	while (ncap < bytes) {
		if (ncap > SIZE_MAX / 2)
			return grist_fail(-ENOMEM, "batch slot: %zu bytes is too large", bytes);
		ncap *= 2;
	}
	ncap = page_round(ncap);
	p = pinned_alloc(ncap, &pinned);
	if (!p)
		return grist_fail(-ENOMEM, "batch slot: cannot map %zu bytes", ncap);
	if (s->bytes)
		memcpy(p, s->data, s->bytes);
	account(s, (int64_t)(ncap - s->cap), 1);
	pinned_free(s->data, s->cap, s->pinned);
	s->data = p;
	s->cap = ncap;
	s->pinned = pinned;
	return 0;
}

/*
 * Room for rows: the batches a slot can hold never exceed max_batch_bytes each (the
 * exact check is at publish time), so a slot holding @s->rows_cap rows never needs more
 * than this; anything more is refused before it is allocated.
 */
static int reserve_rows(struct grist_slot *s, const struct grist_layout *L, size_t bytes)
{
	size_t batches = s->rows_cap / L->batch_size + 1, limit;

	if (L->max_batch_bytes && bytes > s->cap) {
		limit = L->max_batch_bytes > (SIZE_MAX - L->map_out_max) / batches ? SIZE_MAX :
			batches * L->max_batch_bytes + L->map_out_max;
		if (bytes > limit)
			return grist_fail(-EMSGSIZE, "a batch holds more than max_batch_bytes (%zu bytes); raise "
					  "max_batch_bytes", L->max_batch_bytes);
	}
	return grist_slot_reserve(s, bytes);
}

static int row_size_error(const struct grist_map_input *in, size_t got, size_t want, const char *what)
{
	return grist_fail(-EMSGSIZE, "dataset %u record %llu: %zu bytes %s the %s layout's %zu-byte rows",
			  in->dataset, (unsigned long long)in->index, got,
			  got > want ? "exceed" : "do not fill", what, want);
}

int grist_slot_add(struct grist_slot *s, const struct grist_layout *L, const struct grist_map_input *in,
		   uint64_t position)
{
	size_t row = s->count, room, len;
	uint8_t *dst;
	int ret;

	if (row >= s->rows_cap)
		return grist_fail(-EOVERFLOW, "batch slot overflow (%zu rows)", s->rows_cap);
	if (L->kind == GRIST_LAYOUT_RAGGED) {
		room = L->map ? L->map_out_max : in->len;
		if (room > SIZE_MAX - s->bytes)
			return grist_fail(-ENOMEM, "batch too large");
		ret = reserve_rows(s, L, s->bytes + room);
		if (ret)
			return ret;
		dst = s->data + s->bytes;
	} else {
		room = L->record_bytes;
		ret = reserve_rows(s, L, (row + 1) * room);
		if (ret)
			return ret;
		dst = s->data + row * room;
	}

	if (L->map) {
		len = 0;
		ret = L->map(L->map_ctx, in, dst, room, &len);
		if (ret < 0)
			return grist_fail_prefix(ret, "map failed on dataset %u record %llu", in->dataset,
						 (unsigned long long)in->index);
		if (ret == 0) {
			s->filtered++;
			return 0;
		}
		if (len > room)
			return grist_fail(-EOVERFLOW, "map wrote %zu bytes for dataset %u record %llu, more than the %zu available",
					  len, in->dataset, (unsigned long long)in->index, room);
	} else {
		len = in->len;
		if (L->kind != GRIST_LAYOUT_RAGGED && len > room)
			return row_size_error(in, len, room, L->kind == GRIST_LAYOUT_FIXED ? "fixed" : "padded");
		if (len)
			memcpy(dst, in->data, len);
	}

	switch (L->kind) {
	case GRIST_LAYOUT_RAGGED:
		s->bytes += len;
		s->offsets[row + 1] = s->bytes;
		break;
	case GRIST_LAYOUT_FIXED:
		if (len != room)
			return row_size_error(in, len, room, "fixed");
		s->bytes += room;
		break;
	case GRIST_LAYOUT_PADDED:
		memset(dst + len, L->pad_value, room - len);
		s->bytes += room;
		break;
	}
	s->indices[row] = in->index;
	s->datasets[row] = in->dataset;
	s->epochs[row] = in->epoch;
	s->positions[row] = position;
	s->count = row + 1;
	return 1;
}

int grist_slot_shape_row(struct grist_slot *s, const struct grist_layout *L, const struct grist_map_input *in,
			 uint64_t position, size_t *dst_offset)
{
	size_t row = s->count, room;
	int ret;

	if (row >= s->rows_cap)
		return grist_fail(-EOVERFLOW, "batch slot overflow (%zu rows)", s->rows_cap);
	if (L->kind == GRIST_LAYOUT_RAGGED) {
		room = in->len;
	} else {
		room = L->record_bytes;
		if (in->len > room || (L->kind == GRIST_LAYOUT_FIXED && in->len != room))
			return row_size_error(in, in->len, room, L->kind == GRIST_LAYOUT_FIXED ? "fixed" : "padded");
	}
	if (room > SIZE_MAX - s->bytes)
		return grist_fail(-ENOMEM, "batch too large");
	ret = reserve_rows(s, L, s->bytes + room);
	if (ret)
		return ret;
	*dst_offset = s->bytes;
	s->bytes += room;
	if (L->kind == GRIST_LAYOUT_RAGGED)
		s->offsets[row + 1] = s->bytes;
	s->indices[row] = in->index;
	s->datasets[row] = in->dataset;
	s->epochs[row] = in->epoch;
	s->positions[row] = position;
	s->count = row + 1;
	return 0;
}

/*
 * Rows filled out of order land on cache lines nobody will read on this core soon (the
 * consumer or the device reads the batch), so large rows are written with streaming
 * stores: no read-for-ownership of the destination, and the decoder's working set stays
 * in cache. The caller makes them visible with grist_slot_fill_done().
 */
void grist_slot_fill_done(void)
{
	grist_copy_streaming_done();
}

void grist_slot_fill_row(struct grist_slot *s, const struct grist_layout *L, size_t dst_offset,
			 const uint8_t *data, size_t len)
{
	uint8_t *dst = s->data + dst_offset;

	grist_copy_streaming(dst, data, len);
	if (L->kind == GRIST_LAYOUT_PADDED)
		memset(dst + len, L->pad_value, L->record_bytes - len);
}

int grist_slot_copy_row(struct grist_slot *dst, const struct grist_layout *L, const struct grist_slot *src, size_t i)
{
	size_t row = dst->count, begin, len;
	int ret;

	if (row >= dst->rows_cap)
		return grist_fail(-EOVERFLOW, "batch slot overflow (%zu rows)", dst->rows_cap);
	if (L->kind == GRIST_LAYOUT_RAGGED) {
		begin = src->offsets[i];
		len = src->offsets[i + 1] - begin;
	} else {
		begin = i * L->record_bytes;
		len = L->record_bytes;
	}
	ret = reserve_rows(dst, L, dst->bytes + len);
	if (ret)
		return ret;
	if (len)
		memcpy(dst->data + dst->bytes, src->data + begin, len);
	dst->bytes += len;
	dst->offsets[row + 1] = dst->bytes;
	dst->indices[row] = src->indices[i];
	dst->datasets[row] = src->datasets[i];
	dst->epochs[row] = src->epochs[i];
	dst->positions[row] = src->positions[i];
	dst->count = row + 1;
	return 0;
}

void grist_slot_make_view(struct grist_slot *s, struct grist_slot *parent, size_t first, size_t rows)
{
	s->parent = parent;
	s->view_first = first;
	s->count = rows;
	s->filtered = 0;
	s->stream_end = parent->positions[first + rows - 1] + 1;
	parent->refs++;
}

/* The one exact check of max_batch_bytes, on what is delivered, so every engine agrees. */
static int check_batch_size(const struct grist_batch *b, const struct grist_layout *L)
{
	if (L->max_batch_bytes && b->bytes > L->max_batch_bytes)
		return grist_fail(-EMSGSIZE, "batch %llu holds %zu bytes, more than max_batch_bytes (%zu); "
				  "raise max_batch_bytes (grist load --max-batch-bytes)",
				  (unsigned long long)b->sequence, b->bytes, L->max_batch_bytes);
	return 0;
}

static void publish_view(struct grist_slot *s, const struct grist_layout *L, uint64_t sequence)
{
	const struct grist_slot *p = s->parent;
	struct grist_batch *b = &s->batch;
	size_t r0 = s->view_first, n = s->count, i;

	memset(b, 0, sizeof(*b));
	b->sequence = sequence;
	b->num_records = b->num_rows = n;
	b->indices = p->indices + r0;
	b->datasets = p->datasets + r0;
	b->epochs = p->epochs + r0;
	if (L->kind == GRIST_LAYOUT_RAGGED) {
		for (i = 0; i <= n; i++)
			s->offsets[i] = p->offsets[r0 + i] - p->offsets[r0];
		b->data = p->data + p->offsets[r0];
		b->bytes = s->offsets[n];
		b->offsets = s->offsets;
	} else {
		b->data = p->data + r0 * L->record_bytes;
		b->bytes = n * L->record_bytes;
		b->record_bytes = L->record_bytes;
	}
}

int grist_slot_publish(struct grist_slot *s, const struct grist_layout *L, uint64_t sequence)
{
	struct grist_batch *b = &s->batch;
	size_t rows = s->count;
	int ret;

	if (s->parent) {
		publish_view(s, L, sequence);
		return check_batch_size(b, L);
	}

	if (L->kind == GRIST_LAYOUT_PADDED && rows < L->batch_size) {
		ret = grist_slot_reserve(s, L->batch_size * L->record_bytes);
		if (ret)
			return ret;
		memset(s->data + s->bytes, L->pad_value, (L->batch_size - rows) * L->record_bytes);
		rows = L->batch_size;
	}
	memset(b, 0, sizeof(*b));
	b->sequence = sequence;
	b->num_records = s->count;
	b->num_rows = rows;
	b->data = s->data;
	b->bytes = L->kind == GRIST_LAYOUT_RAGGED ? s->bytes : rows * L->record_bytes;
	b->record_bytes = L->kind == GRIST_LAYOUT_RAGGED ? 0 : L->record_bytes;
	b->offsets = L->kind == GRIST_LAYOUT_RAGGED ? s->offsets : NULL;
	b->indices = s->indices;
	b->datasets = s->datasets;
	b->epochs = s->epochs;
	return check_batch_size(b, L);
}

size_t grist_slot_memory(const struct grist_slot *s)
{
	return (s->external ? 0 : s->cap) + (s->rows_cap * 4 + 1) * sizeof(uint64_t) + s->rows_cap * sizeof(uint32_t);
}
