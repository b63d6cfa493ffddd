/*
 * grist/features.h - typed records: tf.train.Example parsed and images decoded into rows.
 *
 * Most datasets that reach grist (every TFDS dataset) store one serialized
 * tf.train.Example per record. This stage turns such a record into one row of
 * typed columns, on the loader's decode threads, so a batch of N rows hands the
 * caller every feature as an array with a leading batch axis and no per-record
 * work left:
 *
 *   record bytes --parse wire format--> values of each feature --convert/decode-->
 *        one row: column 0 | column 1 | ...      (PNG/JPEG decoded straight into it)
 *
 * A *spec* (struct grist_features) lists the features: a key (TFDS joins nested
 * dict keys with '/'), the list kind it has on the wire, the dtype and shape of its
 * column, and how its value is decoded. The spec fixes the row layout: every
 * column at an 8-byte aligned offset, the row a multiple of 8 bytes. For the
 * loader that is GRIST_LAYOUT_FIXED with record_bytes = grist_features_row_bytes(),
 * and column c of a batch is the strided view
 *
 *     base = batch->data + column.offset, row stride = grist_features_row_bytes(),
 *     element shape = column.row_shape[0..ndim), dtype = column.dtype
 *
 * which numpy can wrap without a copy.
 *
 * Shapes. A feature's shape is the shape of its values in C, with -1 for a
 * dimension that varies between records. A spec with -1 dimensions needs a varlen
 * mode for that feature, or grist_features_finish() refuses it naming the feature:
 *   GRIST_VARLEN_PAD     the column holds max_shape (grist_features_set_max_shape());
 *                        the record's values sit in its leading corner, the rest is
 *                        pad_value; the record's real shape is in a dims column.
 *   GRIST_VARLEN_RAGGED  the values live after the row's fixed part and the row's
 *                        size varies: the loader then needs GRIST_LAYOUT_RAGGED, and
 *                        grist_features_gather() turns a batch of such rows into
 *                        one values array plus the per-record dims.
 *
 * Parsing follows protobuf's semantics for tf.train.Example: fields in any order,
 * unknown fields skipped, packed and unpacked repeated values, a key given twice takes
 * its last value (as a map does), a Feature's list given twice is merged (as protobuf
 * merges a message field), a oneof keeps the kind set last. Where protobuf's
 * implementations differ, grist reads as protobuf's Python parser (upb, what TFDS
 * decodes with) does: a map entry holding an unknown field is dropped whole. The
 * tests check all of these against protobuf's ParseFromString. No record is copied
 * and no protobuf runtime runs. Every length is checked against the bytes that hold it;
 * entries whose keys the spec does not ask for are skipped by length, unparsed.
 *
 * Errors. A record that does not match the spec (a missing key, another list kind,
 * another number of values, an image that does not decode or has another shape, a
 * value that does not fit) fails with a negative code and a message naming the file,
 * the record index within that file and the feature, e.g.
 *   "train.array_record-00003-of-00008: record 1207: feature 'image': PNG is 32x28x1, the spec says (28, 28, 1)"
 * (the loader puts its own "file: chunk at byte N: map failed on dataset D record I: "
 * before it). Never a zero-filled row. Codes: -EBADMSG for bytes that are not a well-formed
 * Example or image and for a record that does not match the spec (a missing key,
 * another list kind), -EMSGSIZE for values that do not fit the spec's shape or a
 * row's room, -ENOTSUP for an image kind or depth not supported, -EINVAL for a bad
 * spec or argument.
 *
 * Objects and threads. A spec is built once (create, add, set, finish) and is then
 * read-only: every function taking a const spec or decoder may run on any number of
 * threads at once. A decoder (struct grist_features_decoder) is a finished spec plus
 * the file names used in messages; it is the map_ctx of grist_features_map().
 * Decoding keeps per-thread image decoder state, freed when the thread exits.
 *
 * Why an opaque builder with setters (zstd's CCtx_setParameter, not a sized
 * struct): a spec is a variable-length list of features whose options will grow
 * (new decode kinds, defaults); setters keep each option's bounds checked in one
 * place, let a binding set them by enum value, and hide the computed layout.
 * The one struct handed out, struct grist_feature_column, is a sized struct:
 * set .size (grist_feature_column_init()) and newer fields are left alone by an
 * older library, and unread by an older caller.
 *
 * The encoder at the end builds serialized tf.train.Example bytes, byte for byte as
 * protobuf's SerializeToString(deterministic=True) writes the same message (TFDS's
 * writer uses protobuf); converters use it to write typed records.
 */
