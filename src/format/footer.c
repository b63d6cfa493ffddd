/* Footer and postscript protobufs: a tiny wire-format reader that skips unknown fields, and writers. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "format/footer.h"
#include "format/varint.h"

/* One protobuf field: its number, wire type, and either a varint or a byte range. */
struct pb_field {
	uint64_t number;
	unsigned wire;
	uint64_t value;
	const uint8_t *bytes;
	size_t len;
};

/* Read the next field from [*p, end). 1 when read, 0 at the end, -EBADMSG on bad encoding. */
static int pb_next(const uint8_t **p, const uint8_t *end, struct pb_field *f)
{
	uint64_t key, n;

	if (*p == end)
		return 0;
	if (grist_varint_read(p, end, &key) < 0)
		return -EBADMSG;
	f->number = key >> 3;
	f->wire = key & 7;
	if (f->number == 0)
		return -EBADMSG;
	switch (f->wire) {
	case 0:
		return grist_varint_read(p, end, &f->value) < 0 ? -EBADMSG : 1;
	case 1:
	case 5:
		n = f->wire == 1 ? 8 : 4;
		if ((uint64_t)(end - *p) < n)
			return -EBADMSG;
		f->value = 0;
		memcpy(&f->value, *p, n);
		*p += n;
		return 1;
	case 2:
		if (grist_varint_read(p, end, &n) < 0 || n > (uint64_t)(end - *p))
			return -EBADMSG;
		f->bytes = *p;
		f->len = n;
		*p += n;
		return 1;
	default:
		return -EBADMSG;
	}
}

int grist_postscript_parse(const uint8_t *p, size_t len, struct grist_postscript *ps)
{
	const uint8_t *end = p + len;
	bool has_offset = false, has_magic = false;
	struct pb_field f;
	int ret;

	while ((ret = pb_next(&p, end, &f)) > 0) {
		if (f.number == 1 && f.wire == 0) {
			ps->footer_offset = f.value;
			has_offset = true;
		} else if (f.number == 2 && f.wire == 0) {
			ps->magic = f.value;
			has_magic = true;
		}
	}
	return ret < 0 || !has_offset || !has_magic ? -EBADMSG : 0;
}

static int metadata_inner_parse(const uint8_t *p, size_t len, struct grist_footer_metadata *m)
{
	const uint8_t *end = p + len;
	struct pb_field f;
	int ret;

	while ((ret = pb_next(&p, end, &f)) > 0) {
		if (f.number == 1 && f.wire == 0)
			m->version = f.value;
		else if (f.number == 2 && f.wire == 0)
			m->num_chunks = f.value;
		else if (f.number == 3 && f.wire == 0)
			m->num_records = f.value;
		else if (f.number == 4 && f.wire == 2) {
			m->writer_options = f.bytes;
			m->writer_options_len = f.len;
		}
	}
	return ret;
}

int grist_footer_metadata_parse(const uint8_t *p, size_t len, struct grist_footer_metadata *m)
{
	const uint8_t *end = p + len;
	bool found = false;
	struct pb_field f;
	int ret;

	memset(m, 0, sizeof(*m));
	while ((ret = pb_next(&p, end, &f)) > 0) {
		if (f.number == 1 && f.wire == 2) {
			if (metadata_inner_parse(f.bytes, f.len, m) < 0)
				return -EBADMSG;
			found = true;
		}
	}
	return ret < 0 || !found ? -EBADMSG : 0;
}

/*
 * Footer entries are parsed once per chunk at open (a million times for a million
 * records at group_size 1), and every writer emits them the same way: fields 1, 2, 3
 * in order with one-byte keys. Read that shape directly; anything else takes the
 * general path below.
 */
static bool entry_parse_fast(const uint8_t *p, const uint8_t *end, struct grist_footer_entry *e)
{
	if (end - p < 6 || p[0] != 0x08)
		return false;
	p++;
	if (grist_varint_read(&p, end, &e->chunk_offset) || p == end || *p++ != 0x10 ||
	    grist_varint_read(&p, end, &e->decoded_data_size) || p == end || *p++ != 0x18 ||
	    grist_varint_read(&p, end, &e->num_records) || p != end)
		return false;
	e->has_chunk_offset = true;
	return true;
}

int grist_footer_entry_parse(const uint8_t *p, size_t len, struct grist_footer_entry *e)
{
	const uint8_t *end = p + len;
	struct pb_field f;
	int ret;

	if (entry_parse_fast(p, end, e))
		return 0;
	memset(e, 0, sizeof(*e));
	while ((ret = pb_next(&p, end, &f)) > 0) {
		if (f.number == 1 && f.wire == 0) {
			e->chunk_offset = f.value;
			e->has_chunk_offset = true;
		} else if (f.number == 2 && f.wire == 0) {
			e->decoded_data_size = f.value;
		} else if (f.number == 3 && f.wire == 0) {
			e->num_records = f.value;
		}
	}
	return ret < 0 ? -EBADMSG : 0;
}

static size_t put_field(uint8_t *p, unsigned number, uint64_t v)
{
	size_t n = grist_varint_write(p, (uint64_t)number << 3);

	return n + grist_varint_write(p + n, v);
}

int grist_postscript_append(struct grist_buf *out, const struct grist_postscript *ps)
{
	uint8_t tmp[2 * (1 + GRIST_VARINT64_MAX)];
	size_t n = put_field(tmp, 1, ps->footer_offset);

	n += put_field(tmp + n, 2, ps->magic);
	return grist_buf_append(out, tmp, n);
}

int grist_footer_metadata_append(struct grist_buf *out, const struct grist_footer_metadata *m)
{
	uint8_t head[3 * (1 + GRIST_VARINT64_MAX) + 1 + GRIST_VARINT64_MAX];
	uint8_t outer[1 + GRIST_VARINT64_MAX];
	size_t n, inner_len, k;
	int ret;

	n = put_field(head, 1, m->version);
	n += put_field(head + n, 2, m->num_chunks);
	n += put_field(head + n, 3, m->num_records);
	inner_len = n;
	if (m->writer_options) {
		head[n++] = (4 << 3) | 2;
		n += grist_varint_write(head + n, m->writer_options_len);
		inner_len = n + m->writer_options_len;
	}
	outer[0] = (1 << 3) | 2;
	k = 1 + grist_varint_write(outer + 1, inner_len);
	ret = grist_buf_append(out, outer, k);
	if (!ret)
		ret = grist_buf_append(out, head, n);
	if (!ret && m->writer_options)
		ret = grist_buf_append(out, m->writer_options, m->writer_options_len);
	return ret;
}

int grist_footer_entry_append(struct grist_buf *out, const struct grist_footer_entry *e)
{
	uint8_t tmp[3 * (1 + GRIST_VARINT64_MAX)];
	size_t n = put_field(tmp, 1, e->chunk_offset);

	n += put_field(tmp + n, 2, e->decoded_data_size);
	n += put_field(tmp + n, 3, e->num_records);
	return grist_buf_append(out, tmp, n);
}
