/* The features spec: building it, checking it, and laying its columns out in a row. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/buf.h"
#include "common/error.h"
#include "features/features_internal.h"
#include "features/vision_internal.h"

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)

size_t gf_dtype_bytes(enum grist_dtype t)
{
	switch (t) {
	case GRIST_DTYPE_UINT8:
	case GRIST_DTYPE_INT8:
	case GRIST_DTYPE_BOOL:
		return 1;
	case GRIST_DTYPE_UINT16:
	case GRIST_DTYPE_INT16:
	case GRIST_DTYPE_FLOAT16:
	case GRIST_DTYPE_BFLOAT16:
		return 2;
	case GRIST_DTYPE_UINT32:
	case GRIST_DTYPE_INT32:
	case GRIST_DTYPE_FLOAT32:
		return 4;
	case GRIST_DTYPE_UINT64:
	case GRIST_DTYPE_INT64:
	case GRIST_DTYPE_FLOAT64:
		return 8;
	}
	return 0;
}

/*
 * float32 <-> IEEE binary16, round to nearest even: the FLOAT16 dtype's values, which the
 * spec (pad values), the parser (float_list values) and the encoder all convert.
 */
uint16_t gf_float_to_half(float f)
{
	uint32_t x, sign, exp, man;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	exp = (x >> 23) & 0xff;
	man = x & 0x7fffff;
	if (exp == 0xff) /* inf, NaN (kept quiet, payload's top bits) */
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
	if (exp > 142) /* overflows binary16 */
		return (uint16_t)(sign | 0x7c00);
	if (exp < 113) { /* subnormal or zero in binary16 */
		uint32_t shift, half, rest;

		if (exp < 102)
			return (uint16_t)sign;
		man |= 0x800000;
		shift = 126 - exp; /* 14 .. 24 */
		half = man >> shift;
		rest = man & ((1u << shift) - 1);
		if (rest > (1u << (shift - 1)) || (rest == (1u << (shift - 1)) && (half & 1)))
			half++;
		return (uint16_t)(sign | half);
	}
	{
		uint32_t h = ((exp - 112) << 10) | (man >> 13), rest = man & 0x1fff;

		if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
			h++; /* may carry into the exponent, up to inf: that is right */
		return (uint16_t)(sign | h);
	}
}

uint16_t gf_float_to_bfloat16(float f)
{
	uint32_t b;

	memcpy(&b, &f, 4);
	if ((b & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)(b >> 16 | 0x40); /* a NaN stays a (quiet) NaN */
	return (uint16_t)((b + 0x7fffu + (b >> 16 & 1)) >> 16);
}

float gf_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
	float f;

	if (exp == 0x1f)
		x = sign | 0x7f800000 | (man << 13);
	else if (exp)
		x = sign | ((exp + 112) << 23) | (man << 13);
	else if (!man)
		x = sign;
	else {
		exp = 113;
		while (!(man & 0x400)) {
			man <<= 1;
			exp--;
		}
		x = sign | (exp << 23) | ((man & 0x3ff) << 13);
	}
	memcpy(&f, &x, 4);
	return f;
}

static bool is_float(enum grist_dtype t)
{
	return t == GRIST_DTYPE_FLOAT16 || t == GRIST_DTYPE_FLOAT32 || t == GRIST_DTYPE_FLOAT64;
}

static bool is_image(enum grist_decode d)
{
	return d == GRIST_DECODE_PNG || d == GRIST_DECODE_JPEG || d == GRIST_DECODE_IMAGE;
}

static uint64_t key_hash(const uint8_t *key, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ key[i]) * 0x100000001b3ull;
	return h;
}

int gf_lookup(const struct grist_features *f, const uint8_t *key, size_t len)
{
	size_t i = key_hash(key, len) & f->table_mask;
	uint32_t k;

	while ((k = f->table[i]) != 0) {
		const struct gf_feature *ft = &f->feat[k - 1];

		if (ft->key_len == len && memcmp(ft->key, key, len) == 0)
			return (int)(k - 1);
		i = (i + 1) & f->table_mask;
	}
	return -1;
}

