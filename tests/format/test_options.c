/* Tests for writer options: the grammar, and the exact text the official writer stores. */
#include <errno.h>
#include <string.h>

#include "helpers.h"
#include "grist/error.h"
#include "format/options.h"

#define HEAD "group_size:1,transpose:false,pad_to_block_boundary:false,"

static void expect_text(const char *in, const char *want)
{
	struct grist_writer_options o;
	char out[256];

	assert_int_equal(grist_writer_options_parse(in, &o), 0);
	grist_writer_options_format(&o, out, sizeof(out));
	assert_string_equal(out, want);
}

/* Pairs observed with the official pip writer (writer_options_string() after writing). */
static void test_official_texts(void **state)
{
	(void)state;
	expect_text(NULL, HEAD "zstd:3,window_log:20,max_parallelism:1");
	expect_text("", HEAD "zstd:3,window_log:20,max_parallelism:1");
	expect_text("default", HEAD "zstd:3,window_log:20,max_parallelism:1");
	expect_text("brotli", HEAD "brotli:6,max_parallelism:1");
	expect_text("zstd:1,window_log:25", HEAD "zstd:1,window_log:25,max_parallelism:1");
	expect_text("uncompressed", HEAD "uncompressed,max_parallelism:1");
	expect_text("snappy", HEAD "snappy,max_parallelism:1");
	expect_text("snappy:2", HEAD "snappy,max_parallelism:1");
	expect_text("group_size:16,uncompressed",
		    "group_size:16,transpose:false,pad_to_block_boundary:false,uncompressed,max_parallelism:1");
	expect_text("pad_to_block_boundary:true,uncompressed",
		    "group_size:1,transpose:false,pad_to_block_boundary:true,uncompressed,max_parallelism:1");
	expect_text("max_parallelism:4", HEAD "zstd:3,window_log:20,max_parallelism:1");
	expect_text("max_parallelism:auto", HEAD "zstd:3,window_log:20,max_parallelism:1");
	expect_text("brotli:3,window_log:25", HEAD "brotli:3,window_log:25,max_parallelism:1");
	expect_text("brotli,window_log:auto", HEAD "brotli:6,max_parallelism:1");
	expect_text("window_log:auto", HEAD "zstd:3,window_log:20,max_parallelism:1");
	expect_text("group_size:5,pad_to_block_boundary,zstd:-5",
		    "group_size:5,transpose:false,pad_to_block_boundary:false,zstd:-5,window_log:20,max_parallelism:1");
	expect_text(",uncompressed,", HEAD "uncompressed,max_parallelism:1");
	expect_text("zstd:+3", HEAD "zstd:3,window_log:20,max_parallelism:1");
	expect_text("group_size:010", "group_size:10,transpose:false,pad_to_block_boundary:false,zstd:3,window_log:20,max_parallelism:1");
	expect_text("transpose:false,transpose_bucket_size:100,saturation_delay_ms:5",
		    HEAD "zstd:3,window_log:20,max_parallelism:1");
	expect_text("default,zstd", HEAD "zstd:3,window_log:20,max_parallelism:1");
	expect_text("window_log:31", HEAD "zstd:3,window_log:31,max_parallelism:1");
}

static void test_rejected(void **state)
{
	static const char *const bad[] = {
		"group_size:0", "group_size:2147483648", "group_size:x", "group_size", "zstd:23",
		"zstd:-131073", "brotli:12", "window_log:9", "window_log:32", "zstd,snappy",
		"snappy,window_log:18", "uncompressed,window_log:18", "group_size:1,group_size:2",
		" group_size:3", "max_parallelism:0", "pad_to_block_boundary:yes", "uncompressed:1",
		"default:1", "bogus", "snappy:3", "snappy:0", "uncompressed:1",
	};
	struct grist_writer_options o;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(grist_writer_options_parse(bad[i], &o), -EINVAL);
		assert_true(strlen(grist_last_error()) > 0);
	}
	assert_int_equal(grist_writer_options_parse("transpose:true", &o), -EINVAL);
	assert_int_equal(grist_writer_options_parse("transpose", &o), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "transpose"));
}

static void test_values(void **state)
{
	struct grist_writer_options o;

	(void)state;
	assert_int_equal(grist_writer_options_parse("brotli:11,window_log:30,group_size:65536,pad_to_block_boundary:true", &o), 0);
	assert_int_equal(o.compression, 'b');
	assert_int_equal(o.level, 11);
	assert_int_equal(o.window_log, 30);
	assert_int_equal(o.group_size, 65536);
	assert_true(o.pad_to_block_boundary);
}

/* max_parallelism sets the writer's threads, clamped; the stored text is unaffected (checked above). */
static void test_parallelism(void **state)
{
	struct grist_writer_options o;

	(void)state;
	assert_int_equal(grist_writer_options_parse(NULL, &o), 0);
	assert_int_equal(o.max_parallelism, 1);
	assert_int_equal(grist_writer_options_parse("max_parallelism:4,zstd", &o), 0);
	assert_int_equal(o.max_parallelism, 4);
	assert_int_equal(grist_writer_options_parse("max_parallelism:+2", &o), 0);
	assert_int_equal(o.max_parallelism, 2);
	assert_int_equal(grist_writer_options_parse("max_parallelism:auto", &o), 0);
	assert_true(o.max_parallelism >= 1 && o.max_parallelism <= GRIST_WRITER_MAX_PARALLELISM);
	assert_int_equal(grist_writer_options_parse("max_parallelism:2147483647", &o), 0);
	assert_int_equal(o.max_parallelism, GRIST_WRITER_MAX_PARALLELISM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_official_texts),
		cmocka_unit_test(test_rejected),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_parallelism),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
