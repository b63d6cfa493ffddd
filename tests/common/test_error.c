/* Tests for the error convention: codes, messages, thread-locality. */
#include <pthread.h>
#include <string.h>

#include "helpers.h"
#include "common/error.h"

static void test_fail_at_names_file_and_offset(void **state)
{
	(void)state;
	assert_int_equal(grist_fail_at(-EBADMSG, "x.ar", 65600, "chunk data hash mismatch"), -EBADMSG);
	assert_string_equal(grist_last_error(), "x.ar: byte 65600: chunk data hash mismatch");
	grist_clear_error();
	assert_string_equal(grist_last_error(), "");
}

static void test_prefix_adds_context(void **state)
{
	(void)state;
	grist_fail(-EIO, "read failed");
	assert_int_equal(grist_fail_prefix(-EIO, "record %d", 7), -EIO);
	assert_string_equal(grist_last_error(), "record 7: read failed");
}

static void test_strerror_is_total(void **state)
{
	(void)state;
	assert_string_equal(grist_strerror(-EBADMSG), "corrupt data");
	assert_string_equal(grist_strerror(0), "success");
	assert_non_null(grist_strerror(-123456));
	assert_non_null(grist_strerror(5));
	assert_true(strlen(grist_version()) >= 5);
}

static void *other_thread(void *arg)
{
	(void)arg;
	grist_fail(-EINVAL, "other thread");
	return NULL;
}

static void test_messages_are_thread_local(void **state)
{
	pthread_t t;

	(void)state;
	grist_fail(-EIO, "mine");
	assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
	pthread_join(t, NULL);
	assert_string_equal(grist_last_error(), "mine");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fail_at_names_file_and_offset),
		cmocka_unit_test(test_prefix_adds_context),
		cmocka_unit_test(test_strerror_is_total),
		cmocka_unit_test(test_messages_are_thread_local),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