int grist_features_create(struct grist_features **out)
{
	struct grist_features *f = calloc(1, sizeof(*f));

	if (!f)
		return grist_fail(-ENOMEM, "features: out of memory");
	*out = f;
	return 0;
}

void grist_features_destroy(struct grist_features *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		free(f->feat[i].key);
	free(f->feat);
	free(f->table);
	free(f);
}

static int check_open(const struct grist_features *f)
{
	if (!f)
		return grist_fail(-EINVAL, "features: NULL spec");
	if (f->finished)
		return grist_fail(-EINVAL, "features: the spec is finished and can no longer change");
	return 0;
}

int grist_features_add(struct grist_features *f, const char *key, enum grist_wire wire, enum grist_dtype dtype,
		       const int64_t *shape, size_t ndim)
{
	struct gf_feature *ft;
	size_t key_len;
	int ret = check_open(f);

	if (ret)
		return ret;
	if (!key || !(key_len = strnlen(key, GF_KEY_MAX + 1)) || key_len > GF_KEY_MAX)
		return grist_fail(-EINVAL, "features: a key must be 1 to %d bytes", GF_KEY_MAX);
	if (wire != GRIST_WIRE_BYTES && wire != GRIST_WIRE_FLOAT && wire != GRIST_WIRE_INT64)
		return grist_fail(-EINVAL, "feature '%s': unknown wire kind %d", key, (int)wire);
	if (!gf_dtype_bytes(dtype))
		return grist_fail(-EINVAL, "feature '%s': unknown dtype %d", key, (int)dtype);
	if (dtype == GRIST_DTYPE_BFLOAT16)
		return grist_fail(-EINVAL, "feature '%s': bfloat16 is a vision transform's output only", key);
	if (ndim > GRIST_FEATURE_MAX_DIMS || (ndim && !shape))
		return grist_fail(-EINVAL, "feature '%s': %zu dimensions (at most %d, and a shape to go with them)",
				  key, ndim, GRIST_FEATURE_MAX_DIMS);
	for (size_t d = 0; d < ndim; d++)
		if (shape[d] < -1 || shape[d] > (int64_t)GF_ROW_MAX)
			return grist_fail(-EINVAL, "feature '%s': dimension %zu is %lld (-1 or 0 .. 2^30)", key, d,
					  (long long)shape[d]);
	if (wire == GRIST_WIRE_INT64 && (is_float(dtype)))
		return grist_fail(-EINVAL, "feature '%s': an int64_list cannot give a float dtype", key);
	if (wire == GRIST_WIRE_FLOAT && !is_float(dtype))
		return grist_fail(-EINVAL, "feature '%s': a float_list gives float16, float32 or float64 only", key);
	for (size_t i = 0; i < f->n; i++)
		if (f->feat[i].key_len == key_len && memcmp(f->feat[i].key, key, key_len) == 0)
			return grist_fail(-EINVAL, "feature '%s': the key is already in the spec", key);
	if (f->n >= INT32_MAX)
		return grist_fail(-EINVAL, "features: too many features");
	ret = grist_array_reserve((void **)&f->feat, &f->cap, f->n + 1, sizeof(*f->feat));
	if (ret)
		return ret;
	ft = &f->feat[f->n];
	*ft = (struct gf_feature){ .wire = wire, .dtype = dtype, .ndim = ndim, .key_len = key_len,
				   .decode = wire == GRIST_WIRE_BYTES ? GRIST_DECODE_BYTES : GRIST_DECODE_VALUES };
	ft->key = strndup(key, key_len);
	if (!ft->key)
		return grist_fail(-ENOMEM, "features: out of memory");
	for (size_t d = 0; d < ndim; d++)
		ft->shape[d] = shape[d];
	return (int)f->n++;
}

static int check_feature(struct grist_features *f, size_t i, struct gf_feature **out)
{
	int ret;

	*out = NULL;
	ret = check_open(f);
	if (ret)
		return ret;
	if (i >= f->n)
		return grist_fail(-EINVAL, "features: no feature %zu (the spec has %zu)", i, f->n);
	*out = &f->feat[i];
	return 0;
}

