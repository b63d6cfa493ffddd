/* features.c - grist._grist.Features: a features spec and decoder (grist/features.h) for Python. */
#include "ext.h"

#include <string.h>

#include "grist/features.h"
#include "grist/vision.h"
#include "grist/fetch.h"

/* Calls with fewer records decode on the calling thread (a Grain source's __getitem__). */
#define POOL_MIN_RECORDS 8
/* Random access decodes at most this many bytes of rows at once (decode_records()). */
#define GROUP_BYTES ((size_t)256 << 20)

typedef struct {
	PyObject_HEAD
	struct grist_features_decoder *dec;
	struct grist_features_pool *pool;   /* NULL: decode on the calling thread */
	const struct grist_features *spec;  /* the decoder's own copy */
	PyThread_type_lock lock;            /* pool, reader, fetcher: one call at a time; waited for
					       without the GIL */
	struct gristpy_map map;             /* what the Loader's _map keyword takes */
	struct gristpy_paths paths;         /* the dataset's files, for fetch() */
	struct grist_reader *reader;        /* fetch(): opened on first use */
	struct grist_fetcher *fetcher;
	size_t group_bytes;                 /* decode_records(): rows decoded at once, at most */
} FeaturesObject;

/*
 * Decoded and gathered features of n records, in one malloc'd arena: feature i's values
 * at col[i].values (col[i].bytes long) and, for a feature whose shape varies, each record's
 * real shape at col[i].dims (n x ndim int64; NULL otherwise). Built without the GIL.
 */
struct gathered_col {
	uint8_t *values;
	size_t bytes;
	int64_t *dims;
	size_t ndim;
	bool strs;                  /* a GRIST_DECODE_STRINGS feature: */
	uint64_t *lens;             /* each string's length */
	size_t nlens;               /* and how many strings */
};

struct gathered {
	size_t nf, n;
	void *arena;
	struct gathered_col *col;   /* nf + 1 of them */
};

static void gathered_free(struct gathered *g)
{
	free(g->arena);
	free(g->col);
	memset(g, 0, sizeof(*g));
}

/* Gather every feature of @n rows into @g. No GIL needed. Return: 0 or a negative code. */
static int gather_rows(const struct grist_features *spec, const uint8_t *rows, const uint64_t *offsets, size_t n,
		       struct gathered *g)
{
	size_t i, total = 0, at = 0;
	int code;

	memset(g, 0, sizeof(*g));
	g->nf = grist_features_count(spec);
	g->n = n;
	g->col = calloc(g->nf + 1, sizeof(*g->col));
	if (!g->col)
		goto nomem;
	for (i = 0; i < g->nf; i++) {
		struct grist_feature_column c;

		grist_feature_column_init(&c);
		if ((code = grist_feature_column(spec, i, &c)) ||
		    (code = grist_features_gather_bytes(spec, i, rows, offsets, n, &g->col[i].bytes)))
			goto fail;
		g->col[i].ndim = c.varlen != GRIST_VARLEN_NONE ? c.ndim : 0;
		total += (g->col[i].bytes + 7) & ~(size_t)7;
		total += n * g->col[i].ndim * sizeof(int64_t);
		if (c.decode == GRIST_DECODE_STRINGS) {
			if ((code = grist_features_gather_lengths(spec, i, rows, offsets, n, NULL, 0, &g->col[i].nlens)))
				goto fail;
			g->col[i].strs = true;
			total += g->col[i].nlens * sizeof(uint64_t);
		}
	}
	g->arena = malloc(total ? total : 8);
	if (!g->arena)
		goto nomem;
	for (i = 0; i < g->nf; i++) {
		g->col[i].values = (uint8_t *)g->arena + at;
		at += (g->col[i].bytes + 7) & ~(size_t)7;
		if (g->col[i].ndim) { /* a varlen feature (it has a -1 dimension, so ndim >= 1) */
			g->col[i].dims = (int64_t *)(void *)((uint8_t *)g->arena + at);
			at += n * g->col[i].ndim * sizeof(int64_t);
		}
		if ((code = grist_features_gather(spec, i, rows, offsets, n, g->col[i].values, g->col[i].bytes, g->col[i].dims)))
			goto fail;
		if (g->col[i].strs) {
			size_t count = 0;

			g->col[i].lens = (uint64_t *)(void *)((uint8_t *)g->arena + at);
			at += g->col[i].nlens * sizeof(uint64_t);
			if ((code = grist_features_gather_lengths(spec, i, rows, offsets, n, g->col[i].lens, g->col[i].nlens,
								  &count)))
				goto fail;
		}
	}
	return 0;
nomem:
	code = -ENOMEM;
fail:
	gathered_free(g);
	return code;
}

