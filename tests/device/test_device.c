/* Tests for the OpenCL device stage: device-side digests of every batch, both strategies, splitting, errors. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "grist/device.h"

#define SLOT_BYTES (64u << 10)
#define MAX_ROWS 256u
#define BLOCK 256u
#define MAX_PARTS 4u
#define MAX_SLOTS 4u
#define PER_EPOCH 12u
#define EPOCHS 4u

/* Each work-item hashes one BLOCK of the range; the host folds the partials in order. */
static const char *kernel_src =
	"__kernel void block_hash(__global const uchar *data, ulong offset, ulong len,\n"
	"			 __global ulong *out)\n"
	"{\n"
	"	ulong i = get_global_id(0), j, end = min((i + 1) * 256UL, len);\n"
	"	ulong h = 0xcbf29ce484222325UL ^ (i * 0x9E3779B97F4A7C15UL);\n"
	"	for (j = i * 256UL; j < end; j++)\n"
	"		h = (h ^ data[offset + j]) * 0x100000001b3UL;\n"
	"	out[i] = h;\n"
	"}\n";

static uint64_t fold(uint64_t d, uint64_t part)
{
	d = (d << 17 | d >> 47) ^ part;
	return d * 0x9E3779B97F4A7C15ull;
}

/* The host side of the same digest: per-block FNV-1a, folded in block order. */
static uint64_t host_digest(const uint8_t *p, size_t n)
{
	uint64_t d = n;
	size_t i, j;

	for (i = 0; i * BLOCK < n; i++) {
		uint64_t h = 0xcbf29ce484222325ull ^ (i * 0x9E3779B97F4A7C15ull);
		size_t end = (i + 1) * BLOCK < n ? (i + 1) * BLOCK : n;

		for (j = i * BLOCK; j < end; j++)
			h = (h ^ p[j]) * 0x100000001b3ull;
		d = fold(d, h);
	}
	return d;
}

static uint64_t fold_partials(const uint64_t *partials, size_t n)
{
	uint64_t d = n;
	size_t i;

	for (i = 0; i * BLOCK < n; i++)
		d = fold(d, partials[i]);
	return d;
}

static uint64_t rnd(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

struct tbatch {
	size_t bytes, rows;
	bool ragged;
	uint64_t offs[MAX_ROWS + 1];
};

/*
 * Batch @seq, a pure function of seq so the consumer can rebuild what the
 * producer wrote. Odd epochs are ragged, with runs of empty rows; sizes vary.
 */
static void gen_batch(uint64_t seq, unsigned ndev, struct tbatch *b, uint8_t *data)
{
	uint64_t x = seq * 7919 + 17;
	size_t r, cap;

	b->ragged = (seq / PER_EPOCH) % 2 == 1;
	b->rows = ndev * (1 + rnd(&x) % (MAX_ROWS / ndev));
	cap = SLOT_BYTES / b->rows;
	if (!b->ragged) {
		b->bytes = b->rows * (1 + rnd(&x) % cap);
	} else {
		b->offs[0] = 0;
		for (r = 0; r < b->rows; r++) {
			size_t len = rnd(&x) % (cap + 1);

			if (seq % 5 == 2 && r < b->rows / 2)
				len = 0;	/* device 0 of a split gets nothing */
			b->offs[r + 1] = b->offs[r] + len;
		}
		b->bytes = b->offs[b->rows];
	}
	if (data)
		t_fill(data, b->bytes, seq + 1);
}

static bool have_opencl(void)
{
	cl_uint np = 0;

	return clGetPlatformIDs(0, NULL, &np) == CL_SUCCESS && np > 0;
}

static unsigned platform0_devices(void)
{
	cl_platform_id p;
	cl_uint nd = 0;

	if (clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS)
		return 0;
	if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS)
		return 0;
	return nd;
}

/* A stage for @cfg; skips the test on a machine without OpenCL. */
static struct grist_device_stage *open_or_skip(const struct grist_device_config *cfg)
{
	struct grist_device_stage *s = NULL;
	int ret;

