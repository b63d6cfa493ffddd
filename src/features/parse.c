/*
 * tf.train.Example straight from the protobuf wire format: no copy of the record, no
 * protobuf runtime. The messages involved (tensorflow/core/example/{example,feature}.proto):
 *
 *   Example  { Features features = 1; }
 *   Features { map<string, Feature> feature = 1; }      an entry: { string key = 1; Feature value = 2; }
 *   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
 *   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
 *   Int64List { repeated int64 value = 1 [packed]; }
 *
 * Protobuf's parsing rules decide the edge cases, so a record means here what it means to
 * TensorFlow: a message field seen twice merges (so a repeated Features or a Feature's
 * value given twice concatenates), a map entry seen twice with one key keeps the last,
 * a oneof keeps the last member set (a list of another kind resets it), a string field
 * seen twice keeps the last, a known field with an unexpected wire type is an unknown
 * field, and unknown fields are skipped. One exception follows protobuf's Python parser
 * (upb, what TFDS decodes with) rather than C++: a map entry holding any field besides
 * its key and value is kept by upb as unknown data, so its key is absent here too.
 * Groups (wire types 3 and 4, deprecated and never written for these messages) are
 * refused as malformed.
 *
 * Only what the spec asks for is looked into: the entries of other keys are skipped by
 * their lengths, as TensorFlow's fast parser does.
 */
#include <errno.h>
#include <string.h>

#include "common/error.h"
#include "features/features_internal.h"
#include "format/varint.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the float and raw tensor paths copy little-endian wire bytes as they are"
#endif

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A varint: the one-byte case inline (tags, lengths, small values), the rest shared with the format's reader. */
static inline int rd_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
	if (*pp < end && **pp < 0x80) {
		*out = *(*pp)++;
		return 0;
	}
	return grist_varint_read(pp, end, out) ? -1 : 0;
}

/* A field's tag; 0 or -1 (malformed: truncated, field number 0 or above 2^29 - 1). */
static inline int rd_tag(const uint8_t **pp, const uint8_t *end, uint32_t *field, unsigned *wt)
{
	uint64_t t;

	if (rd_varint(pp, end, &t) || t > UINT32_MAX || (t >> 3) == 0)
		return -1;
	*field = (uint32_t)(t >> 3);
	*wt = (unsigned)(t & 7);
	return 0;
}

/* A length-delimited body: [*body, *body + *blen) within the bytes. */
static inline int rd_len(const uint8_t **pp, const uint8_t *end, const uint8_t **body, size_t *blen)
{
	uint64_t n;

	if (rd_varint(pp, end, &n) || n > (uint64_t)(end - *pp))
		return -1;
	*body = *pp;
	*blen = (size_t)n;
	*pp += n;
	return 0;
}

static inline int skip(const uint8_t **pp, const uint8_t *end, unsigned wt)
{
	const uint8_t *body;
	size_t blen;
	uint64_t v;

	switch (wt) {
	case WT_VARINT:
		return rd_varint(pp, end, &v);
	case WT_I64:
		if (end - *pp < 8)
			return -1;
		*pp += 8;
		return 0;
	case WT_LEN:
		return rd_len(pp, end, &body, &blen);
	case WT_I32:
		if (end - *pp < 4)
			return -1;
		*pp += 4;
		return 0;
	}
	return -1;
}

static int malformed(const char *what, const uint8_t *rec, const uint8_t *at)
{
	return grist_fail(-EBADMSG, "not a well-formed tf.train.Example: %s at byte %zu", what, (size_t)(at - rec));
}

