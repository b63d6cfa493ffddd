/* example.c - grist._grist.encode_examples(): columns of a table into tf.train.Example records, with libgrist's encoder. */
#include "ext.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grist/features.h"

enum col_kind { COL_INT64, COL_FLOAT, COL_BYTES };

struct col {
	const char *key;            /* UTF-8, NUL-terminated, owned by the key object */
	enum col_kind kind;
	Py_buffer values;           /* int64 / float32 values; bytes: the data */
	Py_buffer offsets;          /* bytes: uint64 value bounds into data (m + 1); else unused */
	Py_buffer rows;             /* int64 row bounds (n + 1) into the values (bytes: into offsets) */
	size_t nvalues;             /* values a row may index: elements, or offsets - 1 */
};

static void cols_free(struct col *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (c[i].values.obj)
			PyBuffer_Release(&c[i].values);
		if (c[i].offsets.obj)
			PyBuffer_Release(&c[i].offsets);
		if (c[i].rows.obj)
			PyBuffer_Release(&c[i].rows);
	}
	free(c);
}

/* A C-contiguous buffer whose items are @itemsize bytes (any format of that size: numpy int64,
 * uint64 and float32 arrays, bytes). */
static int get_buffer(PyObject *obj, Py_buffer *b, Py_ssize_t itemsize, const char *what, const char *key)
{
	if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
		return -1;
	if (b->itemsize != itemsize) {
		PyErr_Format(PyExc_ValueError, "encode_examples: column '%s': %s must have %zd-byte items, not %zd", key,
			     what, itemsize, b->itemsize);
		PyBuffer_Release(b);
		b->obj = NULL;
		return -1;
	}
	return 0;
}

