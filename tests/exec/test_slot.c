/* Tests for batch slots: growth, the three layouts, maps and filters, row copies and publishing. */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "common/error.h"
#include "exec/slot.h"

static struct grist_map_input input(const uint8_t *data, size_t len, uint64_t index)
{
	struct grist_map_input in = { .data = data, .len = len, .index = index, .dataset = 1 };

	return in;
}

static void test_init_bounds(void **state)
{
	struct grist_slot s;

	(void)state;
	assert_int_equal(grist_slot_init(&s, 0, 0), -EINVAL);
	assert_int_equal(grist_slot_init(&s, SIZE_MAX / 8, 0), -EINVAL);
	assert_int_equal(grist_slot_init(&s, 3, 100), 0);
	assert_true(s.cap >= 100);
	assert_int_equal(s.cap % 4096, 0);
	assert_true(grist_slot_memory(&s) >= s.cap);
	grist_slot_free(&s);
	grist_slot_free(&s); /* freeing twice is harmless: free clears the slot */
}

/* Growing keeps the bytes already written. */
static void test_reserve_keeps_data(void **state)
{
	struct grist_slot s;
	uint8_t rec[3000], want[3000];
	struct grist_layout L = { .kind = GRIST_LAYOUT_RAGGED, .batch_size = 200 };
	size_t i;

	(void)state;
	assert_int_equal(grist_slot_init(&s, 200, 0), 0);
	for (i = 0; i < 200; i++) {
		struct grist_map_input in;

		t_fill(rec, (i * 131) % 3000, i);
		in = input(rec, (i * 131) % 3000, i);
		assert_int_equal(grist_slot_add(&s, &L, &in, 1000 + i), 1);
	}
	assert_int_equal(s.count, 200);
	assert_true(s.cap >= s.bytes);
	for (i = 0; i < 200; i++) {
		size_t len = (i * 131) % 3000;

		assert_int_equal(s.offsets[i + 1] - s.offsets[i], len);
		t_fill(want, len, i);
		assert_memory_equal(s.data + s.offsets[i], want, len);
		assert_int_equal(s.indices[i], i);
		assert_int_equal(s.datasets[i], 1);
		assert_int_equal(s.positions[i], 1000 + i);
	}
	/* the slot is full: one more row is refused */
	{
		struct grist_map_input in = input(rec, 1, 0);

		assert_int_equal(grist_slot_add(&s, &L, &in, 0), -EOVERFLOW);
	}
	grist_slot_reset(&s);
	assert_int_equal(s.count, 0);
	assert_int_equal(s.bytes, 0);
	grist_slot_free(&s);
}