/* One Features message: record the entries whose key the spec has. */
static int walk_features(const struct grist_features *f, const uint8_t *rec, const uint8_t *p, const uint8_t *end,
			 struct gf_span *spans)
{
	while (p < end) {
		const uint8_t *at = p, *entry, *q, *qend, *key = (const uint8_t *)"";
		size_t elen, klen = 0;
		bool unknown = false;
		uint32_t field;
		unsigned wt;
		int k;

		if (rd_tag(&p, end, &field, &wt))
			return malformed("a bad field tag in Features", rec, at);
		if (field != 1 || wt != WT_LEN) {
			if (skip(&p, end, wt))
				return malformed("a bad field in Features", rec, at);
			continue;
		}
		if (rd_len(&p, end, &entry, &elen))
			return malformed("a feature map entry runs past its message", rec, at);
		for (q = entry, qend = entry + elen; q < qend;) {
			const uint8_t *fat = q;

			if (rd_tag(&q, qend, &field, &wt))
				return malformed("a bad field tag in a feature map entry", rec, fat);
			if (field == 1 && wt == WT_LEN) {
				if (rd_len(&q, qend, &key, &klen))
					return malformed("a feature key runs past its entry", rec, fat);
			} else if (skip(&q, qend, wt)) {
				return malformed("a bad field in a feature map entry", rec, fat);
			} else {
				unknown |= field != 2 || wt != WT_LEN;
			}
		}
		k = unknown ? -1 : gf_lookup(f, key, klen);
		if (k >= 0) {
			spans[k].p = entry;
			spans[k].len = elen;
		}
	}
	return 0;
}

