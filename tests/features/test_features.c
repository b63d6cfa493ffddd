/*
 * The features stage against its peers: records serialized by TFDS and protobuf, their
 * values as protobuf parses them and as TFDS decodes them, images as PIL decodes them
 * (tests/data/features, made by tools/make_example_golden.py), and the encoder's bytes
 * against protobuf's deterministic serializer. Then every kind of bad record, the pool,
 * and the loader running the stage on its decode threads.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "features_loader.h"
#include "grist/features.h"
#include "grist/format.h"
#include "grist/loader.h"

/* ------------------------------------------------------------------ the manifest */

#define MAX_LINES 4096
#define MAX_TOK 64

struct line {
	char *tok[MAX_TOK]; /* whitespace-separated; values past MAX_TOK - 1 are joined in the last */
	int n;
};

/* One check run as two tests: with ragged features, then with padded ones. */
#define RAGGED_AND_PADDED(name, check)                       \
	static void test_##name##_ragged(void **state)           \
	{                                                        \
		(void)state;                                      \
		check(false);                                     \
	}                                                        \
	static void test_##name##_padded(void **state)           \
	{                                                        \
		(void)state;                                      \
		check(true);                                      \
	}

static struct line lines[MAX_LINES];
static int num_lines;
static char *manifest_text;

static int load_manifest(void **state)
{
	size_t len;
	char *save = NULL, *l;

	(void)state;
	manifest_text = (char *)t_read_file(t_data("features/MANIFEST.txt"), &len);
	assert_non_null(manifest_text);
	manifest_text = realloc(manifest_text, len + 1);
	manifest_text[len] = '\0';
	for (l = strtok_r(manifest_text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		struct line *ln;
		char *s2 = NULL, *t;

		if (l[0] == '#')
			continue;
		assert_true(num_lines < MAX_LINES);
		ln = &lines[num_lines++];
		for (t = strtok_r(l, " ", &s2); t && ln->n < MAX_TOK; t = strtok_r(NULL, " ", &s2))
			ln->tok[ln->n++] = t;
		assert_null(t); /* no line has more tokens than the tests read */
	}
	return 0;
}

static int free_manifest(void **state)
{
	(void)state;
	free(manifest_text);
	return 0;
}

static uint8_t *read_rec(const char *name, size_t *len)
{
	char path[256];
	uint8_t *p;

	snprintf(path, sizeof(path), "features/%s", name);
	p = t_read_file(t_data(path), len);
	assert_non_null(p);
	return p;
}

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
	size_t n = 0;

	if (!strcmp(h, "-"))
		return 0;
	for (; h[0] && h[1]; h += 2) {
		unsigned v;

		assert_int_equal(sscanf(h, "%2x", &v), 1);
		assert_true(n < cap);
		out[n++] = (uint8_t)v;
	}
	return n;
}

/* ------------------------------------------------------------------ spec helpers */

static struct grist_features *spec_new(void)
{
	struct grist_features *f;

	assert_int_equal(grist_features_create(&f), 0);
	return f;
}

static int add(struct grist_features *f, const char *key, enum grist_wire w, enum grist_dtype t, size_t ndim, ...)
{
	int64_t shape[GRIST_FEATURE_MAX_DIMS];
	va_list ap;
	int i;

	va_start(ap, ndim);
	for (size_t d = 0; d < ndim; d++)
		shape[d] = va_arg(ap, int64_t);
	va_end(ap);
	i = grist_features_add(f, key, w, t, shape, ndim);
	assert_true(i >= 0);
	return i;
}

static void set(struct grist_features *f, int i, enum grist_feature_param p, int64_t v)
{
	assert_int_equal(grist_features_set(f, (size_t)i, p, v), 0);
}

static struct grist_features_decoder *decoder(struct grist_features *f)
{
	struct grist_features_decoder *d;

	assert_int_equal(grist_features_finish(f), 0);
	assert_int_equal(grist_features_decoder_create(f, NULL, 0, &d), 0);
	return d;
}

/* Decode @rec into a fresh row (8-byte aligned, of the record's bound). */
static uint8_t *decode1(struct grist_features_decoder *d, const uint8_t *rec, size_t len, size_t *row_len, int *ret)
{
	const struct grist_features *f = grist_features_decoder_spec(d);
	size_t cap = grist_features_row_bound(f, len);
	uint8_t *row = aligned_alloc(8, cap);

	memset(row, 0xa5, cap);
	*ret = grist_features_decode(d, rec, len, 0, 7, row, cap, row_len);
	return row;
}

/* Feature @key of one row (fixed or ragged), gathered: its values and dims. */
static uint8_t *gather1(const struct grist_features *f, const char *key, const uint8_t *row, size_t row_len,
			size_t *bytes, int64_t *dims)
{
	uint64_t offs[2] = { 0, row_len };
	int i = grist_features_find(f, key);
	uint8_t *v;

	assert_true(i >= 0);
	assert_int_equal(grist_features_gather_bytes(f, (size_t)i, row, offs, 1, bytes), 0);
	v = malloc(*bytes + 1);
	assert_int_equal(grist_features_gather(f, (size_t)i, row, offs, 1, v, *bytes, dims), 0);
	return v;
}

/* ------------------------------------------------------------------ values as protobuf parses them */

/*
 * Every record's features, read as protobuf reads them: each `wire` line becomes a ragged
 * feature of the line's kind, and the gathered values must be the line's.
 */
static void test_wire_values(void **state)
{
	int checked = 0, absent = 0;

	(void)state;
	for (int a = 0; a < num_lines;) {
		const char *rec_name = lines[a].tok[1];
		struct grist_features *f = spec_new();
		struct grist_features_decoder *d;
		uint8_t *rec, *row;
		size_t len, row_len;
		int b, ret, nf = 0;

		for (b = a; b < num_lines && lines[b].n > 1 && !strcmp(lines[b].tok[1], rec_name); b++) {
			struct line *l = &lines[b];
			int i;

			if (strcmp(l->tok[0], "wire") || !strcmp(l->tok[3], "none") ||
			    (!strcmp(l->tok[3], "bytes") && strcmp(l->tok[4], "1")))
				continue;
			if (!strcmp(l->tok[3], "int64"))
				i = add(f, l->tok[2], GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 1, (int64_t)-1);
			else if (!strcmp(l->tok[3], "float"))
				i = add(f, l->tok[2], GRIST_WIRE_FLOAT, GRIST_DTYPE_FLOAT32, 1, (int64_t)-1);
			else
				i = add(f, l->tok[2], GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 1, (int64_t)-1);
			set(f, i, GRIST_FEATURE_VARLEN, GRIST_VARLEN_RAGGED);
			nf++;
		}
		if (!nf || strcmp(lines[a].tok[0], "wire")) {
			grist_features_destroy(f);
			a = b > a ? b : a + 1;
			continue;
		}
		d = decoder(f);
		rec = read_rec(rec_name, &len);
		row = decode1(d, rec, len, &row_len, &ret);
		if (ret)
			fail_msg("%s: %s", rec_name, grist_last_error());
		for (int k = a; k < b; k++) {
			struct line *l = &lines[k];
			size_t bytes, n;
			int64_t dims[1];
			uint8_t *v;

			if (!strcmp(l->tok[0], "absent")) {
				/* the key protobuf does not see: a spec asking for it fails, naming it */
				struct grist_features *g = spec_new();
				struct grist_features_decoder *dg;
				uint8_t *r2;
				size_t rl;

				set(g, add(g, l->tok[2], GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 1, (int64_t)-1),
				    GRIST_FEATURE_VARLEN, GRIST_VARLEN_RAGGED);
				dg = decoder(g);
				r2 = decode1(dg, rec, len, &rl, &ret);
				assert_int_equal(ret, -EBADMSG);
				assert_non_null(strstr(grist_last_error(), "missing"));
				assert_non_null(strstr(grist_last_error(), l->tok[2]));
				free(r2);
				grist_features_decoder_destroy(dg);
				grist_features_destroy(g);
				absent++;
				continue;
			}
			if (strcmp(l->tok[0], "wire") || !strcmp(l->tok[3], "none") ||
			    (!strcmp(l->tok[3], "bytes") && strcmp(l->tok[4], "1")))
				continue;
			v = gather1(grist_features_decoder_spec(d), l->tok[2], row, row_len, &bytes, dims);
			n = (size_t)strtoull(l->tok[4], NULL, 10);
			if (!strcmp(l->tok[3], "int64")) {
				assert_int_equal(bytes, 8 * n);
				assert_int_equal(dims[0], (int64_t)n);
				for (size_t j = 0; j < n; j++) {
					int64_t x;

					memcpy(&x, v + 8 * j, 8);
					assert_int_equal(x, strtoll(l->tok[5 + j], NULL, 10));
				}
			} else if (!strcmp(l->tok[3], "float")) {
				assert_int_equal(bytes, 4 * n);
				for (size_t j = 0; j < n; j++) {
					uint8_t want[4];

					assert_int_equal(unhex(l->tok[5 + j], want, 4), 4);
					assert_memory_equal(v + 4 * j, want, 4);
				}
			} else {
				uint8_t *want = malloc(strlen(l->tok[5]) / 2 + 1);
				size_t wl = unhex(l->tok[5], want, strlen(l->tok[5]) / 2 + 1);

				if (bytes != wl)
					fail_msg("%s %s: %zu bytes, protobuf says %zu", rec_name, l->tok[2], bytes, wl);
				assert_int_equal(dims[0], (int64_t)wl);
				assert_memory_equal(v, want, wl);
				free(want);
			}
			free(v);
			checked++;
		}
		free(row);
		free(rec);
		grist_features_decoder_destroy(d);
		grist_features_destroy(f);
		a = b;
	}
	assert_true(checked >= 130);
	assert_int_equal(absent, 6);
}