#ifndef GRIST_FEATURES_H
#define GRIST_FEATURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/error.h"
#include "grist/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The most dimensions a feature may have. */
#define GRIST_FEATURE_MAX_DIMS 8

/** The list kind a feature has in tf.train.Feature (the values are its field numbers). */
enum grist_wire {
	GRIST_WIRE_BYTES = 1, /* bytes_list */
	GRIST_WIRE_FLOAT = 2, /* float_list: 32-bit floats */
	GRIST_WIRE_INT64 = 3, /* int64_list */
};

/** A column's element type. */
enum grist_dtype {
	GRIST_DTYPE_UINT8 = 1,
	GRIST_DTYPE_INT8,
	GRIST_DTYPE_UINT16,
	GRIST_DTYPE_INT16,
	GRIST_DTYPE_UINT32,
	GRIST_DTYPE_INT32,
	GRIST_DTYPE_UINT64,
	GRIST_DTYPE_INT64,
	GRIST_DTYPE_FLOAT16, /* IEEE binary16, rounded to nearest even from the wire's float */
	GRIST_DTYPE_FLOAT32,
	GRIST_DTYPE_FLOAT64,
	GRIST_DTYPE_BOOL,    /* one byte, 0 or 1 (an int64 value != 0 is 1) */
	GRIST_DTYPE_BFLOAT16, /* the top half of a float32, rounded to nearest even (JAX's bfloat16): a
				 vision transform's output only (grist/vision.h), not a feature's dtype */
};

/**
 * How a feature's wire values become its column.
 *
 * GRIST_DECODE_VALUES  int64_list into an integer or bool dtype; float_list into a
 *                      float dtype. Integers narrow as TFDS does (its int32 tensors are
 *                      int64 on the wire): two's complement truncation, as numpy's
 *                      astype. The number of values must fill the shape.
 * GRIST_DECODE_BYTES   bytes_list holding exactly one value, copied as uint8: the shape
 *                      is (L,) with L its length (-1 for any length: pad or ragged).
 *                      TFDS's Text and scalar string Tensors.
 * GRIST_DECODE_RAW     bytes_list holding one value: the little-endian bytes of a dense
 *                      array of the column's dtype and shape (TFDS's Tensor with
 *                      encoding=bytes). Its length must be a whole number of elements.
 * GRIST_DECODE_PNG     bytes_list holding one PNG, decoded (zlib, or libspng) into uint8 (H, W, C),
 *                      or uint16 for a 16-bit PNG (TFDS's Image(dtype=uint16)), host-endian.
 * GRIST_DECODE_JPEG    ... one JPEG, decoded with libjpeg-turbo (TurboJPEG) into uint8 (H, W, C).
 * GRIST_DECODE_IMAGE   ... one PNG or JPEG, told by its first bytes.
 * GRIST_DECODE_STRINGS bytes_list of any number of values, each a string (TFDS's
 *                      Sequence(Text) and string Tensors of shape (N,) or (None,)): the
 *                      shape (N,) or (-1,) counts strings, the dtype is uint8, and the
 *                      feature must be GRIST_VARLEN_RAGGED (strings vary in bytes).
 *                      gather() gives the strings' bytes back to back and dims their count
 *                      per record; grist_features_gather_lengths() each string's length.
 *
 * Images: the shape is (H, W, C) (H and W may be -1 with pad or ragged), or (T, H, W, C)
 * for a bytes_list of T images (TFDS's Video and Sequence(Image); T may be -1 too, and
 * a record's images must share one H x W x C, which its dims column gives). C is 1
 * (grayscale), 2 (gray+alpha, PNG only), 3 (RGB) or 4 (RGBA, PNG only) and must be
 * the image's own channel count: a PNG palette counts as 3, or 4 with a tRNS chunk;
 * no silent conversion between gray and color. The sample width must be the dtype's
 * (-EBADMSG otherwise): 8-bit into uint8, 16-bit PNG into uint16. PNGs of 1, 2 or 4-bit
 * gray and CMYK JPEGs fail with -ENOTSUP. The image
 * header is checked against the shape before a byte of the row is written. JPEG
 * decodes with TurboJPEG's default (accurate) IDCT and fancy upsampling, as PIL and
 * OpenCV do (the golden tests find all three equal to the level), and a libjpeg
 * warning (a truncated or damaged stream, which libjpeg would fill with gray) is an
 * error. A PNG's zlib checksum and the CRCs of the chunks up to its image data are
 * checked (what follows the image data, IEND included, is not read). Interlaced PNGs decode
 * (libspng de-interlaces) but no golden image covers them yet.
 */
