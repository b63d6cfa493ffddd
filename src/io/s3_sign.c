/*
 * AWS Signature Version 4, computed here rather than with libcurl's CURLOPT_AWS_SIGV4:
 * curl 7.88 does not add x-amz-content-sha256 (S3 requires it) and earlier versions
 * canonicalised some query strings and paths differently from S3, so a key with a space,
 * '+' or non-ASCII bytes could fail to verify. Here the path is signed exactly as it is
 * sent (the caller encodes it once with grist_uri_encode()), which is what S3 checks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/error.h"
#include "io/s3_sign.h"
#include "io/url.h"

void grist_hex(const unsigned char *p, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hex[p[i] >> 4];
		out[2 * i + 1] = hex[p[i] & 15];
	}
	out[2 * n] = '\0';
}

void grist_sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
	grist_hex(md, 32, out);
}

static void hmac(const void *key, size_t klen, const char *msg, size_t mlen, unsigned char out[32])
{
	unsigned int len = 32;

	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, mlen, out, &len);
}

static int append_str(struct grist_buf *b, const char *s)
{
	return grist_buf_append(b, s, strlen(s)) ? -ENOMEM : 0;
}

/* Terminate @b with a NUL that len does not count. */
static int terminate(struct grist_buf *b)
{
	if (grist_buf_append(b, "", 1))
		return -ENOMEM;
	b->len--;
	return 0;
}

struct enc_pair {
	char *name;
	char *value;
};

static int cmp_enc(const void *a, const void *b)
{
	const struct enc_pair *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

static char *encode_dup(const char *s)
{
	struct grist_buf b = { 0 };

	if (grist_uri_encode(&b, s, strlen(s), false) || grist_buf_append(&b, "", 1)) {
		grist_buf_free(&b);
		return NULL;
	}
	return (char *)b.data;
}

int grist_sigv4_query(struct grist_buf *out, const struct grist_sigv4_pair *q, size_t n)
{
	struct enc_pair *e;
	size_t i;
	int ret = 0;

	if (!n)
		return terminate(out);
	e = calloc(n, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (i = 0; i < n && !ret; i++) {
		e[i].name = encode_dup(q[i].name);
		e[i].value = encode_dup(q[i].value ? q[i].value : "");
		if (!e[i].name || !e[i].value)
			ret = -ENOMEM;
	}
	if (!ret) {
		qsort(e, n, sizeof(*e), cmp_enc);
		for (i = 0; i < n && !ret; i++)
			ret = (i && append_str(out, "&")) || append_str(out, e[i].name) || append_str(out, "=") ||
			      append_str(out, e[i].value) ? -ENOMEM : 0;
	}
	for (i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].value);
	}
	free(e);
	return ret ? ret : terminate(out);
}

static int cmp_header(const void *a, const void *b)
{
	const struct grist_sigv4_pair *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* Append @v trimmed, runs of blanks folded to one space (the spec's header value rule). */
static int append_trimmed(struct grist_buf *b, const char *v)
{
	bool blank = false, any = false;

	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			blank = any;
			continue;
		}
		if (blank && grist_buf_append(b, " ", 1))
			return -ENOMEM;
		blank = false;
		any = true;
		if (grist_buf_append(b, v, 1))
			return -ENOMEM;
	}
	return 0;
}

