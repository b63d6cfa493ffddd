/* The byte source under the stream inputs: one buffer over a plain or GZIP file. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/open.h"
#include "convert/input.h"

/* Reads go to the kernel (or zlib) in pieces of at least this size. */
#define SOURCE_READ_SIZE (1u << 20)

/* True when the first bytes of the source's file are the GZIP magic. 0/1, or a negative errno. */
static int is_gzip(const struct grist_input_source *s)
{
	uint8_t magic[2];
	ssize_t n = pread(s->fd, magic, 2, 0);

	if (n < 0)
		return grist_fail(-errno, "%s: byte 0: read failed: %s", s->path, strerror(errno));
	return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

int grist_input_source_open(struct grist_input_source *s, const char *path)
{
	struct stat st;
	int ret;

	memset(s, 0, sizeof(*s));
	s->path = path;
	/* A folder given as a file is bad input (the dir format reads folders), not a bad request. */
	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		return grist_fail(-EISDIR, "%s: a folder, not a file (folders are the dir format)", path);
	/* Never blocks on a FIFO without a writer: -EINVAL for anything but a regular file. */
	s->fd = grist_open_regular(path, 0, &st);
	if (s->fd < 0)
		return s->fd;
	s->file_size = (uint64_t)st.st_size;
	ret = is_gzip(s);
	if (ret < 0)
		goto fail;
	if (ret) {
		/* zlib owns the descriptor from here; a dup keeps ours for close(). */
		int gfd = dup(s->fd);

		gzFile gz = gfd >= 0 ? gzdopen(gfd, "rb") : NULL;

		if (!gz) {
			if (gfd >= 0)
				close(gfd);
			ret = grist_fail(-ENOMEM, "%s: cannot start the GZIP decoder", path);
			goto fail;
		}
		gzbuffer(gz, SOURCE_READ_SIZE);
		ret = grist_inflater_start(gz, path, &s->gz);
		if (ret) {
			gzclose(gz);
			goto fail;
		}
	}
	s->cap = 4 * SOURCE_READ_SIZE;
	s->buf = malloc(s->cap);
	if (!s->buf) {
		ret = grist_fail(-ENOMEM, "%s: cannot allocate the read buffer", path);
		goto fail;
	}
	return 0;
fail:
	grist_input_source_close(s);
	return ret;
}

void grist_input_source_close(struct grist_input_source *s)
{
	grist_inflater_stop(s->gz);
	if (s->fd >= 0)
		close(s->fd);
	free(s->buf);
	s->gz = NULL;
	s->fd = -1;
	s->buf = NULL;
}

/* One read of up to @n bytes into @dst: the count, 0 at the end, or a negative errno. */
static int64_t read_some(struct grist_input_source *s, uint8_t *dst, size_t n)
{
	uint64_t at = s->offset + (s->end - s->start);

	if (n > (1u << 30))
		n = 1u << 30;
	if (s->gz) {
		const char *why = "";
		int64_t got = grist_inflater_read(s->gz, dst, n, &why);

		if (got >= 0)
			return got;
		return grist_fail_at((int)got, s->path, at, "(decompressed stream) GZIP error: %s", why);
	}
	for (;;) {
		ssize_t got = read(s->fd, dst, n);

		if (got >= 0)
			return got;
		if (errno != EINTR)
			return grist_fail_at(-errno, s->path, at, "read failed: %s", strerror(errno));
	}
}

int64_t grist_input_source_fill(struct grist_input_source *s, size_t n)
{
	while (s->end - s->start < n && !s->eof) {
		int64_t got;

		/* Room at the end for a whole read; move the unread bytes down or grow. */
		if (s->cap - s->end < SOURCE_READ_SIZE || s->cap - s->start < n) {
			size_t have = s->end - s->start, want = have + (n > SOURCE_READ_SIZE ? n : SOURCE_READ_SIZE);

			memmove(s->buf, s->buf + s->start, have);
			s->start = 0;
			s->end = have;
			if (s->cap < want) {
				uint8_t *nb = realloc(s->buf, want);

				if (!nb)
					return grist_fail_at(-ENOMEM, s->path, s->offset,
							     "cannot allocate %zu bytes for a record", want);
				s->buf = nb;
				s->cap = want;
			}
		}
		got = read_some(s, s->buf + s->end, s->cap - s->end);
		if (got < 0)
			return got;
		if (!got)
			s->eof = true;
		s->end += (size_t)got;
	}
	return (int64_t)(s->end - s->start);
}

uint64_t grist_input_source_disk_offset(const struct grist_input_source *s)
{
	if (s->gz)
		return grist_inflater_disk_offset(s->gz);
	return s->offset;
}
