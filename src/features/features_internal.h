/* The features stage's shared internals: the spec's layout, the wire reader, image decoders. */
#ifndef GRIST_FEATURES_INTERNAL_H
#define GRIST_FEATURES_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/features.h"
#include "grist/vision.h"
#include "features/vision_internal.h" /* struct gv_out_plan */

#define GF_KEY_MAX 4096
/* No row (fixed part or one ragged feature's values) is larger: keeps every size sum far from overflow. */
#define GF_ROW_MAX ((size_t)1 << 30)

struct gf_feature {
	char *key;
	size_t key_len;
	enum grist_wire wire;
	enum grist_dtype dtype;
	enum grist_decode decode;
	enum grist_varlen varlen;
	size_t ndim;
	int64_t shape[GRIST_FEATURE_MAX_DIMS];
	int64_t max_shape[GRIST_FEATURE_MAX_DIMS];
	bool has_max;
	double pad_value;
	/* the layout, set by grist_features_finish() */
	int64_t row_shape[GRIST_FEATURE_MAX_DIMS];
	size_t elem_bytes;
	size_t offset, bytes, dims_offset;
	uint64_t count;      /* elements of row_shape (NONE, PAD) */
	int var_dim;         /* the first -1 dimension, or -1 */
	uint64_t inner;      /* product of the dimensions after var_dim (VALUES, RAW, BYTES) */
	uint8_t pad_bytes[8]; /* pad_value in dtype */
	/* a vision transform (grist/vision.h): the column is its fixed output, whatever the image */
	bool has_tf, boxes;
	struct grist_vision_transform tf; /* loaded: defaults filled in, checked */
	struct gv_out_plan tf_plan;       /* tf's output plan, made with it (read by every decode thread) */
	size_t box_offset;   /* boxes: int32[5]; SIZE_MAX otherwise */
	enum grist_on_error on_error;
};

struct grist_features {
	struct gf_feature *feat;
	size_t n, cap;
	bool finished;
	bool ragged;
	size_t row_bytes;
	uint64_t id;
	/* key -> feature + 1 (0 empty), open addressing; built by finish */
	uint32_t *table;
	size_t table_mask;
};

/* The feature with this key, or -1. */
int gf_lookup(const struct grist_features *f, const uint8_t *key, size_t len);
size_t gf_dtype_bytes(enum grist_dtype t);
/* FLOAT16 values: float32 to binary16 rounded to nearest even, and back (exact). */
uint16_t gf_float_to_half(float f);
float gf_half_to_float(uint16_t h);
/* BFLOAT16: float32 to bfloat16, rounded to nearest even (as ml_dtypes and JAX round). */
uint16_t gf_float_to_bfloat16(float f);
/* A deep copy of a finished spec. */
int gf_clone(const struct grist_features *f, struct grist_features **out);

/* ---- the wire reader (parse.c) ---- */

/* Where one feature's map entries lie: the last entry with its key (a map keeps the last). */
struct gf_span {
	const uint8_t *p;
	size_t len;
};

/* Walk an Example, set spans[k] for every spec key found (p NULL when absent). -EBADMSG + message. */
int gf_parse_example(const struct grist_features *f, const uint8_t *rec, size_t len, struct gf_span *spans);

/*
 * The values of one map entry: the list kind its Feature ends up with (0: none set) and
 * how many values it holds (bytes_list: values; others: numbers). -EBADMSG + message.
 */
struct gf_values {
	int kind;
	const uint8_t *start;  /* the first list field that counts (protobuf's oneof: later kinds reset) */
	uint64_t count;
	const uint8_t *first;  /* bytes_list: the first value, and first_len its length */
	size_t first_len;
};
int gf_values_scan(const struct gf_span *entry, struct gf_values *v);
/* The values of a bytes_list one by one (those that count, as scanned), without copying. */
struct gf_bytes_iter {
	const uint8_t *ep, *eend, *fp, *fend, *lp, *lend, *start;
	int kind;
};
void gf_bytes_iter_init(struct gf_bytes_iter *bi, const struct gf_span *entry, const struct gf_values *v);
/* 1 and the next value, 0 at the end, or -EBADMSG + message. */
int gf_bytes_iter_next(struct gf_bytes_iter *bi, const uint8_t **p, size_t *len);

/*
 * The strings of a bytes_list (v->count of them, as scanned): their lengths into @lens
 * (uint64, may be NULL), their bytes back to back into @bytes (may be NULL); *total gets
 * the sum of the lengths.
 */
int gf_values_strings(const struct gf_span *entry, const struct gf_values *v, uint8_t *lens, uint8_t *bytes,
		      uint64_t *total);
/* Write the int64 or float values (v->count of them, as scanned) into @dst as @dtype. */
int gf_values_write(const struct gf_span *entry, const struct gf_values *v, enum grist_dtype dtype, uint8_t *dst);

/* ---- images (image.c) ---- */

/* One image being decoded: its header is read first, so its size is checked before a byte is written. */
struct gf_image {
	enum grist_decode kind; /* PNG or JPEG */
	uint32_t width, height, channels;
	uint32_t sample_bytes;  /* 1, or 2 for a 16-bit PNG (decoded host-endian) */
	const uint8_t *p;
	size_t len;
	void *spng;             /* spng_ctx, PNG only; NULL on the direct path (png_direct in image.c) */
	bool direct;            /* PNG: decode with png_direct(), libspng only if it declines */
	int spng_fmt;
	int spng_flags;
};
/* Read the header of a PNG or JPEG (@want: PNG, JPEG or IMAGE for either). -EBADMSG / -ENOTSUP + message. */
int gf_image_open(struct gf_image *img, enum grist_decode want, const uint8_t *p, size_t len);
/* Decode into @dst, rows @pitch bytes apart (>= width x channels), and release the image. */
int gf_image_decode(struct gf_image *img, uint8_t *dst, size_t pitch);
/* Release an opened image without decoding it. */
void gf_image_close(struct gf_image *img);

/*
 * decode.c: a record into a row, the error located by (dataset, index), or by batch position when !known;
 * @epoch keys the transforms' draws (grist/vision.h).
 */
int gf_decode_located(const struct grist_features_decoder *d, const uint8_t *rec, size_t len, uint32_t dataset,
		      uint64_t index, uint64_t epoch, bool known, uint8_t *row, size_t cap, size_t *row_len);

/* skips.c: the records a map dropped with on_error skip (the features and text stages): the rare path, under a lock. */
#define GF_SKIPS_KEPT 16
struct gf_skips {
	pthread_mutex_t lock;
	uint64_t count;
	struct grist_feature_skip kept[GF_SKIPS_KEPT];
};
void gf_skips_init(struct gf_skips *s);
void gf_skips_destroy(struct gf_skips *s);
/* Whether error @ret is the record's data (a skip drops it) rather than the machine's (it stops the loader). */
bool gf_skippable(int ret);
/* Count @in's record as dropped; keep it with grist_last_error() as its reason while fewer than GF_SKIPS_KEPT. */
void gf_skips_add(struct gf_skips *s, const struct grist_map_input *in);
/* The count; up to @cap kept records into @out (@n: how many). Any thread. */
uint64_t gf_skips_get(struct gf_skips *s, struct grist_feature_skip *out, size_t cap, size_t *n);

/* vision.c: a transformed image feature into its column (and box), its key naming the draws. */
int gf_transform_image(const struct gf_feature *ft, const uint8_t *img, size_t len, uint64_t epoch, uint64_t index,
		       uint8_t *row);

#endif
