/* Dataset URLs: scheme detection, bucket/key split, endpoint resolution, SigV4 encoding. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "io/url.h"

enum grist_url_scheme grist_url_scheme(const char *path)
{
	if (!path)
		return GRIST_URL_LOCAL;
	if (!strncmp(path, "s3://", 5))
		return GRIST_URL_S3;
	if (!strncmp(path, "gs://", 5))
		return GRIST_URL_GS;
	if (!strncasecmp(path, "http://", 7) || !strncasecmp(path, "https://", 8))
		return GRIST_URL_HTTP;
	return GRIST_URL_LOCAL;
}

bool grist_url_has_glob(const char *s)
{
	return s && strpbrk(s, "*?[") != NULL;
}

int grist_uri_encode(struct grist_buf *out, const char *s, size_t n, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char e[3];

		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (c == '/' && keep_slash)) {
			if (grist_buf_append(out, &c, 1))
				return -ENOMEM;
			continue;
		}
		e[0] = '%';
		e[1] = hex[c >> 4];
		e[2] = hex[c & 15];
		if (grist_buf_append(out, e, 3))
			return -ENOMEM;
	}
	return 0;
}

void grist_url_free(struct grist_url *u)
{
	if (!u)
		return;
	free(u->bucket);
	free(u->key);
	free(u->endpoint);
	free(u->host);
	free(u->path);
	memset(u, 0, sizeof(*u));
}

/* Split "scheme://host[:port][/...]" at the end of the authority; lower-case host kept in @u. */
static int set_endpoint(struct grist_url *u, const char *text, const char *origin)
{
	const char *auth, *end;
	size_t n;
	char *p;

	if (!strncasecmp(text, "https://", 8)) {
		u->tls = true;
		auth = text + 8;
	} else if (!strncasecmp(text, "http://", 7)) {
		auth = text + 7;
	} else {
		return grist_fail(-EINVAL, "%s: endpoint '%s' is not an http:// or https:// URL", origin, text);
	}
	end = auth + strcspn(auth, "/?#");
	if (end == auth)
		return grist_fail(-EINVAL, "%s: endpoint '%s' names no host", origin, text);
	if (memchr(auth, '@', (size_t)(end - auth)))
		return grist_fail(-EINVAL, "%s: endpoint '%s': credentials in URLs are not accepted", origin, text);
	u->host = strndup(auth, (size_t)(end - auth));
	n = (size_t)(end - text);
	u->endpoint = strndup(text, n);
	if (!u->host || !u->endpoint)
		return grist_fail(-ENOMEM, "out of memory parsing %s", origin);
	for (p = u->host; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	/* a path after the endpoint (http URLs) is handled by the caller */
	return 0;
}

int grist_url_parse(const char *text, const char *region, bool need_key, struct grist_url *u)
{
	struct grist_buf b = { 0 };
	const char *rest, *slash, *env;
	int ret;

	memset(u, 0, sizeof(*u));
	u->scheme = grist_url_scheme(text);
	if (u->scheme == GRIST_URL_LOCAL)
		return grist_fail(-EINVAL, "%s: not an s3://, gs:// or http(s):// URL", text);
	if (u->scheme == GRIST_URL_HTTP) {
		ret = set_endpoint(u, text, text);
		if (ret)
			goto fail;
		rest = text + strlen(u->endpoint);
		if (strchr(rest, '#') || strpbrk(rest, " \t\r\n")) {
			ret = grist_fail(-EINVAL, "%s: a URL may not hold blanks or a fragment (percent-encode them)", text);
			goto fail;
		}
		u->path = strdup(*rest ? rest : "/");
		if (!u->path) {
			ret = grist_fail(-ENOMEM, "out of memory parsing %s", text);
			goto fail;
		}
		return 0;
	}
	rest = text + 5;
	slash = strchr(rest, '/');
	u->bucket = slash ? strndup(rest, (size_t)(slash - rest)) : strdup(rest);
	u->key = strdup(slash ? slash + 1 : "");
	if (!u->bucket || !u->key) {
		ret = grist_fail(-ENOMEM, "out of memory parsing %s", text);
		goto fail;
	}
	if (!*u->bucket || strpbrk(u->bucket, "?#%") || strlen(u->bucket) > 255) {
		ret = grist_fail(-EINVAL, "%s: '%s' is not a bucket name", text, u->bucket);
		goto fail;
	}
	if (need_key && !*u->key) {
		ret = grist_fail(-EINVAL, "%s: the URL names a bucket but no object key", text);
		goto fail;
	}
	if (u->scheme == GRIST_URL_S3) {
		env = getenv("AWS_ENDPOINT_URL_S3");
		if (!env || !*env)
			env = getenv("AWS_ENDPOINT_URL");
	} else {
		env = getenv("GRIST_GS_ENDPOINT_URL");
	}
	if (env && *env) {
		/* a custom endpoint implies path style: endpoint/bucket/key */
		char *e = strdup(env);
		size_t n;

		if (!e) {
			ret = grist_fail(-ENOMEM, "out of memory parsing %s", text);
			goto fail;
		}
		n = strlen(e);
		while (n && e[n - 1] == '/')
			e[--n] = '\0';
		ret = set_endpoint(u, e, text);
		if (!ret && strlen(u->endpoint) != n)
			ret = grist_fail(-EINVAL, "%s: endpoint '%s' may not hold a path", text, env);
		free(e);
		if (ret)
			goto fail;
		u->path_style = true;
		ret = grist_buf_append(&b, "/", 1) ? -ENOMEM : grist_uri_encode(&b, u->bucket, strlen(u->bucket), false);
	} else if (u->scheme == GRIST_URL_S3) {
		struct grist_buf ep = { 0 };

		if (strchr(u->bucket, '.')) {
			/* dotted bucket names break the wildcard TLS certificate: path style */
			ret = grist_buf_append(&ep, "https://s3.", 11) || grist_buf_append(&ep, region, strlen(region)) ||
			      grist_buf_append(&ep, ".amazonaws.com", 15) ? -ENOMEM : 0;
		} else {
			ret = grist_buf_append(&ep, "https://", 8) ||
			      grist_buf_append(&ep, u->bucket, strlen(u->bucket)) ||
			      grist_buf_append(&ep, ".s3.", 4) || grist_buf_append(&ep, region, strlen(region)) ||
			      grist_buf_append(&ep, ".amazonaws.com", 15) ? -ENOMEM : 0;
		}
		if (!ret)
			ret = set_endpoint(u, (const char *)ep.data, text);
		grist_buf_free(&ep);
		if (ret)
			goto fail;
		u->path_style = strchr(u->bucket, '.') != NULL;
		if (u->path_style)
			ret = grist_buf_append(&b, "/", 1) ? -ENOMEM
							   : grist_uri_encode(&b, u->bucket, strlen(u->bucket), false);
	} else {
		ret = set_endpoint(u, "https://storage.googleapis.com", text);
		u->path_style = true;
		if (!ret)
			ret = grist_buf_append(&b, "/", 1) ? -ENOMEM
							   : grist_uri_encode(&b, u->bucket, strlen(u->bucket), false);
	}
	if (!ret)
		ret = grist_buf_append(&b, "/", 1) ? -ENOMEM : grist_uri_encode(&b, u->key, strlen(u->key), true);
	if (!ret)
		ret = grist_buf_append(&b, "", 1) ? -ENOMEM : 0;
	if (ret) {
		if (ret == -ENOMEM)
			ret = grist_fail(-ENOMEM, "out of memory parsing %s", text);
		goto fail;
	}
	u->path = (char *)b.data;
	return 0;
fail:
	grist_buf_free(&b);
	grist_url_free(u);
	return ret;
}
