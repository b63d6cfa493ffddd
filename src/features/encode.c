/*
 * Serialized tf.train.Example records, byte for byte as protobuf's deterministic
 * serializer writes them: map entries sorted by key, each entry as key (field 1) then
 * value (field 2), every Feature's list present (an empty one as a zero-length
 * message), numbers packed. Sorting makes the bytes a function of the features alone,
 * whatever order a converter adds them in.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"
#include "features/features_internal.h"
#include "format/varint.h"

/* protobuf's limit on a message */
#define MSG_MAX ((uint64_t)INT32_MAX)

struct entry {
	size_t key_at, key_len; /* the key within ents */
	size_t at, len;         /* the whole map entry (tag included) within ents */
	size_t order;           /* the order added: the last of equal keys wins */
};

struct grist_example_encoder {
	struct grist_buf ents;  /* the encoded map entries, as added */
	struct entry *list;
	size_t n, cap;
	struct grist_buf out;
	int error;              /* a failed add: finish reports it */
};

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	return p + grist_varint_write(p, v);
}

int grist_example_encoder_create(struct grist_example_encoder **out)
{
	struct grist_example_encoder *e = calloc(1, sizeof(*e));

	if (!e)
		return grist_fail(-ENOMEM, "encoder: out of memory");
	*out = e;
	return 0;
}

void grist_example_encoder_destroy(struct grist_example_encoder *e)
{
	if (!e)
		return;
	grist_buf_free(&e->ents);
	grist_buf_free(&e->out);
	free(e->list);
	free(e);
}

void grist_example_begin(struct grist_example_encoder *e)
{
	e->ents.len = 0;
	e->n = 0;
	e->error = 0;
}

/*
 * Append one map entry whose list body takes @body bytes: writes everything up to the
 * body and returns where the body goes (the caller fills exactly @body bytes).
 */
static int open_entry(struct grist_example_encoder *e, const char *key, int kind, uint64_t body, uint8_t **dst)
{
	size_t klen = key ? strnlen(key, GF_KEY_MAX + 1) : 0;
	uint64_t feature, entry, total;
	struct entry *en;
	uint8_t *p;
	int ret;

	if (e->error)
		return e->error;
	if (!klen || klen > GF_KEY_MAX)
		return e->error = grist_fail(-EINVAL, "encoder: a key must be 1 to %d bytes", GF_KEY_MAX);
	if (body > MSG_MAX)
		return e->error = grist_fail(-EMSGSIZE, "encoder: feature '%s' is over 2 GiB", key);
	feature = 1 + grist_varint_len(body) + body;                               /* Feature { list } */
	entry = 1 + grist_varint_len(klen) + klen + 1 + grist_varint_len(feature) + feature; /* { key, value } */
	total = 1 + grist_varint_len(entry) + entry;
	if (total > MSG_MAX || e->ents.len + total > MSG_MAX)
		return e->error = grist_fail(-EMSGSIZE, "encoder: the record is over 2 GiB (at feature '%s')", key);
	ret = grist_buf_reserve(&e->ents, e->ents.len + total);
	if (!ret)
		ret = grist_array_reserve((void **)&e->list, &e->cap, e->n + 1, sizeof(*e->list));
	if (ret)
		return e->error = ret;
	p = e->ents.data + e->ents.len;
	en = &e->list[e->n];
	*en = (struct entry){ .at = e->ents.len, .len = total, .key_len = klen, .order = e->n };
	*p++ = 0x0a; /* Features.feature (1, LEN) */
	p = put_varint(p, entry);
	*p++ = 0x0a; /* key (1, LEN) */
	p = put_varint(p, klen);
	en->key_at = (size_t)(p - e->ents.data);
	memcpy(p, key, klen);
	p += klen;
	*p++ = 0x12; /* value (2, LEN) */
	p = put_varint(p, feature);
	*p++ = (uint8_t)(kind << 3 | 2); /* bytes_list 1, float_list 2, int64_list 3 */
	p = put_varint(p, body);
	*dst = p;
	e->ents.len += total;
	e->n++;
	return 0;
}

