/* Glob expansion for s3:// and gs:// URLs: ListObjectsV2 under the pattern's literal prefix. */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "io/remote.h"
#include "io/s3_sign.h"
#include "io/url.h"

#define LIST_BODY_MAX (64u << 20)
#define MAX_PAGES 100000

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

GRIST_API void grist_remote_glob_free(char **urls, size_t n)
{
	size_t i;

	for (i = 0; urls && i < n; i++)
		free(urls[i]);
	free(urls);
}

GRIST_API int grist_remote_glob(const char *pattern, char ***urls, size_t *n)
{
	struct grist_remote_options opt;
	struct grist_url u = { 0 };
	struct grist_remote_xfer x;
	struct grist_buf body = { 0 };
	char **out = NULL, *prefix = NULL, *token = NULL, region[64], *bucket_path = NULL;
	size_t nout = 0, cap = 0, plen, pages;
	const char *env_region;
	bool literal = false; /* a key equal to the pattern was listed: it is the one match */
	int ret;

	if (!pattern || !urls || !n)
		return grist_fail(-EINVAL, "grist_remote_glob: NULL argument");
	*urls = NULL;
	*n = 0;
	if (grist_url_scheme(pattern) != GRIST_URL_S3 && grist_url_scheme(pattern) != GRIST_URL_GS)
		return grist_fail(-EINVAL, "%s: only s3:// and gs:// URLs can hold a glob (http has no listing)",
				  pattern);
	ret = grist_remote_global_init();
	if (ret)
		return ret;
	env_region = getenv("AWS_REGION");
	if (!env_region || !*env_region)
		env_region = getenv("AWS_DEFAULT_REGION");
	snprintf(region, sizeof(region), "%s",
		 env_region && *env_region ? env_region : grist_url_scheme(pattern) == GRIST_URL_GS ? "auto" : "us-east-1");
	ret = grist_url_parse(pattern, region, false, &u);
	if (ret)
		return ret;
	if (grist_url_has_glob(u.bucket)) {
		ret = grist_fail(-EINVAL, "%s: a glob in the bucket name is not supported", pattern);
		goto out;
	}
	plen = strcspn(u.key, "*?[");
	prefix = strndup(u.key, plen);
	/* listing: the bucket itself, path style or virtual-hosted */
	bucket_path = u.path_style ? malloc(strlen(u.bucket) * 3 + 2) : strdup("/");
	if (!prefix || !bucket_path) {
		ret = grist_fail(-ENOMEM, "%s: out of memory", pattern);
		goto out;
	}
	if (u.path_style) {
		struct grist_buf bp = { 0 };

		if (grist_buf_append(&bp, "/", 1) || grist_uri_encode(&bp, u.bucket, strlen(u.bucket), false) ||
		    grist_buf_append(&bp, "", 1)) {
			grist_buf_free(&bp);
			ret = grist_fail(-ENOMEM, "%s: out of memory", pattern);
			goto out;
		}
		free(bucket_path);
		bucket_path = (char *)bp.data;
	}
	free(u.path);
	u.path = bucket_path;
	bucket_path = NULL;
	grist_remote_options_current(&opt);
	memset(&x, 0, sizeof(x));
	x.easy = curl_easy_init();
	if (!x.easy) {
		ret = grist_fail(-ENOMEM, "%s: cannot make a libcurl handle", pattern);
		goto out;
	}
	x.u = &u;
	x.display = pattern;
	x.keep = &body;
	x.keep_max = LIST_BODY_MAX;
	x.opt = &opt;
	/* bounded: each page is a GET with its timeouts; a listing ends or hits MAX_PAGES */
	for (pages = 0; pages < MAX_PAGES; pages++) {
		struct grist_sigv4_pair q[3] = { { "list-type", "2" }, { "prefix", prefix }, { "continuation-token", token } };
		const char *p, *end, *v;
		size_t vlen;
		char trunc[8] = "";

		x.query = q;
		x.nquery = token ? 3 : 2;
		x.attempt = 0;
		ret = grist_remote_xfer_run(&x);
		if (ret)
			break;
		p = (const char *)body.data;
		end = p + body.len;
		while (p && (p = grist_xml_next(p, end, "Contents", &v, &vlen))) {
			const char *kv;
			size_t klen;
			char *key, *url;

			if (!grist_xml_next(v, v + vlen, "Key", &kv, &klen))
				continue;
			key = strndup(kv, klen);
			if (!key || grist_xml_unescape(key)) {
				ret = key ? grist_fail(-EPROTO, "%s: a listed key has a bad XML entity", pattern)
					  : grist_fail(-ENOMEM, "%s: out of memory", pattern);
				free(key);
				goto listed;
			}
			/*
			 * As a local glob: '*' and '?' do not match '/'. A key that is the pattern
			 * itself ("a[1].ar" exists) is that object alone, as a local name that
			 * exists is taken as it is: otherwise no glob could name it.
			 */
			if (!literal && !strcmp(key, u.key)) {
				grist_remote_glob_free(out, nout);
				out = NULL;
				nout = cap = 0;
				literal = true;
			}
			if (literal ? !strcmp(key, u.key) : fnmatch(u.key, key, FNM_PATHNAME) == 0) {
				url = malloc(strlen(key) + strlen(u.bucket) + 8);
				if (!url || grist_array_reserve((void **)&out, &cap, nout + 1, sizeof(*out))) {
					free(url);
					free(key);
					ret = grist_fail(-ENOMEM, "%s: out of memory", pattern);
					goto listed;
				}
				sprintf(url, "%.2s://%s/%s", pattern, u.bucket, key);
				out[nout++] = url;
			}
			free(key);
		}
		free(token);
		token = NULL;
		if ((p = grist_xml_next((const char *)body.data, end, "IsTruncated", &v, &vlen)))
			snprintf(trunc, sizeof(trunc), "%.*s", (int)(vlen < 7 ? vlen : 7), v);
		if (strcmp(trunc, "true"))
			break;
		if (!grist_xml_next((const char *)body.data, end, "NextContinuationToken", &v, &vlen)) {
			ret = grist_fail(-EPROTO, "%s: a truncated listing without NextContinuationToken", pattern);
			break;
		}
		token = strndup(v, vlen);
		if (!token || grist_xml_unescape(token)) {
			ret = grist_fail(-EPROTO, "%s: a bad continuation token", pattern);
			break;
		}
	}
listed:
	curl_easy_cleanup(x.easy);
	grist_remote_xfer_release(&x);
	if (!ret && pages == MAX_PAGES)
		ret = grist_fail(-EPROTO, "%s: the listing did not end after %d pages", pattern, MAX_PAGES);
	if (!ret) {
		if (nout)
			qsort(out, nout, sizeof(*out), cmp_str);
		*urls = out;
		*n = nout;
		out = NULL;
		nout = 0;
	}
out:
	grist_remote_glob_free(out, nout);
	grist_buf_free(&body);
	free(token);
	free(prefix);
	free(bucket_path);
	grist_url_free(&u);
	return ret;
}
