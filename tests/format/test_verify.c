/* Tests for whole-file verification and the format verbs of the CLI (info, cat, get, verify, write). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "grist/format.h"

static const char *cli(void)
{
	const char *p = getenv("GRIST_CLI");

	return p && *p ? p : "grist";
}

static void test_verify_api(void **state)
{
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "v.ar");
	struct grist_verify_report rep;
	struct grist_writer *w;
	uint8_t rec[3000], *all;
	size_t i, len;

	(void)state;
	t_fill(rec, sizeof(rec), 1);
	assert_int_equal(grist_writer_open(path, "group_size:5,pad_to_block_boundary:true,snappy", &w), 0);
	for (i = 0; i < 52; i++)
		assert_int_equal(grist_writer_write(w, rec, i * 50), 0);
	assert_int_equal(grist_writer_close(w), 0);
	assert_int_equal(grist_file_verify(path, &rep), 0);
	assert_int_equal(rep.num_records, 52);
	assert_int_equal(rep.data_chunks, 11);
	assert_int_equal(rep.padding_chunks, 13);
	assert_int_equal(rep.decoded_bytes, 50 * 51 * 52 / 2);
	/* A flip in padding that random reads never touch is still found. */
	all = t_read_file(path, &len);
	assert_non_null(all);
	all[len - 100] ^= 1;
	assert_int_equal(t_write_file(path, all, len), 0);
	assert_int_equal(grist_file_verify(path, &rep), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "v.ar: byte "));
	free(all);
	t_rmtree(dir);
}

static void test_cli(void **state)
{
	char *dir = t_mkdtemp();
	const char *a = t_path(dir, "a.ar"), *b = t_path(dir, "b.ar");
	char *out = NULL;
	int st;

	(void)state;
	st = t_run(&out, "printf 'one\\ntwo\\n\\nfour' | %s write --options group_size:2,uncompressed %s", cli(), a);
	assert_int_equal(st, 0);
	free(out);
	st = t_run(&out, "printf '00ff\\n\\n41' | %s write --hex %s", cli(), b);
	assert_int_equal(st, 0);
	free(out);
	st = t_run(&out, "%s cat %s", cli(), a);
	assert_int_equal(st, 0);
	assert_string_equal(out, "onetwofour");
	free(out);
	st = t_run(&out, "%s cat --hex %s %s", cli(), a, b);
	assert_int_equal(st, 0);
	assert_string_equal(out, "6f6e65\n74776f\n\n666f7572\n00ff\n\n41\n");
	free(out);
	st = t_run(&out, "%s get --hex %s %s -- 5 0 4", cli(), a, b);
	assert_int_equal(st, 0);
	assert_string_equal(out, "\n6f6e65\n00ff\n");
	free(out);
	st = t_run(&out, "%s get %s -- 4 2>&1", cli(), a);
	assert_int_equal(st, 1);
	assert_non_null(strstr(out, "4"));
	free(out);
	st = t_run(&out, "%s info %s %s", cli(), a, b);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "\nrecords: 7\n"));
	assert_non_null(strstr(out, "group_size:2,transpose:false,pad_to_block_boundary:false,uncompressed,max_parallelism:1"));
	free(out);
	st = t_run(&out, "%s verify %s %s", cli(), a, b);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "ok: 4 records"));
	free(out);
	/* Usage errors exit 2; bad hex names the line and exits 1; damaged files exit 1. */
	st = t_run(&out, "%s cat 2>/dev/null", cli());
	assert_int_equal(st, 2);
	free(out);
	st = t_run(&out, "%s write --options bogus %s 2>/dev/null </dev/null", cli(), b);
	assert_int_equal(st, 2);
	free(out);
	st = t_run(&out, "printf 'ab\\nabc\\n' | %s write --hex %s 2>&1", cli(), t_path(dir, "c.ar"));
	assert_int_equal(st, 1);
	assert_non_null(strstr(out, "line 2"));
	free(out);
	st = t_run(&out, "%s verify %s 2>&1", cli(), t_path(dir, "c.ar"));
	assert_int_equal(st, 1);
	free(out);
	st = t_run(&out, "head -c 70000 %s > %s && %s verify %s 2>&1", a, t_path(dir, "d.ar"), cli(), t_path(dir, "d.ar"));
	assert_int_equal(st, 1);
	assert_non_null(strstr(out, "d.ar: byte "));
	free(out);
	st = t_run(&out, "%s info --help", cli());
	assert_int_equal(st, 0);
	free(out);
	t_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verify_api),
		cmocka_unit_test(test_cli),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