enum grist_decode {
	GRIST_DECODE_VALUES = 0,
	GRIST_DECODE_BYTES,
	GRIST_DECODE_RAW,
	GRIST_DECODE_PNG,
	GRIST_DECODE_JPEG,
	GRIST_DECODE_IMAGE,
	GRIST_DECODE_STRINGS,
};

/** What a -1 dimension does (see the overview). */
enum grist_varlen {
	GRIST_VARLEN_NONE = 0, /* no -1 dimension allowed */
	GRIST_VARLEN_PAD,
	GRIST_VARLEN_RAGGED,
};

/** What the loader's map does with a record whose feature does not decode. */
enum grist_on_error {
	GRIST_ON_ERROR_FAIL = 0, /* stop the loader with the error (the default) */
	GRIST_ON_ERROR_SKIP,     /* drop the record, counted (grist_features_skipped()): a corrupt,
				    truncated or oversized image, or one that does not match the spec */
};

/** Per-feature options for grist_features_set(). */
enum grist_feature_param {
	GRIST_FEATURE_DECODE = 1, /* enum grist_decode; default VALUES for int64/float lists, BYTES for bytes */
	GRIST_FEATURE_VARLEN,     /* enum grist_varlen; default NONE */
	GRIST_FEATURE_ON_ERROR,   /* enum grist_on_error; default FAIL */
};

struct grist_features;

/* ------------------------------------------------------------------ building a spec */

/**
 * grist_features_create() - an empty spec.
 * Return: 0 or -ENOMEM.
 */
GRIST_API int grist_features_create(struct grist_features **out);

/** grist_features_destroy() - free a spec. NULL is fine. */
GRIST_API void grist_features_destroy(struct grist_features *f);

/**
 * grist_features_add() - append a feature.
 * @key:   its key in Example.features.feature, 1 to 4096 bytes (copied).
 * @wire:  the list kind it must have in every record.
 * @dtype: the column's element type.
 * @shape: @ndim dimensions (0 <= @ndim <= GRIST_FEATURE_MAX_DIMS), each >= 0 or -1;
 *         NULL when @ndim is 0 (a scalar: one value).
 *
 * Return: the feature's index (>= 0), or -EINVAL (bad argument, the key already in
 * the spec, a dtype the wire kind cannot give, the spec finished), -ENOMEM.
 */
GRIST_API int grist_features_add(struct grist_features *f, const char *key, enum grist_wire wire,
				 enum grist_dtype dtype, const int64_t *shape, size_t ndim);

/**
 * grist_features_set() - set an option (enum grist_feature_param) of feature @i.
 * Return: 0, or -EINVAL for an unknown option, a value out of range, a decode kind
 * the feature's wire kind or dtype cannot take, or a finished spec.
 */