int grist_features_set(struct grist_features *f, size_t i, enum grist_feature_param param, int64_t value)
{
	struct gf_feature *ft;
	int ret = check_feature(f, i, &ft);

	if (ret)
		return ret;
	switch (param) {
	case GRIST_FEATURE_DECODE:
		if (value < GRIST_DECODE_VALUES || value > GRIST_DECODE_STRINGS)
			return grist_fail(-EINVAL, "feature '%s': unknown decode kind %lld", ft->key, (long long)value);
		if ((value == GRIST_DECODE_VALUES) != (ft->wire != GRIST_WIRE_BYTES))
			return grist_fail(-EINVAL, "feature '%s': %s", ft->key,
					  value == GRIST_DECODE_VALUES ? "a bytes_list has no numeric values to decode" :
					  "only a bytes_list holds bytes, raw tensors or images");
		ft->decode = (enum grist_decode)value;
		return 0;
	case GRIST_FEATURE_ON_ERROR:
		if (value != GRIST_ON_ERROR_FAIL && value != GRIST_ON_ERROR_SKIP)
			return grist_fail(-EINVAL, "feature '%s': unknown on_error %lld", ft->key, (long long)value);
		ft->on_error = (enum grist_on_error)value;
		return 0;
	case GRIST_FEATURE_VARLEN:
		if (value < GRIST_VARLEN_NONE || value > GRIST_VARLEN_RAGGED)
			return grist_fail(-EINVAL, "feature '%s': unknown varlen mode %lld", ft->key, (long long)value);
		ft->varlen = (enum grist_varlen)value;
		return 0;
	}
	return grist_fail(-EINVAL, "feature '%s': unknown option %d", ft->key, (int)param);
}

int grist_features_set_max_shape(struct grist_features *f, size_t i, const int64_t *max_shape, size_t ndim)
{
	struct gf_feature *ft;
	int ret = check_feature(f, i, &ft);

	if (ret)
		return ret;
	if (ndim != ft->ndim || (ndim && !max_shape))
		return grist_fail(-EINVAL, "feature '%s': a max shape of %zu dimensions for a feature of %zu",
				  ft->key, ndim, ft->ndim);
	for (size_t d = 0; d < ndim; d++)
		if (max_shape[d] < 0 || max_shape[d] > (int64_t)GF_ROW_MAX ||
		    (ft->shape[d] >= 0 && max_shape[d] != ft->shape[d]))
			return grist_fail(-EINVAL, "feature '%s': max dimension %zu is %lld, the shape says %lld",
					  ft->key, d, (long long)max_shape[d], (long long)ft->shape[d]);
	memcpy(ft->max_shape, max_shape, ndim * sizeof(*max_shape));
	ft->has_max = true;
	return 0;
}

int grist_features_set_pad_value(struct grist_features *f, size_t i, double value)
{
	struct gf_feature *ft;
	int ret = check_feature(f, i, &ft);

	if (ret)
		return ret;
	if (isnan(value) && !is_float(ft->dtype))
		return grist_fail(-EINVAL, "feature '%s': a NaN pad value for an integer dtype", ft->key);
	ft->pad_value = value;
	return 0;
}

/* pad_value as the bytes of the feature's dtype. */
int grist_features_set_transform(struct grist_features *f, size_t i, const struct grist_vision_transform *t,
				 bool boxes)
{
	struct gf_feature *ft;
	int ret = check_feature(f, i, &ft);

	if (ret)
		return ret;
	if (!t) {
		ft->has_tf = ft->boxes = false;
		return 0;
	}
	if ((ret = gv_transform_load(&ft->tf, t)))
		return grist_fail_prefix(ret, "feature '%s'", ft->key);
	gv_out_plan_make(&ft->tf_plan, &ft->tf);
	ft->has_tf = true;
	ft->boxes = boxes;
	return 0;
}

