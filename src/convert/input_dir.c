/* grist_convert() from dir: one record per regular file under a folder, in bytewise order of relative path. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "convert/input.h"

/* One file is one record; a file larger than this is refused, not loaded. */
#define DIR_FILE_MAX_BYTES ((uint64_t)1 << 31)

struct dir_input {
	char **rel;          /* relative paths of the regular files, sorted bytewise */
	size_t n, cap;
	size_t next;
	uint8_t *buf;
	size_t buf_cap;
	char *full;          /* scratch: root/rel */
};

static int cmp_rel(const void *a, const void *b)
{
	/* strcmp compares as unsigned char: bytewise order, as promised. */
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_file(struct dir_input *d, const char *rel)
{
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 256;
		char **r = realloc(d->rel, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		d->rel = r;
		d->cap = cap;
	}
	d->rel[d->n] = strdup(rel);
	if (!d->rel[d->n])
		return -ENOMEM;
	d->n++;
	return 0;
}

/* List the regular files under @root/@rel (rel "" at the top); symlinks and special files are skipped. */
static int walk(struct dir_input *d, const char *root, const char *rel)
{
	char *path = NULL;
	struct dirent *e;
	DIR *dir;
	int ret = 0;

	if (asprintf(&path, "%s%s%s", root, *rel ? "/" : "", rel) < 0)
		return grist_fail(-ENOMEM, "cannot allocate a path");
	dir = opendir(path);
	if (!dir) {
		ret = grist_fail(-errno, "%s: cannot open folder: %s", path, strerror(errno));
		free(path);
		return ret;
	}
	while (!ret) {
		struct stat st;
		char *child;

		errno = 0;
		e = readdir(dir);
		if (!e) {
			if (errno)
				ret = grist_fail(-errno, "%s: cannot list folder: %s", path, strerror(errno));
			break;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			ret = grist_fail(-errno, "%s/%s: cannot stat: %s", path, e->d_name, strerror(errno));
			break;
		}
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
			continue;
		if (asprintf(&child, "%s%s%s", rel, *rel ? "/" : "", e->d_name) < 0) {
			ret = grist_fail(-ENOMEM, "cannot allocate a path");
			break;
		}
		if (S_ISDIR(st.st_mode))
			ret = walk(d, root, child);
		else if (add_file(d, child))
			ret = grist_fail(-ENOMEM, "cannot list %s", child);
		free(child);
	}
	closedir(dir);
	free(path);
	return ret;
}

static void dir_close(struct grist_input *in)
{
	struct dir_input *d = in->priv;
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->n; i++)
		free(d->rel[i]);
	free(d->rel);
	free(d->buf);
	free(d->full);
	free(d);
	in->priv = NULL;
}

static int dir_open(struct grist_input *in, const char *path)
{
	struct dir_input *d = calloc(1, sizeof(*d));
	struct stat st;
	int ret;

	if (!d)
		return grist_fail(-ENOMEM, "cannot allocate an input");
	in->priv = d;
	if (stat(path, &st) < 0) {
		ret = grist_fail(-errno, "%s: cannot stat: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISDIR(st.st_mode)) {
		ret = grist_fail(-ENOTDIR, "%s: not a folder (the dir format takes folders)", path);
		goto fail;
	}
	ret = walk(d, path, "");
	if (ret)
		goto fail;
	qsort(d->rel, d->n, sizeof(*d->rel), cmp_rel);
	return 0;
fail:
	dir_close(in);
	return ret;
}

int grist_input_read_file(const char *path, uint64_t record, uint8_t **buf, size_t *cap, size_t *len)
{
	struct stat st;
	size_t got = 0;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return grist_fail(-errno, "%s: record %llu: cannot open: %s", path, (unsigned long long)record,
				  strerror(errno));
	if (fstat(fd, &st) < 0) {
		ret = grist_fail(-errno, "%s: cannot stat: %s", path, strerror(errno));
		goto out;
	}
	if ((uint64_t)st.st_size > DIR_FILE_MAX_BYTES) {
		ret = grist_fail(-EFBIG, "%s: record %llu: %llu bytes, more than a record may hold (%llu)", path,
				 (unsigned long long)record, (unsigned long long)st.st_size,
				 (unsigned long long)DIR_FILE_MAX_BYTES);
		goto out;
	}
	if (*cap < (size_t)st.st_size + 1) {
		uint8_t *nb = realloc(*buf, (size_t)st.st_size + 1);

		if (!nb) {
			ret = grist_fail(-ENOMEM, "%s: cannot allocate %lld bytes", path, (long long)st.st_size);
			goto out;
		}
		*buf = nb;
		*cap = (size_t)st.st_size + 1;
	}
	/* Read to the end, one byte past the size seen: a file that changes under us is an error. */
	for (;;) {
		ssize_t n = read(fd, *buf + got, *cap - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = grist_fail_at(-errno, path, got, "read failed: %s", strerror(errno));
			goto out;
		}
		if (!n)
			break;
		got += (size_t)n;
		if (got == *cap) {
			ret = grist_fail(-EBADMSG, "%s: grew while being read (more than %lld bytes)", path,
					 (long long)st.st_size);
			goto out;
		}
	}
	*len = got;
out:
	close(fd);
	return ret;
}

static int dir_next(struct grist_input *in, const uint8_t **data, size_t *len)
{
	struct dir_input *d = in->priv;
	int ret;

	if (d->next == d->n)
		return 0;
	free(d->full);
	if (asprintf(&d->full, "%s/%s", in->path, d->rel[d->next]) < 0) {
		d->full = NULL;
		return grist_fail(-ENOMEM, "cannot allocate a path");
	}
	ret = grist_input_read_file(d->full, in->record, &d->buf, &d->buf_cap, len);
	if (ret)
		return ret;
	*data = d->buf;
	d->next++;
	in->record++;
	return 1;
}

static int dir_count(struct grist_input *in, uint64_t *records)
{
	*records = ((struct dir_input *)in->priv)->n;
	return 0;
}

const struct grist_input_ops grist_input_dir_ops = {
	.name = "dir",
	.open = dir_open,
	.next = dir_next,
	.count = dir_count,
	.close = dir_close,
};
