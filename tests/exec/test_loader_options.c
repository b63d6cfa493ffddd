/* The loader's option table (grist/options.h): sizes, names, bounds, and the fields they set. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "grist/options.h"
#include "grist/remote.h"
#include "helpers.h"

static void test_sizes(void **state)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} good[] = {
		{ "0", 0 }, { "4096", 4096 }, { "4K", 4096 }, { "4k", 4096 }, { "4KiB", 4096 }, { "4M", 4u << 20 },
		{ "4MiB", 4u << 20 }, { "3G", (uint64_t)3 << 30 }, { "2TiB", (uint64_t)2 << 40 },
		{ "16777215T", (uint64_t)16777215 << 40 },
	};
	static const char *const bad[] = { "", "K", "4KB", "4kb", "4 M", "-1", "4.5M", "4Mi", "4MiBs", "16777216T",
					   "18446744073709551616", "0x10", "4P" };
	uint64_t v;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(grist_parse_size(good[i].text, &v), 0);
		assert_true(v == good[i].bytes);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(grist_parse_size(bad[i], &v), -EINVAL);
}

static void test_table_walk_and_find(void **state)
{
	const struct grist_option *o;
	size_t i;

	(void)state;
	for (i = 0; (o = grist_loader_option_at(i)); i++) {
		assert_non_null(o->name);
		assert_non_null(o->help);
		assert_non_null(o->default_value);
		assert_ptr_equal(grist_loader_option_find(o->name), o);
		if (o->type == GRIST_OPTION_UINT || o->type == GRIST_OPTION_SIZE)
			assert_true(o->min <= o->max);
		if (o->type == GRIST_OPTION_CHOICE || o->type == GRIST_OPTION_TEXT)
			assert_non_null(o->choices);
	}
	assert_true(i >= 25);
	assert_ptr_equal(grist_loader_option_find("queue-depth"), grist_loader_option_find("queue_depth"));
	assert_null(grist_loader_option_find("queue"));
	o = grist_loader_option_find("queue_depth");
	assert_int_equal(o->min, 1);
	assert_int_equal(o->max, 32768);
}

static void test_set_fields(void **state)
{
	struct grist_loader_config c, before;

	(void)state;
	grist_loader_config_init(&c);
	assert_int_equal(grist_loader_config_set(&c, "read_ahead", "4M"), 0);
	assert_int_equal(c.read_ahead_bytes, 4u << 20);
	assert_int_equal(grist_loader_config_set(&c, "queue-depth", "32768"), 0);
	assert_int_equal(c.queue_depth, 32768);
	assert_int_equal(grist_loader_config_set(&c, "shuffle", "off"), 0);
	assert_true(c.no_shuffle);
	assert_int_equal(grist_loader_config_set(&c, "shard", "3/8"), 0);
	assert_true(c.shard_index == 3 && c.shard_count == 8);
	assert_int_equal(grist_loader_config_set(&c, "layout", "padded:1K"), 0);
	assert_true(c.layout == GRIST_LAYOUT_PADDED && c.record_bytes == 1024);
	assert_int_equal(grist_loader_config_set(&c, "pack", "first-fit:2048:16"), 0);
	assert_true(c.pack == GRIST_PACK_FIRST_FIT && c.pack_length == 2048 && c.pack_bins == 16);
	assert_int_equal(grist_loader_config_set(&c, "io", "mmap"), 0);
	assert_int_equal(c.read_mode, GRIST_READ_MMAP);
	assert_int_equal(grist_loader_config_set(&c, "token_bytes", "4"), 0);
	assert_int_equal(c.pack_token_bytes, 4);
	/* pack_bos: any id, 0 among them, turns the replacement on */
	assert_false(c.pack_bos);
	assert_int_equal(grist_loader_config_set(&c, "pack-bos", "0"), 0);
	assert_true(c.pack_bos && c.pack_bos_id == 0);
	assert_int_equal(grist_loader_config_set(&c, "pack_bos", "4294967295"), 0);
	assert_true(c.pack_bos && c.pack_bos_id == UINT32_MAX);
	/* assembly_bytes: a size, from one byte (the engine keeps at least one slot) */
	assert_int_equal(grist_loader_config_set(&c, "assembly-bytes", "8MiB"), 0);
	assert_int_equal(c.assembly_bytes, 8u << 20);

	/* a refused value leaves the struct as it was, and the message names option and range */
	before = c;
	assert_int_equal(grist_loader_config_set(&c, "queue_depth", "32769"), -EINVAL);
	assert_string_equal(grist_last_error(), "queue_depth: '32769' is not a whole number in 1..32768");
	assert_int_equal(grist_loader_config_set(&c, "read_ahead", "4KB"), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "read_ahead: '4KB' is not a size in 4KiB..1TiB"));
	assert_int_equal(grist_loader_config_set(&c, "shard", "8/8"), -EINVAL);
	assert_int_equal(grist_loader_config_set(&c, "engine", "io_uring"), -EINVAL);
	assert_string_equal(grist_last_error(), "engine: 'io_uring' is not one of uring, pread, ref");
	assert_int_equal(grist_loader_config_set(&c, "pack", "concat-split:8:2"), -EINVAL);
	assert_int_equal(grist_loader_config_set(&c, "pack_bos", "4294967296"), -EINVAL);
	assert_string_equal(grist_last_error(), "pack_bos: '4294967296' is not a whole number in 0..4294967295");
	assert_int_equal(grist_loader_config_set(&c, "assembly_bytes", "0"), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "assembly_bytes"));
	assert_int_equal(grist_loader_config_set(&c, "no_such", "1"), -EINVAL);
	assert_string_equal(grist_last_error(), "'no_such' is not a loader option");
	assert_memory_equal(&c, &before, sizeof(c));
}