static void pad_bytes(struct gf_feature *ft)
{
	double v = ft->pad_value;
	union {
		uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; float f32; double f64;
	} u = { .u64 = 0 };
	int64_t iv = isfinite(v) && v > -9.2e18 && v < 9.2e18 ? (int64_t)v : 0;

	switch (ft->dtype) {
	case GRIST_DTYPE_UINT8: case GRIST_DTYPE_INT8: u.u8 = (uint8_t)iv; break;
	case GRIST_DTYPE_BOOL: u.u8 = v != 0; break;
	case GRIST_DTYPE_UINT16: case GRIST_DTYPE_INT16: u.u16 = (uint16_t)iv; break;
	case GRIST_DTYPE_UINT32: case GRIST_DTYPE_INT32: u.u32 = (uint32_t)iv; break;
	case GRIST_DTYPE_UINT64: case GRIST_DTYPE_INT64: u.u64 = (uint64_t)iv; break;
	case GRIST_DTYPE_FLOAT16: u.u16 = gf_float_to_half((float)v); break;
	case GRIST_DTYPE_BFLOAT16: u.u16 = gf_float_to_bfloat16((float)v); break;
	case GRIST_DTYPE_FLOAT32: u.f32 = (float)v; break;
	case GRIST_DTYPE_FLOAT64: u.f64 = v; break;
	}
	memcpy(ft->pad_bytes, &u, sizeof(ft->pad_bytes));
}

/* Check one feature's options against each other and size its column. */
static int check_and_size(struct gf_feature *ft)
{
	size_t vars = 0;
	uint64_t count = 1;

	ft->elem_bytes = gf_dtype_bytes(ft->dtype);
	ft->var_dim = -1;
	ft->box_offset = SIZE_MAX;
	if (ft->has_tf) {
		/* the column is the transform's output, the same for every record */
		bool chw = ft->tf.layout == GRIST_VISION_CHW;

		if (!is_image(ft->decode) || ft->ndim != 3 || ft->dtype != GRIST_DTYPE_UINT8)
			return grist_fail(-EINVAL, "feature '%s': a transform takes an image of uint8 (H, W, C)", ft->key);
		ft->elem_bytes = gf_dtype_bytes(ft->tf.dtype);
		ft->row_shape[0] = chw ? ft->tf.channels : ft->tf.out_height;
		ft->row_shape[1] = chw ? ft->tf.out_height : ft->tf.out_width;
		ft->row_shape[2] = chw ? ft->tf.out_width : ft->tf.channels;
		ft->count = (uint64_t)ft->tf.out_height * ft->tf.out_width * ft->tf.channels;
		if (ft->count > GF_ROW_MAX / ft->elem_bytes)
			return grist_fail(-EINVAL, "feature '%s': the transform's output is larger than 1 GiB", ft->key);
		ft->varlen = GRIST_VARLEN_NONE;
		ft->inner = 1;
		pad_bytes(ft);
		return 0;
	}
	for (size_t d = 0; d < ft->ndim; d++)
		if (ft->shape[d] < 0 && !vars++)
			ft->var_dim = (int)d;
	if (is_image(ft->decode)) {
		int64_t c = ft->ndim ? ft->shape[ft->ndim - 1] : 0;

		if ((ft->dtype != GRIST_DTYPE_UINT8 && (ft->dtype != GRIST_DTYPE_UINT16 || ft->decode == GRIST_DECODE_JPEG)) ||
		    (ft->ndim != 3 && ft->ndim != 4) || c < 1 || c > 4)
			return grist_fail(-EINVAL, "feature '%s': an image is uint8 (or uint16 for PNG) of shape (H, W, C) "
					  "or, a sequence of them, (T, H, W, C), C 1 to 4", ft->key);
		if (ft->decode == GRIST_DECODE_JPEG && c != 1 && c != 3)
			return grist_fail(-EINVAL, "feature '%s': a JPEG has 1 or 3 channels", ft->key);
	} else if (ft->decode == GRIST_DECODE_STRINGS) {
		if (ft->dtype != GRIST_DTYPE_UINT8 || ft->ndim != 1 || ft->varlen != GRIST_VARLEN_RAGGED)
			return grist_fail(-EINVAL, "feature '%s': a list of strings is uint8 of shape (N,) or (-1,) and "
					  "ragged (its strings vary in bytes)", ft->key);
	} else if (ft->decode == GRIST_DECODE_BYTES) {
		if (ft->dtype != GRIST_DTYPE_UINT8 || ft->ndim != 1)
			return grist_fail(-EINVAL, "feature '%s': bytes are uint8 of shape (L,) (L = -1 for any length)",
					  ft->key);
	} else if (vars > 1 || (vars && ft->var_dim != 0)) {
		return grist_fail(-EINVAL, "feature '%s': only the first dimension may be -1 (a count of values "
				  "cannot tell two apart)", ft->key);
	}
	if (vars && ft->varlen == GRIST_VARLEN_NONE)
		return grist_fail(-EINVAL, "feature '%s': its shape varies (a -1 dimension): pad it to a max shape "
				  "(GRIST_VARLEN_PAD) or make it ragged (GRIST_VARLEN_RAGGED)", ft->key);
	if (ft->varlen == GRIST_VARLEN_PAD && !ft->has_max)
		return grist_fail(-EINVAL, "feature '%s': padding needs a max shape", ft->key);
	if (ft->varlen == GRIST_VARLEN_RAGGED && is_image(ft->decode) && !ft->has_max)
		return grist_fail(-EINVAL, "feature '%s': a ragged image needs a max shape (to bound a row)", ft->key);

	ft->inner = 1;
	for (size_t d = 0; d < ft->ndim; d++) {
		int64_t dim = ft->varlen == GRIST_VARLEN_PAD && ft->shape[d] < 0 ? ft->max_shape[d] : ft->shape[d];

		ft->row_shape[d] = dim;
		if (dim >= 0) {
			if (dim && count > GF_ROW_MAX / (uint64_t)dim)
				return grist_fail(-EINVAL, "feature '%s': its shape is larger than a 1 GiB row", ft->key);
			count *= (uint64_t)dim;
			if ((int)d > ft->var_dim && ft->var_dim >= 0)
				ft->inner *= (uint64_t)dim;
		}
	}
	if (ft->has_max)
		for (size_t d = 0; d < ft->ndim; d++)
			if (ft->max_shape[d] && count > GF_ROW_MAX / (uint64_t)ft->max_shape[d])
				return grist_fail(-EINVAL, "feature '%s': its max shape is larger than 1 GiB", ft->key);
	if (count > GF_ROW_MAX / ft->elem_bytes)
		return grist_fail(-EINVAL, "feature '%s': its shape is larger than a 1 GiB row", ft->key);
	ft->count = ft->varlen == GRIST_VARLEN_RAGGED ? 0 : count;
	pad_bytes(ft);
	return 0;
}