	if (!have_opencl())
		skip();
	ret = grist_device_stage_create(cfg, &s);
	if (ret)
		fail_msg("create: %d %s", ret, grist_last_error());
	return s;
}

struct producer {
	struct grist_device_stage *s;
	unsigned ndev;
	uint64_t total;
	int ret;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	struct tbatch b;
	uint64_t seq;

	for (seq = 0; seq < p->total; seq++) {
		unsigned slot;
		void *host;

		p->ret = grist_device_stage_acquire(p->s, &slot, &host);
		if (p->ret)
			break;
		gen_batch(seq, p->ndev, &b, host);
		p->ret = grist_device_stage_submit(p->s, slot, b.bytes, b.rows, b.ragged ? b.offs : NULL);
		if (p->ret)
			break;
	}
	grist_device_stage_close(p->s);
	return NULL;
}

/* The consumer's device objects, indexed by slot and part: [slot][part][0 = data, 1 = offsets]. */
struct consumer {
	cl_program prog;
	cl_kernel kernel;
	cl_command_queue q[MAX_PARTS];
	cl_mem partial[MAX_SLOTS][MAX_PARTS][2];
	uint64_t host[MAX_SLOTS][MAX_PARTS][2][SLOT_BYTES / BLOCK];
	cl_event kev[MAX_SLOTS][2 * MAX_PARTS];
	cl_event rev[MAX_SLOTS][2 * MAX_PARTS];
	unsigned nev[MAX_SLOTS];
};

static void consumer_init(struct consumer *c, struct grist_device_stage *s, unsigned slots)
{
	cl_context ctx = grist_device_stage_context(s);
	unsigned n = grist_device_stage_num_devices(s), k, i, j;
	cl_int err;

	memset(c, 0, sizeof(*c));
	c->prog = clCreateProgramWithSource(ctx, 1, &kernel_src, NULL, &err);
	assert_int_equal(err, CL_SUCCESS);
	assert_int_equal(clBuildProgram(c->prog, 0, NULL, NULL, NULL, NULL), CL_SUCCESS);
	c->kernel = clCreateKernel(c->prog, "block_hash", &err);
	assert_int_equal(err, CL_SUCCESS);
	for (k = 0; k < n; k++) {
		c->q[k] = clCreateCommandQueue(ctx, grist_device_stage_device(s, k), 0, &err);
		assert_int_equal(err, CL_SUCCESS);
	}
	for (i = 0; i < slots; i++)
		for (k = 0; k < n; k++)
			for (j = 0; j < 2; j++) {
				c->partial[i][k][j] = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, SLOT_BYTES / BLOCK * 8,
								     NULL, &err);
				assert_int_equal(err, CL_SUCCESS);
			}
}

static void consumer_fini(struct consumer *c)
{
	unsigned i, k, j;

	for (k = 0; k < MAX_PARTS; k++)
		if (c->q[k]) {
			clFinish(c->q[k]);
			clReleaseCommandQueue(c->q[k]);
		}
	for (i = 0; i < MAX_SLOTS; i++)
		for (k = 0; k < MAX_PARTS; k++)
			for (j = 0; j < 2; j++)
				if (c->partial[i][k][j])
					clReleaseMemObject(c->partial[i][k][j]);
	clReleaseKernel(c->kernel);
	clReleaseProgram(c->prog);
}

/* Hash @len bytes of @mem from @offset on part k's queue after @wait; events go to slot's lists. */
static void enqueue_hash(struct consumer *c, unsigned slot, unsigned k, unsigned j, cl_mem mem,
			 cl_ulong offset, cl_ulong len, cl_event wait)
{
	size_t global = (len + BLOCK - 1) / BLOCK;
	cl_event kev, rev;

	if (global == 0)
		return;
	assert_int_equal(clSetKernelArg(c->kernel, 0, sizeof(mem), &mem), CL_SUCCESS);
	assert_int_equal(clSetKernelArg(c->kernel, 1, sizeof(offset), &offset), CL_SUCCESS);
	assert_int_equal(clSetKernelArg(c->kernel, 2, sizeof(len), &len), CL_SUCCESS);
	assert_int_equal(clSetKernelArg(c->kernel, 3, sizeof(cl_mem), &c->partial[slot][k][j]), CL_SUCCESS);
	assert_int_equal(clEnqueueNDRangeKernel(c->q[k], c->kernel, 1, NULL, &global, NULL, 1, &wait, &kev),
			 CL_SUCCESS);
	assert_int_equal(clEnqueueReadBuffer(c->q[k], c->partial[slot][k][j], CL_FALSE, 0, global * 8,
					     c->host[slot][k][j], 0, NULL, &rev), CL_SUCCESS);
	c->kev[slot][c->nev[slot]] = kev;
	c->rev[slot][c->nev[slot]++] = rev;
}