/* ------------------------------------------------------------------ TFDS's types */

/* The spec grist.tfds builds for typed-N.pb's features.json (ragged or padded sequences). */
static struct grist_features *typed_spec(bool pad)
{
	struct grist_features *f = spec_new();
	int i;

	set(f, add(f, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 3, (int64_t)28, (int64_t)28, (int64_t)1),
	    GRIST_FEATURE_DECODE, GRIST_DECODE_PNG);
	add(f, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 0);
	add(f, "vec", GRIST_WIRE_FLOAT, GRIST_DTYPE_FLOAT32, 1, (int64_t)4);
	add(f, "mat", GRIST_WIRE_INT64, GRIST_DTYPE_INT32, 2, (int64_t)2, (int64_t)3);
	add(f, "flag", GRIST_WIRE_INT64, GRIST_DTYPE_BOOL, 0);
	add(f, "weight", GRIST_WIRE_FLOAT, GRIST_DTYPE_FLOAT32, 0);
	add(f, "meta/year", GRIST_WIRE_INT64, GRIST_DTYPE_INT32, 0);
	add(f, "half", GRIST_WIRE_FLOAT, GRIST_DTYPE_FLOAT16, 1, (int64_t)3);
	add(f, "f64", GRIST_WIRE_FLOAT, GRIST_DTYPE_FLOAT64, 1, (int64_t)2);
	add(f, "u16", GRIST_WIRE_INT64, GRIST_DTYPE_UINT16, 1, (int64_t)2);
	add(f, "i8", GRIST_WIRE_INT64, GRIST_DTYPE_INT8, 1, (int64_t)3);
	add(f, "u64", GRIST_WIRE_INT64, GRIST_DTYPE_UINT64, 1, (int64_t)2);
	set(f, add(f, "rawt", GRIST_WIRE_BYTES, GRIST_DTYPE_INT16, 2, (int64_t)2, (int64_t)2), GRIST_FEATURE_DECODE,
	    GRIST_DECODE_RAW);
	i = add(f, "ids", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 1, (int64_t)-1);
	set(f, i, GRIST_FEATURE_VARLEN, pad ? GRIST_VARLEN_PAD : GRIST_VARLEN_RAGGED);
	if (pad) {
		assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 8 }, 1), 0);
		assert_int_equal(grist_features_set_pad_value(f, (size_t)i, -1), 0);
	}
	i = add(f, "tokens", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 1, (int64_t)-1);
	set(f, i, GRIST_FEATURE_VARLEN, pad ? GRIST_VARLEN_PAD : GRIST_VARLEN_RAGGED);
	if (pad)
		assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 5 }, 1), 0);
	i = add(f, "pairs", GRIST_WIRE_INT64, GRIST_DTYPE_UINT8, 2, (int64_t)-1, (int64_t)2);
	set(f, i, GRIST_FEATURE_VARLEN, pad ? GRIST_VARLEN_PAD : GRIST_VARLEN_RAGGED);
	if (pad)
		assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 6, 2 }, 2), 0);
	for (int k = 0; k < 3; k++) {
		const char *key = (const char *[]){ "uid", "caption", "meta/source" }[k];

		i = add(f, key, GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 1, (int64_t)-1);
		set(f, i, GRIST_FEATURE_VARLEN, pad ? GRIST_VARLEN_PAD : GRIST_VARLEN_RAGGED);
		if (pad)
			assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 40 }, 1), 0);
	}
	i = add(f, "photo", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 3, (int64_t)-1, (int64_t)-1, (int64_t)3);
	set(f, i, GRIST_FEATURE_DECODE, GRIST_DECODE_JPEG);
	set(f, i, GRIST_FEATURE_VARLEN, pad ? GRIST_VARLEN_PAD : GRIST_VARLEN_RAGGED);
	assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 16, 16, 3 }, 3), 0);
	return f;
}

/* Element j of an array of numpy dtype @name, as a double and (integers) an int64. */
static bool np_elem(const char *name, const uint8_t *p, size_t j, double *dv, int64_t *iv, size_t *size)
{
	union { int8_t i8; uint8_t u8; int16_t i16; uint16_t u16; int32_t i32; uint32_t u32; int64_t i64;
		uint64_t u64; float f32; double f64; } u = { .u64 = 0 };
	bool is_float = false;

	if (!strcmp(name, "bool") || !strcmp(name, "uint8") || !strcmp(name, "int8") || !strcmp(name, "bytes"))
		*size = 1;
	else if (!strcmp(name, "int16") || !strcmp(name, "uint16") || !strcmp(name, "float16"))
		*size = 2;
	else if (!strcmp(name, "int32") || !strcmp(name, "uint32") || !strcmp(name, "float32"))
		*size = 4;
	else
		*size = 8;
	memcpy(&u, p + j * *size, *size);
	if (!strcmp(name, "int8")) *iv = u.i8;
	else if (!strcmp(name, "uint8") || !strcmp(name, "bool") || !strcmp(name, "bytes")) *iv = u.u8;
	else if (!strcmp(name, "int16")) *iv = u.i16;
	else if (!strcmp(name, "uint16")) *iv = u.u16;
	else if (!strcmp(name, "int32")) *iv = u.i32;
	else if (!strcmp(name, "uint32")) *iv = u.u32;
	else if (!strcmp(name, "int64") || !strcmp(name, "uint64")) *iv = u.i64;
	else {
		is_float = true;
		if (!strcmp(name, "float32"))
			*dv = u.f32;
		else if (!strcmp(name, "float64"))
			*dv = u.f64;
		else { /* float16 */
			uint16_t h = u.u16;
			int e = (h >> 10) & 31;
			double m = h & 1023;

			*dv = (e == 31) ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
			if (h & 0x8000)
				*dv = -*dv;
		}
	}
	if (!is_float)
		*dv = (double)*iv;
	return is_float;
}

static const char *dtype_np(enum grist_dtype t)
{
	static const char *names[] = { "", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
				       "float16", "float32", "float64", "bool" };
	return names[t];
}

static void check_typed(bool pad)
{
	struct grist_features *f = typed_spec(pad);
	struct grist_features_decoder *d = decoder(f);
	const struct grist_features *s = grist_features_decoder_spec(d);
	int checked = 0;

	assert_int_equal(grist_features_is_ragged(s), !pad);
	for (int r = 0; r < 3; r++) {
		char name[32];
		uint8_t *rec, *row;
		size_t len, row_len;
		int ret;

		snprintf(name, sizeof(name), "typed-%d.pb", r);
		rec = read_rec(name, &len);
		row = decode1(d, rec, len, &row_len, &ret);
		if (ret)
			fail_msg("%s: %s", name, grist_last_error());
		for (int k = 0; k < num_lines; k++) {
			struct line *l = &lines[k];
			struct grist_feature_column col;
			int64_t dims[GRIST_FEATURE_MAX_DIMS];
			size_t bytes, ndim, want_len, esz, gsz, count = 1;
			uint8_t *got, *want;
			int fi;

			if (strcmp(l->tok[0], "tfds") || strcmp(l->tok[1], name))
				continue;
			fi = grist_features_find(s, l->tok[2]);
			assert_true(fi >= 0);
			grist_feature_column_init(&col);
			assert_int_equal(grist_feature_column(s, (size_t)fi, &col), 0);
			got = gather1(s, l->tok[2], row, row_len, &bytes, dims);
			ndim = (size_t)atoi(l->tok[4]);
			if (!strcmp(l->tok[3], "bytes"))
				ndim = 1; /* TFDS gives bytes; the column is their uint8 vector */
			for (size_t j = 0; j < ndim; j++)
				count *= (size_t)atoll(l->tok[5 + j]);
			assert_int_equal(col.ndim, ndim);
			if (col.varlen != GRIST_VARLEN_NONE || !strcmp(l->tok[3], "bytes"))
				for (size_t j = 0; j < ndim; j++)
					assert_int_equal(dims[j], atoll(l->tok[5 + j]));
			want = malloc(strlen(l->tok[5 + ndim]) / 2 + 1);
			want_len = unhex(l->tok[5 + ndim], want, strlen(l->tok[5 + ndim]) / 2 + 1);
			for (size_t j = 0; j < count; j++) {
				double wd, gd;
				int64_t wi = 0, gi = 0;
				/* a padded image keeps the column's row pitch */
				size_t gj = col.varlen == GRIST_VARLEN_PAD && col.decode == GRIST_DECODE_JPEG ?
					    j / (size_t)(dims[1] * 3) * (size_t)(col.row_shape[1] * 3) + j % (size_t)(dims[1] * 3) : j;
				bool wf = np_elem(l->tok[3], want, j, &wd, &wi, &esz);
				bool gf = np_elem(dtype_np(col.dtype), got, gj, &gd, &gi, &gsz);

				assert_true((j + 1) * esz <= want_len || !count);
				if (wf || gf) {
					if (!(wd == gd || (isnan(wd) && isnan(gd))))
						fail_msg("%s %s[%zu]: got %.17g, TFDS %.17g", name, l->tok[2], j, gd, wd);
				} else if (wi != gi) {
					fail_msg("%s %s[%zu]: got %" PRId64 ", TFDS %" PRId64, name, l->tok[2], j, gi, wi);
				}
			}
			if (col.varlen == GRIST_VARLEN_PAD && col.decode != GRIST_DECODE_JPEG) {
				/* the pad after the record's values */
				assert_int_equal(bytes, col.bytes);
				for (size_t j = count; j < bytes / col.elem_bytes; j++) {
					double gd;
					int64_t gi;

					np_elem(dtype_np(col.dtype), got, j, &gd, &gi, &gsz);
					assert_int_equal(gi, !strcmp(l->tok[2], "ids") ? -1 : 0);
				}
			}
			free(want);
			free(got);
			checked++;
		}
		free(row);
		free(rec);
	}
	assert_int_equal(checked, 3 * 20);
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
}

