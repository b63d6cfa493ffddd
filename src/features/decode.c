/* One record into one row: the values of each feature converted, copied or decoded into its column. */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "features/features_internal.h"
#include "grist/format.h"

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)
#define SPANS_ON_STACK 64

/* A dataset's files, to turn a record index within the dataset into (file, index within it). */
struct gf_names {
	char **paths;
	uint64_t *first; /* global index of each file's record 0 */
	size_t n;
};

struct grist_features_decoder {
	struct grist_features *spec;
	struct gf_names *names;
	size_t num_names;
	struct gf_skips skips; /* records grist_features_map() dropped (GRIST_ON_ERROR_SKIP) */
};

static const char *wire_name(int kind)
{
	switch (kind) {
	case GRIST_WIRE_BYTES: return "bytes_list";
	case GRIST_WIRE_FLOAT: return "float_list";
	case GRIST_WIRE_INT64: return "int64_list";
	}
	return "Feature with no list set";
}

static void fmt_shape(char *buf, size_t cap, const int64_t *shape, size_t ndim)
{
	size_t at = (size_t)snprintf(buf, cap, "(");

	for (size_t d = 0; d < ndim && at < cap; d++)
		at += (size_t)snprintf(buf + at, cap - at, d ? ", %" PRId64 : "%" PRId64, shape[d]);
	if (at < cap)
		snprintf(buf + at, cap - at, ndim == 1 ? ",)" : ")");
}

static void fill(uint8_t *dst, const struct gf_feature *ft, size_t from, size_t to)
{
	if (ft->elem_bytes == 1 || !memcmp(ft->pad_bytes, (const uint8_t[8]){ 0 }, 8)) {
		memset(dst + from, ft->pad_bytes[0], to - from);
		return;
	}
	for (size_t i = from; i < to; i += ft->elem_bytes)
		memcpy(dst + i, ft->pad_bytes, ft->elem_bytes);
}

/* Where a feature's values go: its column, or (ragged) the row's variable part. */
struct place {
	uint8_t *row;
	size_t cap;
	size_t cursor; /* ragged part: next free byte */
};

static int reserve_ragged(const struct gf_feature *ft, struct place *pl, size_t bytes, uint8_t **dst)
{
	if (bytes > pl->cap - pl->cursor)
		return grist_fail(-EMSGSIZE, "feature '%s': %zu bytes of values do not fit the row's %zu bytes of room "
				  "(raise the loader's map_out_max)", ft->key, bytes, pl->cap - pl->cursor);
	*dst = pl->row + pl->cursor;
	memcpy(pl->row + ft->offset, &(uint64_t){ pl->cursor }, 8);
	pl->cursor += bytes;
	/* the alignment gap gets zeros, so rows are the same bytes whatever the memory held before */
	if (ALIGN8(pl->cursor) > pl->cap)
		return grist_fail(-EMSGSIZE, "feature '%s': the row has no room left (raise map_out_max)", ft->key);
	memset(pl->row + pl->cursor, 0, ALIGN8(pl->cursor) - pl->cursor);
	pl->cursor = ALIGN8(pl->cursor);
	return 0;
}

static void put_dims(const struct gf_feature *ft, uint8_t *row, const int64_t *dims)
{
	if (ft->dims_offset != SIZE_MAX)
		memcpy(row + ft->dims_offset, dims, 8 * ft->ndim);
}

/*
 * A record's values make @count elements: check that against the shape and give the
 * destination (with the pad filled), the real dims written to the dims column.
 */
static int place_elements(const struct gf_feature *ft, struct place *pl, uint64_t count, uint8_t **dst)
{
	char want[160];
	int64_t dims[GRIST_FEATURE_MAX_DIMS];
	uint64_t lead;

	memcpy(dims, ft->shape, sizeof(dims));
	if (ft->var_dim < 0) {
		if (count != ft->count)
			goto mismatch;
	} else {
		if (ft->inner ? count % ft->inner : count)
			goto mismatch;
		lead = ft->inner ? count / ft->inner : 0;
		if (ft->has_max && lead > (uint64_t)ft->max_shape[0]) {
			fmt_shape(want, sizeof(want), ft->max_shape, ft->ndim);
			return grist_fail(-EMSGSIZE, "feature '%s': %" PRIu64 " values make %" PRIu64
					  " rows, more than the max shape %s allows", ft->key, count, lead, want);
		}
		dims[0] = (int64_t)lead;
	}
	put_dims(ft, pl->row, dims);
	if (ft->varlen == GRIST_VARLEN_RAGGED)
		return reserve_ragged(ft, pl, count * ft->elem_bytes, dst);
	*dst = pl->row + ft->offset;
	if (ft->varlen == GRIST_VARLEN_PAD)
		fill(*dst, ft, count * ft->elem_bytes, ft->bytes);
	return 0;
mismatch:
	fmt_shape(want, sizeof(want), ft->shape, ft->ndim);
	return grist_fail(-EMSGSIZE, "feature '%s': %" PRIu64 " %s, which do not make the shape %s", ft->key, count,
			  ft->decode == GRIST_DECODE_VALUES ? "values" : ft->decode == GRIST_DECODE_RAW ?
			  "elements of raw bytes" : "bytes", want);
}