/*
 * Check the batch's layout against the batch rebuilt on the host, hash it on
 * its devices now (long after next() returned it, so an overwrite while held
 * would show), release it with the still-pending kernel events, then compare
 * the device digests. Parts are stage memory: read only before the release.
 */
static void consumer_check_release(struct consumer *c, struct grist_device_stage *s,
				   const struct grist_device_batch *b, uint8_t *scratch)
{
	unsigned n = b->num_parts, k, i, slot = b->slot;
	size_t per, start[MAX_PARTS], len[MAX_PARTS];
	uint64_t rebased[MAX_ROWS + 1];
	struct tbatch t;

	gen_batch(b->seq, n, &t, scratch);
	assert_int_equal(b->bytes, t.bytes);
	assert_int_equal(b->rows, t.rows);
	per = t.rows / n;
	c->nev[slot] = 0;
	for (k = 0; k < n; k++) {
		const struct grist_device_part *p = &b->parts[k];
		size_t r0 = k * per;

		assert_int_equal(p->rows, per);
		if (t.ragged) {
			start[k] = t.offs[r0];
			len[k] = t.offs[r0 + per] - start[k];
			assert_non_null(p->row_offsets);
			for (i = 0; i <= per; i++)
				assert_int_equal(p->row_offsets[i], t.offs[r0 + i] - start[k]);
		} else {
			start[k] = r0 * (t.bytes / t.rows);
			len[k] = per * (t.bytes / t.rows);
			assert_null(p->row_offsets);
		}
		assert_int_equal(p->bytes, len[k]);
		enqueue_hash(c, slot, k, 0, p->data, p->offset, p->bytes, p->ready);
		if (p->row_offsets)
			enqueue_hash(c, slot, k, 1, p->row_offsets_mem, 0, (p->rows + 1) * 8, p->ready);
		assert_int_equal(clFlush(c->q[k]), CL_SUCCESS);
	}
	if (b->seq % 3 == 0) {
		/* Sometimes the consumer is already done: release with no events. */
		assert_int_equal(clWaitForEvents(c->nev[slot], c->rev[slot]), CL_SUCCESS);
		assert_int_equal(grist_device_stage_release(s, b, 0, NULL), 0);
	} else {
		assert_int_equal(grist_device_stage_release(s, b, c->nev[slot], c->kev[slot]), 0);
		assert_int_equal(clWaitForEvents(c->nev[slot], c->rev[slot]), CL_SUCCESS);
	}
	for (i = 0; i < c->nev[slot]; i++) {
		clReleaseEvent(c->kev[slot][i]);
		clReleaseEvent(c->rev[slot][i]);
	}
	for (k = 0; k < n; k++) {
		if (len[k])
			assert_int_equal(fold_partials(c->host[slot][k][0], len[k]),
					 host_digest(scratch + start[k], len[k]));
		if (!t.ragged)
			continue;
		for (i = 0; i <= per; i++)
			rebased[i] = t.offs[k * per + i] - start[k];
		assert_int_equal(fold_partials(c->host[slot][k][1], (per + 1) * 8),
				 host_digest((const uint8_t *)rebased, (per + 1) * 8));
	}
}

/*
 * The producer thread fills EPOCHS * PER_EPOCH batches; this thread holds up
 * to slots - 1 of them and releases a random one, so releases come out of order.
 */