RAGGED_AND_PADDED(tfds_typed, check_typed)

static enum grist_dtype dtype_named(const char *name)
{
	for (int t = GRIST_DTYPE_UINT8; t <= GRIST_DTYPE_BOOL; t++)
		if (!strcmp(dtype_np((enum grist_dtype)t), name))
			return (enum grist_dtype)t;
	fail_msg("unknown dtype %s", name);
	return GRIST_DTYPE_UINT8;
}

/* Narrowing (two's complement, bool as != 0) and float16 rounding, byte for byte as numpy's astype. */
static void test_casts(void **state)
{
	int checked = 0;

	(void)state;
	for (int k = 0; k < num_lines; k++) {
		struct line *l = &lines[k];
		struct grist_features *f;
		struct grist_features_decoder *d;
		enum grist_dtype t;
		uint8_t *rec, *row, *want;
		size_t len, row_len, wl;
		int64_t n;
		int ret;

		if (strcmp(l->tok[0], "cast"))
			continue;
		t = dtype_named(l->tok[3]);
		n = atoll(l->tok[4]);
		f = spec_new();
		add(f, l->tok[2], !strcmp(l->tok[2], "f") ? GRIST_WIRE_FLOAT : GRIST_WIRE_INT64, t, 1, n);
		d = decoder(f);
		rec = read_rec(l->tok[1], &len);
		row = decode1(d, rec, len, &row_len, &ret);
		assert_int_equal(ret, 0);
		want = malloc(strlen(l->tok[5]) / 2 + 1);
		wl = unhex(l->tok[5], want, strlen(l->tok[5]) / 2 + 1);
		{
			struct grist_feature_column c;

			grist_feature_column_init(&c);
			assert_int_equal(grist_feature_column(f, 0, &c), 0);
			assert_int_equal(wl, (size_t)n * c.elem_bytes);
		}
		for (int64_t j = 0; j < n; j++) {
			size_t e = wl / (size_t)n;

			if (memcmp(row + (size_t)j * e, want + (size_t)j * e, e))
				fail_msg("%s as %s, value %" PRId64 ": differs from numpy", l->tok[2], l->tok[3], j);
		}
		free(want);
		free(row);
		free(rec);
		grist_features_decoder_destroy(d);
		grist_features_destroy(f);
		checked++;
	}
	assert_int_equal(checked, 12);
}

/* Lists of strings (Sequence(Text), string Tensors) as TFDS decodes them: bytes back to back, lengths, counts. */
static void test_strings(void **state)
{
	struct grist_features *f = spec_new();
	struct grist_features_decoder *d;
	const char *keys[] = { "tags", "names", "answers/text" };
	int checked = 0, i;

	(void)state;
	for (int k = 0; k < 3; k++) {
		i = add(f, keys[k], GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 1, (int64_t)(k == 1 ? 2 : -1));
		set(f, i, GRIST_FEATURE_DECODE, GRIST_DECODE_STRINGS);
		set(f, i, GRIST_FEATURE_VARLEN, GRIST_VARLEN_RAGGED);
	}
	set(f, add(f, "answers/start", GRIST_WIRE_INT64, GRIST_DTYPE_INT32, 1, (int64_t)-1), GRIST_FEATURE_VARLEN,
	    GRIST_VARLEN_RAGGED);
	d = decoder(f);
	for (int r = 0; r < 3; r++) {
		char name[32];
		uint8_t *rec, *row;
		size_t len, row_len;
		int ret;

		snprintf(name, sizeof(name), "texts-%d.pb", r);
		rec = read_rec(name, &len);
		row = decode1(d, rec, len, &row_len, &ret);
		if (ret)
			fail_msg("%s: %s", name, grist_last_error());
		for (int k = 0; k < 3; k++) {
			uint64_t offs[2] = { 0, row_len }, lens[8];
			size_t bytes, count, at = 0, want_n = 0;
			int64_t dims[1];
			uint8_t *got;
			struct line *l = NULL;

			for (int m = 0; m < num_lines; m++)
				if ((!strcmp(lines[m].tok[0], "strings") || !strcmp(lines[m].tok[0], "tfds")) &&
				    !strcmp(lines[m].tok[1], name) && !strcmp(lines[m].tok[2], keys[k]))
					l = &lines[m];
			assert_non_null(l);
			if (!strcmp(l->tok[0], "strings"))
				want_n = (size_t)atoll(l->tok[3]);
			else
				assert_string_equal(l->tok[6], "-"); /* TFDS's empty list */
			got = gather1(f, keys[k], row, row_len, &bytes, dims);
			assert_int_equal(dims[0], (int64_t)want_n);
			assert_int_equal(grist_features_gather_lengths(f, (size_t)grist_features_find(f, keys[k]), row, offs, 1,
								       lens, 8, &count), 0);
			assert_int_equal(count, want_n);
			for (size_t j = 0; j < want_n; j++) {
				uint8_t want[256];
				size_t wl = unhex(l->tok[4 + j], want, sizeof(want));

				assert_int_equal(lens[j], wl);
				assert_memory_equal(got + at, want, wl);
				at += wl;
			}
			assert_int_equal(at, bytes);
			free(got);
			checked++;
		}
		free(row);
		free(rec);
	}
	assert_int_equal(checked, 9);
	/* another number of strings than a fixed shape says; strings that are not ragged */
	{
		struct grist_features *g = spec_new();
		struct grist_features_decoder *dg;
		uint8_t *rec, *row;
		size_t len, row_len;
		int ret;

		i = add(g, "tags", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 1, (int64_t)2);
		set(g, i, GRIST_FEATURE_DECODE, GRIST_DECODE_STRINGS);
		assert_int_equal(grist_features_finish(g), -EINVAL);
		set(g, i, GRIST_FEATURE_VARLEN, GRIST_VARLEN_RAGGED);
		dg = decoder(g);
		rec = read_rec("texts-0.pb", &len);
		row = decode1(dg, rec, len, &row_len, &ret);
		assert_int_equal(ret, -EMSGSIZE);
		assert_non_null(strstr(grist_last_error(), "feature 'tags': 3 strings, the spec says 2"));
		assert_int_equal(grist_features_gather_lengths(f, 3, row, (uint64_t[]){ 0, 8 }, 1, NULL, 0, &len), -EINVAL);
		free(row);
		free(rec);
		grist_features_decoder_destroy(dg);
		grist_features_destroy(g);
	}
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
}