GRIST_API int grist_features_set(struct grist_features *f, size_t i, enum grist_feature_param param,
				 int64_t value);

/**
 * grist_features_set_max_shape() - the largest shape feature @i may have: required for
 * GRIST_VARLEN_PAD (it is the column's shape), optional for RAGGED (a bound, checked
 * per record; ragged images need it to bound a batch's memory). @ndim must equal the
 * feature's; each entry equals the declared dimension where that one is fixed.
 * Return: 0 or -EINVAL.
 */
GRIST_API int grist_features_set_max_shape(struct grist_features *f, size_t i, const int64_t *max_shape,
					   size_t ndim);

/**
 * grist_features_set_pad_value() - the value GRIST_VARLEN_PAD fills with (default 0),
 * converted to the column's dtype.
 * Return: 0 or -EINVAL.
 */
GRIST_API int grist_features_set_pad_value(struct grist_features *f, size_t i, double value);

/**
 * grist_features_finish() - check the spec and fix its layout; afterwards it is
 * read-only and the functions below accept it.
 * Return: 0, or -EINVAL naming the feature (no features, a -1 dimension without a
 * varlen mode, PAD without a max shape, more than one -1 dimension for VALUES or RAW
 * (their count cannot tell two), a shape too large for a row of 1 GiB).
 */
GRIST_API int grist_features_finish(struct grist_features *f);

/* ------------------------------------------------------------------ reading the layout */

/** A column's place in a row, from grist_feature_column(). */
struct grist_feature_column {
	size_t size;                /* sizeof(struct grist_feature_column): set by grist_feature_column_init() */
	const char *key;            /* lives as long as the spec */
	enum grist_wire wire;
	enum grist_dtype dtype;
	enum grist_decode decode;
	enum grist_varlen varlen;
	size_t elem_bytes;          /* bytes per element of dtype */
	size_t ndim;
	int64_t shape[GRIST_FEATURE_MAX_DIMS];     /* as declared: -1 where it varies */
	int64_t row_shape[GRIST_FEATURE_MAX_DIMS]; /* the values' shape in the row: shape, with
						      max_shape where PAD; -1 stays for RAGGED */
	size_t offset;              /* NONE and PAD: the values in the row (row_shape, C order);
				       RAGGED: a uint64 holding the byte offset of the values from
				       the row's start (for gather; callers need not read it) */
	size_t bytes;               /* bytes at offset in every row */
	size_t dims_offset;         /* PAD and RAGGED: int64[ndim], this record's real shape;
				       SIZE_MAX for NONE */
	size_t box_offset;          /* a transform with boxes (grist/vision.h): int32[5], the record's
				       box (top, left, height, width, flipped); SIZE_MAX otherwise */
};

/** grist_feature_column_init() - zero @c and set its size field. */
static inline void grist_feature_column_init(struct grist_feature_column *c)
{
	*c = (struct grist_feature_column){ .size = sizeof(*c) };
}

/** grist_features_count() - the number of features. */
GRIST_API size_t grist_features_count(const struct grist_features *f);

/**
 * grist_features_find() - the index of the feature with @key, or -ENOENT.
 */
GRIST_API int grist_features_find(const struct grist_features *f, const char *key);

/**
 * grist_feature_column() - describe feature @i's column (finished spec).
 * @out: with ->size set (grist_feature_column_init()); fields past it are not written.
 * Return: 0, or -EINVAL (unfinished spec, @i out of range, ->size too small).
 */
GRIST_API int grist_feature_column(const struct grist_features *f, size_t i, struct grist_feature_column *out);

/**
 * grist_features_row_bytes() - bytes of a row (a multiple of 8); with ragged features,
 * of a row's fixed part. 0 for an unfinished spec.
 */
GRIST_API size_t grist_features_row_bytes(const struct grist_features *f);

