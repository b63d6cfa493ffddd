/* Content-Range and delta-seconds (RFC 9110), parsed strictly: see http_fields.h. */
#include <errno.h>
#include <stdint.h>
#include <strings.h>

#include "io/http_fields.h"

/* RFC 9110's OWS: spaces and horizontal tabs only. */
static const char *ows(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/*
 * 1*DIGIT at *@p, at most INT64_MAX, moving *@p past it. strtoull() is no use here: it
 * takes a sign (negating "-5" into a huge number), leading spaces, and "0x" with base 0.
 */
static int digits(const char **p, uint64_t *v)
{
	const char *s = *p;
	uint64_t n = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (n > (INT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -EINVAL;
		n = n * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*v = n;
	return 0;
}

int grist_http_content_range_parse(const char *v, struct grist_http_content_range *out)
{
	struct grist_http_content_range cr = { 0 };
	const char *p = ows(v);

	/* the unit, then exactly one SP: the grammar's "bytes" SP ( range / unsatisfied ) */
	if (strncasecmp(p, "bytes ", 6))
		return -EINVAL;
	p += 6;
	if (*p == '*') {
		p++;
		cr.unsatisfied = true;
	} else {
		if (digits(&p, &cr.first) || *p++ != '-' || digits(&p, &cr.last) || cr.first > cr.last)
			return -EINVAL;
	}
	if (*p++ != '/')
		return -EINVAL;
	if (*p == '*' && !cr.unsatisfied) {
		/* an unsatisfied answer without a length names nothing: only a range may omit it */
		p++;
		cr.complete_unknown = true;
	} else if (digits(&p, &cr.complete) || (!cr.unsatisfied && cr.last >= cr.complete)) {
		return -EINVAL;
	}
	if (*ows(p))
		return -EINVAL;
	*out = cr;
	return 0;
}

int grist_http_delta_seconds_parse(const char *v, uint64_t *out)
{
	const char *p = ows(v);
	uint64_t n = 0;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	/* past the cap the digits still have to be digits, but their value no longer matters */
	for (; *p >= '0' && *p <= '9'; p++)
		if (n <= GRIST_HTTP_DELTA_SECONDS_MAX)
			n = n * 10 + (uint64_t)(*p - '0');
	if (*ows(p))
		return -EINVAL;
	*out = n < GRIST_HTTP_DELTA_SECONDS_MAX ? n : GRIST_HTTP_DELTA_SECONDS_MAX;
	return 0;
}