int gf_parse_example(const struct grist_features *f, const uint8_t *rec, size_t len, struct gf_span *spans)
{
	const uint8_t *p = rec, *end = rec + len;

	for (size_t i = 0; i < f->n; i++)
		spans[i].p = NULL;
	while (p < end) {
		const uint8_t *at = p, *body;
		size_t blen;
		uint32_t field;
		unsigned wt;
		int ret;

		if (rd_tag(&p, end, &field, &wt))
			return malformed("a bad field tag", rec, at);
		if (field != 1 || wt != WT_LEN) {
			if (skip(&p, end, wt))
				return malformed("a bad field", rec, at);
			continue;
		}
		if (rd_len(&p, end, &body, &blen))
			return malformed("the Features message runs past the record", rec, at);
		ret = walk_features(f, rec, body, body + blen, spans);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * The list fields of one entry's Feature value(s), in wire order: calls back for each
 * (kind, list body). The iteration is written once, as a macro-free state machine.
 */
struct list_iter {
	const uint8_t *ep, *eend; /* the entry's fields */
	const uint8_t *fp, *fend; /* the current Feature's fields (fp == fend: none open) */
};

/* Next list field: 1 with *kind, *at (its tag's position) and its body; 0 at the end; -1 malformed. */
static int next_list(struct list_iter *it, int *kind, const uint8_t **at, const uint8_t **body, size_t *blen)
{
	uint32_t field;
	unsigned wt;

	for (;;) {
		while (it->fp < it->fend) {
			*at = it->fp;
			if (rd_tag(&it->fp, it->fend, &field, &wt))
				return -1;
			if (field >= 1 && field <= 3 && wt == WT_LEN) {
				if (rd_len(&it->fp, it->fend, body, blen))
					return -1;
				*kind = (int)field;
				return 1;
			}
			if (skip(&it->fp, it->fend, wt))
				return -1;
		}
		if (it->ep >= it->eend)
			return 0;
		if (rd_tag(&it->ep, it->eend, &field, &wt))
			return -1;
		if (field == 2 && wt == WT_LEN) {
			const uint8_t *fb;
			size_t fl;

			if (rd_len(&it->ep, it->eend, &fb, &fl))
				return -1;
			it->fp = fb;
			it->fend = fb + fl;
		} else if (skip(&it->ep, it->eend, wt)) {
			return -1;
		}
	}
}

static int bad_values(const char *what)
{
	return grist_fail(-EBADMSG, "malformed %s", what);
}

/* Count the values of one list body of @kind. */
static int count_list(int kind, const uint8_t *p, const uint8_t *end, struct gf_values *v)
{
	while (p < end) {
		const uint8_t *body;
		size_t blen;
		uint32_t field;
		unsigned wt;
		uint64_t x;

		if (rd_tag(&p, end, &field, &wt))
			return bad_values("list (a bad field tag)");
		if (field != 1) {
			if (skip(&p, end, wt))
				return bad_values("list (a bad field)");
			continue;
		}
		if (kind == GRIST_WIRE_BYTES && wt == WT_LEN) {
			if (rd_len(&p, end, &body, &blen))
				return bad_values("bytes_list (a value runs past the list)");
			if (!v->count)
				v->first = body, v->first_len = blen;
			v->count++;
		} else if (kind == GRIST_WIRE_FLOAT && wt == WT_LEN) {
			if (rd_len(&p, end, &body, &blen) || blen % 4)
				return bad_values("float_list (a packed run that is not whole floats)");
			v->count += blen / 4;
		} else if (kind == GRIST_WIRE_FLOAT && wt == WT_I32) {
			if (end - p < 4)
				return bad_values("float_list (a value runs past the list)");
			p += 4;
			v->count++;
		} else if (kind == GRIST_WIRE_INT64 && wt == WT_LEN) {
			if (rd_len(&p, end, &body, &blen) || (blen && body[blen - 1] >= 0x80))
				return bad_values("int64_list (a packed run that ends inside a value)");
			for (size_t i = 0; i < blen; i++)
				v->count += body[i] < 0x80;
		} else if (kind == GRIST_WIRE_INT64 && wt == WT_VARINT) {
			if (rd_varint(&p, end, &x))
				return bad_values("int64_list (a bad varint)");
			v->count++;
		} else if (skip(&p, end, wt)) {
			return bad_values("list (a bad field)");
		}
	}
	return 0;
}

int gf_values_scan(const struct gf_span *entry, struct gf_values *v)
{
	struct list_iter it = { .ep = entry->p, .eend = entry->p + entry->len };
	const uint8_t *at, *body;
	size_t blen;
	int kind, r, ret;

	*v = (struct gf_values){ 0 };
	while ((r = next_list(&it, &kind, &at, &body, &blen)) == 1) {
		if (kind != v->kind) {
			/* another member of the oneof: it replaces what came before */
			*v = (struct gf_values){ .kind = kind, .start = at };
		}
		ret = count_list(kind, body, body + blen, v);
		if (ret)
			return ret;
	}
	return r < 0 ? bad_values("Feature (a bad field)") : 0;
}

static inline void store_int(uint8_t *dst, uint64_t i, enum grist_dtype t, uint64_t x)
{
	switch (t) {
	case GRIST_DTYPE_UINT8: case GRIST_DTYPE_INT8: dst[i] = (uint8_t)x; break;
	case GRIST_DTYPE_BOOL: dst[i] = x != 0; break;
	case GRIST_DTYPE_UINT16: case GRIST_DTYPE_INT16: { uint16_t y = (uint16_t)x; memcpy(dst + 2 * i, &y, 2); break; }
	case GRIST_DTYPE_UINT32: case GRIST_DTYPE_INT32: { uint32_t y = (uint32_t)x; memcpy(dst + 4 * i, &y, 4); break; }
	default: memcpy(dst + 8 * i, &x, 8); break;
	}
}

static inline void store_float(uint8_t *dst, uint64_t i, enum grist_dtype t, const uint8_t *src)
{
	float f;

	memcpy(&f, src, 4);
	switch (t) {
	case GRIST_DTYPE_FLOAT16: { uint16_t h = gf_float_to_half(f); memcpy(dst + 2 * i, &h, 2); break; }
	case GRIST_DTYPE_FLOAT64: { double d = f; memcpy(dst + 8 * i, &d, 8); break; }
	default: memcpy(dst + 4 * i, &f, 4); break;
	}
}

/* Write the values of the lists of v->kind from v->start on; the scan counted them. */
int gf_values_write(const struct gf_span *entry, const struct gf_values *v, enum grist_dtype t, uint8_t *dst)
{
	struct list_iter it = { .ep = entry->p, .eend = entry->p + entry->len };
	const uint8_t *at, *body;
	uint64_t i = 0;
	size_t blen;
	int kind, r;

	while ((r = next_list(&it, &kind, &at, &body, &blen)) == 1) {
		const uint8_t *p = body, *end = body + blen;

		if (at < v->start || kind != v->kind)
			continue;
		while (p < end) {
			const uint8_t *run;
			size_t rlen;
			uint32_t field;
			unsigned wt;
			uint64_t x;

			if (rd_tag(&p, end, &field, &wt))
				return bad_values("list");
			if (field == 1 && kind == GRIST_WIRE_INT64 && wt == WT_VARINT) {
				if (rd_varint(&p, end, &x) || i >= v->count)
					return bad_values("int64_list");
				store_int(dst, i++, t, x);
			} else if (field == 1 && kind == GRIST_WIRE_INT64 && wt == WT_LEN) {
				if (rd_len(&p, end, &run, &rlen))
					return bad_values("int64_list");
				for (const uint8_t *q = run, *qend = run + rlen; q < qend;) {
					if (rd_varint(&q, qend, &x) || i >= v->count)
						return bad_values("int64_list (a varint of more than 64 bits)");
					store_int(dst, i++, t, x);
				}
			} else if (field == 1 && kind == GRIST_WIRE_FLOAT && wt == WT_I32) {
				if (end - p < 4 || i >= v->count)
					return bad_values("float_list");
				store_float(dst, i++, t, p);
				p += 4;
			} else if (field == 1 && kind == GRIST_WIRE_FLOAT && wt == WT_LEN) {
				if (rd_len(&p, end, &run, &rlen) || rlen / 4 > v->count - i)
					return bad_values("float_list");
				if (t == GRIST_DTYPE_FLOAT32) {
					memcpy(dst + 4 * i, run, rlen);
					i += rlen / 4;
				} else {
					for (size_t k = 0; k < rlen; k += 4)
						store_float(dst, i++, t, run + k);
				}
			} else if (skip(&p, end, wt)) {
				return bad_values("list");
			}
		}
	}
	if (r < 0 || i != v->count)
		return bad_values("Feature");
	return 0;
}

void gf_bytes_iter_init(struct gf_bytes_iter *bi, const struct gf_span *entry, const struct gf_values *v)
{
	*bi = (struct gf_bytes_iter){ .ep = entry->p, .eend = entry->p + entry->len, .start = v->start,
				      .kind = v->kind };
}

int gf_bytes_iter_next(struct gf_bytes_iter *bi, const uint8_t **p, size_t *len)
{
	struct list_iter it = { .ep = bi->ep, .eend = bi->eend, .fp = bi->fp, .fend = bi->fend };
	const uint8_t *at, *body;
	size_t blen;
	int kind, r;

	for (;;) {
		while (bi->lp < bi->lend) {
			uint32_t field;
			unsigned wt;

			if (rd_tag(&bi->lp, bi->lend, &field, &wt))
				return bad_values("bytes_list");
			if (field == 1 && wt == WT_LEN)
				return rd_len(&bi->lp, bi->lend, p, len) ? bad_values("bytes_list") : 1;
			if (skip(&bi->lp, bi->lend, wt))
				return bad_values("bytes_list");
		}
		r = next_list(&it, &kind, &at, &body, &blen);
		bi->ep = it.ep;
		bi->fp = it.fp;
		bi->fend = it.fend;
		if (r <= 0)
			return r < 0 ? bad_values("Feature") : 0;
		if (at >= bi->start && kind == bi->kind) {
			bi->lp = body;
			bi->lend = body + blen;
		}
	}
}

int gf_values_strings(const struct gf_span *entry, const struct gf_values *v, uint8_t *lens, uint8_t *bytes,
		      uint64_t *total)
{
	struct gf_bytes_iter bi;
	const uint8_t *s;
	uint64_t i = 0, sum = 0;
	size_t slen;
	int r;

	gf_bytes_iter_init(&bi, entry, v);
	while ((r = gf_bytes_iter_next(&bi, &s, &slen)) == 1) {
		if (i >= v->count)
			return bad_values("bytes_list");
		if (lens)
			memcpy(lens + 8 * i, &(uint64_t){ slen }, 8);
		if (bytes)
			memcpy(bytes + sum, s, slen);
		sum += slen;
		i++;
	}
	if (r < 0 || i != v->count)
		return r < 0 ? r : bad_values("Feature");
	*total = sum;
	return 0;
}