/* Sequences of images (Video, Sequence(Image)) as TFDS decodes them, ragged and padded. */
static void check_video(bool pad)
{
	struct grist_features *f = spec_new();
	struct grist_features_decoder *d;
	int checked = 0, i;

	set(f, add(f, "clip", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 4, (int64_t)2, (int64_t)6, (int64_t)6, (int64_t)1),
	    GRIST_FEATURE_DECODE, GRIST_DECODE_PNG);
	i = add(f, "video", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 4, (int64_t)-1, (int64_t)8, (int64_t)10, (int64_t)3);
	set(f, i, GRIST_FEATURE_DECODE, GRIST_DECODE_PNG);
	set(f, i, GRIST_FEATURE_VARLEN, pad ? GRIST_VARLEN_PAD : GRIST_VARLEN_RAGGED);
	assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 4, 8, 10, 3 }, 4), 0);
	i = add(f, "frames", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 4, (int64_t)-1, (int64_t)-1, (int64_t)-1, (int64_t)3);
	set(f, i, GRIST_FEATURE_DECODE, GRIST_DECODE_IMAGE);
	set(f, i, GRIST_FEATURE_VARLEN, pad ? GRIST_VARLEN_PAD : GRIST_VARLEN_RAGGED);
	assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 3, 16, 8, 3 }, 4), 0);
	assert_int_equal(grist_features_set_pad_value(f, (size_t)i, 9), 0);
	d = decoder(f);
	for (int k = 0; k < num_lines; k++) {
		struct line *l = &lines[k];
		struct grist_feature_column col;
		int64_t dims[4], t, h, w, c;
		uint8_t *rec, *row, *got, *want;
		size_t len, row_len, bytes, wl;
		int ret;

		if (strcmp(l->tok[0], "tfds") || strncmp(l->tok[1], "video-", 6))
			continue;
		rec = read_rec(l->tok[1], &len);
		row = decode1(d, rec, len, &row_len, &ret);
		if (ret)
			fail_msg("%s: %s", l->tok[1], grist_last_error());
		got = gather1(f, l->tok[2], row, row_len, &bytes, dims);
		grist_feature_column_init(&col);
		assert_int_equal(grist_feature_column(f, (size_t)grist_features_find(f, l->tok[2]), &col), 0);
		t = atoll(l->tok[5]);
		h = atoll(l->tok[6]);
		w = atoll(l->tok[7]);
		c = atoll(l->tok[8]);
		if (col.varlen != GRIST_VARLEN_NONE) {
			assert_int_equal(dims[0], t);
			assert_int_equal(dims[1], h);
			assert_int_equal(dims[2], w);
			assert_int_equal(dims[3], c);
		}
		want = malloc(strlen(l->tok[9]) / 2 + 1);
		wl = unhex(l->tok[9], want, strlen(l->tok[9]) / 2 + 1);
		assert_int_equal(wl, (size_t)(t * h * w * c));
		if (col.varlen != GRIST_VARLEN_PAD) {
			assert_int_equal(bytes, wl);
			assert_memory_equal(got, want, wl); /* TFDS decodes with OpenCV: PNG and JPEG exact */
		} else {
			int64_t mh = col.row_shape[1], mw = col.row_shape[2];
			uint8_t pv = !strcmp(l->tok[2], "frames") ? 9 : 0;

			assert_int_equal(bytes, col.bytes);
			for (int64_t z = 0; z < col.row_shape[0]; z++)
				for (int64_t y = 0; y < mh; y++)
					for (int64_t x = 0; x < mw * c; x++) {
						uint8_t g = got[(z * mh + y) * mw * c + x];

						if (z < t && y < h && x < w * c)
							assert_int_equal(g, want[((z * h) + y) * w * c + x]);
						else
							assert_int_equal(g, pv);
					}
		}
		free(want);
		free(got);
		free(row);
		free(rec);
		checked++;
	}
	assert_int_equal(checked, 9);
	/* more images than the max, images of two sizes in one record */
	{
		struct grist_example_encoder *e;
		const uint8_t *data;
		uint8_t *a, *b, *both, *row;
		size_t al, bl, dl, row_len;
		int ret;

		a = read_rec("rgb.png", &al);
		b = read_rec("rgb420.jpg", &bl);
		both = malloc(al + bl);
		memcpy(both, a, al);
		memcpy(both + al, b, bl);
		assert_int_equal(grist_example_encoder_create(&e), 0);
		grist_example_begin(e);
		assert_int_equal(grist_example_add_bytes(e, "frames", both, (uint64_t[]){ 0, al, al + bl }, 2), 0);
		assert_int_equal(grist_example_add_bytes(e, "clip", both, (uint64_t[]){ 0, al, al + bl }, 2), 0);
		assert_int_equal(grist_example_add_bytes(e, "video", both, (uint64_t[]){ 0, 0 }, 1), 0);
		assert_int_equal(grist_example_finish(e, &data, &dl), 0);
		row = decode1(d, data, dl, &row_len, &ret);
		assert_int_equal(ret, -EMSGSIZE); /* clip: a 23x37x3 PNG, the spec says 6x6x1 */
		assert_non_null(strstr(grist_last_error(), "feature 'clip': PNG is 23x37x3"));
		free(row);
		grist_features_decoder_destroy(d);
		grist_features_destroy(f);
		f = spec_new();
		i = add(f, "frames", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 4, (int64_t)-1, (int64_t)-1, (int64_t)-1, (int64_t)3);
		set(f, i, GRIST_FEATURE_DECODE, GRIST_DECODE_IMAGE);
		set(f, i, GRIST_FEATURE_VARLEN, GRIST_VARLEN_PAD);
		assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 1, 32, 40, 3 }, 4), 0);
		d = decoder(f);
		row = decode1(d, data, dl, &row_len, &ret);
		assert_int_equal(ret, -EMSGSIZE);
		assert_non_null(strstr(grist_last_error(), "feature 'frames': 2 images, the spec says at most 1"));
		free(row);
		grist_features_decoder_destroy(d);
		grist_features_destroy(f);
		f = spec_new();
		i = add(f, "frames", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 4, (int64_t)-1, (int64_t)-1, (int64_t)-1, (int64_t)3);
		set(f, i, GRIST_FEATURE_DECODE, GRIST_DECODE_IMAGE);
		set(f, i, GRIST_FEATURE_VARLEN, GRIST_VARLEN_RAGGED);
		assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 4, 32, 40, 3 }, 4), 0);
		d = decoder(f);
		row = decode1(d, data, dl, &row_len, &ret);
		assert_int_equal(ret, 0); /* both are 23x37x3: a PNG then a JPEG, one sequence */
		free(row);
		grist_example_begin(e);
		memcpy(both + al, a, 40); /* a second image cut short */
		assert_int_equal(grist_example_add_bytes(e, "frames", both, (uint64_t[]){ 0, al, al + 40 }, 2), 0);
		assert_int_equal(grist_example_finish(e, &data, &dl), 0);
		row = decode1(d, data, dl, &row_len, &ret);
		assert_int_equal(ret, -EBADMSG);
		assert_non_null(strstr(grist_last_error(), "feature 'frames': image 1: "));
		free(row);
		grist_example_encoder_destroy(e);
		free(both);
		free(a);
		free(b);
	}
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
}

RAGGED_AND_PADDED(video, check_video)

/* The fixed row of MNIST: image at 0, label after it, and the pixels TFDS decodes. */
static void test_mnist_layout(void **state)
{
	struct grist_features *f = spec_new();
	struct grist_feature_column c;
	struct grist_features_decoder *d;
	uint8_t want[784];

	(void)state;
	set(f, add(f, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 3, (int64_t)28, (int64_t)28, (int64_t)1),
	    GRIST_FEATURE_DECODE, GRIST_DECODE_IMAGE);
	add(f, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 0);
	d = decoder(f);
	assert_int_equal(grist_features_row_bytes(f), 792);
	assert_false(grist_features_is_ragged(f));
	grist_feature_column_init(&c);
	assert_int_equal(grist_feature_column(f, 1, &c), 0);
	assert_int_equal(c.offset, 784);
	assert_int_equal(c.bytes, 8);
	assert_int_equal(c.dims_offset, SIZE_MAX);
	assert_int_equal(grist_features_id(f), grist_features_id(grist_features_decoder_spec(d)));
	for (int k = 0; k < num_lines; k++) {
		struct line *l = &lines[k];
		uint8_t *rec, *row;
		size_t len, row_len;
		int64_t label;
		int ret;

		if (strcmp(l->tok[0], "tfds") || strncmp(l->tok[1], "mnist", 5) || strcmp(l->tok[2], "image"))
			continue;
		rec = read_rec(l->tok[1], &len);
		row = decode1(d, rec, len, &row_len, &ret);
		assert_int_equal(ret, 0);
		assert_int_equal(row_len, 792);
		assert_int_equal(unhex(l->tok[8], want, sizeof(want)), 784);
		assert_memory_equal(row, want, 784);
		assert_string_equal(lines[k + 1].tok[2], "label"); /* sorted by key: label's line is next */
		assert_string_equal(lines[k + 1].tok[0], "tfds");
		unhex(lines[k + 1].tok[5], (uint8_t *)&label, 8);
		assert_memory_equal(row + 784, &label, 8);
		free(row);
		free(rec);
	}
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
}

/* ------------------------------------------------------------------ images */

static uint8_t *image_record(struct grist_example_encoder *e, const uint8_t *img, size_t len, size_t *rlen)
{
	const uint8_t *data;
	uint8_t *copy;

	grist_example_begin(e);
	assert_int_equal(grist_example_add_bytes(e, "img", img, (uint64_t[]){ 0, len }, 1), 0);
	assert_int_equal(grist_example_finish(e, &data, rlen), 0);
	copy = malloc(*rlen);
	memcpy(copy, data, *rlen);
	return copy;
}

static enum grist_dtype image_dtype = GRIST_DTYPE_UINT8;

static struct grist_features_decoder *image_decoder(enum grist_decode kind, int64_t h, int64_t w, int64_t c,
						    enum grist_varlen vl, const int64_t *max)
{
	struct grist_features *f = spec_new();
	struct grist_features_decoder *d;
	int i = add(f, "img", GRIST_WIRE_BYTES, image_dtype, 3, h, w, c);

	set(f, i, GRIST_FEATURE_DECODE, kind);
	set(f, i, GRIST_FEATURE_VARLEN, vl);
	if (max) {
		assert_int_equal(grist_features_set_max_shape(f, (size_t)i, max, 3), 0);
		assert_int_equal(grist_features_set_pad_value(f, (size_t)i, 7), 0);
	}
	d = decoder(f);
	grist_features_destroy(f);
	return d;
}