/* Decode @n records and gather them into @g. No GIL needed. Return: 0 or a negative code. */
static int decode_group(FeaturesObject *self, const uint8_t *const *recs, const size_t *lens, size_t n,
			const uint64_t *indices, struct gathered *g)
{
	bool ragged = grist_features_is_ragged(self->spec);
	size_t cap = grist_features_batch_bound(self->spec, lens, n);
	uint64_t *offsets = ragged ? calloc(n + 1, sizeof(*offsets)) : NULL;
	uint8_t *rows = aligned_alloc(8, cap ? (cap + 7) & ~(size_t)7 : 8);
	int code = -ENOMEM;

	if (rows && (offsets || !ragged)) {
		/* Waking the pool costs more than a few small records take: those decode here. */
		code = grist_features_decode_batch(self->dec, n >= POOL_MIN_RECORDS ? self->pool : NULL, recs, lens, n,
						   0, indices, rows, cap, offsets);
		if (!code)
			code = gather_rows(self->spec, rows, offsets, n, g);
	}
	free(rows);
	free(offsets);
	return code;
}

/*
 * A request's features as decode_records() gathered them: one part per group of rows, in
 * record order, joined once (gathered_list()) straight into the Python arrays. Joining
 * each group to the ones before as it came copied everything gathered so far at every
 * group: copying that grew with the square of the group count.
 */
struct gathered_parts {
	struct gathered *part;
	size_t n;
};

static void gathered_parts_free(struct gathered_parts *ps)
{
	for (size_t p = 0; p < ps->n; p++)
		gathered_free(&ps->part[p]);
	free(ps->part);
	memset(ps, 0, sizeof(*ps));
}

/*
 * Decode @n records and gather them into @out, without the GIL. Records whose rows could be
 * large (images of unknown size are bounded by their largest shape, not their bytes) go in
 * groups of at most self->group_bytes of rows (GROUP_BYTES unless a test asked otherwise), so
 * a request never reserves more than that at once besides one record's bound.
 * Return: 0 or a negative code (@out empty then).
 */
static int decode_records(FeaturesObject *self, const uint8_t *const *recs, const size_t *lens, size_t n,
			  const uint64_t *indices, struct gathered_parts *out)
{
	bool one = grist_features_batch_bound(self->spec, lens, n) <= self->group_bytes;
	size_t a, b;
	int code = 0;

	/* a group holds a record at least: never more groups than records */
	out->n = 0;
	out->part = calloc(one || !n ? 1 : n, sizeof(*out->part));
	if (!out->part)
		return -ENOMEM;
	/* one pass at least: no records still make one (empty) part */
	for (a = 0; !code && (a < n || !out->n); a = b) {
		b = n;
		if (!one) {
			size_t bytes = grist_features_row_bound(self->spec, lens[a]);

			for (b = a + 1; b < n; b++) {
				size_t next = grist_features_row_bound(self->spec, lens[b]);

				if (bytes + next > self->group_bytes)
					break;
				bytes += next;
			}
		}
		code = decode_group(self, recs + a, lens + a, b - a, indices ? indices + a : NULL, &out->part[out->n]);
		if (!code)
			out->n++;
	}
	if (code)
		gathered_parts_free(out);
	return code;
}

enum gathered_piece { PIECE_VALUES, PIECE_DIMS, PIECE_LENGTHS };

/* Column @i's @k in @g: where it is (NULL: the feature has none) and its bytes. */
static const void *gathered_piece(const struct gathered *g, size_t i, enum gathered_piece k, size_t *len)
{
	const struct gathered_col *c = &g->col[i];

	switch (k) {
	case PIECE_VALUES:
		*len = c->bytes;
		return c->values;
	case PIECE_DIMS:
		*len = g->n * c->ndim * sizeof(int64_t);
		return c->dims;
	case PIECE_LENGTHS:
	default:
		*len = c->nlens * sizeof(uint64_t);
		return c->strs ? c->lens : NULL;
	}
}

/* Column @i's @k of every part, in order, in one bytearray; None where the feature has none. */
static PyObject *gathered_join(const struct gathered_parts *ps, size_t i, enum gathered_piece k)
{
	size_t len, total = 0, at = 0, p;
	PyObject *out;

	if (!gathered_piece(&ps->part[0], i, k, &len))
		Py_RETURN_NONE;
	for (p = 0; p < ps->n; p++) {
		gathered_piece(&ps->part[p], i, k, &len);
		total += len;
	}
	out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)total);
	for (p = 0; out && p < ps->n; p++) {
		const void *src = gathered_piece(&ps->part[p], i, k, &len);

		if (len)
			memcpy(PyByteArray_AS_STRING(out) + at, src, len);
		at += len;
	}
	return out;
}