static void run_roundtrip(const char *selector, enum grist_device_strategy strategy, unsigned slots)
{
	struct grist_device_config cfg = { .size = sizeof(cfg),
		.selector = selector, .slots = slots, .slot_bytes = SLOT_BYTES, .max_rows = MAX_ROWS,
		.strategy = strategy,
	};
	struct grist_device_batch held[MAX_SLOTS];
	struct grist_device_stats st;
	struct grist_device_stage *s;
	struct consumer *c;
	struct producer prod;
	uint8_t *scratch;
	unsigned nheld = 0;
	uint64_t want_seq = 0, x = 99;
	pthread_t t;
	int ret;

	s = open_or_skip(&cfg);
	assert_int_equal(grist_device_stage_strategy(s), strategy);
	c = calloc(1, sizeof(*c));
	scratch = malloc(SLOT_BYTES);
	assert_non_null(c);
	assert_non_null(scratch);
	consumer_init(c, s, slots);

	prod = (struct producer){ .s = s, .ndev = grist_device_stage_num_devices(s),
				  .total = EPOCHS * PER_EPOCH };
	assert_int_equal(pthread_create(&t, NULL, produce, &prod), 0);
	for (;;) {
		ret = grist_device_stage_next(s, &held[nheld]);
		assert_true(ret >= 0);
		if (ret == 0)
			break;
		assert_int_equal(held[nheld].seq, want_seq);
		want_seq++;
		nheld++;
		if (nheld == slots - 1) {
			unsigned pick = (unsigned)(rnd(&x) % nheld);

			consumer_check_release(c, s, &held[pick], scratch);
			held[pick] = held[--nheld];
		}
	}
	while (nheld)
		consumer_check_release(c, s, &held[--nheld], scratch);
	pthread_join(t, NULL);
	assert_int_equal(prod.ret, 0);
	assert_int_equal(want_seq, EPOCHS * PER_EPOCH);
	grist_device_stage_stats(s, &st);
	assert_int_equal(st.batches, EPOCHS * PER_EPOCH);
	/* one device: a batch is one command, its row offsets riding with its rows */
	if (grist_device_stage_num_devices(s) == 1)
		assert_int_equal(st.commands, EPOCHS * PER_EPOCH);
	assert_true(st.slots_allocated <= slots);
	consumer_fini(c);
	grist_device_stage_destroy(s);
	free(c);
	free(scratch);
}

/* Read part 0 of @b back (rows and, when ragged, offsets) and compare with what was written. */
static void check_readback(cl_command_queue q, const struct grist_device_batch *b, const uint8_t *want,
			   const uint64_t *offs)
{
	const struct grist_device_part *p = &b->parts[0];
	uint8_t *got = malloc(p->bytes + 1);
	uint64_t got_offs[MAX_ROWS + 1];

	assert_non_null(got);
	if (p->bytes)
		assert_int_equal(clEnqueueReadBuffer(q, p->data, CL_TRUE, p->offset, p->bytes, got, 1, &p->ready, NULL),
				 CL_SUCCESS);
	assert_memory_equal(got, want, p->bytes);
	if (offs) {
		assert_int_equal(clEnqueueReadBuffer(q, p->row_offsets_mem, CL_TRUE, 0, (p->rows + 1) * 8, got_offs, 1,
						     &p->ready, NULL), CL_SUCCESS);
		assert_memory_equal(got_offs, offs, (p->rows + 1) * 8);
	}
	free(got);
}

/*
 * Slots get memory on first use and keep reusing it: a producer/consumer in lockstep
 * touches one slot of eight; a batch larger than a slot's memory grows it (and the bytes
 * still arrive intact); one larger than slot_bytes is refused without failing the stage.
 */