/*
 * An image, or a sequence of @frames images (shape (T, H, W, C): TFDS's Video and
 * Sequence(Image)), each header checked before its pixels are written. The frames of a
 * record share one H x W x C; they sit one after another, each in a frame of the
 * column's shape (padded) or of the record's (ragged).
 */
static int decode_images(const struct gf_feature *ft, const struct gf_span *entry, const struct gf_values *v,
			 struct place *pl)
{
	size_t lead = ft->ndim == 4, pitch = 0, frame = 0;
	int64_t dims[4] = { 0 };
	struct gf_bytes_iter bi;
	struct gf_image img;
	const uint8_t *p;
	uint8_t *dst = NULL;
	uint64_t k = 0;
	size_t len;
	char want[96];
	int ret, r;

	if (!lead && v->count != 1)
		return grist_fail(-EMSGSIZE, "feature '%s': a bytes_list of %" PRIu64 " values, one expected", ft->key,
				  v->count);
	if (lead && ((ft->shape[0] >= 0 && v->count != (uint64_t)ft->shape[0]) ||
		     (ft->has_max && v->count > (uint64_t)ft->max_shape[0])))
		return grist_fail(-EMSGSIZE, "feature '%s': %" PRIu64 " images, the spec says %s%" PRId64, ft->key,
				  v->count, ft->shape[0] >= 0 ? "" : "at most ",
				  ft->shape[0] >= 0 ? ft->shape[0] : ft->max_shape[0]);
	dims[0] = (int64_t)v->count;
	for (size_t d = lead; d < ft->ndim; d++) /* what an empty sequence reports */
		dims[d] = ft->shape[d] >= 0 ? ft->shape[d] : 0;
	gf_bytes_iter_init(&bi, entry, v);
	/* one image (the usual case): the scan already found it, no second walk */
	while ((r = v->count == 1 ? (k == 0 ? (p = v->first, len = v->first_len, 1) : 0) :
		    gf_bytes_iter_next(&bi, &p, &len)) == 1) {
		int64_t got[3];

		ret = gf_image_open(&img, ft->decode, p, len);
		if (ret)
			return lead ? grist_fail_prefix(ret, "feature '%s': image %" PRIu64, ft->key, k) :
				      grist_fail_prefix(ret, "feature '%s'", ft->key);
		got[0] = img.height;
		got[1] = img.width;
		got[2] = img.channels;
		if (k && (got[0] != dims[lead] || got[1] != dims[lead + 1] || got[2] != dims[lead + 2])) {
			gf_image_close(&img);
			return grist_fail(-EMSGSIZE, "feature '%s': image %" PRIu64 " is %" PRId64 "x%" PRId64 "x%" PRId64
					  ", image 0 is %" PRId64 "x%" PRId64 "x%" PRId64, ft->key, k, got[0], got[1],
					  got[2], dims[lead], dims[lead + 1], dims[lead + 2]);
		}
		for (size_t d = 0; !k && d < 3; d++) {
			int64_t decl = ft->shape[lead + d];
			int64_t lim = decl >= 0 ? decl : ft->has_max ? ft->max_shape[lead + d] : INT64_MAX;

			if ((decl >= 0 && got[d] != decl) || got[d] > lim) {
				gf_image_close(&img);
				fmt_shape(want, sizeof(want), (ft->has_max ? ft->max_shape : ft->shape) + lead, 3);
				return grist_fail(-EMSGSIZE, "feature '%s': %s is %" PRId64 "x%" PRId64 "x%" PRId64 ", the "
						  "spec says %s%s", ft->key, img.kind == GRIST_DECODE_PNG ? "PNG" : "JPEG",
						  got[0], got[1], got[2], ft->varlen == GRIST_VARLEN_NONE ? "" : "at most ",
						  want);
			}
		}
		if (img.sample_bytes != ft->elem_bytes) {
			gf_image_close(&img);
			return grist_fail(-EBADMSG, "feature '%s': the image has %u-bit samples, the spec says %s", ft->key,
					  8 * img.sample_bytes, ft->elem_bytes == 1 ? "uint8" : "uint16");
		}
		if (!k) {
			/* the first image fixes the record's shape, and so its place */
			size_t bytes = (size_t)(got[0] * got[1] * got[2]) * ft->elem_bytes;

			memcpy(dims + lead, got, sizeof(got));
			if (ft->varlen == GRIST_VARLEN_RAGGED) {
				ret = reserve_ragged(ft, pl, bytes * v->count, &dst);
				if (ret) {
					gf_image_close(&img);
					return ret;
				}
				pitch = (size_t)(got[1] * got[2]) * ft->elem_bytes;
				frame = bytes;
			} else {
				dst = pl->row + ft->offset;
				pitch = (size_t)(ft->row_shape[lead + 1] * ft->row_shape[lead + 2]) * ft->elem_bytes;
				frame = (size_t)ft->row_shape[lead] * pitch;
				if (ft->varlen == GRIST_VARLEN_PAD && bytes * v->count != ft->bytes)
					fill(dst, ft, 0, ft->bytes);
			}
		}
		ret = gf_image_decode(&img, dst + k * frame, pitch);
		if (ret)
			return lead ? grist_fail_prefix(ret, "feature '%s': image %" PRIu64, ft->key, k) :
				      grist_fail_prefix(ret, "feature '%s'", ft->key);
		k++;
	}
	if (r < 0)
		return grist_fail_prefix(r, "feature '%s'", ft->key);
	if (!k) {
		/* no image: an empty sequence, its column all pad */
		if (ft->varlen == GRIST_VARLEN_PAD)
			fill(pl->row + ft->offset, ft, 0, ft->bytes);
		else if (ft->varlen == GRIST_VARLEN_RAGGED && (ret = reserve_ragged(ft, pl, 0, &dst)))
			return ret;
	}
	put_dims(ft, pl->row, dims);
	return 0;
}