/** grist_features_is_ragged() - whether some feature is GRIST_VARLEN_RAGGED (rows vary in size). */
GRIST_API bool grist_features_is_ragged(const struct grist_features *f);

/**
 * grist_features_row_bound() - the most bytes a row can take for a record of
 * @record_len bytes (a multiple of 8); row_bytes() without ragged features.
 * For the loader's map_out_max with ragged rows, use the largest record's bound.
 */
GRIST_API size_t grist_features_row_bound(const struct grist_features *f, size_t record_len);

/**
 * grist_features_id() - a 64-bit hash of everything that shapes a row (keys, kinds,
 * dtypes, shapes, decode and varlen modes, max shapes, pad values): the loader's
 * map_id, so a checkpoint taken with one spec is refused with another.
 */
GRIST_API uint64_t grist_features_id(const struct grist_features *f);

/* ------------------------------------------------------------------ decoding */

struct grist_features_decoder;

/**
 * grist_features_decoder_create() - a finished spec plus the names used in messages.
 * @f:            a finished spec; copied, so it may be destroyed afterwards.
 * @datasets:     @num_datasets datasets as given to the loader (grist/loader.h), in the
 *                same order; their files are opened once to count their records, so a
 *                message can turn (dataset, index) into (file, record within the file).
 *                NULL (and 0): messages say "dataset D record I" instead.
 * Return: 0, -EINVAL (unfinished spec), -ENOMEM, or an error opening the files.
 */
GRIST_API int grist_features_decoder_create(const struct grist_features *f,
					    const struct grist_dataset_spec *datasets, size_t num_datasets,
					    struct grist_features_decoder **out);

/** grist_features_decoder_destroy() - free it. NULL is fine. */
GRIST_API void grist_features_decoder_destroy(struct grist_features_decoder *d);

/** grist_features_decoder_spec() - the decoder's own (finished) copy of the spec. */
GRIST_API const struct grist_features *grist_features_decoder_spec(const struct grist_features_decoder *d);

/**
 * grist_features_decode() - decode one record into one row.
 * @rec, @len:  the serialized tf.train.Example.
 * @dataset, @index: where it comes from, for messages (index within the dataset).
 * @row:        where the row goes, 8-byte aligned, @cap bytes (row_bytes(), or
 *              row_bound(@len) with ragged features).
 * @row_len:    set to the bytes written (row_bytes(), or more with ragged features).
 *
 * Return: 0 or a negative code with the message described in the overview. On
 * error the row's contents are unspecified (the caller must not deliver it).
 * Thread-safety: any number of threads at once on one decoder.
 */
GRIST_API int grist_features_decode(const struct grist_features_decoder *d, const uint8_t *rec, size_t len,
				    uint32_t dataset, uint64_t index, uint8_t *row, size_t cap, size_t *row_len);

/**
 * grist_features_map() - grist_features_decode() as a grist_map_fn: set
 *
 *   cfg.map = grist_features_map; cfg.map_ctx = decoder;
 *   cfg.map_id = grist_features_id(spec);
 *   cfg.layout = GRIST_LAYOUT_FIXED; cfg.record_bytes = grist_features_row_bytes(spec);
 *
 * or, with ragged features, GRIST_LAYOUT_RAGGED and map_out_max = the row_bound() of
 * the largest record (a row that does not fit fails with -EMSGSIZE). Ragged rows are
 * padded to a multiple of 8 bytes, so every row of a batch stays 8-byte aligned.
 * Returns 1, or a negative code; or 0 (the record dropped, and counted by
 * grist_features_skipped()) when a feature set to GRIST_ON_ERROR_SKIP does not decode.
 */
GRIST_API int grist_features_map(void *decoder, const struct grist_map_input *in, uint8_t *out, size_t out_cap,
				 size_t *out_len);

/** A record grist_features_map() dropped (GRIST_ON_ERROR_SKIP). */
struct grist_feature_skip {
	uint32_t dataset;
	uint64_t index;             /* within its dataset */
	char reason[256];           /* the error message, cut to fit */
};