/*
 * @ps as a list of (values, dims, lengths) per feature, each a bytearray: dims (int64, n x
 * ndim) for a feature whose shape varies, lengths (uint64, one per string) for a strings
 * feature, None otherwise. Frees @ps, which holds one part at least.
 */
static PyObject *gathered_list(struct gathered_parts *ps)
{
	size_t i, nf = ps->part[0].nf;
	PyObject *out = PyList_New((Py_ssize_t)nf);

	for (i = 0; out && i < nf; i++) {
		PyObject *v = gathered_join(ps, i, PIECE_VALUES);
		PyObject *d = v ? gathered_join(ps, i, PIECE_DIMS) : NULL;
		PyObject *l = d ? gathered_join(ps, i, PIECE_LENGTHS) : NULL;
		PyObject *t = l ? PyTuple_Pack(3, v, d, l) : NULL;

		Py_XDECREF(v);
		Py_XDECREF(d);
		Py_XDECREF(l);
		if (!t)
			Py_CLEAR(out);
		else
			PyList_SET_ITEM(out, (Py_ssize_t)i, t);
	}
	gathered_parts_free(ps);
	return out;
}

static int int64_tuple(PyObject *v, const char *what, int64_t *out, size_t *n)
{
	PyObject *seq = PySequence_Fast(v, what);
	Py_ssize_t i, len;

	if (!seq)
		return -1;
	len = PySequence_Fast_GET_SIZE(seq);
	if (len > GRIST_FEATURE_MAX_DIMS) {
		Py_DECREF(seq);
		PyErr_Format(PyExc_ValueError, "Features: %s has more than %d dimensions", what, GRIST_FEATURE_MAX_DIMS);
		return -1;
	}
	for (i = 0; i < len; i++) {
		out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
		if (out[i] == -1 && PyErr_Occurred()) {
			Py_DECREF(seq);
			return -1;
		}
	}
	*n = (size_t)len;
	Py_DECREF(seq);
	return 0;
}

/* A failed grist_features_* call on a spec being built: the library's message, as ValueError. */
static int spec_fail(int code, const char *key)
{
	const char *msg = grist_last_error();

	if (code == -ENOMEM)
		PyErr_NoMemory();
	else
		PyErr_Format(PyExc_ValueError, "Features: feature '%s': %s", key, msg && *msg ? msg : grist_strerror(code));
	return -1;
}

/*
 * One column: (key, wire, dtype, shape, decode, varlen, max_shape or None, pad_value[,
 * transform dict (grist.vision) or None, seed, boxes[, on_error]]).
 */
static int add_column(struct grist_features *f, PyObject *col)
{
	PyObject *shape_o, *max_o, *tf_o = Py_None;
	unsigned long long seed = 0;
	int boxes = 0, on_error = 0;
	const char *key;
	int wire, dtype, decode, varlen, idx, ret;
	int64_t shape[GRIST_FEATURE_MAX_DIMS], max_shape[GRIST_FEATURE_MAX_DIMS];
	size_t ndim = 0, max_ndim = 0;
	double pad;

	if (!PyArg_ParseTuple(col, "siiOiiOd|OKpi:Features column", &key, &wire, &dtype, &shape_o, &decode, &varlen,
			      &max_o, &pad, &tf_o, &seed, &boxes, &on_error))
		return -1;
	if (int64_tuple(shape_o, "shape", shape, &ndim))
		return -1;
	idx = grist_features_add(f, key, (enum grist_wire)wire, (enum grist_dtype)dtype, ndim ? shape : NULL, ndim);
	if (idx < 0)
		return spec_fail(idx, key);
	if ((ret = grist_features_set(f, (size_t)idx, GRIST_FEATURE_DECODE, decode)) ||
	    (ret = grist_features_set(f, (size_t)idx, GRIST_FEATURE_VARLEN, varlen)))
		return spec_fail(ret, key);
	if (max_o != Py_None) {
		if (int64_tuple(max_o, "max_shape", max_shape, &max_ndim))
			return -1;
		if ((ret = grist_features_set_max_shape(f, (size_t)idx, max_shape, max_ndim)))
			return spec_fail(ret, key);
	}
	if (pad != 0 && (ret = grist_features_set_pad_value(f, (size_t)idx, pad)))
		return spec_fail(ret, key);
	if (on_error && (ret = grist_features_set(f, (size_t)idx, GRIST_FEATURE_ON_ERROR, on_error)))
		return spec_fail(ret, key);
	if (tf_o != Py_None) {
		struct grist_vision_transform t;

		if (gristpy_transform_from(tf_o, seed, &t))
			return -1;
		if ((ret = grist_features_set_transform(f, (size_t)idx, &t, boxes)))
			return spec_fail(ret, key);
	}
	return 0;
}