static void hash_feature(XXH64_state_t *st, const struct gf_feature *ft)
{
	uint64_t words[6 + 2 * GRIST_FEATURE_MAX_DIMS] = {
		ft->key_len, ft->wire, ft->dtype, ft->decode, ft->varlen, ft->ndim,
	};

	for (size_t d = 0; d < ft->ndim; d++) {
		words[6 + d] = (uint64_t)ft->shape[d];
		words[6 + GRIST_FEATURE_MAX_DIMS + d] = ft->has_max ? (uint64_t)ft->max_shape[d] : UINT64_MAX;
	}
	XXH64_update(st, words, sizeof(words));
	XXH64_update(st, ft->key, ft->key_len);
	XXH64_update(st, ft->pad_bytes, sizeof(ft->pad_bytes));
	if (ft->on_error) { /* skipping changes which records a stream delivers (only then hashed: old ids stand) */
		uint64_t oe = ft->on_error;

		XXH64_update(st, &oe, sizeof(oe));
	}
	if (ft->has_tf) {
		/* field by field: the struct's padding bytes are not part of the transform */
		const struct grist_vision_transform *t = &ft->tf;
		double d[] = { t->scale[0], t->scale[1], t->ratio[0], t->ratio[1], t->crop_fraction, t->flip,
			       t->mean[0], t->mean[1], t->mean[2], t->std[0], t->std[1], t->std[2],
			       t->min_object_covered };
		uint64_t w[] = { t->op, t->out_height, t->out_width, t->interp, t->resize, t->normalize, t->dtype,
				 t->layout, t->seed, t->max_pixels, t->scan_limit, ft->boxes, t->channels,
				 t->decode, t->exif_orientation, t->sampler };

		XXH64_update(st, d, sizeof(d));
		XXH64_update(st, w, sizeof(w));
		if (t->exact_resize) /* only when set: a spec without it hashes as before the field came */
			XXH64_update(st, &t->exact_resize, sizeof(t->exact_resize));
	}
}

