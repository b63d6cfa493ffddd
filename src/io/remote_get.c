/* The whole of a small object (a dataset's metadata) read through the remote backend. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "io/remote.h"

GRIST_API void grist_remote_get_free(void *data)
{
	free(data);
}

GRIST_API int grist_remote_get(const char *url, size_t max_bytes, void **data, size_t *len)
{
	struct grist_remote_object *o = NULL;
	uint8_t *buf;
	int ret;

	if (!url || !data || !len)
		return grist_fail(-EINVAL, "grist_remote_get: NULL argument");
	*data = NULL;
	*len = 0;
	if (!grist_path_is_url(url))
		return grist_fail(-EINVAL, "%s: not an s3://, gs://, http:// or https:// URL", url);
	/*
	 * Opened as a dataset's object is: the first GET (its last 64 KiB) pins the ETag and
	 * gives the size, and whatever lies before those bytes comes by grist_remote_read()
	 * with If-Match, so a metadata file replaced between the two GETs is -ESTALE, never
	 * half of each version. A small file is the one GET.
	 */
	ret = grist_remote_open(url, &o);
	if (ret)
		return ret;
	if (o->size > max_bytes || o->size >= SIZE_MAX) {
		ret = grist_fail(-EFBIG, "%s: %llu bytes, more than the %zu this read takes", url,
				 (unsigned long long)o->size, max_bytes);
		goto out;
	}
	/* one byte more: a NUL after the body, so that text can be parsed in place */
	buf = malloc((size_t)o->size + 1);
	if (!buf) {
		ret = grist_fail(-ENOMEM, "%s: out of memory for %llu bytes", url, (unsigned long long)o->size);
		goto out;
	}
	ret = grist_remote_read(o, buf, 0, o->size);
	if (ret) {
		free(buf);
		goto out;
	}
	buf[o->size] = '\0';
	*data = buf;
	*len = (size_t)o->size;
out:
	grist_remote_unref(o);
	return ret;
}