/*
 * The remote grammar (--remote, GRIST_REMOTE_OPTIONS, grist_remote_options_parse()) takes
 * sizes as every other size is taken: the same suffixes accepted, the same ones refused, and
 * the loader's remote_coalesce option and the grammar agree.
 */
static void test_remote_sizes(void **state)
{
	static const char *const good[] = { "4096", "4K", "4k", "4KiB", "1M", "1MiB", "1G", "1GiB" };
	static const char *const bad[] = { "4KB", "4kb", "1.5M", "4Mi", "-1", "0x1000", "1P", "" };
	struct grist_remote_options o;
	struct grist_loader_config c;
	char text[64];
	uint64_t want;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(grist_parse_size(good[i], &want), 0);
		grist_remote_options_init(&o);
		snprintf(text, sizeof(text), "split:1GiB,coalesce:%s", good[i]);
		assert_int_equal(grist_remote_options_parse(text, &o), 0);
		assert_true(o.coalesce_bytes == want);
		grist_remote_options_init(&o);
		snprintf(text, sizeof(text), "coalesce:0,split:%s", good[i]);
		assert_int_equal(grist_remote_options_parse(text, &o), 0);
		assert_true(o.split_bytes == want);
		grist_loader_config_init(&c);
		assert_int_equal(grist_loader_config_set(&c, "remote_split", "1GiB"), 0);
		assert_int_equal(grist_loader_config_set(&c, "remote_coalesce", good[i]), 0);
		assert_true(c.remote.coalesce_bytes == want);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		grist_remote_options_init(&o);
		snprintf(text, sizeof(text), "coalesce:%s", bad[i]);
		assert_int_equal(grist_remote_options_parse(text, &o), -EINVAL);
		assert_non_null(strstr(grist_last_error(), "coalesce"));
		grist_loader_config_init(&c);
		assert_int_equal(grist_loader_config_set(&c, "remote_coalesce", bad[i]), -EINVAL);
	}
}

/*
 * split alone lowers coalesce to it ("split:64K" is not refused for the 1 MiB default
 * coalesce), and only when it is above; both given, coalesce above split is refused.
 */
static void test_remote_split_alone(void **state)
{
	struct grist_remote_options o;

	(void)state;
	grist_remote_options_init(&o);
	assert_int_equal(grist_remote_options_parse("split:64K", &o), 0);
	assert_true(o.split_bytes == 64 << 10 && o.coalesce_bytes == 64 << 10);
	grist_remote_options_init(&o);
	assert_int_equal(grist_remote_options_parse("split:16M", &o), 0);
	assert_true(o.split_bytes == 16 << 20 && o.coalesce_bytes == 1 << 20);
	grist_remote_options_init(&o);
	assert_int_equal(grist_remote_options_parse("coalesce:16K,split:64K", &o), 0);
	assert_true(o.coalesce_bytes == 16 << 10);
	grist_remote_options_init(&o);
	assert_int_equal(grist_remote_options_parse("split:64K,coalesce:128K", &o), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "above split"));
	assert_true(o.split_bytes == 8 << 20 && o.coalesce_bytes == 1 << 20); /* untouched */
	grist_remote_options_init(&o);
	assert_int_equal(grist_remote_options_parse("coalesce:16M", &o), -EINVAL); /* above the 8 MiB split */
	/* a coalesce set by an earlier call is the caller's: never lowered, in either order */
	grist_remote_options_init(&o);
	assert_int_equal(grist_remote_options_parse("split:4M", &o), 0);
	assert_int_equal(grist_remote_options_parse("coalesce:2M", &o), 0);
	assert_int_equal(grist_remote_options_parse("split:1M", &o), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "above split"));
	assert_true(o.coalesce_bytes == 2 << 20 && o.split_bytes == 4 << 20); /* untouched */
	{
		struct grist_loader_config c;

		grist_loader_config_init(&c);
		assert_int_equal(grist_loader_config_set(&c, "remote_coalesce", "2M"), 0);
		assert_int_equal(grist_loader_config_set(&c, "remote_split", "1M"), -EINVAL);
		assert_true(c.remote.coalesce_bytes == 2 << 20);
		grist_loader_config_init(&c);
		assert_int_equal(grist_loader_config_set(&c, "remote_split", "1M"), 0);
		assert_true(c.remote.coalesce_bytes == 1 << 20); /* the default, not above: kept */
		assert_int_equal(grist_loader_config_set(&c, "remote_coalesce", "2M"), -EINVAL);
	}
}