static void test_images(void **state)
{
	struct grist_example_encoder *e;
	int tolerance = -1, checked = 0, refused = 0;

	(void)state;
	assert_int_equal(grist_example_encoder_create(&e), 0);
	for (int k = 0; k < num_lines; k++)
		if (!strcmp(lines[k].tok[0], "jpeg_tolerance"))
			tolerance = atoi(lines[k].tok[1]);
	assert_true(tolerance >= 0);
	for (int k = 0; k < num_lines; k++) {
		struct line *l = &lines[k];
		struct grist_features_decoder *d;
		uint8_t *img, *rec, *row, *want;
		size_t len, rlen, row_len, wlen;
		int64_t h, w, c;
		size_t es;
		bool jpeg;
		int ret, maxdiff = 0;

		if (strcmp(l->tok[0], "image"))
			continue;
		img = read_rec(l->tok[1], &len);
		rec = image_record(e, img, len, &rlen);
		jpeg = strstr(l->tok[1], ".jpg") != NULL;
		if (!strcmp(l->tok[2], "unsupported")) {
			image_dtype = GRIST_DTYPE_UINT8;
			d = image_decoder(GRIST_DECODE_IMAGE, 23, 37, 1, GRIST_VARLEN_NONE, NULL);
			row = decode1(d, rec, rlen, &row_len, &ret);
			assert_int_equal(ret, -ENOTSUP);
			assert_non_null(strstr(grist_last_error(), "feature 'img'"));
			free(row);
			grist_features_decoder_destroy(d);
			refused++;
			free(rec);
			free(img);
			continue;
		}
		h = atoll(l->tok[2]);
		w = atoll(l->tok[3]);
		c = atoll(l->tok[4]);
		es = l->n > 6 && !strcmp(l->tok[6], "uint16") ? 2 : 1;
		image_dtype = es == 2 ? GRIST_DTYPE_UINT16 : GRIST_DTYPE_UINT8;
		want = read_rec(l->tok[5], &wlen);
		assert_int_equal(wlen, (size_t)(h * w * c) * es);

		/* exact shape, told by kind and by magic (PNG exact, JPEG within what PIL and OpenCV differ by) */
		for (int auto_kind = 0; auto_kind < 2; auto_kind++) {
			d = image_decoder(auto_kind ? GRIST_DECODE_IMAGE : jpeg ? GRIST_DECODE_JPEG : GRIST_DECODE_PNG, h, w,
					  c, GRIST_VARLEN_NONE, NULL);
			row = decode1(d, rec, rlen, &row_len, &ret);
			if (ret)
				fail_msg("%s: %s", l->tok[1], grist_last_error());
			for (size_t j = 0; j < wlen; j++) {
				int diff = abs((int)row[j] - (int)want[j]);

				maxdiff = diff > maxdiff ? diff : maxdiff;
			}
			if (maxdiff > (jpeg ? tolerance : 0))
				fail_msg("%s: differs from PIL by %d", l->tok[1], maxdiff);
			free(row);
			grist_features_decoder_destroy(d);
		}

		/* padded into a larger column: the corner holds the image, the rest the pad value */
		d = image_decoder(jpeg ? GRIST_DECODE_JPEG : GRIST_DECODE_PNG, -1, -1, c, GRIST_VARLEN_PAD,
				  (int64_t[]){ 30, 40, c });
		row = decode1(d, rec, rlen, &row_len, &ret);
		assert_int_equal(ret, 0);
		for (int64_t y = 0; y < 30; y++)
			for (int64_t x = 0; x < 40 * c; x++) {
				unsigned got = 0, exp = 0;

				memcpy(&got, row + (size_t)(y * 40 * c + x) * es, es);
				if (y < h && x < w * c) {
					memcpy(&exp, want + (size_t)(y * w * c + x) * es, es);
					assert_true(abs((int)got - (int)exp) <= (jpeg ? tolerance : 0));
				} else {
					assert_int_equal(got, 7);
				}
			}
		{
			int64_t dims[3];
			struct grist_feature_column col;

			grist_feature_column_init(&col);
			grist_feature_column(grist_features_decoder_spec(d), 0, &col);
			memcpy(dims, row + col.dims_offset, sizeof(dims));
			assert_int_equal(dims[0], h);
			assert_int_equal(dims[1], w);
			assert_int_equal(dims[2], c);
		}
		free(row);
		grist_features_decoder_destroy(d);

		/* another shape than the image's is an error that says both, before writing */
		d = image_decoder(GRIST_DECODE_IMAGE, h + 1, w, c, GRIST_VARLEN_NONE, NULL);
		row = decode1(d, rec, rlen, &row_len, &ret);
		assert_int_equal(ret, -EMSGSIZE);
		assert_non_null(strstr(grist_last_error(), "feature 'img'"));
		assert_non_null(strstr(grist_last_error(), jpeg ? "JPEG is 23x37" : "PNG is 23x37"));
		for (size_t j = 0; j < wlen; j++)
			assert_int_equal(row[j], 0xa5);
		free(row);
		grist_features_decoder_destroy(d);
		/* another channel count */
		d = image_decoder(GRIST_DECODE_IMAGE, h, w, c == 3 ? 1 : 3, GRIST_VARLEN_NONE, NULL);
		row = decode1(d, rec, rlen, &row_len, &ret);
		assert_int_equal(ret, -EMSGSIZE);
		free(row);
		grist_features_decoder_destroy(d);
		/* the other sample width */
		if (!jpeg) {
			image_dtype = es == 2 ? GRIST_DTYPE_UINT8 : GRIST_DTYPE_UINT16;
			d = image_decoder(GRIST_DECODE_PNG, h, w, c, GRIST_VARLEN_NONE, NULL);
			row = decode1(d, rec, rlen, &row_len, &ret);
			assert_int_equal(ret, -EBADMSG);
			assert_non_null(strstr(grist_last_error(), es == 2 ? "16-bit samples" : "8-bit samples"));
			free(row);
			grist_features_decoder_destroy(d);
			image_dtype = es == 2 ? GRIST_DTYPE_UINT16 : GRIST_DTYPE_UINT8;
		}
		/* the other format asked for */
		if (es == 2)
			goto damaged;
		d = image_decoder(jpeg ? GRIST_DECODE_PNG : GRIST_DECODE_JPEG, h, w, c == 1 || c == 3 ? c : 3,
				  GRIST_VARLEN_NONE, NULL);
		row = decode1(d, rec, rlen, &row_len, &ret);
		assert_int_equal(ret, -EBADMSG);
		assert_non_null(strstr(grist_last_error(), jpeg ? "not a PNG" : "not a JPEG"));
		free(row);
		grist_features_decoder_destroy(d);

damaged:
		/* damaged: cut short, and a flipped byte in the middle */
		for (int cut = 0; cut < 2; cut++) {
			uint8_t *bad = malloc(len), *brec;
			size_t blen;

			memcpy(bad, img, len);
			if (!cut)
				bad[len / 2] ^= 0x55;
			brec = image_record(e, bad, cut ? len * 2 / 3 : len, &blen);
			d = image_decoder(GRIST_DECODE_IMAGE, h, w, c, GRIST_VARLEN_NONE, NULL);
			row = decode1(d, brec, blen, &row_len, &ret);
			/* a JPEG's flipped entropy-coded byte can decode to other pixels without a
			   warning (nothing checks JPEG data), so only the cut is an error for JPEG */
			if (cut || !jpeg) {
				if (ret != -EBADMSG)
					fail_msg("%s damaged (%s): %d %s", l->tok[1], cut ? "cut" : "flipped", ret,
						 grist_last_error());
			}
			free(row);
			grist_features_decoder_destroy(d);
			free(brec);
			free(bad);
		}
		checked++;
		free(want);
		free(rec);
		free(img);
	}
	assert_int_equal(checked, 14);
	assert_int_equal(refused, 1);
	image_dtype = GRIST_DTYPE_UINT8;
	grist_example_encoder_destroy(e);
}

/* ------------------------------------------------------------------ the encoder */

