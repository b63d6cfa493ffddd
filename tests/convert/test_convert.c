/*
 * Tests for grist_convert() (grist/convert.h): every input format into ArrayRecord files read
 * back with grist's reader, shards, progress and cancellation, all-or-nothing on failure,
 * outputs that are inputs refused, and the sized options struct.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "grist/convert.h"
#include "grist/format.h"

/* Every record of the ArrayRecord file @path, each as "<record>\n", into one malloc'd string. */
static char *records_of(const char *path, uint64_t *n)
{
	struct grist_reader *r;
	const uint8_t *p;
	size_t len, cap = 1 << 16, used = 0;
	char *all = malloc(cap);
	int ret;

	assert_non_null(all);
	assert_int_equal(grist_reader_open(&path, 1, NULL, &r), 0);
	*n = 0;
	while ((ret = grist_reader_read_next(r, &p, &len)) > 0) {
		while (used + len + 2 > cap)
			assert_non_null(all = realloc(all, cap *= 2));
		memcpy(all + used, p, len);
		used += len;
		all[used++] = '\n';
		(*n)++;
	}
	assert_int_equal(ret, 0);
	all[used] = '\0';
	grist_reader_close(r);
	return all;
}

/* @n numbered lines "record <i>" into @path; returns the text. */
static char *write_lines(const char *path, unsigned n)
{
	size_t cap = (size_t)n * 24 + 1, used = 0;
	char *text = malloc(cap);
	unsigned i;

	assert_non_null(text);
	text[0] = '\0';
	for (i = 0; i < n; i++)
		used += (size_t)snprintf(text + used, cap - used, "record %u\n", i);
	assert_int_equal(t_write_file(path, text, used), 0);
	return text;
}

static int convert1(const char *in, const char *out, const struct grist_convert_options *o)
{
	const char *inputs[] = { in };

	return grist_convert(inputs, 1, out, o, NULL);
}

static void test_lines_round_trip(void **state)
{
	char *dir = t_mkdtemp(), *text, *got;
	const char *in = t_path(dir, "data.txt"), *out = t_path(dir, "data.ar");
	const char *inputs[] = { in };
	struct grist_convert_options o;
	struct grist_convert_stats st;
	uint64_t n;

	(void)state;
	text = write_lines(in, 1000);
	grist_convert_options_init(&o);
	o.writer_options = "group_size:7,zstd:3,max_parallelism:2";
	grist_convert_stats_init(&st);
	assert_int_equal(grist_convert(inputs, 1, out, &o, &st), 0);
	assert_int_equal(st.records, 1000);
	assert_int_equal(st.shards, 1);
	assert_int_equal(st.bytes, strlen(text) - 1000); /* the newlines are not records' bytes */
	got = records_of(out, &n);
	assert_int_equal(n, 1000);
	assert_string_equal(got, text);
	/* The defaults (NULL options) detect the format too. */
	assert_int_equal(unlink(out), 0);
	assert_int_equal(grist_convert(inputs, 1, out, NULL, NULL), 0);
	free(got);
	got = records_of(out, &n);
	assert_string_equal(got, text);
	free(got);
	free(text);
	t_rmtree(dir);
}

/* Contiguous runs, counts within one of each other, TFDS names; more shards than records gives empty ones. */
static void test_shards(void **state)
{
	char *dir = t_mkdtemp(), *text, name[4096];
	const char *in = t_path(dir, "data.txt"), *out = t_path(dir, "out.ar");
	struct grist_convert_options o;
	uint64_t s, n, want[] = { 4, 3, 3 };
	size_t used = 0;

	(void)state;
	text = write_lines(in, 10);
	grist_convert_options_init(&o);
	o.shards = 3;
	assert_int_equal(convert1(in, out, &o), 0);
	assert_int_equal(t_count_entries(dir), 4);
	for (s = 0; s < 3; s++) {
		char *got;

		assert_int_equal(grist_convert_shard_name(out, s, 3, name, sizeof(name)), (int)strlen(out) + 15);
		assert_non_null(strstr(name, s == 0 ? "-00000-of-00003" : s == 1 ? "-00001-of-00003" : "-00002-of-00003"));
		got = records_of(name, &n);
		assert_int_equal(n, want[s]);
		assert_memory_equal(got, text + used, strlen(got));
		used += strlen(got);
		free(got);
	}
	assert_int_equal(used, strlen(text));
	o.shards = 12;
	assert_int_equal(convert1(in, t_path(dir, "many"), &o), 0);
	assert_true(grist_convert_shard_name(t_path(dir, "many"), 11, 12, name, sizeof(name)) > 0);
	free(records_of(name, &n));
	assert_int_equal(n, 0);
	assert_int_equal(grist_convert_shard_name(out, 3, 3, name, sizeof(name)), -EINVAL);
	assert_int_equal(grist_convert_shard_name(out, 0, 1, name, sizeof(name)), (int)strlen(out));
	assert_string_equal(name, out);
	o.shards = GRIST_CONVERT_SHARDS_MAX + 1;
	assert_int_equal(convert1(in, t_path(dir, "x"), &o), -EINVAL);
	free(text);
	t_rmtree(dir);
}