static void features_free(FeaturesObject *self)
{
	grist_fetcher_destroy(self->fetcher); /* before the reader whose index it uses */
	grist_reader_close(self->reader);
	gristpy_paths_free(&self->paths);
	self->fetcher = NULL;
	self->reader = NULL;
	grist_features_pool_destroy(self->pool);
	grist_features_decoder_destroy(self->dec);
	self->pool = NULL;
	self->dec = NULL;
	self->spec = NULL;
}

/*
 * Features(columns, paths=None, threads=0, datasets=None): @paths are the files of the one
 * dataset the records come from (for messages naming file and record, and for fetch());
 * @datasets instead, a list of such lists for a loader that mixes datasets (messages only);
 * @threads the pool's workers beside the calling thread (0: none). The private
 * @_group_bytes (tests) replaces GROUP_BYTES for this object, so a small dataset decodes in
 * many groups.
 */
static int features_init(FeaturesObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = { "columns", "paths", "threads", "datasets", "_group_bytes", NULL };
	PyObject *columns, *paths = Py_None, *datasets = Py_None, *seq = NULL, *dseq = NULL;
	struct grist_features *f = NULL;
	struct gristpy_paths *p = NULL;
	struct grist_dataset_spec *ds = NULL;
	size_t nd = 0, d;
	unsigned threads = 0;
	Py_ssize_t group_bytes = (Py_ssize_t)GROUP_BYTES;
	char msg[1024] = "";
	Py_ssize_t i;
	int ret = -1, code;

	if (self->dec) {
		PyErr_SetString(PyExc_ValueError, "Features: already initialised");
		return -1;
	}
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OIO$n:Features", kwlist, &columns, &paths, &threads, &datasets,
					 &group_bytes))
		return -1;
	if (group_bytes < 1) {
		PyErr_SetString(PyExc_ValueError, "Features: _group_bytes must be at least 1");
		return -1;
	}
	if (paths != Py_None && datasets != Py_None) {
		PyErr_SetString(PyExc_ValueError, "Features: paths or datasets, not both");
		return -1;
	}
	if (threads > 256) {
		PyErr_Format(PyExc_ValueError, "Features: threads must be in 0..256, not %u", threads);
		return -1;
	}
	seq = PySequence_Fast(columns, "Features: columns must be a sequence");
	if (!seq)
		return -1;
	if ((code = grist_features_create(&f))) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < PySequence_Fast_GET_SIZE(seq); i++)
		if (add_column(f, PySequence_Fast_GET_ITEM(seq, i)))
			goto out;
	if ((code = grist_features_finish(f))) {
		PyErr_Format(PyExc_ValueError, "Features: %s", grist_last_error());
		goto out;
	}
	if (paths != Py_None || datasets != Py_None) {
		if (datasets != Py_None && !(dseq = PySequence_Fast(datasets, "Features: datasets must be a list")))
			goto out;
		nd = dseq ? (size_t)PySequence_Fast_GET_SIZE(dseq) : 1;
		p = calloc(nd + 1, sizeof(*p));
		ds = calloc(nd + 1, sizeof(*ds));
		if (!p || !ds) {
			PyErr_NoMemory();
			goto out;
		}
		for (d = 0; d < nd; d++) {
			if (gristpy_paths_from(dseq ? PySequence_Fast_GET_ITEM(dseq, (Py_ssize_t)d) : paths, &p[d]))
				goto out;
			ds[d].paths = (const char *const *)p[d].v;
			ds[d].num_paths = p[d].n;
			ds[d].weight = 1.0;
		}
		if (!dseq && gristpy_paths_from(paths, &self->paths))
			goto out;
	}
	if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
		PyErr_NoMemory();
		goto out;
	}
	/* Opening the files to count their records is I/O: without the GIL. */
	Py_BEGIN_ALLOW_THREADS
	code = grist_features_decoder_create(f, nd ? ds : NULL, nd, &self->dec);
	if (!code && threads)
		code = grist_features_pool_create(threads, &self->pool);
	if (code)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	if (code) {
		features_free(self);
		gristpy_raise(code, msg);
		goto out;
	}
	self->spec = grist_features_decoder_spec(self->dec);
	self->group_bytes = (size_t)group_bytes;
	self->map.fn = grist_features_map;
	self->map.ctx = self->dec;
	self->map.id = grist_features_id(self->spec);
	ret = 0;