/**
 * grist_features_skipped() - how many records grist_features_map() dropped for a feature
 * with GRIST_ON_ERROR_SKIP, and the first of them (at most 16 are kept, in the order they
 * were dropped: decode threads race, so that order may vary between runs; the count does not).
 * @out:  @cap entries, or NULL; @n set to the number written.
 * Return: the count. Thread-safety: any thread, while the loader runs.
 */
GRIST_API uint64_t grist_features_skipped(struct grist_features_decoder *d, struct grist_feature_skip *out,
					  size_t cap, size_t *n);

/* A small thread pool for grist_features_decode_batch(). */
struct grist_features_pool;

/**
 * grist_features_pool_create() - start @threads worker threads (1 to 256); the calling
 * thread of decode_batch works too.
 * Return: 0, -EINVAL, -ENOMEM or an error from pthread_create().
 */
GRIST_API int grist_features_pool_create(unsigned threads, struct grist_features_pool **out);

/** grist_features_pool_destroy() - join the threads and free the pool. NULL is fine. */
GRIST_API void grist_features_pool_destroy(struct grist_features_pool *p);

/**
 * grist_features_batch_bound() - the bytes grist_features_decode_batch() needs for
 * records of @lens: n x row_bytes() without ragged features, else the sum of the rows'
 * bounds.
 */
GRIST_API size_t grist_features_batch_bound(const struct grist_features *f, const size_t *lens, size_t n);

/**
 * grist_features_decode_batch() - decode @n records into @n rows, for random access.
 * @pool:     a pool to spread the records over, or NULL to decode on this thread.
 * @records, @lens: the records.
 * @dataset:  the dataset they come from and @indices (may be NULL) their indices within
 *            it, for messages (NULL: messages say "record i of the batch").
 * @rows:     8-byte aligned, @cap >= grist_features_batch_bound() bytes.
 * @offsets:  NULL without ragged features (row i is at i x row_bytes()); else @n + 1
 *            entries: set to where row i starts, offsets[n] to the end of the last
 *            row's room. grist_features_gather() takes the same array.
 *
 * The rows are those grist_features_decode() gives, whatever the pool's size.
 * Return: 0, or the error of the lowest-numbered record that failed (message and
 * code as for decode), or -EINVAL for a short @cap.
 * Thread-safety: concurrent calls may share a decoder; a pool runs one call at a time
 * (a second caller waits).
 */
GRIST_API int grist_features_decode_batch(const struct grist_features_decoder *d, struct grist_features_pool *pool,
					  const uint8_t *const *records, const size_t *lens, size_t n,
					  uint32_t dataset, const uint64_t *indices, uint8_t *rows, size_t cap,
					  uint64_t *offsets);

/**
 * grist_features_gather_bytes() - bytes that grist_features_gather() writes for
 * feature @i over @n rows: n x column.bytes for NONE and PAD features, the sum of the
 * rows' values for RAGGED ones.
 * @rows, @offsets: the batch: offsets NULL for rows of row_bytes() back to back (a
 *            FIXED batch), else @n + 1 entries, row i being [offsets[i], offsets[i + 1])
 *            (a RAGGED loader batch's offsets, or decode_batch's); a ragged spec needs
 *            them.
 * Return: 0 or -EINVAL (@i out of range) / -EBADMSG (a ragged row that is not one
 * this spec wrote).
 */
GRIST_API int grist_features_gather_bytes(const struct grist_features *f, size_t i, const uint8_t *rows,
					  const uint64_t *offsets, size_t n, size_t *bytes);

/**
 * grist_features_gather() - copy feature @i of @n rows into one array.
 * @values:   @cap bytes: the rows' values back to back (for RAGGED features, each
 *            record's values in C order, concatenated); NULL with @cap 0 to get only @dims.
 * @dims:     NULL, or n x ndim int64: each record's real shape (row i's at i x ndim);
 *            for a RAGGED feature with one -1 dimension, that dimension's entries are
 *            the row lengths.
 * Return: 0, -EINVAL (bad argument, @cap too small) or -EBADMSG (as above).
 */