/* TFRecord plain and GZIP (the golden files from the pip tfrecord writer) give the same records. */
static void test_tfrecord_plain_and_gzip(void **state)
{
	char *dir = t_mkdtemp(), *a, *b;
	const char *plain = t_data("tfrecord/small.tfrecord"), *gz = t_data("tfrecord/small.tfrecord.gz");
	const char *inputs[] = { t_data("tfrecord/part-0.tfrecord"), t_data("tfrecord/part-1.tfrecord.gz") };
	struct grist_convert_options o;
	enum grist_convert_format f;
	uint64_t n, m;

	(void)state;
	assert_int_equal(grist_convert_detect(plain, &f), 0);
	assert_int_equal(f, GRIST_CONVERT_TFRECORD);
	assert_int_equal(grist_convert_detect(gz, &f), 0);
	assert_int_equal(f, GRIST_CONVERT_TFRECORD);
	assert_int_equal(convert1(plain, t_path(dir, "a.ar"), NULL), 0);
	grist_convert_options_init(&o);
	o.format = GRIST_CONVERT_TFRECORD;
	o.no_check = true;
	assert_int_equal(convert1(gz, t_path(dir, "b.ar"), &o), 0);
	a = records_of(t_path(dir, "a.ar"), &n);
	b = records_of(t_path(dir, "b.ar"), &m);
	assert_int_equal(n, 60);
	assert_int_equal(m, 60);
	assert_string_equal(a, b);
	free(a);
	free(b);
	/* Several inputs, plain and GZIP mixed, in order. */
	assert_int_equal(grist_convert(inputs, 2, t_path(dir, "c.ar"), NULL, NULL), 0);
	free(records_of(t_path(dir, "c.ar"), &n));
	assert_int_equal(n, 25 + 17);
	t_rmtree(dir);
}

/* A folder: one record per regular file, bytewise order of relative path; then re-encoded as ArrayRecord. */
static void test_dir_and_arrayrecord(void **state)
{
	char *dir = t_mkdtemp(), *got, *again, sub[4096];
	const char *in = t_path(dir, "in");
	struct grist_convert_options o;
	enum grist_convert_format f;
	uint64_t n;

	(void)state;
	assert_int_equal(mkdir(in, 0755), 0);
	snprintf(sub, sizeof(sub), "%s/b", in);
	assert_int_equal(mkdir(sub, 0755), 0);
	assert_int_equal(t_write_file(t_path(in, "c"), "third", 5), 0);
	assert_int_equal(t_write_file(t_path(in, "a"), "first", 5), 0);
	assert_int_equal(t_write_file(t_path(sub, "x"), "second", 6), 0);
	assert_int_equal(grist_convert_detect(in, &f), 0);
	assert_int_equal(f, GRIST_CONVERT_DIR);
	assert_int_equal(convert1(in, t_path(dir, "d.ar"), NULL), 0);
	got = records_of(t_path(dir, "d.ar"), &n);
	assert_string_equal(got, "first\nsecond\nthird\n");
	grist_convert_options_init(&o);
	o.writer_options = "uncompressed,group_size:2";
	assert_int_equal(grist_convert_detect(t_path(dir, "d.ar"), &f), 0);
	assert_int_equal(f, GRIST_CONVERT_ARRAYRECORD);
	assert_int_equal(convert1(t_path(dir, "d.ar"), t_path(dir, "e.ar"), &o), 0);
	again = records_of(t_path(dir, "e.ar"), &n);
	assert_string_equal(again, got);
	free(got);
	free(again);
	t_rmtree(dir);
}