out:
	for (d = 0; p && d < nd; d++)
		gristpy_paths_free(&p[d]);
	free(p);
	free(ds);
	grist_features_destroy(f);
	Py_XDECREF(dseq);
	Py_XDECREF(seq);
	return ret;
}

static void features_dealloc(FeaturesObject *self)
{
	features_free(self);
	if (self->lock)
		PyThread_free_lock(self->lock);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int features_ready(FeaturesObject *self)
{
	if (self->dec)
		return 0;
	PyErr_SetString(PyExc_ValueError, "Features: not initialised");
	return -1;
}

static PyObject *tuple_of(const int64_t *v, size_t n)
{
	PyObject *t = PyTuple_New((Py_ssize_t)n);
	size_t i;

	for (i = 0; t && i < n; i++) {
		PyObject *x = PyLong_FromLongLong(v[i]);

		if (!x) {
			Py_CLEAR(t);
			break;
		}
		PyTuple_SET_ITEM(t, (Py_ssize_t)i, x);
	}
	return t;
}

/* (count, [(dataset, index, reason), ...]) of the records a map dropped: for each stage that skips. */
PyObject *gristpy_skips(uint64_t count, const struct grist_feature_skip *s, size_t n)
{
	PyObject *list = PyList_New((Py_ssize_t)n);

	for (size_t i = 0; list && i < n; i++) {
		PyObject *e = Py_BuildValue("(IKs)", s[i].dataset, (unsigned long long)s[i].index, s[i].reason);

		if (!e) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, e);
	}
	return list ? Py_BuildValue("(KN)", (unsigned long long)count, list) : NULL;
}

/* skipped() -> (count, [(dataset, index, reason), ...]): records the loader's map dropped (on_error skip). */
static PyObject *features_skipped(FeaturesObject *self, PyObject *unused)
{
	struct grist_feature_skip s[16];
	size_t n = 0;
	uint64_t count;

	(void)unused;
	if (features_ready(self))
		return NULL;
	count = grist_features_skipped(self->dec, s, 16, &n);
	return gristpy_skips(count, s, n);
}

/* columns() -> list of dicts: key, offset, bytes, row_shape, dims_offset (-1 if none), elem_bytes. */
static PyObject *features_columns(FeaturesObject *self, PyObject *unused)
{
	size_t i, n;
	PyObject *list;

	(void)unused;
	if (features_ready(self))
		return NULL;
	n = grist_features_count(self->spec);
	list = PyList_New((Py_ssize_t)n);
	for (i = 0; list && i < n; i++) {
		struct grist_feature_column c;
		PyObject *d, *rs;

		grist_feature_column_init(&c);
		if (grist_feature_column(self->spec, i, &c)) {
			Py_DECREF(list);
			return gristpy_raise(-EINVAL, NULL);
		}
		rs = tuple_of(c.row_shape, c.ndim);
		d = rs ? Py_BuildValue("{s:s,s:n,s:n,s:N,s:n,s:n,s:n,s:i}", "key", c.key, "offset", (Py_ssize_t)c.offset,
				       "bytes", (Py_ssize_t)c.bytes, "row_shape", rs, "dims_offset",
				       c.dims_offset == SIZE_MAX ? (Py_ssize_t)-1 : (Py_ssize_t)c.dims_offset,
				       "elem_bytes", (Py_ssize_t)c.elem_bytes, "box_offset",
				       c.box_offset == SIZE_MAX ? (Py_ssize_t)-1 : (Py_ssize_t)c.box_offset,
				       "dtype", (int)c.dtype)
		       : NULL;
		if (!d) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, d);
	}
	return list;
}

/*
 * Decode @n records into a list of (values, dims, lengths) per feature, the GIL released throughout:
 * @recs and @lens given (decode()), or read here from the dataset's files at @indices
 * (fetch(): @recs NULL, @lens scratch for n entries).
 */