int grist_features_finish(struct grist_features *f)
{
	size_t pos = 0, tsize = 16;
	XXH64_state_t *st;
	int ret = check_open(f);

	if (ret)
		return ret;
	if (!f->n)
		return grist_fail(-EINVAL, "features: the spec has no features");
	f->ragged = false;
	for (size_t i = 0; i < f->n; i++) {
		struct gf_feature *ft = &f->feat[i];

		ret = check_and_size(ft);
		if (ret)
			return ret;
		ft->offset = ALIGN8(pos);
		ft->bytes = ft->varlen == GRIST_VARLEN_RAGGED ? 8 : ft->count * ft->elem_bytes;
		pos = ft->offset + ft->bytes;
		ft->dims_offset = SIZE_MAX;
		if (ft->varlen != GRIST_VARLEN_NONE) {
			ft->dims_offset = ALIGN8(pos);
			pos = ft->dims_offset + 8 * ft->ndim;
		}
		if (ft->has_tf && ft->boxes) {
			ft->box_offset = ALIGN8(pos);
			pos = ft->box_offset + 5 * sizeof(int32_t);
		}
		if (ft->varlen == GRIST_VARLEN_RAGGED)
			f->ragged = true;
		if (pos > GF_ROW_MAX)
			return grist_fail(-EINVAL, "features: a row of more than 1 GiB (at feature '%s')", ft->key);
	}
	f->row_bytes = pos ? ALIGN8(pos) : 8;

	while (tsize < 2 * f->n)
		tsize *= 2;
	free(f->table);
	f->table = calloc(tsize, sizeof(*f->table));
	if (!f->table)
		return grist_fail(-ENOMEM, "features: out of memory");
	f->table_mask = tsize - 1;
	for (size_t i = 0; i < f->n; i++) {
		size_t h = key_hash((const uint8_t *)f->feat[i].key, f->feat[i].key_len) & f->table_mask;

		while (f->table[h])
			h = (h + 1) & f->table_mask;
		f->table[h] = (uint32_t)(i + 1);
	}

	st = XXH64_createState();
	if (!st)
		return grist_fail(-ENOMEM, "features: out of memory");
	XXH64_reset(st, 0x67726973742d6631ull /* "grist-f1" */);
	for (size_t i = 0; i < f->n; i++)
		hash_feature(st, &f->feat[i]);
	f->id = XXH64_digest(st);
	XXH64_freeState(st);
	f->finished = true;
	return 0;
}

int gf_clone(const struct grist_features *f, struct grist_features **out)
{
	struct grist_features *c;
	int ret = grist_features_create(&c);

	if (ret)
		return ret;
	for (size_t i = 0; i < f->n; i++) {
		const struct gf_feature *ft = &f->feat[i];

		ret = grist_features_add(c, ft->key, ft->wire, ft->dtype, ft->shape, ft->ndim);
		if (ret < 0)
			goto fail;
		c->feat[i].decode = ft->decode;
		c->feat[i].varlen = ft->varlen;
		c->feat[i].has_max = ft->has_max;
		memcpy(c->feat[i].max_shape, ft->max_shape, sizeof(ft->max_shape));
		c->feat[i].pad_value = ft->pad_value;
		c->feat[i].on_error = ft->on_error;
		c->feat[i].has_tf = ft->has_tf;
		c->feat[i].boxes = ft->boxes;
		c->feat[i].tf = ft->tf;
		c->feat[i].tf_plan = ft->tf_plan;
	}
	ret = grist_features_finish(c);
	if (ret)
		goto fail;
	*out = c;
	return 0;
fail:
	grist_features_destroy(c);
	return ret;
}

size_t grist_features_count(const struct grist_features *f)
{
	return f ? f->n : 0;
}

int grist_features_find(const struct grist_features *f, const char *key)
{
	if (!f || !key)
		return -ENOENT;
	if (f->finished) {
		int i = gf_lookup(f, (const uint8_t *)key, strlen(key));

		return i >= 0 ? i : -ENOENT;
	}
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->feat[i].key, key) == 0)
			return (int)i;
	return -ENOENT;
}