static void test_fixed_layout(void **state)
{
	struct grist_layout L = { .kind = GRIST_LAYOUT_FIXED, .record_bytes = 8, .batch_size = 4 };
	const uint8_t rec[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	struct grist_map_input in;
	struct grist_slot s;

	(void)state;
	assert_int_equal(grist_slot_init(&s, 4, 0), 0);
	in = input(rec, 8, 5);
	assert_int_equal(grist_slot_add(&s, &L, &in, 0), 1);
	in = input(rec + 1, 8, 6);
	assert_int_equal(grist_slot_add(&s, &L, &in, 1), 1);
	/* too long and too short records are errors naming the record */
	in = input(rec, 9, 77);
	assert_int_equal(grist_slot_add(&s, &L, &in, 2), -EMSGSIZE);
	assert_non_null(strstr(grist_last_error(), "record 77"));
	in = input(rec, 7, 78);
	assert_int_equal(grist_slot_add(&s, &L, &in, 2), -EMSGSIZE);
	assert_non_null(strstr(grist_last_error(), "record 78"));
	assert_int_equal(s.count, 2);
	assert_int_equal(grist_slot_publish(&s, &L, 9), 0);
	assert_int_equal(s.batch.sequence, 9);
	assert_int_equal(s.batch.num_records, 2);
	assert_int_equal(s.batch.num_rows, 2);
	assert_int_equal(s.batch.bytes, 16);
	assert_int_equal(s.batch.record_bytes, 8);
	assert_null(s.batch.offsets);
	assert_memory_equal(s.batch.data, rec, 8);
	assert_memory_equal(s.batch.data + 8, rec + 1, 8);
	assert_int_equal(s.batch.indices[1], 6);
	grist_slot_free(&s);
}

static void test_padded_layout(void **state)
{
	struct grist_layout L = { .kind = GRIST_LAYOUT_PADDED, .record_bytes = 6, .pad_value = 0xee, .batch_size = 4 };
	const uint8_t rec[6] = { 1, 2, 3, 4, 5, 6 };
	const uint8_t want[24] = { 1, 2, 3, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
				   0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee };
	struct grist_map_input in;
	struct grist_slot s;

	(void)state;
	assert_int_equal(grist_slot_init(&s, 4, 0), 0);
	/* dirty the memory first so the padding is proven written, not just zero */
	assert_int_equal(grist_slot_reserve(&s, 64), 0);
	memset(s.data, 0x11, s.cap);
	in = input(rec, 3, 0);
	assert_int_equal(grist_slot_add(&s, &L, &in, 0), 1);
	in = input(rec, 0, 1);
	assert_int_equal(grist_slot_add(&s, &L, &in, 1), 1);
	in = input(rec, 6, 2);
	assert_int_equal(grist_slot_add(&s, &L, &in, 2), 1);
	in = input(rec, 7, 3);
	assert_int_equal(grist_slot_add(&s, &L, &in, 3), -EMSGSIZE);
	assert_non_null(strstr(grist_last_error(), "padded"));
	assert_int_equal(grist_slot_publish(&s, &L, 0), 0);
	/* a short batch is padded with pad rows to batch_size */
	assert_int_equal(s.batch.num_records, 3);
	assert_int_equal(s.batch.num_rows, 4);
	assert_int_equal(s.batch.bytes, 24);
	assert_memory_equal(s.batch.data, want, 6);
	assert_memory_equal(s.batch.data + 6, want + 6, 6);
	assert_memory_equal(s.batch.data + 12, rec, 6);
	assert_memory_equal(s.batch.data + 18, want + 18, 6);
	grist_slot_free(&s);
}

static int map_double(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t cap, size_t *len)
{
	int *mode = ctx;

	if (*mode == 1)
		return in->index % 2 ? 0 : (*len = 0, 1);
	if (*mode == 2)
		return -EDOM;
	if (*mode == 3) {
		*len = cap + 1; /* claims more than it may write */
		return 1;
	}
	if (2 * in->len > cap)
		return -ENOSPC;
	memcpy(out, in->data, in->len);
	memcpy(out + in->len, in->data, in->len);
	*len = 2 * in->len;
	return 1;
}

static void test_map(void **state)
{
	int mode = 0;
	struct grist_layout L = { .kind = GRIST_LAYOUT_RAGGED, .map = map_double, .map_ctx = &mode,
				  .map_out_max = 16, .batch_size = 4 };
	const uint8_t rec[4] = { 9, 8, 7, 6 };
	const uint8_t want[8] = { 9, 8, 7, 6, 9, 8, 7, 6 };
	struct grist_map_input in = input(rec, 4, 0);
	struct grist_slot s;

	(void)state;
	assert_int_equal(grist_slot_init(&s, 4, 0), 0);
	assert_int_equal(grist_slot_add(&s, &L, &in, 0), 1);
	assert_int_equal(s.offsets[1], 8);
	assert_memory_equal(s.data, want, 8);
	/* filter: odd indices dropped and counted */
	mode = 1;
	in.index = 1;
	assert_int_equal(grist_slot_add(&s, &L, &in, 1), 0);
	in.index = 2;
	assert_int_equal(grist_slot_add(&s, &L, &in, 2), 1);
	assert_int_equal(s.count, 2);
	assert_int_equal(s.filtered, 1);
	assert_int_equal(s.offsets[2], 8);
	/* errors from the map carry its code and name the record */
	mode = 2;
	in.index = 55;
	assert_int_equal(grist_slot_add(&s, &L, &in, 3), -EDOM);
	assert_non_null(strstr(grist_last_error(), "record 55"));
	mode = 3;
	assert_int_equal(grist_slot_add(&s, &L, &in, 3), -EOVERFLOW);
	assert_int_equal(s.count, 2);
	grist_slot_free(&s);
}

/* copy_row reproduces rows exactly, for ragged and fixed layouts. */
static void test_copy_row(void **state)
{
	struct grist_layout R = { .kind = GRIST_LAYOUT_RAGGED, .batch_size = 8 };
	struct grist_layout F = { .kind = GRIST_LAYOUT_FIXED, .record_bytes = 5, .batch_size = 8 };
	uint8_t rec[5000];
	struct grist_slot a, b;
	size_t i;

	(void)state;
	t_fill(rec, sizeof(rec), 3);
	assert_int_equal(grist_slot_init(&a, 8, 0), 0);
	assert_int_equal(grist_slot_init(&b, 8, 0), 0);
	for (i = 0; i < 8; i++) {
		struct grist_map_input in = input(rec + i, i == 3 ? 0 : 700 * i, 10 + i);

		assert_int_equal(grist_slot_add(&a, &R, &in, 20 + i), 1);
	}
	for (i = 2; i < 8; i++)
		assert_int_equal(grist_slot_copy_row(&b, &R, &a, i), 0);
	assert_int_equal(b.count, 6);
	assert_int_equal(b.bytes, a.bytes - a.offsets[2]);
	for (i = 0; i < 6; i++) {
		assert_int_equal(b.offsets[i + 1] - b.offsets[i], a.offsets[i + 3] - a.offsets[i + 2]);
		assert_memory_equal(b.data + b.offsets[i], a.data + a.offsets[i + 2], b.offsets[i + 1] - b.offsets[i]);
		assert_int_equal(b.indices[i], 12 + i);
		assert_int_equal(b.positions[i], 22 + i);
	}
	grist_slot_reset(&a);
	grist_slot_reset(&b);
	for (i = 0; i < 3; i++) {
		struct grist_map_input in = input(rec + i, 5, i);

		assert_int_equal(grist_slot_add(&a, &F, &in, i), 1);
	}
	assert_int_equal(grist_slot_copy_row(&b, &F, &a, 2), 0);
	assert_int_equal(grist_slot_copy_row(&b, &F, &a, 0), 0);
	assert_int_equal(b.bytes, 10);
	assert_memory_equal(b.data, rec + 2, 5);
	assert_memory_equal(b.data + 5, rec, 5);
	assert_int_equal(grist_slot_publish(&b, &F, 1), 0);
	assert_int_equal(b.batch.num_rows, 2);
	assert_int_equal(b.batch.bytes, 10);
	grist_slot_free(&a);
	grist_slot_free(&b);
}

/* Rows shaped in stream order and filled in any order equal rows added in order. */
static void test_shape_and_fill(void **state)
{
	const enum grist_batch_layout kinds[] = { GRIST_LAYOUT_RAGGED, GRIST_LAYOUT_PADDED };
	uint8_t recs[4][2000];
	const size_t lens[4] = { 1500, 3, 0, 2000 };
	size_t k, i, dst[4];

	(void)state;
	for (i = 0; i < 4; i++)
		t_fill(recs[i], sizeof(recs[i]), i + 1);
	for (k = 0; k < 2; k++) {
		struct grist_layout L = { .kind = kinds[k], .record_bytes = 2000, .pad_value = 0xee, .batch_size = 4 };
		struct grist_slot a, b;
		struct grist_map_input in;

		assert_int_equal(grist_slot_init(&a, 4, 0), 0);
		assert_int_equal(grist_slot_init(&b, 4, 0), 0);
		for (i = 0; i < 4; i++) {
			in = input(recs[i], lens[i], 10 + i);
			assert_int_equal(grist_slot_add(&a, &L, &in, i), 1);
			assert_int_equal(grist_slot_shape_row(&b, &L, &in, i, &dst[i]), 0);
		}
		for (i = 4; i-- > 0;)
			grist_slot_fill_row(&b, &L, dst[i], recs[i], lens[i]);
		grist_slot_fill_done();
		assert_int_equal(b.count, a.count);
		assert_int_equal(b.bytes, a.bytes);
		assert_memory_equal(b.data, a.data, a.bytes);
		assert_memory_equal(b.indices, a.indices, 4 * sizeof(*a.indices));
		assert_memory_equal(b.positions, a.positions, 4 * sizeof(*a.positions));
		if (kinds[k] == GRIST_LAYOUT_RAGGED)
			assert_memory_equal(b.offsets, a.offsets, 5 * sizeof(*a.offsets));
		grist_slot_free(&a);
		grist_slot_free(&b);
	}
	/* A fixed layout refuses a record of another size, naming it, as grist_slot_add() does. */
	{
		struct grist_layout L = { .kind = GRIST_LAYOUT_FIXED, .record_bytes = 8, .batch_size = 2 };
		struct grist_map_input in = input(recs[0], 7, 99);
		struct grist_slot s;
		size_t at;

		assert_int_equal(grist_slot_init(&s, 2, 0), 0);
		assert_int_equal(grist_slot_shape_row(&s, &L, &in, 0, &at), -EMSGSIZE);
		assert_non_null(strstr(grist_last_error(), "record 99"));
		assert_int_equal(s.count, 0);
		grist_slot_free(&s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_bounds),
		cmocka_unit_test(test_reserve_keeps_data),
		cmocka_unit_test(test_fixed_layout),
		cmocka_unit_test(test_padded_layout),
		cmocka_unit_test(test_map),
		cmocka_unit_test(test_copy_row),
		cmocka_unit_test(test_shape_and_fill),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
