/* grist_convert() from tfrecord: TFRecord framing, every CRC-32C checked, plain or GZIP. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/error.h"
#include "format/le.h"
#include "convert/input.h"

/*
 * A record is framed as
 *   u64 length (LE) | u32 masked CRC-32C of those 8 bytes | data | u32 masked CRC-32C of data.
 * A length is trusted only after its CRC matches, and for a plain file only
 * when the file can still hold it, so damage never leads to a huge allocation.
 * GZIP streams cannot say how much is left; their records are capped instead.
 */
#define TFRECORD_FOOTER 4
#define TFRECORD_GZIP_MAX_RECORD ((uint64_t)1 << 31)

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

bool grist_tfrecord_header(const uint8_t *h, uint64_t *length)
{
	if (grist_crc32c_mask(grist_crc32c(0, h, 8)) != le32(h + 8))
		return false;
	*length = grist_le64_get(h);
	return true;
}

/*
 * Whether the record whose header is at @at, with @length data bytes and the
 * data CRC, fits in the plain file. A file that shrank since it was opened
 * leaves nothing (and must not wrap around); no overflow for any length.
 */
static bool fits_file(const struct grist_input_source *s, uint64_t at, uint64_t length)
{
	uint64_t left = s->file_size >= at + GRIST_TFRECORD_HEADER ? s->file_size - at - GRIST_TFRECORD_HEADER : 0;

	return left >= TFRECORD_FOOTER && length <= left - TFRECORD_FOOTER;
}

static int tf_open(struct grist_input *in, const char *path)
{
	struct grist_input_source *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return grist_fail(-ENOMEM, "cannot allocate an input");
	ret = grist_input_source_open(s, path);
	if (ret) {
		free(s);
		return ret;
	}
	in->priv = s;
	return 0;
}

static int tf_next(struct grist_input *in, const uint8_t **data, size_t *len)
{
	struct grist_input_source *s = in->priv;
	uint64_t at = s->offset, length;
	const uint8_t *p;
	int64_t have;

	have = grist_input_source_fill(s, GRIST_TFRECORD_HEADER);
	if (have < 0)
		return (int)have;
	if (!have)
		return 0;
	if (have < GRIST_TFRECORD_HEADER)
		return grist_fail_at(-EBADMSG, s->path, at, "record %llu: truncated header (%lld of %d bytes)",
				     (unsigned long long)in->record, (long long)have, GRIST_TFRECORD_HEADER);
	if (!grist_tfrecord_header(s->buf + s->start, &length))
		return grist_fail_at(-EBADMSG, s->path, at, "record %llu: length CRC mismatch (not TFRecord, or damaged)",
				     (unsigned long long)in->record);
	if (s->gz ? length > TFRECORD_GZIP_MAX_RECORD : !fits_file(s, at, length))
		return grist_fail_at(-EBADMSG, s->path, at, "record %llu: %s: the header says %llu bytes%s",
				     (unsigned long long)in->record, s->gz ? "too large" : "truncated",
				     (unsigned long long)length, s->gz ? "" : ", more than the file holds");
	have = grist_input_source_fill(s, GRIST_TFRECORD_HEADER + length + TFRECORD_FOOTER);
	if (have < 0)
		return (int)have;
	if ((uint64_t)have < GRIST_TFRECORD_HEADER + length + TFRECORD_FOOTER)
		return grist_fail_at(-EBADMSG, s->path, at, "record %llu: truncated: the header says %llu bytes, the stream ends after %llu",
				     (unsigned long long)in->record, (unsigned long long)length,
				     (unsigned long long)(have > GRIST_TFRECORD_HEADER ? have - GRIST_TFRECORD_HEADER : 0));
	p = s->buf + s->start;
	if (in->check_data &&
	    grist_crc32c_mask(grist_crc32c(0, p + GRIST_TFRECORD_HEADER, length)) != le32(p + GRIST_TFRECORD_HEADER + length))
		return grist_fail_at(-EBADMSG, s->path, at + GRIST_TFRECORD_HEADER + length,
				     "record %llu: data CRC mismatch", (unsigned long long)in->record);
	*data = p + GRIST_TFRECORD_HEADER;
	*len = length;
	grist_input_source_consume(s, GRIST_TFRECORD_HEADER + length + TFRECORD_FOOTER);
	in->record++;
	return 1;
}

/*
 * Count the records for sharding. A plain file is walked header to header
 * with one 12-byte pread each (the data is not read: its CRC is checked by the
 * writing pass); a GZIP stream has to be inflated, framing checked as it goes.
 */
static int tf_count(struct grist_input *in, uint64_t *records)
{
	struct grist_input_source *s = in->priv;
	const uint8_t *data;
	uint64_t at = 0, n = 0;
	size_t len;
	int ret;

	if (s->gz) {
		while ((ret = tf_next(in, &data, &len)) > 0)
			n++;
		*records = n;
		return ret;
	}
	while (at < s->file_size) {
		uint8_t h[GRIST_TFRECORD_HEADER];
		ssize_t got = pread(s->fd, h, sizeof(h), (off_t)at);
		uint64_t length;

		if (got < 0)
			return grist_fail_at(-errno, s->path, at, "read failed: %s", strerror(errno));
		if ((size_t)got < sizeof(h))
			return grist_fail_at(-EBADMSG, s->path, at, "record %llu: truncated header (%zd of %d bytes)",
					     (unsigned long long)n, got, GRIST_TFRECORD_HEADER);
		if (!grist_tfrecord_header(h, &length))
			return grist_fail_at(-EBADMSG, s->path, at, "record %llu: length CRC mismatch (not TFRecord, or damaged)",
					     (unsigned long long)n);
		if (!fits_file(s, at, length))
			return grist_fail_at(-EBADMSG, s->path, at, "record %llu: truncated: the header says %llu bytes, more than the file holds",
					     (unsigned long long)n, (unsigned long long)length);
		at += GRIST_TFRECORD_HEADER + length + TFRECORD_FOOTER;
		n++;
	}
	*records = n;
	return 0;
}

static uint64_t tf_done_bytes(const struct grist_input *in)
{
	return grist_input_source_disk_offset(in->priv);
}

static void tf_close(struct grist_input *in)
{
	if (in->priv)
		grist_input_source_close(in->priv);
	free(in->priv);
	in->priv = NULL;
}

const struct grist_input_ops grist_input_tfrecord_ops = {
	.name = "tfrecord",
	.open = tf_open,
	.next = tf_next,
	.count = tf_count,
	.done_bytes = tf_done_bytes,
	.close = tf_close,
};
