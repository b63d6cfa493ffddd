/* HTTP-dates (RFC 9110 section 5.6.7), parsed without the C library's locale. */
#include <errno.h>
#include <string.h>

#include "io/http_date.h"

static const char *const DAYS[7] = { "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun" };
static const char *const LONG_DAYS[7] = { "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
					  "Saturday", "Sunday" };
static const char *const MONTHS[12] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					"Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };

/* The cursor moves only on a match; every helper returns whether it matched. */
static int lit(const char **p, const char *want)
{
	size_t n = strlen(want);

	if (strncmp(*p, want, n) != 0)
		return 0;
	*p += n;
	return 1;
}

static int name(const char **p, const char *const *names, int count)
{
	for (int i = 0; i < count; i++)
		if (lit(p, names[i]))
			return i + 1;
	return 0;
}

/* Exactly @digits decimal digits, or with @pad a space then @digits - 1 (asctime's day). */
static int num(const char **p, int digits, int pad, int *v)
{
	const char *s = *p;
	int n = 0;

	if (pad && *s == ' ') {
		s++;
		digits--;
	}
	for (int i = 0; i < digits; i++, s++) {
		if (*s < '0' || *s > '9')
			return 0;
		n = n * 10 + (*s - '0');
	}
	*p = s;
	*v = n;
	return 1;
}

static int clock_time(const char **p, int *h, int *m, int *sec)
{
	return num(p, 2, 0, h) && lit(p, ":") && num(p, 2, 0, m) && lit(p, ":") && num(p, 2, 0, sec);
}

struct civil {
	int y, mon, d, h, mi, sec;
};

static int imf_fixdate(const char *p, struct civil *c, const char **end)
{
	int ok = name(&p, DAYS, 7) && lit(&p, ", ") && num(&p, 2, 0, &c->d) && lit(&p, " ") &&
		 (c->mon = name(&p, MONTHS, 12)) && lit(&p, " ") && num(&p, 4, 0, &c->y) && lit(&p, " ") &&
		 clock_time(&p, &c->h, &c->mi, &c->sec) && lit(&p, " GMT");

	*end = p;
	return ok;
}

/* Whether @c is later than @now's date and time @years years on (or back), field by field. */
static int after_years(const struct civil *c, const struct tm *now, int years)
{
	const int a[6] = { c->y, c->mon, c->d, c->h, c->mi, c->sec };
	const int b[6] = { now->tm_year + 1900 + years, now->tm_mon + 1, now->tm_mday,
			   now->tm_hour, now->tm_min, now->tm_sec };

	for (int i = 0; i < 6; i++)
		if (a[i] != b[i])
			return a[i] > b[i];
	return 0;
}

/*
 * RFC 9110 section 5.6.7: a timestamp that appears to be more than 50 years in the future is
 * in the most recent year in the past with the same two digits. Every other reading stands,
 * so the year is the one that puts the timestamp within (now - 50 years, now + 50 years]:
 * in @now's century, then 100 years back if that is too far ahead, or 100 years on if it
 * is 50 years ago or more (in 2060, "05" is 2105, 45 years ahead, not 2005). The timestamp
 * is compared, not only its year: 50 years and a second ahead is too far.
 */
static int rfc850(const char *p, time_t now, struct civil *c, const char **end)
{
	struct tm t;
	int year_now;
	int ok = name(&p, LONG_DAYS, 7) && lit(&p, ", ") && num(&p, 2, 0, &c->d) && lit(&p, "-") &&
		 (c->mon = name(&p, MONTHS, 12)) && lit(&p, "-") && num(&p, 2, 0, &c->y) && lit(&p, " ") &&
		 clock_time(&p, &c->h, &c->mi, &c->sec) && lit(&p, " GMT");

	*end = p;
	if (!ok)
		return 0;
	if (!gmtime_r(&now, &t))
		t = (struct tm){ .tm_year = 70, .tm_mday = 1 };
	year_now = t.tm_year + 1900;
	c->y += year_now - year_now % 100;
	if (after_years(c, &t, 50))
		c->y -= 100;
	else if (!after_years(c, &t, -50))
		c->y += 100;
	return 1;
}

/* asctime's form: no comma, the day space-padded, the year last. */
static int asctime_form(const char *p, struct civil *c, const char **end)
{
	int ok = name(&p, DAYS, 7) && lit(&p, " ") && (c->mon = name(&p, MONTHS, 12)) && lit(&p, " ") &&
		 num(&p, 2, 1, &c->d) && lit(&p, " ") && clock_time(&p, &c->h, &c->mi, &c->sec) && lit(&p, " ") &&
		 num(&p, 4, 0, &c->y);

	*end = p;
	return ok;
}

int grist_http_date_parse(const char *s, time_t now, time_t *out)
{
	const char *start = s + strspn(s, " \t"), *p;
	struct civil c = { 0 };
	struct tm tm, back;
	time_t t;

	if (!imf_fixdate(start, &c, &p) && !rfc850(start, now, &c, &p) && !asctime_form(start, &c, &p))
		return -EINVAL;
	p += strspn(p, " \t");
	if (*p || c.sec > 60)
		return -EINVAL;
	/*
	 * timegm() (no locale in it) does the calendar, but normalises what it is given (31
	 * Apr becomes 1 May), so a date is valid when it comes back unchanged. A leap second,
	 * which the grammar allows, is read as :59 and counts as the next second.
	 */
	tm = (struct tm){ .tm_year = c.y - 1900, .tm_mon = c.mon - 1, .tm_mday = c.d, .tm_hour = c.h,
			  .tm_min = c.mi, .tm_sec = c.sec == 60 ? 59 : c.sec };
	t = timegm(&tm);
	if (!gmtime_r(&t, &back) || back.tm_year != c.y - 1900 || back.tm_mon != c.mon - 1 || back.tm_mday != c.d ||
	    back.tm_hour != c.h || back.tm_min != c.mi)
		return -EINVAL;
	*out = t + (c.sec == 60);
	return 0;
}