int grist_example_add_int64s(struct grist_example_encoder *e, const char *key, const int64_t *values, size_t n)
{
	uint64_t packed = 0, body;
	uint8_t *p;
	int ret;

	if (n && !values)
		return e->error = grist_fail(-EINVAL, "encoder: NULL values");
	for (size_t i = 0; i < n; i++)
		packed += grist_varint_len((uint64_t)values[i]);
	body = n ? 1 + grist_varint_len(packed) + packed : 0;
	ret = open_entry(e, key, GRIST_WIRE_INT64, body, &p);
	if (ret || !n)
		return ret;
	*p++ = 0x0a; /* value (1, LEN): packed */
	p = put_varint(p, packed);
	for (size_t i = 0; i < n; i++)
		p = put_varint(p, (uint64_t)values[i]);
	return 0;
}

int grist_example_add_floats(struct grist_example_encoder *e, const char *key, const float *values, size_t n)
{
	uint64_t packed = (uint64_t)n * 4, body = n ? 1 + grist_varint_len(packed) + packed : 0;
	uint8_t *p;
	int ret;

	if (n && !values)
		return e->error = grist_fail(-EINVAL, "encoder: NULL values");
	if (n > MSG_MAX / 4)
		return e->error = grist_fail(-EMSGSIZE, "encoder: feature '%s' is over 2 GiB", key ? key : "");
	ret = open_entry(e, key, GRIST_WIRE_FLOAT, body, &p);
	if (ret || !n)
		return ret;
	*p++ = 0x0a;
	p = put_varint(p, packed);
	memcpy(p, values, packed); /* little-endian, as the wire wants (parse.c refuses other hosts) */
	return 0;
}

int grist_example_add_bytes(struct grist_example_encoder *e, const char *key, const uint8_t *data,
			    const uint64_t *offsets, size_t n)
{
	uint64_t body = 0;
	uint8_t *p;
	int ret;

	if (n && (!offsets || !data))
		return e->error = grist_fail(-EINVAL, "encoder: NULL values");
	for (size_t i = 0; i < n; i++) {
		uint64_t len = offsets[i + 1] - offsets[i];

		if (offsets[i + 1] < offsets[i] || len > MSG_MAX || body > MSG_MAX)
			return e->error = grist_fail(-EINVAL, "encoder: feature '%s': offsets that decrease or a value "
						     "over 2 GiB", key ? key : "");
		body += 1 + grist_varint_len(len) + len;
	}
	ret = open_entry(e, key, GRIST_WIRE_BYTES, body, &p);
	for (size_t i = 0; !ret && i < n; i++) {
		uint64_t len = offsets[i + 1] - offsets[i];

		*p++ = 0x0a; /* value (1, LEN) */
		p = put_varint(p, len);
		memcpy(p, data + offsets[i], len);
		p += len;
	}
	return ret;
}