static void run_memory_on_first_use(enum grist_device_strategy strategy)
{
	struct grist_device_config cfg = { .size = sizeof(cfg), .selector = "0:0", .slots = 8, .slot_bytes = 1u << 20,
					   .max_rows = MAX_ROWS, .strategy = strategy };
	struct grist_device_stage *s = open_or_skip(&cfg);
	const size_t sizes[] = { 1000, 3000, 700u << 10, 20, 1u << 20 };
	uint8_t *want = malloc(1u << 20);
	uint64_t offs[5] = { 0 };
	struct grist_device_stats st;
	struct grist_device_batch b, held;
	cl_command_queue q;
	unsigned slot, slot2, i;
	uint64_t mem_small;
	cl_int err;
	void *host;

	assert_non_null(want);
	q = clCreateCommandQueue(grist_device_stage_context(s), grist_device_stage_device(s, 0), 0, &err);
	assert_int_equal(err, CL_SUCCESS);
	grist_device_stage_stats(s, &st);
	assert_int_equal(st.slots, 8);
	assert_int_equal(st.slots_allocated, 0);
	assert_int_equal(st.memory_bytes, 0);

	for (i = 0; i < 20; i++) {
		size_t n = i < 12 ? sizes[i % 2] : sizes[2 + i % 3];

		assert_int_equal(grist_device_stage_acquire_bytes(s, n, &slot, &host), 0);
		t_fill(want, n, i + 1);
		memcpy(host, want, n);
		offs[1] = n / 3;
		offs[2] = n / 2;
		offs[3] = n / 2;
		offs[4] = n;
		assert_int_equal(grist_device_stage_submit(s, slot, n, 4, i % 2 ? offs : NULL), n % 4 && i % 2 == 0
				 ? -EINVAL : 0);
		if (n % 4 && i % 2 == 0)	/* not whole fixed-size rows: submit it ragged instead */
			assert_int_equal(grist_device_stage_submit(s, slot, n, 4, offs), 0);
		assert_int_equal(grist_device_stage_next(s, &b), 1);
		check_readback(q, &b, want, b.parts[0].row_offsets ? offs : NULL);
		assert_int_equal(grist_device_stage_release(s, &b, 0, NULL), 0);
		grist_device_stage_stats(s, &st);
		if (i == 11) {
			/* twelve small batches one at a time: one slot, made once, 64 KiB of rows */
			assert_int_equal(st.slots_allocated, 1);
			assert_int_equal(st.slots_grown, 1);
			mem_small = st.memory_bytes;
			assert_true(mem_small >= 64u << 10);
			assert_true(mem_small < 2 * (64u << 10) + (64u << 10) * grist_device_stage_num_devices(s) + 65536);
		}
	}
	/* 700 KiB grew it, 1 MiB grew it to slot_bytes; the others fit */
	assert_int_equal(st.slots_allocated, 1);
	assert_int_equal(st.slots_grown, 3);
	assert_true(st.memory_bytes > mem_small);

	/* a held batch makes the next acquire take a second slot, which gets memory then */
	assert_int_equal(grist_device_stage_acquire_bytes(s, 100, &slot, &host), 0);
	assert_int_equal(grist_device_stage_submit(s, slot, 100, 1, NULL), 0);
	assert_int_equal(grist_device_stage_next(s, &held), 1);
	assert_int_equal(grist_device_stage_acquire_bytes(s, 100, &slot2, &host), 0);
	assert_int_not_equal(slot2, slot);
	grist_device_stage_stats(s, &st);
	assert_int_equal(st.slots_allocated, 2);

	/* more than slot_bytes: refused, and the stage goes on */
	assert_int_equal(grist_device_stage_acquire_bytes(s, (1u << 20) + 1, &slot, &host), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "slot_bytes"));
	assert_int_equal(grist_device_stage_submit(s, slot2, 100, 1, NULL), 0);
	assert_int_equal(grist_device_stage_next(s, &b), 1);
	assert_int_equal(grist_device_stage_release(s, &b, 0, NULL), 0);
	assert_int_equal(grist_device_stage_release(s, &held, 0, NULL), 0);
	clReleaseCommandQueue(q);
	grist_device_stage_destroy(s);
	free(want);
}

static void test_memory_on_first_use(void **state)
{
	(void)state;
	run_memory_on_first_use(GRIST_DEVICE_STAGING);
	run_memory_on_first_use(GRIST_DEVICE_MAPPED);
}