int grist_sigv4_sign(const struct grist_sigv4 *in, struct grist_buf *creq_out, struct grist_buf *sts_out,
		     char signature[65], struct grist_buf *authz)
{
	struct grist_buf creq = { 0 }, sts = { 0 }, signed_names = { 0 };
	struct grist_sigv4_pair *h = NULL;
	unsigned char k[32], sig[32];
	char date[9], hash[65], sig_hex[65];
	struct grist_buf secret = { 0 };
	size_t i;
	int ret = -ENOMEM;

	if (!in || !in->method || !in->canonical_uri || !in->amz_date || strlen(in->amz_date) != 16 ||
	    !in->region || !in->service || !in->access_key || !in->secret_key || !in->payload_hash ||
	    (in->nheaders && !in->headers) || (in->nquery && !in->query))
		return grist_fail(-EINVAL, "sigv4: a field of the request to sign is missing");
	h = calloc(in->nheaders ? in->nheaders : 1, sizeof(*h));
	if (!h)
		return grist_fail(-ENOMEM, "sigv4: out of memory");
	for (i = 0; i < in->nheaders; i++) {
		const char *c;

		for (c = in->headers[i].name; *c; c++)
			if (*c >= 'A' && *c <= 'Z') {
				free(h);
				return grist_fail(-EINVAL, "sigv4: header name '%s' is not in lower case",
						  in->headers[i].name);
			}
		h[i] = in->headers[i];
	}
	qsort(h, in->nheaders, sizeof(*h), cmp_header);
	memcpy(date, in->amz_date, 8);
	date[8] = '\0';

	/* the canonical request */
	if (append_str(&creq, in->method) || append_str(&creq, "\n") || append_str(&creq, in->canonical_uri) ||
	    append_str(&creq, "\n") || grist_sigv4_query(&creq, in->query, in->nquery) ||
	    append_str(&creq, "\n"))
		goto out;
	for (i = 0; i < in->nheaders; i++) {
		if (append_str(&creq, h[i].name) || append_str(&creq, ":") ||
		    append_trimmed(&creq, h[i].value ? h[i].value : "") || append_str(&creq, "\n"))
			goto out;
		if ((i && append_str(&signed_names, ";")) || append_str(&signed_names, h[i].name))
			goto out;
	}
	if (terminate(&signed_names) || append_str(&creq, "\n") ||
	    append_str(&creq, (const char *)signed_names.data) || append_str(&creq, "\n") ||
	    append_str(&creq, in->payload_hash) || terminate(&creq))
		goto out;

	/* the string to sign */
	grist_sha256_hex(creq.data, creq.len, hash);
	if (append_str(&sts, "AWS4-HMAC-SHA256\n") || append_str(&sts, in->amz_date) || append_str(&sts, "\n") ||
	    append_str(&sts, date) || append_str(&sts, "/") || append_str(&sts, in->region) ||
	    append_str(&sts, "/") || append_str(&sts, in->service) || append_str(&sts, "/aws4_request\n") ||
	    append_str(&sts, hash) || terminate(&sts))
		goto out;

	/* the signing key: HMAC chain over date, region, service, "aws4_request" */
	if (append_str(&secret, "AWS4") || append_str(&secret, in->secret_key))
		goto out;
	hmac(secret.data, secret.len, date, strlen(date), k);
	hmac(k, 32, in->region, strlen(in->region), k);
	hmac(k, 32, in->service, strlen(in->service), k);
	hmac(k, 32, "aws4_request", 12, k);
	hmac(k, 32, (const char *)sts.data, sts.len, sig);
	grist_hex(sig, 32, sig_hex);
	if (signature)
		memcpy(signature, sig_hex, 65);
	if (authz &&
	    (append_str(authz, "AWS4-HMAC-SHA256 Credential=") || append_str(authz, in->access_key) ||
	     append_str(authz, "/") || append_str(authz, date) || append_str(authz, "/") ||
	     append_str(authz, in->region) || append_str(authz, "/") || append_str(authz, in->service) ||
	     append_str(authz, "/aws4_request, SignedHeaders=") ||
	     append_str(authz, (const char *)signed_names.data) || append_str(authz, ", Signature=") ||
	     append_str(authz, sig_hex) || terminate(authz)))
		goto out;
	if (creq_out && (grist_buf_append(creq_out, creq.data, creq.len) || terminate(creq_out)))
		goto out;
	if (sts_out && (grist_buf_append(sts_out, sts.data, sts.len) || terminate(sts_out)))
		goto out;
	ret = 0;
out:
	/* the secret and the derived key do not outlive the call */
	if (secret.data)
		memset(secret.data, 0, secret.cap);
	memset(k, 0, sizeof(k));
	grist_buf_free(&secret);
	grist_buf_free(&creq);
	grist_buf_free(&sts);
	grist_buf_free(&signed_names);
	free(h);
	return ret ? grist_fail(ret, "sigv4: out of memory") : 0;
}