static void test_format_names(void **state)
{
	enum grist_convert_format f;

	(void)state;
	assert_int_equal(grist_convert_format_parse("lines", &f), 0);
	assert_int_equal(f, GRIST_CONVERT_LINES);
	assert_int_equal(grist_convert_format_parse("arrayrecord", &f), 0);
	assert_string_equal(grist_convert_format_name(f), "arrayrecord");
	assert_int_equal(grist_convert_format_parse("csv", &f), 0);
	assert_int_equal(f, GRIST_CONVERT_CSV);
	assert_int_equal(grist_convert_format_parse("imagefolder", &f), 0);
	assert_string_equal(grist_convert_format_name(f), "imagefolder");
	assert_int_equal(grist_convert_format_parse("parquet", &f), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "csv"));
	assert_null(grist_convert_format_name((enum grist_convert_format)99));
}

/* What a progress callback saw, and when it cancels. */
struct watch {
	unsigned calls, done_calls;
	uint64_t last_records;
	uint64_t cancel_at;      /* cancel once this many records are written (UINT64_MAX: never) */
	bool cancel_first;       /* cancel at the first call */
	bool cancel_before_commit; /* cancel at the call after every input was read */
	bool monotonic;
	char *dir;               /* checked on every call: the output folder holds only temporaries */
};

static int watch_progress(const struct grist_convert_progress *p, void *arg)
{
	struct watch *w = arg;

	assert_int_equal(p->size, sizeof(*p));
	w->calls++;
	if (p->records < w->last_records)
		w->monotonic = false;
	w->last_records = p->records;
	if (p->done) {
		w->done_calls++;
		return 1; /* ignored: the outputs are in place */
	}
	if (w->cancel_first)
		return 1;
	if (w->cancel_before_commit && p->input == 1 && !p->counting)
		return 1;
	return p->records >= w->cancel_at;
}

/* Only the inputs are left: no output, no shard, no temporary. */
static void assert_only_inputs(const char *dir, unsigned inputs)
{
	assert_int_equal(t_count_entries(dir), inputs);
}

static void test_progress_and_cancel(void **state)
{
	char *dir = t_mkdtemp(), *text;
	const char *in = t_path(dir, "data.txt"), *out = t_path(dir, "out.ar");
	struct grist_convert_options o;
	struct watch w = { .cancel_at = UINT64_MAX, .monotonic = true };
	uint64_t shards[] = { 1, 3 };
	size_t k;

	(void)state;
	text = write_lines(in, 20000);
	grist_convert_options_init(&o);
	o.progress = watch_progress;
	o.progress_arg = &w;
	o.progress_interval = 1e-9; /* every check: each PROGRESS_EVERY records */
	assert_int_equal(convert1(in, out, &o), 0);
	assert_int_equal(w.done_calls, 1);
	assert_true(w.monotonic);
	assert_int_equal(w.last_records, 20000);
	assert_true(w.calls > 100);
	assert_int_equal(unlink(out), 0);
	for (k = 0; k < 2; k++) {
		o.shards = shards[k];
		/* At the first call, before anything is read. */
		w = (struct watch){ .cancel_at = UINT64_MAX, .cancel_first = true, .monotonic = true };
		assert_int_equal(convert1(in, out, &o), -ECANCELED);
		assert_only_inputs(dir, 1);
		/* Halfway through the records. */
		w = (struct watch){ .cancel_at = 5000, .monotonic = true };
		assert_int_equal(convert1(in, out, &o), -ECANCELED);
		assert_non_null(strstr(grist_last_error(), "cancel"));
		assert_int_equal(w.done_calls, 0);
		assert_true(w.last_records >= 5000 && w.last_records < 20000);
		assert_only_inputs(dir, 1);
		/* After the last record, before the outputs are renamed into place. */
		w = (struct watch){ .cancel_at = UINT64_MAX, .cancel_before_commit = true, .monotonic = true };
		assert_int_equal(convert1(in, out, &o), -ECANCELED);
		assert_int_equal(w.last_records, 20000);
		assert_only_inputs(dir, 1);
	}
	/* A huge interval: only the calls before each input, before the commit and when done. */
	w = (struct watch){ .cancel_at = UINT64_MAX, .monotonic = true };
	o.shards = 1;
	o.progress_interval = 1e9;
	assert_int_equal(convert1(in, out, &o), 0);
	assert_int_equal(w.calls, 3);
	assert_int_equal(o.progress_interval, 1e9); /* the caller's struct is never written */
	free(text);
	t_rmtree(dir);
}