/*
 * The remote_* options' defaults that the table shows (and every front end prints from it)
 * are the values grist_remote_options_init() sets: setting each option to its shown default
 * stores the library's value.
 */
static void test_remote_defaults(void **state)
{
	struct grist_remote_options o;
	struct grist_loader_config c;
	const struct grist_option *opt;
	const struct {
		const char *name;
		size_t offset;
	} *r, rows[] = {
#define ROW(n, f) { n, offsetof(struct grist_remote_options, f) }
		ROW("remote_timeout_ms", request_timeout_ms), ROW("remote_connect_timeout_ms", connect_timeout_ms),
		ROW("remote_retries", retries), ROW("remote_backoff_ms", backoff_ms),
		ROW("remote_backoff_max_ms", backoff_max_ms), ROW("remote_coalesce", coalesce_bytes),
		ROW("remote_split", split_bytes), ROW("remote_inflight", max_inflight),
		ROW("remote_inflight_min", min_inflight),
		ROW("remote_redirects", redirects),
#undef ROW
	};
	size_t i, n = 0;

	(void)state;
	grist_remote_options_init(&o);
	for (i = 0; (opt = grist_loader_option_at(i)); i++)
		n += !strncmp(opt->name, "remote_", 7);
	assert_int_equal(n, sizeof(rows) / sizeof(rows[0])); /* a new remote option needs a row here */
	for (r = rows; r < rows + n; r++) {
		const char *lib_field = (const char *)&o + r->offset, *set_field = (const char *)&c.remote + r->offset;
		uint64_t lib, set;

		opt = grist_loader_option_find(r->name);
		assert_non_null(opt);
		grist_loader_config_init(&c);
		assert_int_equal(grist_loader_config_set(&c, r->name, opt->default_value), 0);
		if (opt->type == GRIST_OPTION_SIZE) {
			lib = *(const uint64_t *)lib_field;
			set = *(const uint64_t *)set_field;
		} else if (!strcmp(r->name, "remote_redirects")) { /* a byte in the struct's old padding */
			lib = *(const uint8_t *)lib_field;
			set = *(const uint8_t *)set_field;
		} else {
			lib = *(const unsigned *)lib_field;
			set = *(const unsigned *)set_field;
		}
		if (set != lib)
			fail_msg("%s: the table shows %s, the library's default is %llu", r->name, opt->default_value,
				 (unsigned long long)lib);
	}
}

/*
 * redirects, part and upload_inflight are bytes in the struct's old padding: parsed and
 * bounded as the others, part in whole MiB, and 0 (an older caller's zeroed padding) read
 * as each one's default by grist_remote_set_options().
 */
static void test_remote_byte_options(void **state)
{
	static const char *const bad[] = { "part:4M", "part:65M", "part:8000000", "redirects:0", "redirects:51",
					   "upload_inflight:0", "upload_inflight:33", "part:256G" };
	struct grist_remote_options o, got;
	size_t i;

	(void)state;
	grist_remote_options_init(&o);
	assert_int_equal(o.redirects, 5);
	assert_int_equal(o.part_mib, 16);
	assert_int_equal(o.upload_inflight, 4);
	assert_int_equal(grist_remote_options_parse("part:8MiB,upload_inflight:2,redirects:7", &o), 0);
	assert_int_equal(o.part_mib, 8);
	assert_int_equal(o.upload_inflight, 2);
	assert_int_equal(o.redirects, 7);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		grist_remote_options_init(&o);
		assert_int_equal(grist_remote_options_parse(bad[i], &o), -EINVAL);
		assert_int_equal(o.part_mib, 16); /* a refused text changes nothing */
	}
	/* an older caller's struct: the padding zeroed */
	grist_remote_options_init(&o);
	o.redirects = o.part_mib = o.upload_inflight = 0;
	assert_int_equal(grist_remote_set_options(&o), 0);
	grist_remote_get_options(&got);
	assert_int_equal(got.redirects, 5);
	assert_int_equal(got.part_mib, 16);
	assert_int_equal(got.upload_inflight, 4);
	assert_int_equal(grist_remote_set_options(NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_remote_split_alone),
		cmocka_unit_test(test_table_walk_and_find),
		cmocka_unit_test(test_set_fields),
		cmocka_unit_test(test_remote_sizes),
		cmocka_unit_test(test_remote_defaults),
		cmocka_unit_test(test_remote_byte_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