/* Encode a record's wire lines (in @reverse order too) and compare with protobuf's deterministic bytes. */
static void test_encoder_matches_protobuf(void **state)
{
	struct grist_example_encoder *e;
	int records = 0;

	(void)state;
	assert_int_equal(grist_example_encoder_create(&e), 0);
	for (int a = 0; a < num_lines;) {
		const char *name = lines[a].tok[1];
		int b = a;

		while (b < num_lines && lines[b].n > 1 && !strcmp(lines[b].tok[1], name))
			b++;
		if (strcmp(lines[a].tok[0], "wire") || (strncmp(name, "mnist", 5) && strncmp(name, "typed", 5))) {
			a = b > a ? b : a + 1;
			continue;
		}
		for (int reverse = 0; reverse < 2; reverse++) {
			char det_name[64];
			const uint8_t *out;
			uint8_t *det;
			size_t out_len, det_len;

			grist_example_begin(e);
			for (int k = reverse ? b - 1 : a; reverse ? k >= a : k < b; k += reverse ? -1 : 1) {
				struct line *l = &lines[k];
				size_t n;

				if (strcmp(l->tok[0], "wire"))
					continue;
				n = (size_t)atoll(l->tok[4]);
				if (!strcmp(l->tok[3], "int64")) {
					int64_t *v = calloc(n + 1, 8);

					for (size_t j = 0; j < n; j++)
						v[j] = strtoll(l->tok[5 + j], NULL, 10);
					/* a key added before its last value: the last one counts */
					if (reverse)
						assert_int_equal(grist_example_add_int64s(e, l->tok[2], (int64_t[]){ 99 }, 1), 0);
					assert_int_equal(grist_example_add_int64s(e, l->tok[2], v, n), 0);
					free(v);
				} else if (!strcmp(l->tok[3], "float")) {
					float *v = calloc(n + 1, 4);

					for (size_t j = 0; j < n; j++)
						unhex(l->tok[5 + j], (uint8_t *)&v[j], 4);
					assert_int_equal(grist_example_add_floats(e, l->tok[2], v, n), 0);
					free(v);
				} else {
					uint64_t *offs = calloc(n + 1, 8);
					uint8_t *data = malloc(100000);

					for (size_t j = 0; j < n; j++)
						offs[j + 1] = offs[j] + unhex(l->tok[5 + j], data + offs[j], 100000 - offs[j]);
					assert_int_equal(grist_example_add_bytes(e, l->tok[2], data, offs, n), 0);
					free(offs);
					free(data);
				}
			}
			assert_int_equal(grist_example_finish(e, &out, &out_len), 0);
			snprintf(det_name, sizeof(det_name), "%.*s.det", (int)(strlen(name) - 3), name);
			det = read_rec(det_name, &det_len);
			assert_int_equal(out_len, det_len);
			assert_memory_equal(out, det, det_len);
			free(det);
		}
		records++;
		a = b;
	}
	assert_int_equal(records, 35);

	/* add_typed widens as TFDS does: int32 to int64, float64 and float16 to float */
	{
		const uint8_t *x, *y;
		size_t xl, yl;
		uint8_t *copy;
		int32_t i32[3] = { -1, 7, INT32_MIN };
		double f64[2] = { 1.0 / 3, 1e300 };
		uint16_t f16[2] = { 0x3c00, 0xc000 }; /* 1.0, -2.0 */

		grist_example_begin(e);
		assert_int_equal(grist_example_add_typed(e, "a", GRIST_DTYPE_INT32, i32, 3), 0);
		assert_int_equal(grist_example_add_typed(e, "b", GRIST_DTYPE_FLOAT64, f64, 2), 0);
		assert_int_equal(grist_example_add_typed(e, "c", GRIST_DTYPE_FLOAT16, f16, 2), 0);
		assert_int_equal(grist_example_finish(e, &x, &xl), 0);
		copy = malloc(xl);
		memcpy(copy, x, xl);
		grist_example_begin(e);
		assert_int_equal(grist_example_add_int64s(e, "a", (int64_t[]){ -1, 7, INT32_MIN }, 3), 0);
		assert_int_equal(grist_example_add_floats(e, "b", (float[]){ (float)(1.0 / 3), INFINITY }, 2), 0);
		assert_int_equal(grist_example_add_floats(e, "c", (float[]){ 1.0f, -2.0f }, 2), 0);
		assert_int_equal(grist_example_finish(e, &y, &yl), 0);
		assert_int_equal(xl, yl);
		assert_memory_equal(copy, y, yl);
		free(copy);
	}
	/* bad keys are refused, and finish reports the failed add */
	grist_example_begin(e);
	assert_int_equal(grist_example_add_int64s(e, "", (int64_t[]){ 1 }, 1), -EINVAL);
	{
		const uint8_t *x;
		size_t xl;

		assert_int_equal(grist_example_finish(e, &x, &xl), -EINVAL);
	}
	grist_example_encoder_destroy(e);
}

/* ------------------------------------------------------------------ errors */

static void test_bad_specs(void **state)
{
	struct grist_features *f;
	int i;

	(void)state;
	f = spec_new();
	assert_int_equal(grist_features_finish(f), -EINVAL); /* no features */
	assert_int_equal(grist_features_add(f, "", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, NULL, 0), -EINVAL);
	assert_int_equal(grist_features_add(f, "x", GRIST_WIRE_INT64, GRIST_DTYPE_FLOAT32, NULL, 0), -EINVAL);
	assert_int_equal(grist_features_add(f, "x", GRIST_WIRE_FLOAT, GRIST_DTYPE_INT64, NULL, 0), -EINVAL);
	assert_int_equal(grist_features_add(f, "x", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, (int64_t[]){ -2 }, 1), -EINVAL);
	i = add(f, "seq", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 1, (int64_t)-1);
	assert_int_equal(grist_features_add(f, "seq", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, NULL, 0), -EINVAL);
	assert_int_equal(grist_features_set(f, (size_t)i, GRIST_FEATURE_DECODE, GRIST_DECODE_PNG), -EINVAL);
	assert_int_equal(grist_features_set(f, 5, GRIST_FEATURE_VARLEN, 1), -EINVAL);
	assert_int_equal(grist_features_set(f, (size_t)i, GRIST_FEATURE_VARLEN, 9), -EINVAL);
	assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 4, 4 }, 2), -EINVAL);
	/* a varying shape with no varlen mode: refused, naming the feature */
	assert_int_equal(grist_features_finish(f), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "feature 'seq'"));
	set(f, i, GRIST_FEATURE_VARLEN, GRIST_VARLEN_PAD);
	assert_int_equal(grist_features_finish(f), -EINVAL); /* pad without a max */
	assert_non_null(strstr(grist_last_error(), "max shape"));
	assert_int_equal(grist_features_set_max_shape(f, (size_t)i, (int64_t[]){ 4 }, 1), 0);
	assert_int_equal(grist_features_finish(f), 0);
	assert_int_equal(grist_features_add(f, "late", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, NULL, 0), -EINVAL);
	grist_features_destroy(f);

	for (int k = 0; k < 3; k++) { /* images are uint8 HWC, or uint16 for PNG */
		f = spec_new();
		set(f, add(f, "im", GRIST_WIRE_BYTES, k == 0 ? GRIST_DTYPE_INT16 : GRIST_DTYPE_UINT16, k == 2 ? 2 : 3,
			   (int64_t)2, (int64_t)2, (int64_t)1), GRIST_FEATURE_DECODE, k == 1 ? GRIST_DECODE_JPEG : GRIST_DECODE_PNG);
		assert_int_equal(grist_features_finish(f), -EINVAL);
		grist_features_destroy(f);
	}
	f = spec_new(); /* two varying dims of plain values cannot be told apart */
	i = add(f, "m", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 2, (int64_t)-1, (int64_t)-1);
	set(f, i, GRIST_FEATURE_VARLEN, GRIST_VARLEN_RAGGED);
	assert_int_equal(grist_features_finish(f), -EINVAL);
	grist_features_destroy(f);
	f = spec_new(); /* a ragged image needs a bound */
	i = add(f, "im", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 3, (int64_t)-1, (int64_t)-1, (int64_t)3);
	set(f, i, GRIST_FEATURE_DECODE, GRIST_DECODE_JPEG);
	set(f, i, GRIST_FEATURE_VARLEN, GRIST_VARLEN_RAGGED);
	assert_int_equal(grist_features_finish(f), -EINVAL);
	grist_features_destroy(f);
	f = spec_new(); /* larger than a row may be */
	add(f, "big", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 2, (int64_t)1 << 20, (int64_t)1 << 20);
	assert_int_equal(grist_features_finish(f), -EINVAL);
	grist_features_destroy(f);
	/* the id changes with anything that shapes a row */
	{
		uint64_t ids[4];

		for (int k = 0; k < 4; k++) {
			f = spec_new();
			i = add(f, k == 1 ? "y" : "x", GRIST_WIRE_INT64, k == 2 ? GRIST_DTYPE_INT32 : GRIST_DTYPE_INT64, 1,
				(int64_t)(k == 3 ? 3 : 2));
			assert_int_equal(grist_features_finish(f), 0);
			ids[k] = grist_features_id(f);
			grist_features_destroy(f);
		}
		for (int x = 0; x < 4; x++)
			for (int y = x + 1; y < 4; y++)
				assert_true(ids[x] != ids[y]);
	}
}

static void expect_error(struct grist_features_decoder *d, const uint8_t *rec, size_t len, int code,
			 const char *text)
{
	size_t row_len;
	int ret;
	uint8_t *row = decode1(d, rec, len, &row_len, &ret);

	if (ret != code || (text && !strstr(grist_last_error(), text)))
		fail_msg("expected %d '%s', got %d: %s", code, text ? text : "", ret, grist_last_error());
	free(row);
}