/* A damaged second input fails the whole conversion: nothing at any output name, no temporary. */
static void test_failure_leaves_nothing(void **state)
{
	char *dir = t_mkdtemp();
	const char *good = t_path(dir, "good.tfrecord"), *bad = t_path(dir, "bad.tfrecord");
	const char *out = t_path(dir, "out.ar");
	const char *inputs[] = { good, bad };
	struct grist_convert_options o;
	uint8_t *bytes;
	size_t len;
	uint64_t shards[] = { 1, 2 };
	size_t k;

	(void)state;
	bytes = t_read_file(t_data("tfrecord/small.tfrecord"), &len);
	assert_non_null(bytes);
	assert_int_equal(t_write_file(good, bytes, len), 0);
	bytes[len - 10] ^= 0x40; /* inside the last record's data: its data CRC fails */
	assert_int_equal(t_write_file(bad, bytes, len), 0);
	free(bytes);
	grist_convert_options_init(&o);
	for (k = 0; k < 2; k++) {
		o.shards = shards[k];
		assert_int_equal(grist_convert(inputs, 2, out, &o, NULL), -EBADMSG);
		assert_non_null(strstr(grist_last_error(), bad));
		assert_only_inputs(dir, 2);
	}
	/* An existing file at the output name is left as it was. */
	assert_int_equal(t_write_file(out, "keep", 4), 0);
	o.shards = 1;
	assert_int_equal(grist_convert(inputs, 2, out, &o, NULL), -EBADMSG);
	bytes = t_read_file(out, &len);
	assert_int_equal(len, 4);
	assert_memory_equal(bytes, "keep", 4);
	free(bytes);
	/* A missing input, a folder given as a file. */
	inputs[1] = t_path(dir, "missing");
	assert_int_equal(grist_convert(inputs, 2, t_path(dir, "o2"), &o, NULL), -ENOENT);
	o.format = GRIST_CONVERT_TFRECORD;
	assert_int_equal(convert1(dir, t_path(dir, "o3"), &o), -EISDIR);
	assert_only_inputs(dir, 3);
	t_rmtree(dir);
}

/*
 * The defect: `grist convert --from lines data.txt data.txt` replaced its input with its
 * own output. An output that is an input by any name is refused before anything is written.
 */
static void test_output_is_input_refused(void **state)
{
	char *dir = t_mkdtemp(), *text, name[4096];
	const char *in = t_path(dir, "data.txt");
	struct grist_convert_options o;
	const char *outs[3];
	size_t len, k;
	uint8_t *now;

	(void)state;
	text = write_lines(in, 100);
	assert_int_equal(link(in, t_path(dir, "hard")), 0);
	assert_int_equal(symlink("data.txt", t_path(dir, "soft")), 0);
	snprintf(name, sizeof(name), "%s", t_path(dir, "o-00001-of-00002"));
	assert_int_equal(symlink("data.txt", name), 0);
	outs[0] = in;
	outs[1] = t_path(dir, "hard");
	outs[2] = t_path(dir, "soft");
	grist_convert_options_init(&o);
	o.format = GRIST_CONVERT_LINES;
	for (k = 0; k < 3; k++) {
		assert_int_equal(convert1(in, outs[k], &o), -EINVAL);
		assert_non_null(strstr(grist_last_error(), "the output is the input"));
	}
	/* Through the symlink as the input, the real file as the output. */
	assert_int_equal(convert1(t_path(dir, "soft"), in, &o), -EINVAL);
	/* A shard name. */
	o.shards = 2;
	assert_int_equal(convert1(in, t_path(dir, "o"), &o), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "o-00001-of-00002"));
	now = t_read_file(in, &len);
	assert_int_equal(len, strlen(text));
	assert_memory_equal(now, text, len);
	free(now);
	assert_int_equal(t_count_entries(dir), 4);
	/* An output inside a folder input. */
	o.shards = 1;
	o.format = GRIST_CONVERT_AUTO;
	assert_int_equal(convert1(dir, t_path(dir, "inside.ar"), &o), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "inside the input folder"));
	assert_int_equal(t_count_entries(dir), 4);
	free(text);
	t_rmtree(dir);
}

