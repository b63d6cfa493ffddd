/*
 * HTTP-dates for Retry-After (RFC 9110 section 5.6.7): the three forms, the calendar's edges,
 * what is refused, and a round trip over two centuries against the C library's own clock.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "io/http_date.h"

/* 2026-11-28 00:00:00 UTC, the "now" that places RFC 850's two-digit years */
#define NOW ((time_t)1795824000)

static time_t parse_ok(const char *s)
{
	time_t t = 0;

	assert_int_equal(grist_http_date_parse(s, NOW, &t), 0);
	return t;
}

static void three_forms(void **state)
{
	(void)state;
	/* RFC 9110's own example, in each of its three forms */
	assert_int_equal(parse_ok("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
	assert_int_equal(parse_ok("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777);
	assert_int_equal(parse_ok("Sun Nov  6 08:49:37 1994"), 784111777);
	/* spaces around the value, as a header line may leave them */
	assert_int_equal(parse_ok("  Sun, 06 Nov 1994 08:49:37 GMT \t"), 784111777);
	assert_int_equal(parse_ok("Sat, 28 Nov 2026 00:00:00 GMT"), NOW);
	assert_int_equal(parse_ok("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
}

static void calendar_edges(void **state)
{
	time_t t;

	(void)state;
	assert_int_equal(parse_ok("Thu, 29 Feb 2024 12:00:00 GMT"), 1709208000);
	assert_int_equal(parse_ok("Tue, 29 Feb 2000 00:00:00 GMT"), 951782400);
	assert_int_equal(grist_http_date_parse("Wed, 29 Feb 2023 00:00:00 GMT", NOW, &t), -EINVAL);
	assert_int_equal(grist_http_date_parse("Sat, 29 Feb 2100 00:00:00 GMT", NOW, &t), -EINVAL);
	assert_int_equal(grist_http_date_parse("Thu, 31 Apr 2026 00:00:00 GMT", NOW, &t), -EINVAL);
	assert_int_equal(parse_ok("Thu, 31 Dec 2026 23:59:59 GMT"), 1798761599);
	/* a leap second is allowed by the grammar and lands on the next second */
	assert_int_equal(parse_ok("Thu, 31 Dec 2026 23:59:60 GMT"), 1798761600);
	/* RFC 850: a year more than 50 years ahead of now is last century's */
	assert_int_equal(parse_ok("Wednesday, 01-Jan-76 00:00:00 GMT"), 3345062400LL);
	assert_int_equal(parse_ok("Saturday, 01-Jan-77 00:00:00 GMT"), 220924800);
	/* "appears to be more than 50 years in the future": the timestamp, not only its year */
	assert_int_equal(parse_ok("Saturday, 28-Nov-76 00:00:00 GMT"), 3373747200LL);
	assert_int_equal(parse_ok("Sunday, 28-Nov-76 00:00:01 GMT"), 217987201);
	assert_int_equal(parse_ok("Friday, 31-Dec-76 00:00:00 GMT"), 220838400);
}

static time_t parse_at(const char *s, time_t now)
{
	time_t t = 0;

	if (grist_http_date_parse(s, now, &t))
		fail_msg("refused \"%s\"", s);
	return t;
}

/*
 * RFC 850's two-digit year at other nows: the timestamp lands in (now - 50 years, now + 50
 * years], so past the middle of a century the small years are the next century's.
 */
static void rfc850_century(void **state)
{
	const time_t y2049 = 2507328000LL; /* 2049-06-15 00:00:00 */
	const time_t y2051 = 2570400000LL; /* 2051-06-15 00:00:00 */
	const time_t y2060 = 2840140800LL; /* 2060-01-01 00:00:00 */

	(void)state;
	assert_int_equal(parse_at("Thursday, 01-Jan-99 00:00:00 GMT", y2049), 4070908800LL); /* 2099 */
	assert_int_equal(parse_at("Friday, 31-Dec-99 00:00:00 GMT", y2049), 946598400);      /* 1999 */
	assert_int_equal(parse_at("Saturday, 01-Jan-00 00:00:00 GMT", y2049), 946684800);    /* 2000 */
	/* 2000 would be 51 years ago: 2100, 49 years ahead, is the reading */
	assert_int_equal(parse_at("Friday, 01-Jan-00 00:00:00 GMT", y2051), 4102444800LL);   /* 2100 */
	assert_int_equal(parse_at("Saturday, 01-Jan-01 00:00:00 GMT", y2051), 4133980800LL); /* 2101 */
	assert_int_equal(parse_at("Monday, 31-Dec-01 00:00:00 GMT", y2051), 1009756800);     /* 2001 */
	assert_int_equal(parse_at("Thursday, 01-Jan-99 00:00:00 GMT", y2051), 4070908800LL); /* 2099 */
	assert_int_equal(parse_at("Thursday, 01-Jan-05 00:00:00 GMT", y2060), 4260211200LL); /* 2105 */
	assert_int_equal(parse_at("Friday, 01-Mar-09 00:00:00 GMT", y2060), 4391539200LL);   /* 2109 */
	/* exactly 50 years ahead is not more than 50: the future reading stands */
	assert_int_equal(parse_at("Wednesday, 01-Jan-10 00:00:00 GMT", y2060), 4417977600LL); /* 2110 */
	assert_int_equal(parse_at("Friday, 01-Jan-10 00:00:01 GMT", y2060), 1262304001);      /* 2010 */
	assert_int_equal(parse_at("Tuesday, 01-Jun-10 00:00:00 GMT", y2060), 1275350400);     /* 2010 */
	assert_int_equal(parse_at("Tuesday, 01-Jun-60 00:00:00 GMT", y2060), 2853273600LL);   /* 2060 */
}

/* For each now, every 37 hours and 13 seconds across its window reads back as itself. */
static void rfc850_window(void **state)
{
	static const int years[] = { 2026, 2049, 2050, 2051, 2060, 2099 };
	char s[64];

	(void)state;
	for (size_t i = 0; i < sizeof(years) / sizeof(years[0]); i++) {
		struct tm at = { .tm_year = years[i] - 1900, .tm_mon = 6, .tm_mday = 15, .tm_hour = 12 };
		struct tm lo_tm = at, hi_tm = at;
		time_t now = timegm(&at), lo, hi;

		lo_tm.tm_year -= 50;
		hi_tm.tm_year += 50;
		lo = timegm(&lo_tm);
		hi = timegm(&hi_tm);
		for (time_t t = lo + 1; t <= hi; t += 37 * 3600 + 13) {
			struct tm tm;
			time_t got = 0;

			gmtime_r(&t, &tm);
			strftime(s, sizeof(s), "%A, %d-%b-%y %H:%M:%S GMT", &tm);
			assert_int_equal(grist_http_date_parse(s, now, &got), 0);
			if (got != t)
				fail_msg("at %d \"%s\" read as %lld, not %lld", years[i], s, (long long)got,
					 (long long)t);
		}
		/* the window's ends: 50 years ago reads as 50 years on, which is not too far */
		gmtime_r(&hi, &hi_tm);
		strftime(s, sizeof(s), "%A, %d-%b-%y %H:%M:%S GMT", &hi_tm);
		assert_int_equal(parse_at(s, now), hi);
	}
}

static void refused(void **state)
{
	static const char *const bad[] = {
		"",
		"120",
		"Sun, 06 Nov 1994 08:49:37 UTC",   /* GMT is the only zone the grammar has */
		"sun, 06 Nov 1994 08:49:37 GMT",   /* names are case-sensitive */
		"Sun, 6 Nov 1994 08:49:37 GMT",    /* IMF-fixdate's day has two digits */
		"Sun, 06 Nov 94 08:49:37 GMT",     /* and its year four */
		"Sun, 06 Nov 1994 08:49 GMT",
		"Sun, 06 Nov 1994 24:00:00 GMT",
		"Sun, 06 Nov 1994 08:60:00 GMT",
		"Sun, 00 Nov 1994 08:49:37 GMT",
		"Sun, 06 Nov 1994 08:49:37 GMT x", /* trailing words */
		"Sun, 06 Foo 1994 08:49:37 GMT",
		"Sunday, 06-Nov-1994 08:49:37 GMT",
		"Sun Nov 6 08:49:37 1994",         /* asctime pads the day with a space */
		"Sun Nov  6 08:49:37",
	};
	time_t t = 12345;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (grist_http_date_parse(bad[i], NOW, &t) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_int_equal(t, 12345);
	}
}

/*
 * Every 37 hours and 13 seconds from 1970 to 2170, formatted by strftime() in the C locale
 * (English names, as on the wire) in each of the three forms and parsed back.
 */
static void round_trip(void **state)
{
	char s[64];
	int n = 0;

	(void)state;
	for (time_t t = 0; t < (time_t)6311433600LL; t += 37 * 3600 + 13) {
		struct tm tm;
		time_t got = 0;

		gmtime_r(&t, &tm);
		for (int form = 0; form < 3; form++) {
			/* RFC 850's two-digit years: only those that NOW places in 1977-2075 */
			if (form == 1 && (t < 220924800 || t >= 3345062400LL))
				continue;
			strftime(s, sizeof(s),
				 form == 0   ? "%a, %d %b %Y %H:%M:%S GMT"
				 : form == 1 ? "%A, %d-%b-%y %H:%M:%S GMT"
					     : "%a %b %e %H:%M:%S %Y", &tm);
			got = 0;
			assert_int_equal(grist_http_date_parse(s, NOW, &got), 0);
			if (got != t)
				fail_msg("\"%s\" read as %lld, not %lld", s, (long long)got, (long long)t);
		}
		n++;
	}
	assert_true(n > 40000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(three_forms),
		cmocka_unit_test(calendar_edges),
		cmocka_unit_test(rfc850_century),
		cmocka_unit_test(rfc850_window),
		cmocka_unit_test(refused),
		cmocka_unit_test(round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