static void test_staging_roundtrip(void **state)
{
	(void)state;
	run_roundtrip("0:0", GRIST_DEVICE_STAGING, 3);
}

static void test_mapped_roundtrip(void **state)
{
	(void)state;
	run_roundtrip("0:0", GRIST_DEVICE_MAPPED, 4);
}

static void test_split_staging(void **state)
{
	(void)state;
	if (platform0_devices() < 2)
		skip();
	run_roundtrip("0:0,1", GRIST_DEVICE_STAGING, 3);
}

static void test_split_mapped(void **state)
{
	(void)state;
	if (platform0_devices() < 2)
		skip();
	run_roundtrip("0:all", GRIST_DEVICE_MAPPED, 2);
}

static void test_auto_strategy_follows_device(void **state)
{
	struct grist_device_config cfg = { .size = sizeof(cfg), .selector = "0:0", .slots = 2, .slot_bytes = 4096, .max_rows = 8 };
	struct grist_device_stage *s;
	cl_bool unified = CL_FALSE;
	cl_device_type type = 0;

	(void)state;
	if (!have_opencl())
		skip();
	assert_int_equal(grist_device_stage_create(&cfg, &s), 0);
	clGetDeviceInfo(grist_device_stage_device(s, 0), CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof(unified),
			&unified, NULL);
	clGetDeviceInfo(grist_device_stage_device(s, 0), CL_DEVICE_TYPE, sizeof(type), &type, NULL);
	assert_int_equal(grist_device_stage_strategy(s),
			 unified || (type & CL_DEVICE_TYPE_CPU) ? GRIST_DEVICE_MAPPED : GRIST_DEVICE_STAGING);
	assert_null(grist_device_stage_device(s, 1));
	grist_device_stage_destroy(s);

	setenv("GRIST_DEVICE_STRATEGY", "staging", 1);
	assert_int_equal(grist_device_stage_create(&cfg, &s), 0);
	assert_int_equal(grist_device_stage_strategy(s), GRIST_DEVICE_STAGING);
	assert_string_equal(grist_device_strategy_name(grist_device_stage_strategy(s)), "staging");
	grist_device_stage_destroy(s);
	setenv("GRIST_DEVICE_STRATEGY", "dma", 1);
	assert_int_equal(grist_device_stage_create(&cfg, &s), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "GRIST_DEVICE_STRATEGY"));
	unsetenv("GRIST_DEVICE_STRATEGY");
}

static void expect_create(const char *selector, int code, const char *needle)
{
	struct grist_device_config cfg = { .size = sizeof(cfg), .selector = selector, .slots = 2, .slot_bytes = 4096, .max_rows = 8 };
	struct grist_device_stage *s = NULL;

	assert_int_equal(grist_device_stage_create(&cfg, &s), code);
	assert_null(s);
	if (!strstr(grist_last_error(), needle))
		fail_msg("selector '%s': message '%s' lacks '%s'", selector ? selector : "(null)",
			 grist_last_error(), needle);
}

static void test_bad_selector(void **state)
{
	(void)state;
	if (!have_opencl())
		skip();
	expect_create("0:99", -ENODEV, "platform 0 '");
	expect_create("0:99", -ENODEV, "no device 99");
	expect_create("42:0", -ENODEV, "no platform 42");
	expect_create("gpu", -EINVAL, "malformed");
	expect_create("0:", -EINVAL, "malformed");
	expect_create(":0", -EINVAL, "malformed");
	expect_create("0:0:0", -EINVAL, "malformed");
	expect_create("0:0,0", -EINVAL, "twice");
	setenv("GRIST_OPENCL_DEVICE", "0:77", 1);
	expect_create(NULL, -ENODEV, "'0:77'");
	unsetenv("GRIST_OPENCL_DEVICE");
}