static PyObject *decode_to_list(FeaturesObject *self, const uint8_t **recs, size_t *lens, size_t n,
				const uint64_t *indices)
{
	struct grist_fetch_record *fetched = NULL;
	struct gathered_parts g = { 0 };
	const uint8_t **data = recs;
	char msg[1024] = "";
	size_t i;
	int code = 0;

	if (!recs) {
		fetched = malloc((n + 1) * sizeof(*fetched));
		data = malloc((n + 1) * sizeof(*data));
		if (!fetched || !data) {
			free(fetched);
			free(data);
			return PyErr_NoMemory();
		}
	}
	gristpy_lock(self->lock);
	Py_BEGIN_ALLOW_THREADS
	if (!recs) {
		if (!self->reader)
			code = grist_reader_open((const char *const *)self->paths.v, self->paths.n, NULL, &self->reader);
		if (!code && !self->fetcher)
			code = grist_fetcher_create(self->reader, NULL, &self->fetcher);
		if (!code)
			code = grist_fetcher_read(self->fetcher, indices, n, fetched);
		for (i = 0; !code && i < n; i++) {
			data[i] = fetched[i].data;
			lens[i] = fetched[i].len;
		}
	}
	if (!code)
		code = decode_records(self, data, lens, n, indices, &g);
	if (code)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	PyThread_release_lock(self->lock);
	if (!recs) {
		free(fetched);
		free(data);
	}
	return code ? gristpy_raise(code, msg) : gathered_list(&g);
}

/* A sequence of integers as uint64 (n + 1 entries allocated), or NULL with an exception. */
static uint64_t *indices_from(PyObject *seq, size_t n)
{
	uint64_t *v = malloc((n + 1) * sizeof(*v));
	size_t i;

	if (!v)
		return (uint64_t *)PyErr_NoMemory();
	for (i = 0; i < n; i++) {
		v[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));
		if (v[i] == (uint64_t)-1 && PyErr_Occurred()) {
			free(v);
			return NULL;
		}
	}
	return v;
}

/*
 * decode(records, indices=None) -> [(values, dims, lengths)] per feature: @records (a
 * sequence of bytes-like) decoded on the pool with the GIL released, then each feature
 * gathered into one bytearray (rows back to back; ragged ones concatenated) with each
 * record's real shape (int64 x ndim) for the features whose shape varies.
 */
static PyObject *features_decode(FeaturesObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = { "records", "indices", NULL };
	PyObject *records, *indices_o = Py_None, *seq = NULL, *iseq = NULL, *out = NULL;
	Py_buffer *bufs = NULL;
	const uint8_t **recs = NULL;
	size_t *lens = NULL, n = 0, got = 0, i;
	uint64_t *indices = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:decode", kwlist, &records, &indices_o))
		return NULL;
	if (features_ready(self))
		return NULL;
	seq = PySequence_Fast(records, "decode: records must be a sequence of bytes");
	if (!seq)
		return NULL;
	n = (size_t)PySequence_Fast_GET_SIZE(seq);
	bufs = calloc(n + 1, sizeof(*bufs));
	recs = calloc(n + 1, sizeof(*recs));
	lens = calloc(n + 1, sizeof(*lens));
	if (!bufs || !recs || !lens) {
		PyErr_NoMemory();
		goto out;
	}
	for (got = 0; got < n; got++) {
		if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)got), &bufs[got], PyBUF_SIMPLE) < 0)
			goto out;
		recs[got] = bufs[got].buf;
		lens[got] = (size_t)bufs[got].len;
	}
	if (indices_o != Py_None) {
		iseq = PySequence_Fast(indices_o, "decode: indices must be a sequence of integers");
		if (!iseq)
			goto out;
		if ((size_t)PySequence_Fast_GET_SIZE(iseq) != n) {
			PyErr_SetString(PyExc_ValueError, "decode: as many indices as records");
			goto out;
		}
		if (!(indices = indices_from(iseq, n)))
			goto out;
	}
	out = decode_to_list(self, recs, lens, n, indices);
out:
	for (i = 0; i < got; i++)
		PyBuffer_Release(&bufs[i]);
	free(bufs);
	free(recs);
	free(lens);
	free(indices);
	Py_XDECREF(iseq);
	Py_XDECREF(seq);
	return out;
}

/*
 * fetch(indices) -> [(values, dims, lengths)] per feature: the records at @indices of the
 * dataset's files read (one batched submission), decoded on the pool and gathered, all in
 * one stretch without the GIL.
 */
