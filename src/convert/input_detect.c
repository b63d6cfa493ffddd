/* Which input format a path holds, by file type and first bytes, for grist_convert() without a format. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "convert/input.h"

static const struct grist_input_ops *const formats[] = {
	&grist_input_tfrecord_ops, &grist_input_lines_ops, &grist_input_dir_ops, &grist_input_arrayrecord_ops,
	&grist_input_imagefolder_ops, &grist_input_csv_ops, NULL,
};

/* The first 64 bytes of every Riegeli file, hence of every ArrayRecord file: block header, then an empty 's' chunk. */
static const uint8_t riegeli_signature[64] = {
	0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x91, 0xba, 0xc2, 0x3c, 0x92, 0x87, 0xe1, 0xa9,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe1, 0x9f, 0x13, 0xc0, 0xe9, 0xb1, 0xc3, 0x72,
	0x73, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/* How much text is looked at before calling a file lines. */
#define SNIFF_BYTES 4096

const struct grist_input_ops *grist_input_find(const char *name)
{
	size_t i;

	for (i = 0; formats[i]; i++)
		if (!strcmp(formats[i]->name, name))
			return formats[i];
	return NULL;
}

/* Valid UTF-8 without NUL bytes; a sequence cut by the end of the sample is fine. */
static bool looks_like_text(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = p[i];
		size_t k;

		if (!c)
			return false;
		k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
		if (k == 9 || (c >= 0x80 && c < 0xc2))
			return false;
		for (i++; k && i < n; k--, i++)
			if ((p[i] & 0xc0) != 0x80)
				return false;
	}
	return true;
}

int grist_input_detect(const char *path, const struct grist_input_ops **ops)
{
	struct grist_input_source s;
	struct stat st;
	const uint8_t *p;
	uint64_t length;
	int64_t have;
	int ret, gz;

	*ops = NULL;
	if (stat(path, &st) < 0)
		return grist_fail(-errno, "%s: cannot stat: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		*ops = &grist_input_dir_ops;
		return 0;
	}
	ret = grist_input_source_open(&s, path);
	if (ret)
		return ret;
	gz = s.gz != NULL;
	have = grist_input_source_fill(&s, SNIFF_BYTES);
	if (have < 0) {
		ret = (int)have;
		goto out;
	}
	p = s.buf + s.start;
	if (!gz && have >= 64 && !memcmp(p, riegeli_signature, 64))
		*ops = &grist_input_arrayrecord_ops;
	else if (have >= GRIST_TFRECORD_HEADER && grist_tfrecord_header(p, &length))
		/* A chance match of a 32-bit CRC in text is one in four billion. */
		*ops = &grist_input_tfrecord_ops;
	else if (have > 0 && looks_like_text(p, (size_t)have))
		*ops = &grist_input_lines_ops;
	/* Empty: no records in any stream format; *ops stays NULL and the caller picks. */
	if (!*ops && have)
		ret = grist_fail(-EINVAL, "%s: cannot tell the input format (%snot ArrayRecord, TFRecord or UTF-8 text); "
				 "name the format: --from (format= in Python) tfrecord|lines|dir|arrayrecord", path, gz ? "GZIP holding " : "");
out:
	grist_input_source_close(&s);
	return ret;
}
