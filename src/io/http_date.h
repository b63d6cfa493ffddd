/* HTTP-dates (RFC 9110 section 5.6.7), parsed without the C library's locale. */
#ifndef GRIST_IO_HTTP_DATE_H
#define GRIST_IO_HTTP_DATE_H

#include <time.h>

/*
 * Parse @s, an HTTP-date in any of the three forms a recipient must accept:
 *   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"   (what servers send now)
 *   RFC 850      "Sunday, 06-Nov-94 08:49:37 GMT"  (obsolete; the two-digit year is the one
 *                                                   that puts the timestamp within
 *                                                   (now - 50 years, now + 50 years])
 *   asctime      "Sun Nov  6 08:49:37 1994"        (obsolete)
 * Leading and trailing spaces are allowed. Day and month names are matched as ASCII, case
 * sensitively as the grammar says, never through strptime(), whose %a and %b follow
 * LC_TIME: an application that set a French locale would otherwise read no Retry-After
 * date at all. @now is only used for RFC 850's century. RFC 9110 section 5.6.7: a timestamp
 * that appears to be more than 50 years in the future is in the most recent past year with the
 * same last two digits; any other reading stands. So the year is the one that puts the
 * timestamp in (now - 50 years, now + 50 years]: at 2026-11-28 00:00, 01-Jan-76 is 2076 and
 * 01-Jan-77 1977; at 2060-01-01 00:00, 01-Jan-05 is 2105 (45 years ahead), 01-Jan-10 00:00 is
 * 2110 (exactly 50 years ahead is not more) and 01-Jan-10 00:00:01 is 2010.
 * Returns 0 and the time in *@out (seconds since the epoch, UTC), or -EINVAL.
 */
int grist_http_date_parse(const char *s, time_t now, time_t *out);

#endif