/* A list of strings into the ragged part: their lengths (uint64), then their bytes. */
static int decode_strings(const struct gf_feature *ft, const struct gf_span *entry, const struct gf_values *v,
			  struct place *pl)
{
	int64_t dims[1] = { (int64_t)v->count };
	uint64_t total;
	uint8_t *dst;
	int ret;

	if ((ft->shape[0] >= 0 && v->count != (uint64_t)ft->shape[0]) ||
	    (ft->has_max && v->count > (uint64_t)ft->max_shape[0]))
		return grist_fail(-EMSGSIZE, "feature '%s': %" PRIu64 " strings, the spec says %s%" PRId64, ft->key,
				  v->count, ft->shape[0] >= 0 ? "" : "at most ",
				  ft->shape[0] >= 0 ? ft->shape[0] : ft->max_shape[0]);
	ret = gf_values_strings(entry, v, NULL, NULL, &total);
	if (!ret)
		ret = reserve_ragged(ft, pl, (size_t)(8 * v->count + total), &dst);
	if (!ret)
		ret = gf_values_strings(entry, v, dst, dst + 8 * v->count, &total);
	if (ret)
		return grist_fail_prefix(ret, "feature '%s'", ft->key);
	put_dims(ft, pl->row, dims);
	return 0;
}

/* Which record is decoded (keys a transform's draws); set to the feature that failed, if one did. */
struct where {
	uint64_t index, epoch;
	int failed;
};

