/*
 * The HTTP response fields the remote backend acts on, parsed strictly: Content-Range
 * (RFC 9110 section 14.4) and delta-seconds (Retry-After's delay-seconds).
 *
 * Every call returns 0 or a negative errno, liburing style, and writes its result only on
 * success: the caller decides what a bad field means (an error for Content-Range, an
 * absent field for Retry-After), so the parser never guesses or prints.
 */
#ifndef GRIST_IO_HTTP_FIELDS_H
#define GRIST_IO_HTTP_FIELDS_H

#include <stdbool.h>
#include <stdint.h>

struct grist_http_content_range {
	uint64_t first, last;   /* the bytes sent, both inclusive; 0 when unsatisfied */
	uint64_t complete;      /* the whole representation's length; 0 when unknown */
	bool unsatisfied;       /* "*" for the range: none sent, a 416's answer */
	bool complete_unknown;  /* "*" for the length: the server did not say it */
};

/*
 * Parse @v, a Content-Range field value, in one of RFC 9110 section 14.4's byte forms
 * (a star where the comment has STAR; C comments cannot hold the sequences):
 *   "bytes first-last/complete"   first <= last < complete
 *   "bytes first-last/STAR"       first <= last, the length unknown
 *   "bytes STAR/complete"         unsatisfied: no range, the length only
 * The unit is case-insensitive (range units are, section 14.1); spaces and tabs may
 * surround the value, never sit inside it. Numbers are digits only, no sign, and at most
 * INT64_MAX: larger would overflow the offset arithmetic that follows (off_t, end + 1).
 * Returns 0 and fills *@out, or -EINVAL.
 */
int grist_http_content_range_parse(const char *v, struct grist_http_content_range *out);

/*
 * Retry-After's delay-seconds (RFC 9110 section 10.2.3) has no cap of its own; RFC 9111
 * section 1.2.2 says a recipient that cannot represent a delta-seconds value takes it as
 * 2^31. Larger values are read as this cap, not refused: a server that says "wait very
 * long" still means wait, and the caller caps the wait by its own limit anyway.
 */
#define GRIST_HTTP_DELTA_SECONDS_MAX 2147483648ull

/*
 * Parse @v, delta-seconds: 1*DIGIT, spaces and tabs around it allowed. Values above
 * GRIST_HTTP_DELTA_SECONDS_MAX, however many digits, give the cap.
 * Returns 0 and the seconds in *@out, or -EINVAL (empty, a sign, anything not a digit).
 */
int grist_http_delta_seconds_parse(const char *v, uint64_t *out);

#endif