static PyObject *features_fetch(FeaturesObject *self, PyObject *arg)
{
	PyObject *seq, *out = NULL;
	uint64_t *indices;
	size_t *lens, n;

	if (features_ready(self))
		return NULL;
	if (!self->paths.n) {
		PyErr_SetString(PyExc_ValueError, "Features.fetch: made without paths");
		return NULL;
	}
	seq = PySequence_Fast(arg, "fetch: indices must be a sequence of integers");
	if (!seq)
		return NULL;
	n = (size_t)PySequence_Fast_GET_SIZE(seq);
	indices = indices_from(seq, n);
	lens = malloc((n + 1) * sizeof(*lens));
	if (indices && !lens)
		PyErr_NoMemory();
	else if (indices)
		out = decode_to_list(self, NULL, lens, n, indices);
	free(indices);
	free(lens);
	Py_DECREF(seq);
	return out;
}

/*
 * gather(rows, n, offsets=None) -> [(values, dims, lengths)] per feature, from @n rows a
 * loader delivered: a FIXED batch's data (offsets None) or a RAGGED batch's data and
 * offsets (uint64, n + 1).
 */
static PyObject *features_gather(FeaturesObject *self, PyObject *args)
{
	PyObject *rows_o, *offsets_o = Py_None, *out = NULL;
	Py_buffer rows = { 0 }, offs = { 0 };
	Py_ssize_t n;

	if (!PyArg_ParseTuple(args, "On|O:gather", &rows_o, &n, &offsets_o))
		return NULL;
	if (features_ready(self))
		return NULL;
	if (PyObject_GetBuffer(rows_o, &rows, PyBUF_SIMPLE) < 0)
		return NULL;
	if (offsets_o != Py_None && PyObject_GetBuffer(offsets_o, &offs, PyBUF_SIMPLE) < 0)
		goto out;
	if (n < 0 || (offs.obj && (size_t)offs.len < ((size_t)n + 1) * sizeof(uint64_t)) ||
	    (!offs.obj && (size_t)rows.len < (size_t)n * grist_features_row_bytes(self->spec))) {
		PyErr_SetString(PyExc_ValueError, "gather: the rows or offsets are shorter than n rows");
		goto out;
	}
	{
		struct gathered_parts one = { calloc(1, sizeof(struct gathered)), 0 };
		int code = -ENOMEM;

		Py_BEGIN_ALLOW_THREADS
		if (one.part && !(code = gather_rows(self->spec, rows.buf, offs.obj ? offs.buf : NULL, (size_t)n, one.part)))
			one.n = 1;
		Py_END_ALLOW_THREADS
		if (code)
			gathered_parts_free(&one);
		out = code ? gristpy_raise(code, NULL) : gathered_list(&one);
	}
out:
	if (offs.obj)
		PyBuffer_Release(&offs);
	PyBuffer_Release(&rows);
	return out;
}

/* map(ragged_out_max=0) -> capsule for Loader(_map=...): the map callback, its context, its id. */
static PyObject *features_map(FeaturesObject *self, PyObject *args)
{
	Py_ssize_t out_max = 0;

	if (!PyArg_ParseTuple(args, "|n:map", &out_max))
		return NULL;
	if (features_ready(self))
		return NULL;
	self->map.out_max = (size_t)(out_max > 0 ? out_max : 0);
	return gristpy_map_capsule((PyObject *)self, &self->map);
}

static void map_capsule_destructor(PyObject *capsule)
{
	Py_XDECREF((PyObject *)PyCapsule_GetContext(capsule));
}

PyObject *gristpy_map_capsule(PyObject *owner, const struct gristpy_map *map)
{
	PyObject *c = PyCapsule_New((void *)map, GRISTPY_MAP_CAPSULE, map_capsule_destructor);

	if (!c)
		return NULL;
	Py_INCREF(owner);
	if (PyCapsule_SetContext(c, owner)) {
		Py_DECREF(owner);
		Py_DECREF(c);
		return NULL;
	}
	return c;
}

static PyObject *features_get_row_bytes(FeaturesObject *self, void *closure)
{
	(void)closure;
	return features_ready(self) ? NULL : PyLong_FromSize_t(grist_features_row_bytes(self->spec));
}

static PyObject *features_get_ragged(FeaturesObject *self, void *closure)
{
	(void)closure;
	return features_ready(self) ? NULL : PyBool_FromLong(grist_features_is_ragged(self->spec));
}

static PyObject *features_row_bound(FeaturesObject *self, PyObject *arg)
{
	Py_ssize_t len = PyNumber_AsSsize_t(arg, PyExc_OverflowError);

	if (len < 0 && PyErr_Occurred())
		return NULL;
	if (features_ready(self))
		return NULL;
	return PyLong_FromSize_t(grist_features_row_bound(self->spec, (size_t)(len < 0 ? 0 : len)));
}

