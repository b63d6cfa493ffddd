/* Dataset URLs: s3://, gs://, http(s)://, their parts, and SigV4's percent-encoding. */
#ifndef GRIST_IO_URL_H
#define GRIST_IO_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

enum grist_url_scheme {
	GRIST_URL_LOCAL = 0, /* not a URL: a local path */
	GRIST_URL_S3,        /* s3://bucket/key, SigV4 */
	GRIST_URL_GS,        /* gs://bucket/key, the GCS XML API with HMAC keys (SigV4) */
	GRIST_URL_HTTP,      /* http:// or https://, plain Range GETs */
};

/* The scheme @path starts with; GRIST_URL_LOCAL for anything else. */
enum grist_url_scheme grist_url_scheme(const char *path);

/* A parsed URL. Every string is owned (grist_url_free()). */
struct grist_url {
	enum grist_url_scheme scheme;
	char *bucket;   /* s3/gs: the bucket; http: NULL */
	char *key;      /* s3/gs: the object key (may be "" for a bucket); http: NULL */
	char *endpoint; /* scheme://host[:port], no trailing slash */
	char *host;     /* host[:port] as sent in the Host header (lower case) */
	char *path;     /* the request path, percent-encoded as sent and as signed */
	bool tls;
	bool path_style; /* s3/gs: the bucket is the first path segment, not part of the host */
};

/*
 * grist_url_parse() - split @text into its parts and resolve the endpoint: s3:// uses
 * AWS_ENDPOINT_URL with path-style addressing when set, else the virtual-hosted
 * https://BUCKET.s3.REGION.amazonaws.com; gs:// uses GRIST_GS_ENDPOINT_URL when set,
 * else https://storage.googleapis.com (path style). @region is the signing region.
 * Return: 0, or -EINVAL naming the URL (no bucket, no key when @need_key, bad endpoint).
 */
int grist_url_parse(const char *text, const char *region, bool need_key, struct grist_url *u);
void grist_url_free(struct grist_url *u);

/*
 * grist_uri_encode() - append @s[0..@n) to @out percent-encoded as SigV4 wants: every
 * byte but A-Z a-z 0-9 - . _ ~ becomes %XX (upper-case hex), and '/' too unless
 * @keep_slash (object keys keep their slashes, query values do not). 0 or -ENOMEM.
 */
int grist_uri_encode(struct grist_buf *out, const char *s, size_t n, bool keep_slash);

/* True when @s holds a glob character (* ? [). */
bool grist_url_has_glob(const char *s);

#endif
