/*
 * libFuzzer harness: tf.train.Example parsing and decoding (grist/features.h). Input: a
 * spec byte (which of three specs), then the record. A spec covers every decode kind
 * and varlen mode; a record that decodes must give a row within its bound whose every
 * feature gathers; one that does not must leave a message. Seeds: tests/data/features.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grist/features.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct grist_features_decoder *decoders[3];

static void add(struct grist_features *f, const char *key, enum grist_wire w, enum grist_dtype t,
		const int64_t *shape, size_t ndim, enum grist_decode dec, enum grist_varlen vl, const int64_t *max)
{
	int i = grist_features_add(f, key, w, t, shape, ndim);

	if (i < 0)
		abort();
	if (dec != GRIST_DECODE_VALUES || w == GRIST_WIRE_BYTES)
		grist_features_set(f, (size_t)i, GRIST_FEATURE_DECODE, dec);
	grist_features_set(f, (size_t)i, GRIST_FEATURE_VARLEN, vl);
	if (max)
		grist_features_set_max_shape(f, (size_t)i, max, ndim);
	grist_features_set_pad_value(f, (size_t)i, 3);
}

static struct grist_features_decoder *make(int which)
{
	struct grist_features *f;
	struct grist_features_decoder *d;
	bool ragged = which == 1;
	enum grist_varlen vl = ragged ? GRIST_VARLEN_RAGGED : GRIST_VARLEN_PAD;

	if (grist_features_create(&f))
		abort();
	if (which == 0) { /* MNIST: fixed */
		add(f, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ 28, 28, 1 }, 3, GRIST_DECODE_IMAGE,
		    GRIST_VARLEN_NONE, NULL);
		add(f, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, NULL, 0, GRIST_DECODE_VALUES, GRIST_VARLEN_NONE, NULL);
	} else { /* the typed golden records' features, ragged or padded */
		add(f, "image", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ -1, -1, 1 }, 3, GRIST_DECODE_PNG, vl,
		    (int64_t[]){ 32, 32, 1 });
		add(f, "label", GRIST_WIRE_INT64, GRIST_DTYPE_INT16, NULL, 0, GRIST_DECODE_VALUES, GRIST_VARLEN_NONE, NULL);
		add(f, "vec", GRIST_WIRE_FLOAT, GRIST_DTYPE_FLOAT16, (int64_t[]){ 4 }, 1, GRIST_DECODE_VALUES,
		    GRIST_VARLEN_NONE, NULL);
		add(f, "mat", GRIST_WIRE_INT64, GRIST_DTYPE_INT32, (int64_t[]){ 2, 3 }, 2, GRIST_DECODE_VALUES,
		    GRIST_VARLEN_NONE, NULL);
		add(f, "ids", GRIST_WIRE_INT64, GRIST_DTYPE_INT64, (int64_t[]){ -1 }, 1, GRIST_DECODE_VALUES, vl,
		    (int64_t[]){ 8 });
		add(f, "pairs", GRIST_WIRE_INT64, GRIST_DTYPE_BOOL, (int64_t[]){ -1, 2 }, 2, GRIST_DECODE_VALUES, vl,
		    (int64_t[]){ 6, 2 });
		add(f, "f64", GRIST_WIRE_FLOAT, GRIST_DTYPE_FLOAT64, (int64_t[]){ 2 }, 1, GRIST_DECODE_VALUES,
		    GRIST_VARLEN_NONE, NULL);
		add(f, "caption", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ -1 }, 1, GRIST_DECODE_BYTES, vl,
		    (int64_t[]){ 40 });
		add(f, "rawt", GRIST_WIRE_BYTES, GRIST_DTYPE_INT16, (int64_t[]){ -1, 2 }, 2, GRIST_DECODE_RAW, vl,
		    (int64_t[]){ 4, 2 });
		if (ragged)
			add(f, "tags", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ -1 }, 1, GRIST_DECODE_STRINGS, vl,
			    NULL);
		add(f, "frames", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ -1, -1, -1, 3 }, 4, GRIST_DECODE_IMAGE,
		    vl, (int64_t[]){ 3, 16, 16, 3 });
		add(f, "photo", GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, (int64_t[]){ -1, -1, 3 }, 3, GRIST_DECODE_JPEG, vl,
		    (int64_t[]){ 16, 16, 3 });
	}
	if (grist_features_finish(f) || grist_features_decoder_create(f, NULL, 0, &d))
		abort();
	grist_features_destroy(f);
	return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct grist_features *f;
	struct grist_features_decoder *d;
	uint64_t offs[2];
	size_t cap, row_len;
	uint8_t *row;
	int ret;

	if (size < 1)
		return 0;
	if (!decoders[data[0] % 3])
		decoders[data[0] % 3] = make(data[0] % 3);
	d = decoders[data[0] % 3];
	f = grist_features_decoder_spec(d);
	data++;
	size--;
	cap = grist_features_row_bound(f, size);
	row = malloc(cap); /* exactly the bound: ASan catches a byte past it */
	if (!row)
		abort();
	ret = grist_features_decode(d, data, size, 0, 0, row, cap, &row_len);
	if (ret < 0) {
		if (!grist_last_error()[0])
			abort();
	} else {
		if (row_len > cap || row_len % 8)
			abort();
		offs[0] = 0;
		offs[1] = row_len;
		for (size_t i = 0; i < grist_features_count(f); i++) {
			size_t bytes;
			int64_t dims[GRIST_FEATURE_MAX_DIMS];
			void *v;

			if (grist_features_gather_bytes(f, i, row, offs, 1, &bytes))
				abort();
			v = malloc(bytes ? bytes : 1);
			if (!v || grist_features_gather(f, i, row, offs, 1, v, bytes, dims))
				abort();
			free(v);
			if (i == (size_t)grist_features_find(f, "tags")) {
				size_t count;

				if (grist_features_gather_lengths(f, i, row, offs, 1, NULL, 0, &count))
					abort();
			}
		}
	}
	free(row);
	return 0;
}