static int decode_feature(const struct gf_feature *ft, const struct gf_span *entry, struct place *pl,
			  const struct where *at)
{
	struct gf_values v;
	uint8_t *dst;
	int ret = gf_values_scan(entry, &v);

	if (ret)
		return grist_fail_prefix(ret, "feature '%s'", ft->key);
	if (v.kind != (int)ft->wire)
		return grist_fail(-EBADMSG, "feature '%s': a %s, the spec says %s", ft->key, wire_name(v.kind),
				  wire_name(ft->wire));
	if (ft->decode == GRIST_DECODE_VALUES) {
		ret = place_elements(ft, pl, v.count, &dst);
		if (!ret && v.count)
			ret = gf_values_write(entry, &v, ft->dtype, dst);
		return ret ? grist_fail_prefix(ret, "feature '%s'", ft->key) : 0;
	}
	if (ft->decode == GRIST_DECODE_STRINGS)
		return decode_strings(ft, entry, &v, pl);
	if (ft->has_tf) {
		if (v.count != 1)
			return grist_fail(-EMSGSIZE, "feature '%s': a bytes_list of %" PRIu64 " values, one image expected",
					  ft->key, v.count);
		ret = gf_transform_image(ft, v.first, v.first_len, at->epoch, at->index, pl->row);
		return ret ? grist_fail_prefix(ret, "feature '%s'", ft->key) : 0;
	}
	if (ft->decode >= GRIST_DECODE_PNG && ft->decode <= GRIST_DECODE_IMAGE)
		return decode_images(ft, entry, &v, pl);
	if (v.count != 1)
		return grist_fail(-EMSGSIZE, "feature '%s': a bytes_list of %" PRIu64 " values, one expected", ft->key,
				  v.count);
	switch (ft->decode) {
	case GRIST_DECODE_BYTES:
		ret = place_elements(ft, pl, v.first_len, &dst);
		if (!ret)
			memcpy(dst, v.first, v.first_len);
		return ret;
	case GRIST_DECODE_RAW:
		if (v.first_len % ft->elem_bytes)
			return grist_fail(-EMSGSIZE, "feature '%s': %zu raw bytes are not whole elements of %zu bytes",
					  ft->key, v.first_len, ft->elem_bytes);
		ret = place_elements(ft, pl, v.first_len / ft->elem_bytes, &dst);
		if (!ret)
			memcpy(dst, v.first, v.first_len);
		return ret;
	default:
		return grist_fail(-EINVAL, "feature '%s': unknown decode kind %d", ft->key, (int)ft->decode);
	}
}

/* Decode into @row; the message (without the record's location) on error. */
static int decode_row(const struct grist_features *f, const uint8_t *rec, size_t len, uint8_t *row, size_t cap,
		      size_t *row_len, struct where *at)
{
	struct gf_span stack[SPANS_ON_STACK], *spans = stack;
	struct place pl = { .row = row, .cap = cap, .cursor = f->row_bytes };
	size_t end = 0;
	int ret;

	if (cap < f->row_bytes)
		return grist_fail(-EMSGSIZE, "a row needs at least %zu bytes, %zu given (a ragged row gets map_out_max)",
				  f->row_bytes, cap);
	if (f->n > SPANS_ON_STACK) {
		spans = malloc(f->n * sizeof(*spans));
		if (!spans)
			return grist_fail(-ENOMEM, "features: out of memory");
	}
	ret = gf_parse_example(f, rec, len, spans);
	for (size_t i = 0; !ret && i < f->n; i++) {
		const struct gf_feature *ft = &f->feat[i];

		/* zero the alignment gaps, so rows are the same bytes whatever the slot held before */
		memset(row + end, 0, ft->offset - end);
		end = ft->offset + ft->bytes;
		if (ft->dims_offset != SIZE_MAX) {
			memset(row + end, 0, ft->dims_offset - end);
			end = ft->dims_offset + 8 * ft->ndim;
		}
		if (ft->box_offset != SIZE_MAX) {
			memset(row + end, 0, ft->box_offset - end);
			end = ft->box_offset + 5 * sizeof(int32_t);
		}
		if (!spans[i].p)
			ret = grist_fail(-EBADMSG, "feature '%s': missing (the record has no such key)", ft->key);
		else
			ret = decode_feature(ft, &spans[i], &pl, at);
		if (ret)
			at->failed = (int)i;
	}
	if (!ret) {
		memset(row + end, 0, f->row_bytes - end);
		*row_len = pl.cursor;
	}
	if (spans != stack)
		free(spans);
	return ret;
}

/* Put "<file>: record <i>" (or what is known of it) before the message. */
static int locate(const struct grist_features_decoder *d, int ret, uint32_t dataset, uint64_t index, bool known)
{
	const struct gf_names *nm;
	size_t lo = 0, hi;

	if (!known)
		return grist_fail_prefix(ret, "batch record %" PRIu64, index);
	if (dataset >= d->num_names || !d->names[dataset].n)
		return grist_fail_prefix(ret, "dataset %" PRIu32 " record %" PRIu64, dataset, index);
	nm = &d->names[dataset];
	hi = nm->n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (nm->first[mid] <= index)
			lo = mid;
		else
			hi = mid;
	}
	return grist_fail_prefix(ret, "%s: record %" PRIu64, nm->paths[lo], index - nm->first[lo]);
}

static int decode_where(const struct grist_features_decoder *d, const uint8_t *rec, size_t len, uint32_t dataset,
			bool known, uint8_t *row, size_t cap, size_t *row_len, struct where *at)
{
	int ret = decode_row(d->spec, rec, len, row, cap, row_len, at);

	return ret ? locate(d, ret, dataset, at->index, known) : 0;
}

