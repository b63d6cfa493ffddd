/* Tests for the loader's device mode (device_feed.c): checkpoints at the end of the stream, and the hold limit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "grist/error.h"
#include "grist/format.h"
#include "grist/loader.h"

#define RECORDS 200

static char *dir;
static const char *path;

static void write_file(void)
{
	struct grist_writer *w;
	char rec[16];
	int i;

	dir = t_mkdtemp();
	path = strdup(t_path(dir, "e.array_record"));
	assert_int_equal(grist_writer_open(path, "group_size:1,zstd:3", &w), 0);
	for (i = 1; i <= RECORDS; i++) {
		int n = snprintf(rec, sizeof(rec), "%d", i);

		assert_int_equal(grist_writer_write(w, rec, (size_t)n), 0);
	}
	assert_int_equal(grist_writer_close(w), 0);
}

static void config(struct grist_loader_config *c, struct grist_dataset_spec *ds)
{
	memset(c, 0, sizeof(*c));
	memset(ds, 0, sizeof(*ds));
	ds->paths = &path;
	ds->num_paths = 1;
	c->datasets = ds;
	c->num_datasets = 1;
	c->batch_size = 8;
	c->epochs = 1;
	c->seed = 3;
	c->threads = 1;
	c->device = "opencl";
}

/* Create a device loader, or skip when this machine has no OpenCL platform. */
static struct grist_loader *open_device(const struct grist_loader_config *c)
{
	struct grist_loader *l;
	int ret;

	ret = grist_loader_create(c, &l);
	if (ret == -ENODEV || ret == -ENOTSUP) {
		fprintf(stderr, "skipped: %s\n", grist_last_error());
		skip();
	}
	assert_int_equal(ret, 0);
	return l;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * A checkpoint saved after the last batch resumes to nothing, also when the feeder
 * reached the end of the stream long before the consumer did (it used to record the
 * consumer's position at that moment as the end, and a resume replayed the rest).
 */
static void test_end_checkpoint(void **state)
{
	struct grist_loader_config c;
	struct grist_dataset_spec ds;
	struct grist_loader *l;
	struct grist_batch *b;
	uint8_t st[256];
	size_t len;
	int n = 0;

	(void)state;
	config(&c, &ds);
	c.prefetch = 32; /* enough device slots that the feeder pulls every batch at once */
	l = open_device(&c);
	assert_int_equal(grist_loader_next(l, &b), 0);
	assert_non_null(b);
	grist_loader_release(l, b);
	sleep_ms(300); /* let the feeder run to the end of the stream */
	for (;;) {
		assert_int_equal(grist_loader_next(l, &b), 0);
		if (!b)
			break;
		n++;
		grist_loader_release(l, b);
	}
	assert_int_equal(n, RECORDS / 8 - 1);
	assert_int_equal(grist_loader_save_state(l, st, sizeof(st), &len), 0);
	grist_loader_destroy(l);

	c.resume_state = st;
	c.resume_state_len = len;
	l = open_device(&c);
	assert_int_equal(grist_loader_next(l, &b), 0);
	assert_null(b);
	grist_loader_destroy(l);
}

/*
 * A caller may hold up to prefetch batches in device mode too; one more is refused
 * with -EBUSY at once. It used to block forever once every device slot was held.
 */
static void test_hold_limit(void **state)
{
	static const struct {
		enum grist_engine_kind engine;
		enum grist_granularity granularity;
		unsigned prefetch;
	} cases[] = {
		{ GRIST_ENGINE_URING, GRIST_GRANULARITY_RECORD, 0 }, /* the default prefetch, 4 */
		{ GRIST_ENGINE_URING, GRIST_GRANULARITY_RECORD, 1 },
		{ GRIST_ENGINE_URING, GRIST_GRANULARITY_CHUNK, 4 },
		{ GRIST_ENGINE_PREAD, GRIST_GRANULARITY_RECORD, 7 },
		{ GRIST_ENGINE_REF, GRIST_GRANULARITY_RECORD, 4 },
	};
	struct grist_loader_config c;
	struct grist_dataset_spec ds;
	struct grist_batch *b[64], *extra;
	struct grist_loader *l;
	unsigned i, k, limit;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		config(&c, &ds);
		c.batch_size = 4;
		c.engine = cases[i].engine;
		c.granularity = cases[i].granularity;
		c.prefetch = cases[i].prefetch;
		limit = c.prefetch ? c.prefetch : 4;
		l = open_device(&c);
		for (k = 0; k < limit; k++) {
			assert_int_equal(grist_loader_next(l, &b[k]), 0);
			assert_non_null(b[k]);
			assert_int_equal(b[k]->sequence, k);
		}
		assert_int_equal(grist_loader_next(l, &extra), -EBUSY);
		assert_non_null(strstr(grist_last_error(), "held"));
		/* the refusal is not an error state: release one and go on */
		grist_loader_release(l, b[0]);
		assert_int_equal(grist_loader_next(l, &b[0]), 0);
		assert_non_null(b[0]);
		assert_int_equal(b[0]->sequence, limit);
		for (k = 0; k < limit; k++)
			grist_loader_release(l, b[k]);
		grist_loader_destroy(l);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_end_checkpoint),
		cmocka_unit_test(test_hold_limit),
	};
	int ret;

	write_file();
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	t_rmtree(dir);
	return ret;
}
