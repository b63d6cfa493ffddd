/* AWS Signature Version 4 (S3, and GCS's XML API with HMAC keys): canonical request to Authorization. */
#ifndef GRIST_IO_S3_SIGN_H
#define GRIST_IO_S3_SIGN_H

#include <stddef.h>

#include "common/buf.h"

/* A name and a value: a query parameter (raw, unencoded) or a header (name in lower case). */
struct grist_sigv4_pair {
	const char *name;
	const char *value;
};

struct grist_sigv4 {
	const char *method;                      /* "GET" */
	const char *canonical_uri;               /* the path exactly as sent, already percent-encoded */
	const struct grist_sigv4_pair *query;    /* raw parameters, any order (encoded and sorted here) */
	size_t nquery;
	const struct grist_sigv4_pair *headers;  /* the signed headers, lower-case names, any order; host included */
	size_t nheaders;
	const char *payload_hash;                /* hex SHA-256 of the body, or "UNSIGNED-PAYLOAD" */
	const char *amz_date;                    /* YYYYMMDDTHHMMSSZ, the x-amz-date header's value */
	const char *region;
	const char *service;                     /* "s3" */
	const char *access_key;
	const char *secret_key;
};

/*
 * grist_sigv4_query() - append the canonical query string of @q[0..@n) to @out: names
 * and values percent-encoded (grist_uri_encode(), '/' encoded too), sorted by encoded
 * name then value, joined with '=' and '&'. The request URL must carry exactly this
 * string so that what is sent is what was signed. 0 or -ENOMEM.
 */
int grist_sigv4_query(struct grist_buf *out, const struct grist_sigv4_pair *q, size_t n);

/*
 * grist_sigv4_sign() - sign @in. Fills (each optional) @creq with the canonical request,
 * @sts with the string to sign, @signature with 64 hex digits and a NUL, and @authz with
 * the Authorization header's value ("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
 * Signature=..."). Buffers are appended to and NUL-terminated (len excludes the NUL).
 * Return: 0, -EINVAL (a missing field, a header name not in lower case), -ENOMEM.
 * Thread-safety: any thread.
 */
int grist_sigv4_sign(const struct grist_sigv4 *in, struct grist_buf *creq, struct grist_buf *sts,
		     char signature[65], struct grist_buf *authz);

/* grist_hex() - @p[0..@n) as 2 @n lower-case hex digits and a NUL into @out. */
void grist_hex(const unsigned char *p, size_t n, char *out);

/* grist_sha256_hex() - the hex SHA-256 of @p[0..@n) into @out (65 bytes with the NUL). */
void grist_sha256_hex(const void *p, size_t n, char out[65]);

/* The payload hash of an empty body. */
#define GRIST_SHA256_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

#endif