int gf_decode_located(const struct grist_features_decoder *d, const uint8_t *rec, size_t len, uint32_t dataset,
		      uint64_t index, uint64_t epoch, bool known, uint8_t *row, size_t cap, size_t *row_len)
{
	struct where at = { .index = index, .epoch = epoch, .failed = -1 };

	return decode_where(d, rec, len, dataset, known, row, cap, row_len, &at);
}

int grist_features_decode(const struct grist_features_decoder *d, const uint8_t *rec, size_t len, uint32_t dataset,
			  uint64_t index, uint8_t *row, size_t cap, size_t *row_len)
{
	if (!d || (!rec && len) || !row || !row_len)
		return grist_fail(-EINVAL, "features: decode: NULL argument");
	return gf_decode_located(d, rec, len, dataset, index, 0, true, row, cap, row_len);
}

int grist_features_map(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t out_cap, size_t *out_len)
{
	struct grist_features_decoder *d = ctx;
	struct where at = { .index = in->index, .epoch = in->epoch, .failed = -1 };
	int ret = decode_where(d, in->data, in->len, in->dataset, true, out, out_cap, out_len, &at);

	if (!ret)
		return 1;
	if (at.failed < 0 || d->spec->feat[at.failed].on_error != GRIST_ON_ERROR_SKIP || !gf_skippable(ret))
		return ret;
	gf_skips_add(&d->skips, in);
	*out_len = 0;
	return 0;
}

uint64_t grist_features_skipped(struct grist_features_decoder *d, struct grist_feature_skip *out, size_t cap,
				size_t *n)
{
	if (!d) {
		if (n)
			*n = 0;
		return 0;
	}
	return gf_skips_get(&d->skips, out, cap, n);
}

static void free_names(struct gf_names *nm)
{
	for (size_t i = 0; i < nm->n; i++)
		free(nm->paths[i]);
	free(nm->paths);
	free(nm->first);
}

static int load_names(const struct grist_dataset_spec *ds, struct gf_names *nm)
{
	struct grist_reader *r;
	struct grist_file_info fi;
	int ret = grist_reader_open(ds->paths, ds->num_paths, NULL, &r);

	if (ret)
		return ret;
	nm->n = grist_reader_num_files(r);
	nm->paths = calloc(nm->n, sizeof(*nm->paths));
	nm->first = calloc(nm->n, sizeof(*nm->first));
	ret = nm->paths && nm->first ? 0 : grist_fail(-ENOMEM, "features: out of memory");
	for (size_t i = 0; !ret && i < nm->n; i++) {
		ret = grist_reader_file_info(r, i, &fi);
		if (!ret) {
			nm->first[i] = fi.first_record;
			nm->paths[i] = strdup(fi.path);
			if (!nm->paths[i])
				ret = grist_fail(-ENOMEM, "features: out of memory");
		}
	}
	grist_reader_close(r);
	if (ret) {
		free_names(nm);
		nm->n = 0;
	}
	return ret;
}

int grist_features_decoder_create(const struct grist_features *f, const struct grist_dataset_spec *datasets,
				  size_t num_datasets, struct grist_features_decoder **out)
{
	struct grist_features_decoder *d;
	int ret;

	if (!f || !f->finished || !out || (num_datasets && !datasets))
		return grist_fail(-EINVAL, "features: a decoder needs a finished spec");
	d = calloc(1, sizeof(*d));
	if (!d)
		return grist_fail(-ENOMEM, "features: out of memory");
	gf_skips_init(&d->skips);
	ret = gf_clone(f, &d->spec);
	if (!ret && num_datasets) {
		d->names = calloc(num_datasets, sizeof(*d->names));
		if (!d->names)
			ret = grist_fail(-ENOMEM, "features: out of memory");
		d->num_names = d->names ? num_datasets : 0;
		for (size_t i = 0; !ret && i < num_datasets; i++)
			ret = load_names(&datasets[i], &d->names[i]);
	}
	if (ret) {
		grist_features_decoder_destroy(d);
		return ret;
	}
	*out = d;
	return 0;
}

void grist_features_decoder_destroy(struct grist_features_decoder *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->num_names; i++)
		free_names(&d->names[i]);
	gf_skips_destroy(&d->skips);
	free(d->names);
	grist_features_destroy(d->spec);
	free(d);
}

const struct grist_features *grist_features_decoder_spec(const struct grist_features_decoder *d)
{
	return d ? d->spec : NULL;
}