static PyMethodDef features_methods[] = {
	{ "columns", (PyCFunction)features_columns, METH_NOARGS,
	  "columns() -> list of dicts: each feature's key, offset, bytes, row_shape, dims_offset, elem_bytes,\n"
	  "box_offset (-1 if none), dtype (enum grist_dtype)." },
	{ "decode", (PyCFunction)(void (*)(void))features_decode, METH_VARARGS | METH_KEYWORDS,
	  "decode(records, indices=None) -> [(values, dims, lengths)] per feature, decoded without the GIL." },
	{ "fetch", (PyCFunction)features_fetch, METH_O,
	  "fetch(indices) -> [(values, dims, lengths)] per feature: read, decoded and gathered without the GIL." },
	{ "gather", (PyCFunction)features_gather, METH_VARARGS,
	  "gather(rows, n, offsets=None) -> [(values, dims, lengths)] per feature of a loader batch." },
	{ "map", (PyCFunction)features_map, METH_VARARGS, "map(out_max=0) -> capsule for Loader(_map=...)." },
	{ "row_bound", (PyCFunction)features_row_bound, METH_O, "row_bound(record_len) -> most bytes of a row." },
	{ "skipped", (PyCFunction)features_skipped, METH_NOARGS,
	  "skipped() -> (count, [(dataset, index, reason), ...]): records the loader's map dropped (on_error skip),\n"
	  "the first 16 of them." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef features_getset[] = {
	{ "row_bytes", (getter)features_get_row_bytes, NULL, "bytes of a row (of its fixed part when ragged).", NULL },
	{ "ragged", (getter)features_get_ragged, NULL, "whether some feature is ragged (rows vary in size).", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

/* The enums a Features column names, as module constants (grist.tfds builds columns from them). */
int gristpy_features_add_constants(PyObject *m)
{
	static const struct {
		const char *name;
		long value;
	} c[] = {
		{ "WIRE_BYTES", GRIST_WIRE_BYTES }, { "WIRE_FLOAT", GRIST_WIRE_FLOAT }, { "WIRE_INT64", GRIST_WIRE_INT64 },
		{ "DTYPE_UINT8", GRIST_DTYPE_UINT8 }, { "DTYPE_INT8", GRIST_DTYPE_INT8 },
		{ "DTYPE_UINT16", GRIST_DTYPE_UINT16 }, { "DTYPE_INT16", GRIST_DTYPE_INT16 },
		{ "DTYPE_UINT32", GRIST_DTYPE_UINT32 }, { "DTYPE_INT32", GRIST_DTYPE_INT32 },
		{ "DTYPE_UINT64", GRIST_DTYPE_UINT64 }, { "DTYPE_INT64", GRIST_DTYPE_INT64 },
		{ "DTYPE_FLOAT16", GRIST_DTYPE_FLOAT16 }, { "DTYPE_FLOAT32", GRIST_DTYPE_FLOAT32 },
		{ "DTYPE_FLOAT64", GRIST_DTYPE_FLOAT64 }, { "DTYPE_BOOL", GRIST_DTYPE_BOOL },
		{ "DECODE_VALUES", GRIST_DECODE_VALUES }, { "DECODE_BYTES", GRIST_DECODE_BYTES },
		{ "DECODE_RAW", GRIST_DECODE_RAW }, { "DECODE_PNG", GRIST_DECODE_PNG },
		{ "DECODE_JPEG", GRIST_DECODE_JPEG }, { "DECODE_IMAGE", GRIST_DECODE_IMAGE },
		{ "DECODE_STRINGS", GRIST_DECODE_STRINGS },
		{ "VARLEN_NONE", GRIST_VARLEN_NONE }, { "VARLEN_PAD", GRIST_VARLEN_PAD },
		{ "VARLEN_RAGGED", GRIST_VARLEN_RAGGED }, { "ON_ERROR_FAIL", GRIST_ON_ERROR_FAIL },
		{ "ON_ERROR_SKIP", GRIST_ON_ERROR_SKIP },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (PyModule_AddIntConstant(m, c[i].name, c[i].value) < 0)
			return -1;
	return 0;
}

PyTypeObject gristpy_FeaturesType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "grist._grist.Features",
	.tp_basicsize = sizeof(FeaturesObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Features(columns, paths=None, threads=0): a tf.train.Example features decoder (grist.tfds).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)features_init,
	.tp_dealloc = (destructor)features_dealloc,
	.tp_methods = features_methods,
	.tp_getset = features_getset,
};
