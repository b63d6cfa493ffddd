/*
 * Content-Range and delta-seconds (RFC 9110 sections 14.4 and 10.2.3): the forms a server
 * may send, every way a value can be wrong, and where large numbers stop.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "io/http_fields.h"

static struct grist_http_content_range cr_ok(const char *v)
{
	struct grist_http_content_range cr;

	memset(&cr, 0xa5, sizeof(cr));
	if (grist_http_content_range_parse(v, &cr))
		fail_msg("refused \"%s\"", v);
	return cr;
}

static void content_range_forms(void **state)
{
	struct grist_http_content_range cr;

	(void)state;
	cr = cr_ok("bytes 0-99/1000");
	assert_true(cr.first == 0 && cr.last == 99 && cr.complete == 1000);
	assert_false(cr.unsatisfied);
	assert_false(cr.complete_unknown);
	/* the last byte of the object, and a one-byte object */
	cr = cr_ok("bytes 999-999/1000");
	assert_true(cr.first == 999 && cr.last == 999 && cr.complete == 1000);
	cr = cr_ok("bytes 0-0/1");
	assert_true(cr.first == 0 && cr.last == 0 && cr.complete == 1);
	/* the unit is case-insensitive; spaces and tabs around the value are not part of it */
	cr = cr_ok("BYTES 1-2/3");
	assert_true(cr.first == 1 && cr.last == 2 && cr.complete == 3);
	cr = cr_ok(" \tBytes 5-9/10\t ");
	assert_true(cr.first == 5 && cr.last == 9 && cr.complete == 10);
	/* leading zeros are digits like any other */
	cr = cr_ok("bytes 007-010/0100");
	assert_true(cr.first == 7 && cr.last == 10 && cr.complete == 100);
	/* the length unknown */
	cr = cr_ok("bytes 0-99/*");
	assert_true(cr.first == 0 && cr.last == 99 && cr.complete == 0 && cr.complete_unknown);
	assert_false(cr.unsatisfied);
	/* unsatisfied: a 416's answer, with the length and no range */
	cr = cr_ok("bytes */1000");
	assert_true(cr.unsatisfied && cr.complete == 1000 && cr.first == 0 && cr.last == 0);
	assert_false(cr.complete_unknown);
	cr = cr_ok("bytes */0");
	assert_true(cr.unsatisfied && cr.complete == 0);
	/* the largest numbers allowed: INT64_MAX */
	cr = cr_ok("bytes 9223372036854775805-9223372036854775806/9223372036854775807");
	assert_true(cr.first == INT64_MAX - 2 && cr.last == INT64_MAX - 1 && cr.complete == INT64_MAX);
	cr = cr_ok("bytes 0-9223372036854775807/*");
	assert_true(cr.last == INT64_MAX && cr.complete_unknown);
	cr = cr_ok("bytes */9223372036854775807");
	assert_true(cr.unsatisfied && cr.complete == INT64_MAX);
}

static void content_range_refused(void **state)
{
	static const char *const bad[] = {
		"",
		" ",
		"0-99/1000",                /* no unit */
		"bytes",
		"bytes ",
		"bytes=0-1/2",              /* the request's Range syntax, not the answer's */
		"bytes  0-99/1000",         /* one SP after the unit, no more */
		"bytes\t0-99/1000",
		"items 0-99/1000",
		"bytesx 0-99/1000",
		"bytes -1-99/1000",         /* signs: strtoull() would take them */
		"bytes 0--99/1000",
		"bytes 0-99/-1000",
		"bytes +0-99/1000",
		"bytes 0-+99/1000",
		"bytes 0-99/+1000",
		"bytes  -0-99/1000",
		"bytes 0- 99/1000",         /* spaces inside */
		"bytes 0 -99/1000",
		"bytes 0-99 /1000",
		"bytes 0-99/ 1000",
		"bytes 0-99/1000xyz",       /* junk after */
		"bytes 0-99/1000 x",
		"bytes 0-99/1000/",
		"bytes 0-99/1000,",
		"bytes 0-99x/1000",
		"bytes 0x0-0x63/1000",
		"bytes 0-99",               /* parts missing */
		"bytes 0-/1000",
		"bytes -99/1000",
		"bytes 0/1000",
		"bytes 0-99/",
		"bytes */",
		"bytes */*",                /* neither a range nor a length */
		"bytes *-99/1000",
		"bytes 0-*/1000",
		"bytes 100-99/1000",        /* first > last */
		"bytes 0-1000/1000",        /* last >= length */
		"bytes 0-1001/1000",
		"bytes 0-0/0",
		"bytes 9223372036854775808-9223372036854775808/*",   /* 2^63 */
		"bytes 0-9223372036854775808/*",
		"bytes 0-99/9223372036854775808",
		"bytes */9223372036854775808",
		"bytes 0-99/18446744073709551616",                    /* 2^64: wraps to 0 */
		"bytes 0-18446744073709551615/*",                     /* 2^64 - 1 */
		"bytes 18446744073709551616-18446744073709551617/*",
		"bytes 0-99/99999999999999999999999999",
	};
	struct grist_http_content_range cr;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&cr, 0xa5, sizeof(cr));
		if (grist_http_content_range_parse(bad[i], &cr) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
		/* nothing written on a refusal */
		for (size_t k = 0; k < sizeof(cr); k++)
			assert_int_equal(((const unsigned char *)&cr)[k], 0xa5);
	}
}

static uint64_t ds_ok(const char *v)
{
	uint64_t s = 12345;

	if (grist_http_delta_seconds_parse(v, &s))
		fail_msg("refused \"%s\"", v);
	return s;
}

static void delta_seconds(void **state)
{
	(void)state;
	assert_int_equal(ds_ok("0"), 0);
	assert_int_equal(ds_ok("120"), 120);
	assert_int_equal(ds_ok(" \t120\t "), 120);
	assert_int_equal(ds_ok("000120"), 120);
	/* up to the cap read as sent, past it the cap (RFC 9111 section 1.2.2) */
	assert_int_equal(ds_ok("2147483647"), 2147483647ull);
	assert_int_equal(ds_ok("2147483648"), GRIST_HTTP_DELTA_SECONDS_MAX);
	assert_int_equal(ds_ok("2147483649"), GRIST_HTTP_DELTA_SECONDS_MAX);
	assert_int_equal(ds_ok("21474836480"), GRIST_HTTP_DELTA_SECONDS_MAX);
	assert_int_equal(ds_ok("9223372036854775807"), GRIST_HTTP_DELTA_SECONDS_MAX);
	assert_int_equal(ds_ok("18446744073709551616"), GRIST_HTTP_DELTA_SECONDS_MAX);
	assert_int_equal(ds_ok("99999999999999999999999999999999999999"), GRIST_HTTP_DELTA_SECONDS_MAX);
	assert_int_equal(GRIST_HTTP_DELTA_SECONDS_MAX, 1ull << 31);
}

static void delta_seconds_refused(void **state)
{
	static const char *const bad[] = {
		"", " ", "-5", "+5", "- 5", "120abc", "120 s", "12 0", "1.5", "0x10", "abc",
		"Wed, 21 Oct 2015 07:28:00 GMT", /* an HTTP-date: the other form, not this parser's */
		"99999999999999999999999x",       /* junk after a long number is still junk */
	};
	uint64_t s;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s = 12345;
		if (grist_http_delta_seconds_parse(bad[i], &s) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_int_equal(s, 12345);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(content_range_forms),
		cmocka_unit_test(content_range_refused),
		cmocka_unit_test(delta_seconds),
		cmocka_unit_test(delta_seconds_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