int grist_example_add_typed(struct grist_example_encoder *e, const char *key, enum grist_dtype dtype,
			    const void *values, size_t n)
{
	size_t eb = gf_dtype_bytes(dtype);
	const uint8_t *v = values;
	void *tmp;
	int ret;

	if (!eb || dtype == GRIST_DTYPE_BFLOAT16)
		return e->error = grist_fail(-EINVAL, "encoder: feature '%s': unknown dtype %d", key ? key : "", dtype);
	if (n && !values)
		return e->error = grist_fail(-EINVAL, "encoder: NULL values");
	if (dtype == GRIST_DTYPE_INT64 || dtype == GRIST_DTYPE_UINT64)
		return grist_example_add_int64s(e, key, values, n);
	if (dtype == GRIST_DTYPE_FLOAT32)
		return grist_example_add_floats(e, key, values, n);
	if (n > SIZE_MAX / 8)
		return e->error = grist_fail(-EMSGSIZE, "encoder: feature '%s' is too large", key ? key : "");
	tmp = malloc(n ? n * 8 : 1);
	if (!tmp)
		return e->error = grist_fail(-ENOMEM, "encoder: out of memory");
	for (size_t i = 0; i < n; i++) {
		const uint8_t *s = v + i * eb;
		int64_t *o = (int64_t *)tmp + i;
		float *fo = (float *)tmp + i;
		union { int8_t i8; uint8_t u8; int16_t i16; uint16_t u16; int32_t i32; uint32_t u32; double f64; } u;

		memcpy(&u, s, eb);
		switch (dtype) {
		case GRIST_DTYPE_UINT8: *o = u.u8; break;
		case GRIST_DTYPE_INT8: *o = u.i8; break;
		case GRIST_DTYPE_BOOL: *o = u.u8 != 0; break;
		case GRIST_DTYPE_UINT16: *o = u.u16; break;
		case GRIST_DTYPE_INT16: *o = u.i16; break;
		case GRIST_DTYPE_UINT32: *o = u.u32; break;
		case GRIST_DTYPE_INT32: *o = u.i32; break;
		case GRIST_DTYPE_FLOAT16: *fo = gf_half_to_float(u.u16); break;
		case GRIST_DTYPE_FLOAT64: *fo = (float)u.f64; break;
		default: break;
		}
	}
	if (dtype == GRIST_DTYPE_FLOAT16 || dtype == GRIST_DTYPE_FLOAT64)
		ret = grist_example_add_floats(e, key, tmp, n);
	else
		ret = grist_example_add_int64s(e, key, tmp, n);
	free(tmp);
	return ret;
}

/* Keys compare bytewise, a prefix first: protobuf's deterministic order for string map keys. */
static int key_cmp(const uint8_t *base, const struct entry *x, const struct entry *y)
{
	size_t m = x->key_len < y->key_len ? x->key_len : y->key_len;
	int c = memcmp(base + x->key_at, base + y->key_at, m);

	if (c)
		return c;
	return x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
}

static int cmp_entry(const void *a, const void *b, void *arg)
{
	const struct entry *x = a, *y = b;
	int c = key_cmp(arg, x, y);

	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

int grist_example_finish(struct grist_example_encoder *e, const uint8_t **data, size_t *len)
{
	uint64_t total = 0;
	size_t kept = 0;
	bool sorted = true;
	uint8_t *p;
	int ret;

	if (e->error)
		return e->error;
	for (size_t i = 1; i < e->n && sorted; i++)
		sorted = key_cmp(e->ents.data, &e->list[i - 1], &e->list[i]) < 0;
	if (!sorted)
		qsort_r(e->list, e->n, sizeof(*e->list), cmp_entry, e->ents.data);
	/* a key added twice: the last one added stays, as assigning twice in protobuf does */
	for (size_t i = 0; i < e->n; i++) {
		const struct entry *x = &e->list[i], *y = i + 1 < e->n ? &e->list[i + 1] : NULL;

		if (y && !key_cmp(e->ents.data, x, y))
			continue;
		e->list[kept++] = *x;
		total += x->len;
	}
	if (1 + grist_varint_len(total) + total > MSG_MAX)
		return grist_fail(-EMSGSIZE, "encoder: the record is over 2 GiB");
	ret = grist_buf_reserve(&e->out, 1 + grist_varint_len(total) + total);
	if (ret)
		return ret;
	p = e->out.data;
	*p++ = 0x0a; /* Example.features (1, LEN) */
	p = put_varint(p, total);
	for (size_t i = 0; i < kept; i++) {
		memcpy(p, e->ents.data + e->list[i].at, e->list[i].len);
		p += e->list[i].len;
	}
	e->out.len = (size_t)(p - e->out.data);
	*data = e->out.data;
	*len = e->out.len;
	return 0;
}