GRIST_API int grist_features_gather(const struct grist_features *f, size_t i, const uint8_t *rows,
				    const uint64_t *offsets, size_t n, void *values, size_t cap, int64_t *dims);

/**
 * grist_features_gather_lengths() - a GRIST_DECODE_STRINGS feature's string lengths
 * over @n rows, in order (record by record, string by string).
 * @lengths:  @cap entries, or NULL to count only.
 * @count:    set to the number of strings in the @n rows.
 * Return: 0, -EINVAL (not a strings feature, @cap too small) or -EBADMSG (a row this
 * spec did not write).
 */
GRIST_API int grist_features_gather_lengths(const struct grist_features *f, size_t i, const uint8_t *rows,
					    const uint64_t *offsets, size_t n, uint64_t *lengths, size_t cap,
					    size_t *count);

/* ------------------------------------------------------------------ encoding */

/*
 * Building serialized tf.train.Example records:
 *
 *   grist_example_begin(e);
 *   grist_example_add_bytes(e, "image", png, (uint64_t[]){0, png_len}, 1);
 *   grist_example_add_int64s(e, "label", &label, 1);
 *   grist_example_finish(e, &data, &len);     // data valid until the next begin
 *
 * The bytes equal protobuf's SerializeToString(deterministic=True) of the same
 * Example: the features sorted by key (bytewise), every Feature written, an empty list
 * too, lists packed. Without deterministic=True protobuf writes its map in hash order
 * (upb's), which no reader depends on. A key added twice keeps its last value, as
 * assigning it twice in protobuf does.
 */
struct grist_example_encoder;

/** grist_example_encoder_create() - 0 or -ENOMEM. */
GRIST_API int grist_example_encoder_create(struct grist_example_encoder **out);

/** grist_example_encoder_destroy() - NULL is fine. */
GRIST_API void grist_example_encoder_destroy(struct grist_example_encoder *e);

/** grist_example_begin() - start a new record (forgets the previous one). */
GRIST_API void grist_example_begin(struct grist_example_encoder *e);

/**
 * grist_example_add_int64s() / add_floats() - a feature of @n values (@n may be 0).
 * @key: NUL-terminated, 1 to 4096 bytes.
 * Return: 0, -EINVAL (bad key), -ENOMEM.
 */
GRIST_API int grist_example_add_int64s(struct grist_example_encoder *e, const char *key, const int64_t *values,
				       size_t n);
GRIST_API int grist_example_add_floats(struct grist_example_encoder *e, const char *key, const float *values,
				       size_t n);

/**
 * grist_example_add_bytes() - a bytes_list feature of @n values: value j is
 * data[offsets[j] .. offsets[j + 1]) (Arrow's binary layout; @offsets has n + 1
 * non-decreasing entries, offsets[0] need not be 0).
 */
GRIST_API int grist_example_add_bytes(struct grist_example_encoder *e, const char *key, const uint8_t *data,
				      const uint64_t *offsets, size_t n);

/**
 * grist_example_add_typed() - a feature from @n values of @dtype, as TFDS serializes
 * a numpy array: integer and bool dtypes widen to an int64_list (uint64 bit-cast),
 * float16/32/64 go to a float_list (rounded to float32, as protobuf's FloatList holds).
 */
GRIST_API int grist_example_add_typed(struct grist_example_encoder *e, const char *key, enum grist_dtype dtype,
				      const void *values, size_t n);

/**
 * grist_example_finish() - the serialized record.
 * @data, @len: set to the bytes, owned by the encoder, valid until the next begin or
 *              destroy.
 * Return: 0, or -EMSGSIZE for a record of 2 GiB or more (protobuf's limit).
 */
GRIST_API int grist_example_finish(struct grist_example_encoder *e, const uint8_t **data, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
