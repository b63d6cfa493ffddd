/* grist_convert() from arrayrecord: the records of existing ArrayRecord files, to re-encode with other options. */
#include <errno.h>
#include <stdlib.h>

#include "common/error.h"
#include "grist/format.h"
#include "convert/input.h"

struct ar_input {
	struct grist_reader *r;
	uint64_t records, size;
};

static int ar_open(struct grist_input *in, const char *path)
{
	struct ar_input *a = calloc(1, sizeof(*a));
	struct grist_file_info fi;
	int ret;

	if (!a)
		return grist_fail(-ENOMEM, "cannot allocate an input");
	ret = grist_reader_open(&path, 1, NULL, &a->r);
	if (ret) {
		free(a);
		return ret;
	}
	grist_reader_file_info(a->r, 0, &fi);
	a->records = fi.num_records;
	a->size = fi.file_size;
	in->priv = a;
	return 0;
}

static int ar_next(struct grist_input *in, const uint8_t **data, size_t *len)
{
	struct ar_input *a = in->priv;
	int ret = grist_reader_read_next(a->r, data, len);

	if (ret > 0)
		in->record++;
	return ret;
}

static int ar_count(struct grist_input *in, uint64_t *records)
{
	*records = ((struct ar_input *)in->priv)->records;
	return 0;
}

/* Progress by records: the file's bytes are not read in order of position alone. */
static uint64_t ar_done_bytes(const struct grist_input *in)
{
	const struct ar_input *a = in->priv;

	return a->records ? (uint64_t)((double)a->size * (double)in->record / (double)a->records) : 0;
}

static void ar_close(struct grist_input *in)
{
	struct ar_input *a = in->priv;

	if (a)
		grist_reader_close(a->r);
	free(a);
	in->priv = NULL;
}

const struct grist_input_ops grist_input_arrayrecord_ops = {
	.name = "arrayrecord",
	.open = ar_open,
	.next = ar_next,
	.count = ar_count,
	.done_bytes = ar_done_bytes,
	.close = ar_close,
};