static void test_bad_config(void **state)
{
	struct grist_device_config cfg = { .size = sizeof(cfg), .selector = "0:0", .slots = 1, .slot_bytes = 4096, .max_rows = 8 };
	struct grist_device_stage *s = NULL;

	(void)state;
	assert_int_equal(grist_device_stage_create(NULL, &s), -EINVAL);
	assert_int_equal(grist_device_stage_create(&cfg, &s), -EINVAL);
	cfg.slots = 2;
	cfg.slot_bytes = 0;
	assert_int_equal(grist_device_stage_create(&cfg, &s), -EINVAL);
	cfg.slot_bytes = 4096;
	cfg.max_rows = 0;
	assert_int_equal(grist_device_stage_create(&cfg, &s), -EINVAL);
	cfg.max_rows = SIZE_MAX / 2;
	assert_int_equal(grist_device_stage_create(&cfg, &s), -EINVAL);
	cfg.max_rows = 8;
	cfg.strategy = (enum grist_device_strategy)7;
	if (have_opencl()) {
		assert_int_equal(grist_device_stage_create(&cfg, &s), -EINVAL);
		assert_non_null(strstr(grist_last_error(), "strategy"));
		cfg.strategy = GRIST_DEVICE_AUTO;
		cfg.slot_bytes = SIZE_MAX / 4;	/* beyond any device's largest buffer */
		assert_int_equal(grist_device_stage_create(&cfg, &s), -EINVAL);
		assert_non_null(strstr(grist_last_error(), "allocates at most"));
	}
	assert_null(s);
}

static void test_bad_submit_and_release(void **state)
{
	struct grist_device_config cfg = { .size = sizeof(cfg), .selector = "0:0", .slots = 2, .slot_bytes = 4096, .max_rows = 8,
					   .strategy = GRIST_DEVICE_STAGING };
	uint64_t offs[4] = { 0, 10, 5, 20 };
	struct grist_device_batch b, stale;
	struct grist_device_stage *s = open_or_skip(&cfg);
	cl_event null_ev = NULL;
	unsigned slot, other;
	void *host;

	(void)state;
	assert_int_equal(grist_device_stage_submit(s, 0, 16, 4, NULL), -EINVAL);	/* not acquired */
	assert_int_equal(grist_device_stage_submit(s, 99, 16, 4, NULL), -EINVAL);
	assert_int_equal(grist_device_stage_acquire(s, &slot, &host), 0);
	memset(host, 7, 4096);
	assert_int_equal(grist_device_stage_submit(s, slot, 4097, 1, NULL), -EINVAL);
	assert_int_equal(grist_device_stage_submit(s, slot, 16, 0, NULL), -EINVAL);
	assert_int_equal(grist_device_stage_submit(s, slot, 16, 9, NULL), -EINVAL);
	assert_int_equal(grist_device_stage_submit(s, slot, 17, 4, NULL), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "fixed-size"));
	assert_int_equal(grist_device_stage_submit(s, slot, 20, 3, offs), -EINVAL);	/* decreasing */
	assert_non_null(strstr(grist_last_error(), "row_offsets[2]"));
	offs[2] = 15;
	assert_int_equal(grist_device_stage_submit(s, slot, 21, 3, offs), -EINVAL);	/* end != bytes */
	offs[0] = 1;
	assert_int_equal(grist_device_stage_submit(s, slot, 20, 3, offs), -EINVAL);
	offs[0] = 0;
	/* The failed submits left the slot with the producer: a good one still works. */
	assert_int_equal(grist_device_stage_submit(s, slot, 20, 3, offs), 0);
	assert_int_equal(grist_device_stage_submit(s, slot, 20, 3, offs), -EINVAL);
	assert_int_equal(grist_device_stage_next(s, &b), 1);
	assert_int_equal(b.parts[0].rows, 3);
	assert_int_equal(b.parts[0].row_offsets[3], 20);
	assert_int_equal(grist_device_stage_release(s, &b, 1, &null_ev), -EINVAL);
	assert_int_equal(grist_device_stage_release(s, &b, 1, NULL), -EINVAL);
	assert_int_equal(grist_device_stage_release(s, &b, 0, NULL), 0);
	assert_int_equal(grist_device_stage_release(s, &b, 0, NULL), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "released twice"));
	stale = b;
	/* A released slot that has memory is reused before one that has none yet. */
	assert_int_equal(grist_device_stage_acquire(s, &slot, &host), 0);
	assert_int_equal(slot, stale.slot);
	assert_int_equal(grist_device_stage_acquire(s, &other, &host), 0);
	assert_int_not_equal(other, stale.slot);
	/* A stale batch whose slot has been reused must not release the new one. */
	assert_int_equal(grist_device_stage_submit(s, slot, 8, 8, NULL), 0);
	assert_int_equal(grist_device_stage_next(s, &b), 1);
	assert_int_equal(b.seq, 1);
	assert_int_equal(b.slot, stale.slot);
	assert_int_equal(grist_device_stage_release(s, &stale, 0, NULL), -EINVAL);
	assert_int_equal(grist_device_stage_release(s, &b, 0, NULL), 0);
	/* Destroy with one slot still FILLING and unsubmitted. */
	grist_device_stage_destroy(s);
}