static void test_bad_records(void **state)
{
	struct grist_features *f = typed_spec(false);
	struct grist_features_decoder *d = decoder(f);
	uint8_t *rec, *cut;
	size_t len, row_len;
	int ret;

	(void)state;
	rec = read_rec("typed-2.pb", &len);
	/* the record is fine; every strict prefix of it fails (never a row) */
	free(decode1(d, rec, len, &row_len, &ret));
	assert_int_equal(ret, 0);
	for (size_t n = 0; n < len; n++) {
		uint8_t *row;

		cut = malloc(n + 1);
		memcpy(cut, rec, n);
		row = decode1(d, cut, n, &row_len, &ret);
		if (ret >= 0)
			fail_msg("a prefix of %zu bytes decoded", n);
		assert_true(strlen(grist_last_error()) > 10);
		free(row);
		free(cut);
	}
	/* the location: dataset and record when no files are named */
	expect_error(d, rec, 3, -EBADMSG, "dataset 0 record 7: not a well-formed tf.train.Example");
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);

	/* wrong kind, wrong count, missing key, a Feature with no list, several values for one image */
	{
		struct { const char *key; enum grist_wire w; enum grist_dtype t; int64_t dim; int code; const char *text; }
		cases[] = {
			{ "label", GRIST_WIRE_FLOAT, GRIST_DTYPE_FLOAT32, 0, -EBADMSG, "a int64_list, the spec says float_list" },
			{ "vec", GRIST_WIRE_FLOAT, GRIST_DTYPE_FLOAT32, 5, -EMSGSIZE, "4 values, which do not make the shape (5,)" },
			{ "ids", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 4, -EMSGSIZE, "5 values" },
			{ "nothere", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 0, -EBADMSG, "feature 'nothere': missing" },
			{ "uid", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 2, -EMSGSIZE, "3 bytes" },
		};

		for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
			struct grist_features_decoder *dk;

			f = spec_new();
			if (cases[k].dim)
				grist_features_add(f, cases[k].key, cases[k].w, cases[k].t, &cases[k].dim, 1);
			else
				grist_features_add(f, cases[k].key, cases[k].w, cases[k].t, NULL, 0);
			dk = decoder(f);
			expect_error(dk, rec, len, cases[k].code, cases[k].text);
			grist_features_decoder_destroy(dk);
			grist_features_destroy(f);
		}
	}
	free(rec);
	rec = read_rec("wire-order.pb", &len);
	f = spec_new();
	add(f, "e", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 0);
	d = decoder(f);
	expect_error(d, rec, len, -EBADMSG, "a Feature with no list set");
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
	f = spec_new();
	set(f, add(f, "m", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 1, (int64_t)0), GRIST_FEATURE_DECODE, GRIST_DECODE_BYTES);
	d = decoder(f);
	expect_error(d, rec, len, -EMSGSIZE, "a bytes_list of 0 values, one expected");
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
	free(rec);

	/* malformed wire bytes: a group, a length past the end, a varint of 11 bytes */
	{
		static const uint8_t group[] = { 0x0b, 0x0c };
		static const uint8_t past[] = { 0x0a, 0x05, 0x0a, 0x01 };
		static const uint8_t long_varint[] = { 0x0a, 0x10, 0x0a, 0x0e, 0x0a, 0x01, 'a', 0x12, 0x09, 0x1a, 0x07,
						       0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

		f = spec_new();
		add(f, "a", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 0);
		d = decoder(f);
		expect_error(d, group, sizeof(group), -EBADMSG, "not a well-formed");
		expect_error(d, past, sizeof(past), -EBADMSG, "runs past");
		expect_error(d, long_varint, sizeof(long_varint), -EBADMSG, "int64_list");
		grist_features_decoder_destroy(d);
		grist_features_destroy(f);
	}

	/* a ragged row that does not fit its room */
	rec = read_rec("typed-2.pb", &len);
	f = typed_spec(false);
	d = decoder(f);
	{
		size_t cap = grist_features_row_bytes(f) + 16;
		uint8_t *row = aligned_alloc(8, cap);

		assert_int_equal(grist_features_decode(d, rec, len, 0, 1, row, cap, &row_len), -EMSGSIZE);
		assert_non_null(strstr(grist_last_error(), "map_out_max"));
		free(row);
	}
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
	free(rec);
}

/* ------------------------------------------------------------------ batches and the pool */

static void test_decode_batch_pool(void **state)
{
	enum { N = 300 };
	const uint8_t *recs[N];
	size_t lens[N], cap;
	uint8_t *owned[3], *rows[2];
	uint64_t *offs[2], idx[N];
	struct grist_features_pool *pool;
	struct grist_features *f = typed_spec(false);
	struct grist_features_decoder *d = decoder(f);
	int ret;

	(void)state;
	for (int r = 0; r < 3; r++) {
		char name[32];

		snprintf(name, sizeof(name), "typed-%d.pb", r);
		owned[r] = read_rec(name, &lens[r]);
	}
	for (int i = 0; i < N; i++) {
		recs[i] = owned[i % 3];
		lens[i] = lens[i % 3];
		idx[i] = 1000 + (uint64_t)i;
	}
	cap = grist_features_batch_bound(f, lens, N);
	assert_int_equal(grist_features_pool_create(2, &pool), 0);
	for (int p = 0; p < 2; p++) {
		rows[p] = aligned_alloc(8, cap);
		offs[p] = calloc(N + 1, 8);
		memset(rows[p], p ? 0x11 : 0x22, cap);
		assert_int_equal(grist_features_decode_batch(d, p ? pool : NULL, recs, lens, N, 0, idx, rows[p], cap,
							     offs[p]), 0);
	}
	/* the same rows on the pool as on one thread, pad bytes included where rows were written */
	assert_memory_equal(offs[0], offs[1], (N + 1) * 8);
	for (int i = 0; i < N; i++) {
		size_t one_len;
		uint8_t *one = decode1(d, recs[i], lens[i], &one_len, &ret);

		assert_int_equal(ret, 0);
		assert_memory_equal(rows[0] + offs[0][i], one, one_len);
		assert_memory_equal(rows[1] + offs[1][i], one, one_len);
		free(one);
	}
	/* gather a ragged feature over the batch: values back to back, lengths in dims */
	{
		int fi = grist_features_find(f, "ids");
		size_t bytes;
		int64_t *dims = calloc(N, 8), *vals;

		assert_int_equal(grist_features_gather_bytes(f, (size_t)fi, rows[1], offs[1], N, &bytes), 0);
		assert_int_equal(bytes, 100 * 8 * (3 + 0 + 5));
		vals = malloc(bytes);
		assert_int_equal(grist_features_gather(f, (size_t)fi, rows[1], offs[1], N, vals, bytes, dims), 0);
		assert_int_equal(dims[0], 3);
		assert_int_equal(dims[1], 0);
		assert_int_equal(dims[2], 5);
		assert_int_equal(vals[3], 5); /* record 2's first id, after record 0's three */
		assert_int_equal(grist_features_gather(f, (size_t)fi, rows[1], offs[1], N, vals, bytes - 8, dims), -EINVAL);
		free(vals);
		free(dims);
	}
	/* two bad records: the lower one is reported, by its index, on the pool as alone */
	{
		uint8_t bad[4] = { 0x0a, 0x7f, 0, 0 };

		recs[250] = bad;
		lens[250] = 4;
		recs[77] = bad;
		lens[77] = 3;
		cap = grist_features_batch_bound(f, lens, N);
		for (int p = 0; p < 2; p++) {
			free(rows[p]);
			rows[p] = aligned_alloc(8, cap);
			ret = grist_features_decode_batch(d, p ? pool : NULL, recs, lens, N, 0, idx, rows[p], cap, offs[p]);
			assert_int_equal(ret, -EBADMSG);
			assert_non_null(strstr(grist_last_error(), "dataset 0 record 1077: "));
			ret = grist_features_decode_batch(d, p ? pool : NULL, recs, lens, N, 0, NULL, rows[p], cap, offs[p]);
			assert_non_null(strstr(grist_last_error(), "batch record 77: "));
		}
		assert_int_equal(grist_features_decode_batch(d, pool, recs, lens, N, 0, idx, rows[0], cap - 1, offs[0]),
				 -EINVAL);
	}
	for (int p = 0; p < 2; p++) {
		free(rows[p]);
		free(offs[p]);
	}
	for (int r = 0; r < 3; r++)
		free(owned[r]);
	grist_features_pool_destroy(pool);
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
}

/* ------------------------------------------------------------------ the loader */

/* Write @n records cycling over mnist-*.pb to @path; record @bad (if < n) gets a cut PNG. */
static void write_mnist_file(const char *path, int n, int first, int bad)
{
	struct grist_writer *w;

	assert_int_equal(grist_writer_open(path, "group_size:4,zstd:3", &w), 0);
	for (int i = 0; i < n; i++) {
		char name[32];
		uint8_t *rec;
		size_t len;

		snprintf(name, sizeof(name), "mnist-%02d.pb", (first + i) % 32);
		rec = read_rec(name, &len);
		if (i == bad) {
			/* the record rewritten with the encoder, its PNG cut inside IDAT */
			struct grist_example_encoder *e;
			const uint8_t *data;
			size_t dl;
			uint8_t png[2048];
			size_t pl = 0;

			/* the PNG inside the record, from its signature to the end of IEND; keep half */
			for (size_t k = 0; k + 8 < len && !pl; k++)
				if (!memcmp(rec + k, "\x89PNG", 4))
					for (size_t m = k; m + 8 <= len; m++)
						if (!memcmp(rec + m, "IEND", 4)) {
							pl = m + 8 - k;
							assert_true(pl <= sizeof(png));
							memcpy(png, rec + k, pl);
							break;
						}
			assert_true(pl > 60);
			assert_int_equal(grist_example_encoder_create(&e), 0);
			grist_example_begin(e);
			assert_int_equal(grist_example_add_bytes(e, "image", png, (uint64_t[]){ 0, pl / 2 }, 1), 0);
			assert_int_equal(grist_example_add_int64s(e, "label", (int64_t[]){ 1 }, 1), 0);
			assert_int_equal(grist_example_finish(e, &data, &dl), 0);
			assert_int_equal(grist_writer_write(w, data, dl), 0);
			grist_example_encoder_destroy(e);
		} else {
			assert_int_equal(grist_writer_write(w, rec, len), 0);
		}
		free(rec);
	}
	assert_int_equal(grist_writer_close(w), 0);
}

static struct grist_features *mnist_spec(void)
{
	struct grist_features *f = spec_new();

	set(f, add(f, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 3, (int64_t)28, (int64_t)28, (int64_t)1),
	    GRIST_FEATURE_DECODE, GRIST_DECODE_PNG);
	add(f, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, 0);
	assert_int_equal(grist_features_finish(f), 0);
	return f;
}