/* Check that the n + 1 bounds in @b never decrease and stay within @limit. */
static int check_bounds(const Py_buffer *b, size_t n, uint64_t limit, const char *what, const char *key)
{
	const uint64_t *v = b->buf;

	if ((size_t)(b->len / 8) != n + 1) {
		PyErr_Format(PyExc_ValueError, "encode_examples: column '%s': %s holds %zd bounds, not %zu", key, what,
			     b->len / 8, n + 1);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (v[i + 1] < v[i] || v[i + 1] > limit) {
			PyErr_Format(PyExc_ValueError, "encode_examples: column '%s': %s decrease or pass the end at %zu",
				     key, what, i);
			return -1;
		}
	return 0;
}

static int parse_col(PyObject *t, size_t nrows, struct col *c)
{
	PyObject *key, *values, *rows, *offsets = NULL;
	const char *kind;
	Py_ssize_t klen;

	if (!PyArg_ParseTuple(t, "UsOO|O:encode_examples column", &key, &kind, &values, &rows, &offsets))
		return -1;
	c->key = PyUnicode_AsUTF8AndSize(key, &klen);
	if (!c->key)
		return -1;
	if ((size_t)klen != strlen(c->key)) {
		PyErr_SetString(PyExc_ValueError, "encode_examples: a key holds a NUL character");
		return -1;
	}
	if (!strcmp(kind, "int64"))
		c->kind = COL_INT64;
	else if (!strcmp(kind, "float"))
		c->kind = COL_FLOAT;
	else if (!strcmp(kind, "bytes") && offsets)
		c->kind = COL_BYTES;
	else {
		PyErr_Format(PyExc_ValueError, "encode_examples: column '%s': kind is 'int64', 'float' or "
			     "'bytes' (with offsets), not '%s'", c->key, kind);
		return -1;
	}
	if (get_buffer(values, &c->values, c->kind == COL_FLOAT ? 4 : c->kind == COL_INT64 ? 8 : 1, "values",
		       c->key) ||
	    get_buffer(rows, &c->rows, 8, "rows", c->key))
		return -1;
	c->nvalues = (size_t)(c->values.len / c->values.itemsize);
	if (c->kind == COL_BYTES) {
		if (get_buffer(offsets, &c->offsets, 8, "offsets", c->key))
			return -1;
		if (c->offsets.len < 8) {
			PyErr_Format(PyExc_ValueError, "encode_examples: column '%s': no offsets", c->key);
			return -1;
		}
		c->nvalues = (size_t)(c->offsets.len / 8) - 1;
		if (check_bounds(&c->offsets, c->nvalues, (uint64_t)c->values.len, "offsets", c->key))
			return -1;
	}
	return check_bounds(&c->rows, nrows, c->nvalues, "rows", c->key);
}

/* Encode every row; the records go back to back into @out, record r at out_at[r]..out_at[r + 1]. */
static int encode_all(struct grist_example_encoder *e, const struct col *cols, size_t ncols, size_t nrows,
		      uint8_t **out, size_t *out_at, size_t *row_failed)
{
	size_t cap = 0, len = 0;
	uint8_t *buf = NULL;
	int ret = 0;

	out_at[0] = 0;
	for (size_t r = 0; r < nrows && !ret; r++) {
		const uint8_t *rec;
		size_t rec_len;

		grist_example_begin(e);
		for (size_t i = 0; i < ncols && !ret; i++) {
			const struct col *c = &cols[i];
			const int64_t *rb = c->rows.buf;
			size_t lo = (size_t)rb[r], n = (size_t)rb[r + 1] - lo;

			if (c->kind == COL_INT64)
				ret = grist_example_add_int64s(e, c->key, (const int64_t *)c->values.buf + lo, n);
			else if (c->kind == COL_FLOAT)
				ret = grist_example_add_floats(e, c->key, (const float *)c->values.buf + lo, n);
			else
				ret = grist_example_add_bytes(e, c->key, c->values.buf,
							      (const uint64_t *)c->offsets.buf + lo, n);
		}
		if (!ret)
			ret = grist_example_finish(e, &rec, &rec_len);
		if (!ret && len + rec_len > cap) {
			size_t want = cap ? cap : 4096;
			uint8_t *p;

			while (want < len + rec_len)
				want *= 2;
			p = realloc(buf, want);
			if (!p)
				ret = -ENOMEM; /* gristpy_raise() gives MemoryError */
			else {
				buf = p;
				cap = want;
			}
		}
		if (ret) {
			*row_failed = r;
			break;
		}
		memcpy(buf + len, rec, rec_len);
		len += rec_len;
		out_at[r + 1] = len;
	}
	if (ret)
		free(buf);
	else
		*out = buf;
	return ret;
}

PyObject *gristpy_encode_examples(PyObject *self, PyObject *args)
{
	PyObject *columns, *seq = NULL, *list = NULL;
	struct grist_example_encoder *e = NULL;
	struct col *cols = NULL;
	size_t ncols = 0, nrows, *out_at = NULL, failed = 0;
	uint8_t *out = NULL;
	Py_ssize_t n;
	char msg[1024] = "";
	int ret;

	(void)self;
	if (!PyArg_ParseTuple(args, "On:encode_examples", &columns, &n))
		return NULL;
	if (n < 0) {
		PyErr_SetString(PyExc_ValueError, "encode_examples: a negative row count");
		return NULL;
	}
	nrows = (size_t)n;
	seq = PySequence_Fast(columns, "encode_examples: columns must be a sequence of tuples");
	if (!seq)
		return NULL;
	ncols = (size_t)PySequence_Fast_GET_SIZE(seq);
	cols = calloc(ncols ? ncols : 1, sizeof(*cols));
	out_at = malloc((nrows + 1) * sizeof(*out_at));
	if (!cols || !out_at) {
		PyErr_NoMemory();
		goto done;
	}
	for (size_t i = 0; i < ncols; i++)
		if (parse_col(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i), nrows, &cols[i]))
			goto done;
	ret = grist_example_encoder_create(&e);
	if (ret) {
		gristpy_raise(ret, NULL);
		goto done;
	}
	/* The buffers stay exported (held by cols) while the GIL is released. */
	Py_BEGIN_ALLOW_THREADS
	ret = encode_all(e, cols, ncols, nrows, &out, out_at, &failed);
	if (ret)
		snprintf(msg, sizeof(msg), "row %zu: %s", failed, ret == -ENOMEM ? "out of memory" : grist_last_error());
	Py_END_ALLOW_THREADS
	if (ret) {
		gristpy_raise(ret, msg);
		goto done;
	}
	list = PyList_New((Py_ssize_t)nrows);
	for (size_t r = 0; list && r < nrows; r++) {
		PyObject *b = PyBytes_FromStringAndSize((const char *)out + out_at[r], (Py_ssize_t)(out_at[r + 1] - out_at[r]));

		if (!b) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)r, b);
	}
done:
	free(out);
	free(out_at);
	grist_example_encoder_destroy(e);
	cols_free(cols, ncols);
	Py_XDECREF(seq);
	return list;
}
