/* grist_convert() from lines: one record per line, without its newline; plain or GZIP text. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "convert/input.h"

/* A line longer than this is an error, not an allocation: no text dataset has one. */
#define LINE_MAX_BYTES ((size_t)1 << 31)

struct lines {
	struct grist_input_source s;
	size_t scanned;  /* bytes after s.start already known to hold no newline */
};

static int lines_open(struct grist_input *in, const char *path)
{
	struct lines *l = calloc(1, sizeof(*l));
	int ret;

	if (!l)
		return grist_fail(-ENOMEM, "cannot allocate an input");
	ret = grist_input_source_open(&l->s, path);
	if (ret) {
		free(l);
		return ret;
	}
	in->priv = l;
	return 0;
}

static int lines_next(struct grist_input *in, const uint8_t **data, size_t *len)
{
	struct lines *l = in->priv;
	struct grist_input_source *s = &l->s;
	int64_t have = (int64_t)(s->end - s->start);
	const uint8_t *nl;

	for (;;) {
		nl = memchr(s->buf + s->start + l->scanned, '\n', (size_t)have - l->scanned);
		if (nl)
			break;
		l->scanned = (size_t)have;
		if (s->eof) {
			if (!have)
				return 0;
			/* A last line without a newline is still a record. */
			*data = s->buf + s->start;
			*len = (size_t)have;
			grist_input_source_consume(s, (size_t)have);
			l->scanned = 0;
			in->record++;
			return 1;
		}
		if ((size_t)have >= LINE_MAX_BYTES)
			return grist_fail_at(-EBADMSG, s->path, s->offset, "line %llu is longer than %zu bytes",
					     (unsigned long long)in->record + 1, LINE_MAX_BYTES);
		have = grist_input_source_fill(s, (size_t)have + 1);
		if (have < 0)
			return (int)have;
	}
	*data = s->buf + s->start;
	*len = (size_t)(nl - (s->buf + s->start));
	grist_input_source_consume(s, *len + 1);
	l->scanned = 0;
	in->record++;
	return 1;
}

static uint64_t lines_done_bytes(const struct grist_input *in)
{
	return grist_input_source_disk_offset(&((const struct lines *)in->priv)->s);
}

static void lines_close(struct grist_input *in)
{
	struct lines *l = in->priv;

	if (l)
		grist_input_source_close(&l->s);
	free(l);
	in->priv = NULL;
}

const struct grist_input_ops grist_input_lines_ops = {
	.name = "lines",
	.open = lines_open,
	.next = lines_next,
	.done_bytes = lines_done_bytes,
	.close = lines_close,
};