/* The sized struct: an older, shorter struct works; an uninitialised one or unknown tail bytes are refused. */
static void test_sized_options(void **state)
{
	char *dir = t_mkdtemp(), *text;
	const char *in = t_path(dir, "data.txt");
	struct {
		struct grist_convert_options o;
		uint64_t future;
	} big;
	struct grist_convert_options o;
	struct grist_convert_stats st;

	(void)state;
	text = write_lines(in, 10);
	grist_convert_options_init(&o);
	assert_int_equal(o.size, sizeof(o));
	o.size = 0;
	assert_int_equal(convert1(in, t_path(dir, "a"), &o), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "grist_convert_options_init"));
	/* A caller built when the struct ended after shards: the rest reads as defaults. */
	memset(&o, 0xab, sizeof(o));
	o.size = offsetof(struct grist_convert_options, no_check);
	o.format = GRIST_CONVERT_LINES;
	o.writer_options = "zstd:1";
	o.shards = 2;
	assert_int_equal(convert1(in, t_path(dir, "b"), &o), 0);
	assert_int_equal(t_count_entries(dir), 3);
	/* A newer caller's extra field: zero is fine, anything else is refused. */
	memset(&big, 0, sizeof(big));
	grist_convert_options_init(&big.o);
	big.o.size = sizeof(big);
	assert_int_equal(convert1(in, t_path(dir, "c"), &big.o), 0);
	big.future = 1;
	assert_int_equal(convert1(in, t_path(dir, "d"), &big.o), -E2BIG);
	/* Stats into an older, shorter struct: only what fits is written. */
	memset(&st, 0xcd, sizeof(st));
	st.size = offsetof(struct grist_convert_stats, bytes);
	{
		const char *inputs[] = { in };

		assert_int_equal(grist_convert(inputs, 1, t_path(dir, "e"), NULL, &st), 0);
	}
	assert_int_equal(st.records, 10);
	assert_int_equal(st.bytes, 0xcdcdcdcdcdcdcdcdull);
	/* Bad requests. */
	grist_convert_options_init(&o);
	o.writer_options = "group_size:0";
	assert_int_equal(convert1(in, t_path(dir, "f"), &o), -EINVAL);
	assert_int_equal(grist_convert(NULL, 0, t_path(dir, "f"), NULL, NULL), -EINVAL);
	assert_int_equal(convert1(in, "", NULL), -EINVAL);
	free(text);
	t_rmtree(dir);
}

/* Inputs of two formats need the format named; a binary file is not told. */
static void test_detection_errors(void **state)
{
	char *dir = t_mkdtemp();
	const char *inputs[] = { NULL, t_data("tfrecord/small.tfrecord") };
	uint8_t bin[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bin); i++)
		bin[i] = (uint8_t)i;
	assert_int_equal(t_write_file(t_path(dir, "t.txt"), "hello\n", 6), 0);
	assert_int_equal(t_write_file(t_path(dir, "b.bin"), bin, sizeof(bin)), 0);
	inputs[0] = t_path(dir, "t.txt");
	assert_int_equal(grist_convert(inputs, 2, t_path(dir, "o"), NULL, NULL), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "lines"));
	assert_non_null(strstr(grist_last_error(), "tfrecord"));
	assert_int_equal(convert1(t_path(dir, "b.bin"), t_path(dir, "o"), NULL), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "cannot tell"));
	assert_int_equal(t_count_entries(dir), 2);
	t_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines_round_trip),
		cmocka_unit_test(test_shards),
		cmocka_unit_test(test_tfrecord_plain_and_gzip),
		cmocka_unit_test(test_dir_and_arrayrecord),
		cmocka_unit_test(test_format_names),
		cmocka_unit_test(test_progress_and_cancel),
		cmocka_unit_test(test_failure_leaves_nothing),
		cmocka_unit_test(test_output_is_input_refused),
		cmocka_unit_test(test_sized_options),
		cmocka_unit_test(test_detection_errors),
	};

	return cmocka_run_group_tests_name("convert", tests, NULL, NULL);
}