static void test_close_drains(void **state)
{
	struct grist_device_config cfg = { .size = sizeof(cfg), .selector = "0:0", .slots = 3, .slot_bytes = 64, .max_rows = 4,
					   .strategy = GRIST_DEVICE_MAPPED };
	struct grist_device_stage *s = open_or_skip(&cfg);
	struct grist_device_batch b;
	unsigned slot;
	void *host;

	(void)state;
	assert_int_equal(grist_device_stage_acquire(s, &slot, &host), 0);
	assert_int_equal(grist_device_stage_submit(s, slot, 64, 4, NULL), 0);
	grist_device_stage_close(s);
	assert_int_equal(grist_device_stage_acquire(s, &slot, &host), -ECANCELED);
	assert_int_equal(grist_device_stage_next(s, &b), 1);
	assert_int_equal(grist_device_stage_next(s, &b), 0);
	/* Destroy while the consumer still holds a batch: the stage waits, then frees. */
	grist_device_stage_destroy(s);
	grist_device_stage_destroy(NULL);
}

static char self_exe[4096];

/* Without any ICD vendor, create must report -ENODEV, not crash. Needs a fresh process. */
static void test_no_platform(void **state)
{
	char *dir, *out = NULL;
	int st;

	(void)state;
	dir = t_mkdtemp();
	st = t_run(&out, "OCL_ICD_VENDORS=%s '%s' --create-child 2>&1", dir, self_exe);
	assert_int_equal(st, 0);
	if (!strstr(out, "code=-19 ") || !strstr(out, "no OpenCL platform"))
		fail_msg("child said: %s", out);
	free(out);
	t_rmtree(dir);
}

static int create_child(void)
{
	struct grist_device_config cfg = { .size = sizeof(cfg), .selector = "0:0", .slots = 2, .slot_bytes = 64, .max_rows = 1 };
	struct grist_device_stage *s = NULL;
	int ret = grist_device_stage_create(&cfg, &s);

	printf("code=%d message=%s\n", ret, grist_last_error());
	grist_device_stage_destroy(s);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_staging_roundtrip),
		cmocka_unit_test(test_mapped_roundtrip),
		cmocka_unit_test(test_split_staging),
		cmocka_unit_test(test_split_mapped),
		cmocka_unit_test(test_memory_on_first_use),
		cmocka_unit_test(test_auto_strategy_follows_device),
		cmocka_unit_test(test_bad_selector),
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_bad_submit_and_release),
		cmocka_unit_test(test_close_drains),
		cmocka_unit_test(test_no_platform),
	};
	ssize_t n;

	if (argc > 1 && strcmp(argv[1], "--create-child") == 0)
		return create_child();
	/* PoCL reads this once, at the first OpenCL call: two CPU devices for the split tests. */
	setenv("POCL_DEVICES", "pthread pthread", 0);
	unsetenv("GRIST_OPENCL_DEVICE");
	unsetenv("GRIST_DEVICE_STRATEGY");
	n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n > 0)
		self_exe[n] = '\0';
	return cmocka_run_group_tests(tests, NULL, NULL);
}