/* Run the loader with the features map; returns all batch bytes concatenated (or NULL on error). */
static uint8_t *run_loader(const char *const *paths, size_t np, unsigned threads, size_t *total, int *err)
{
	struct grist_features *f = mnist_spec();
	struct grist_dataset_spec ds = { .paths = paths, .num_paths = np };
	struct grist_features_decoder *d;
	struct grist_loader_config cfg = { .size = sizeof(cfg) };
	struct grist_loader *l;
	struct grist_batch *b;
	uint8_t *all = NULL;
	size_t at = 0;
	int ret;

	assert_int_equal(grist_features_decoder_create(f, &ds, 1, &d), 0);
	t_features_loader_config(&cfg, &ds, f, d, 16, threads);
	cfg.engine = GRIST_ENGINE_PREAD;
	assert_int_equal(grist_loader_create(&cfg, &l), 0);
	while ((ret = grist_loader_next(l, &b)) == 0 && b) {
		assert_int_equal(b->record_bytes, 792);
		all = realloc(all, at + b->bytes + 8 * b->num_records);
		memcpy(all + at, b->data, b->bytes);
		at += b->bytes;
		/* each row is the record TFDS decodes, found by its index */
		for (size_t r = 0; r < b->num_records; r++) {
			uint64_t idx = b->indices[r];

			memcpy(all + at, &idx, 8);
			at += 8;
		}
		grist_loader_release(l, b);
	}
	*err = ret;
	grist_loader_destroy(l);
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
	*total = at;
	return all;
}

static void test_loader_rows(void **state)
{
	char *dir = t_mkdtemp();
	char a[512], bpath[512];
	const char *paths[2] = { a, bpath };
	uint8_t *one, *two;
	size_t n1, n2;
	int err;

	(void)state;
	snprintf(a, sizeof(a), "%s", t_path(dir, "a.array_record"));
	snprintf(bpath, sizeof(bpath), "%s", t_path(dir, "b.array_record"));
	write_mnist_file(a, 50, 0, -1);
	write_mnist_file(bpath, 37, 50, -1);
	one = run_loader(paths, 2, 1, &n1, &err);
	assert_int_equal(err, 0);
	two = run_loader(paths, 2, 2, &n2, &err);
	assert_int_equal(err, 0);
	/* identical bytes at 1 and 2 threads; 2 epochs of 87 records of 792 bytes + indices */
	assert_int_equal(n1, 2 * 87 * (792 + 8));
	assert_int_equal(n1, n2);
	assert_memory_equal(one, two, n1);
	/* every row is what TFDS decodes for the record at its index */
	{
		size_t at = 0, seen = 0;

		while (at < n1) {
			size_t rows = (n1 - at) >= 16 * 800 ? 16 : (n1 - at) / 800;
			const uint8_t *data = one + at, *idx = one + at + rows * 792;

			for (size_t r = 0; r < rows; r++) {
				uint64_t i;
				char name[32];

				memcpy(&i, idx + 8 * r, 8);
				snprintf(name, sizeof(name), "mnist-%02d.pb", (int)(i % 32));
				for (int k = 0; k < num_lines; k++) {
					uint8_t want[784];
					int64_t label;

					if (strcmp(lines[k].tok[0], "tfds") || strcmp(lines[k].tok[1], name) ||
					    strcmp(lines[k].tok[2], "image"))
						continue;
					unhex(lines[k].tok[8], want, sizeof(want));
					assert_memory_equal(data + r * 792, want, 784);
					unhex(lines[k + 1].tok[5], (uint8_t *)&label, 8);
					assert_memory_equal(data + r * 792 + 784, &label, 8);
					seen++;
				}
			}
			at += rows * 800;
		}
		assert_int_equal(seen, 2 * 87);
	}
	free(one);
	free(two);

	/* a checkpoint taken with one spec is refused with another: the map id is the spec's */
	{
		struct grist_features *fa = mnist_spec(), *fb = spec_new();
		struct grist_dataset_spec ds = { .paths = paths, .num_paths = 2 };
		struct grist_features_decoder *da;
		struct grist_loader_config cfg = { .size = sizeof(cfg) };
		struct grist_loader *l;
		struct grist_batch *b;
		uint8_t st[GRIST_STATE_MAX];
		size_t st_len;

		set(fb, add(fb, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, 3, (int64_t)28, (int64_t)28, (int64_t)1),
		    GRIST_FEATURE_DECODE, GRIST_DECODE_PNG);
		add(fb, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT32, 0);
		assert_int_equal(grist_features_finish(fb), 0);
		assert_int_equal(grist_features_decoder_create(fa, &ds, 1, &da), 0);
		cfg.datasets = &ds;
		cfg.num_datasets = 1;
		cfg.batch_size = 16;
		cfg.layout = GRIST_LAYOUT_FIXED;
		cfg.record_bytes = grist_features_row_bytes(fa);
		cfg.map = grist_features_map;
		cfg.map_ctx = da;
		cfg.map_id = grist_features_id(fa);
		assert_int_equal(grist_loader_create(&cfg, &l), 0);
		assert_int_equal(grist_loader_next(l, &b), 0);
		grist_loader_release(l, b);
		assert_int_equal(grist_loader_save_state(l, st, sizeof(st), &st_len), 0);
		grist_loader_destroy(l);
		cfg.resume_state = st;
		cfg.resume_state_len = st_len;
		assert_int_equal(grist_loader_create(&cfg, &l), 0); /* the same spec resumes */
		grist_loader_destroy(l);
		cfg.map_id = grist_features_id(fb);
		assert_int_equal(grist_loader_create(&cfg, &l), -ESTALE);
		grist_features_decoder_destroy(da);
		grist_features_destroy(fa);
		grist_features_destroy(fb);
	}

	/* a bad record stops the loader with an error naming its file, record and feature */
	write_mnist_file(bpath, 37, 50, 5);
	one = run_loader(paths, 2, 2, &n1, &err);
	assert_int_equal(err, -EBADMSG);
	if (!strstr(grist_last_error(), "b.array_record: record 5: feature 'image': PNG"))
		fail_msg("message: %s", grist_last_error());
	free(one);
	t_rmtree(dir);
}

/* Ragged rows through the loader: typed records, GRIST_LAYOUT_RAGGED, split with gather. */
static void test_loader_ragged(void **state)
{
	char *dir = t_mkdtemp();
	char path[512];
	const char *paths[1] = { path };
	struct grist_dataset_spec ds = { .paths = paths, .num_paths = 1 };
	struct grist_features *f = typed_spec(false);
	struct grist_features_decoder *d;
	struct grist_loader_config cfg = { .size = sizeof(cfg) };
	struct grist_loader *l;
	struct grist_batch *b;
	struct grist_writer *w;
	uint8_t *recs[3];
	size_t lens[3], max_len = 0, seen = 0;
	int ret, ids = grist_features_find(f, "ids");

	(void)state;
	snprintf(path, sizeof(path), "%s", t_path(dir, "typed.array_record"));
	assert_int_equal(grist_writer_open(path, "group_size:2", &w), 0);
	for (int r = 0; r < 3; r++) {
		char name[32];

		snprintf(name, sizeof(name), "typed-%d.pb", r);
		recs[r] = read_rec(name, &lens[r]);
		max_len = lens[r] > max_len ? lens[r] : max_len;
	}
	for (int i = 0; i < 30; i++)
		assert_int_equal(grist_writer_write(w, recs[i % 3], lens[i % 3]), 0);
	assert_int_equal(grist_writer_close(w), 0);
	assert_int_equal(grist_features_finish(f), 0);
	assert_int_equal(grist_features_decoder_create(f, &ds, 1, &d), 0);
	cfg.datasets = &ds;
	cfg.num_datasets = 1;
	cfg.seed = 3;
	cfg.epochs = 1;
	cfg.batch_size = 8;
	cfg.layout = GRIST_LAYOUT_RAGGED;
	cfg.map = grist_features_map;
	cfg.map_ctx = d;
	cfg.map_id = grist_features_id(f);
	cfg.map_out_max = grist_features_row_bound(f, max_len);
	cfg.threads = 2;
	assert_int_equal(grist_loader_create(&cfg, &l), 0);
	while ((ret = grist_loader_next(l, &b)) == 0 && b) {
		size_t bytes;
		int64_t *vals, *dims = calloc(b->num_records, 8);

		assert_int_equal(grist_features_gather_bytes(f, (size_t)ids, b->data, b->offsets, b->num_records, &bytes), 0);
		vals = malloc(bytes + 8);
		assert_int_equal(grist_features_gather(f, (size_t)ids, b->data, b->offsets, b->num_records, vals, bytes,
						       dims), 0);
		for (size_t r = 0, at = 0; r < b->num_records; r++) {
			/* typed-0 has 3 ids, typed-1 none, typed-2 five; each row starts 8-aligned */
			int64_t want = (int64_t[]){ 3, 0, 5 }[b->indices[r] % 3];

			assert_int_equal(b->offsets[r] % 8, 0);
			assert_int_equal(dims[r], want);
			if (want)
				assert_int_equal(vals[at], 5);
			at += (size_t)want;
			seen++;
		}
		free(vals);
		free(dims);
		grist_loader_release(l, b);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(seen, 30);
	grist_loader_destroy(l);
	grist_features_decoder_destroy(d);
	grist_features_destroy(f);
	for (int r = 0; r < 3; r++)
		free(recs[r]);
	t_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wire_values),
		cmocka_unit_test(test_tfds_typed_ragged),
		cmocka_unit_test(test_tfds_typed_padded),
		cmocka_unit_test(test_mnist_layout),
		cmocka_unit_test(test_casts),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_video_ragged),
		cmocka_unit_test(test_video_padded),
		cmocka_unit_test(test_images),
		cmocka_unit_test(test_encoder_matches_protobuf),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_bad_records),
		cmocka_unit_test(test_decode_batch_pool),
		cmocka_unit_test(test_loader_rows),
		cmocka_unit_test(test_loader_ragged),
	};

	return cmocka_run_group_tests(tests, load_manifest, free_manifest);
}