int grist_feature_column(const struct grist_features *f, size_t i, struct grist_feature_column *out)
{
	struct grist_feature_column c = { .size = sizeof(c) };
	const struct gf_feature *ft;

	if (!f || !f->finished || i >= f->n || !out || out->size < offsetof(struct grist_feature_column, dims_offset) +
	    sizeof(out->dims_offset))
		return grist_fail(-EINVAL, "features: column %zu: unfinished spec, no such feature or a short struct", i);
	ft = &f->feat[i];
	c.key = ft->key;
	c.wire = ft->wire;
	c.dtype = ft->dtype;
	c.decode = ft->decode;
	c.varlen = ft->varlen;
	c.elem_bytes = ft->elem_bytes;
	c.ndim = ft->ndim;
	memcpy(c.shape, ft->shape, sizeof(c.shape));
	memcpy(c.row_shape, ft->row_shape, sizeof(c.row_shape));
	c.offset = ft->offset;
	c.bytes = ft->bytes;
	c.dims_offset = ft->dims_offset;
	c.box_offset = ft->box_offset;
	if (ft->has_tf) {
		c.dtype = ft->tf.dtype;
		c.varlen = GRIST_VARLEN_NONE;
		memcpy(c.shape, ft->row_shape, sizeof(c.shape));
	}
	c.size = out->size < sizeof(c) ? out->size : sizeof(c);
	memcpy(out, &c, c.size);
	return 0;
}

size_t grist_features_row_bytes(const struct grist_features *f)
{
	return f && f->finished ? f->row_bytes : 0;
}

bool grist_features_is_ragged(const struct grist_features *f)
{
	return f && f->finished && f->ragged;
}

/* The most bytes a ragged feature's values can take for a record of @len bytes. */
static size_t ragged_bound(const struct gf_feature *ft, size_t len)
{
	uint64_t n, max = UINT64_MAX;

	if (ft->has_max) {
		max = 1;
		for (size_t d = 0; d < ft->ndim; d++)
			max *= (uint64_t)ft->max_shape[d];
		max *= ft->elem_bytes;
	}
	if (ft->decode == GRIST_DECODE_VALUES)
		/* an int64 takes at least 1 wire byte, a float 4 */
		n = (ft->wire == GRIST_WIRE_FLOAT ? len / 4 : len) * (uint64_t)ft->elem_bytes;
	else if (ft->decode == GRIST_DECODE_BYTES || ft->decode == GRIST_DECODE_RAW)
		n = len;
	else if (ft->decode == GRIST_DECODE_STRINGS)
		/* a string takes at least 2 wire bytes (tag, length): 8-byte lengths, then the bytes */
		n = (uint64_t)len / 2 * 8 + len, max = UINT64_MAX;
	else
		n = max;
	if (n > max)
		n = max;
	if (n > GF_ROW_MAX)
		n = GF_ROW_MAX;
	return ALIGN8((size_t)n);
}

size_t grist_features_row_bound(const struct grist_features *f, size_t record_len)
{
	size_t bound;

	if (!f || !f->finished)
		return 0;
	bound = f->row_bytes;
	if (f->ragged)
		for (size_t i = 0; i < f->n; i++)
			if (f->feat[i].varlen == GRIST_VARLEN_RAGGED)
				bound += ragged_bound(&f->feat[i], record_len);
	return bound;
}

uint64_t grist_features_id(const struct grist_features *f)
{
	return f && f->finished ? f->id : 0;
}

size_t grist_features_batch_bound(const struct grist_features *f, const size_t *lens, size_t n)
{
	size_t total = 0;

	if (!f || !f->finished)
		return 0;
	if (!f->ragged)
		return n > SIZE_MAX / f->row_bytes ? SIZE_MAX : n * f->row_bytes;
	for (size_t i = 0; i < n; i++) {
		size_t b = grist_features_row_bound(f, lens[i]);

		if (b > SIZE_MAX - total)
			return SIZE_MAX;
		total += b;
	}
	return total;
}
