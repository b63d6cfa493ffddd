/* reader.c - grist._grist.Reader: random and batched reads of a dataset (grist_reader_*). */
#include "ext.h"

#include <string.h>

#include "grist/fetch.h"
#include "grist/options.h"

#define MAX_THREADS 64

typedef struct {
	PyObject_HEAD
	struct grist_reader *r;     /* NULL once closed */
	/*
	 * read(): every chunk read of a call in one batched submission, the chunks decoded by
	 * `threads` threads. Made on the first read(); a fetcher takes one thread at a time
	 * (any thread), and the lock sees to that.
	 */
	struct grist_fetcher *fetcher;
	unsigned threads;
	PyThread_type_lock lock;    /* the reader and the fetcher take one call at a time */
	uint64_t num_records;
} ReaderObject;

static void reader_close_all(ReaderObject *self)
{
	grist_fetcher_destroy(self->fetcher); /* before the reader whose index it uses */
	self->fetcher = NULL;
	grist_reader_close(self->r);
	self->r = NULL;
}

static int reader_open_check(ReaderObject *self)
{
	if (self->r)
		return 0;
	PyErr_SetString(PyExc_ValueError, "grist.Reader: the reader is closed");
	return -1;
}

static int reader_init(ReaderObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = { "paths", "threads", "verify", NULL };
	struct gristpy_paths paths;
	struct grist_reader_options ro;
	struct grist_loader_config checks;
	PyObject *obj, *threads_obj = Py_None;
	const char *verify = NULL;
	char msg[1024] = "";
	long threads;
	int ret = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|Oz:Reader", kwlist, &obj, &threads_obj, &verify))
		return -1;
	/* "verify" is the loader's option: its one parser reads the word (grist/options.h) */
	grist_loader_config_init(&checks);
	if (verify && (ret = grist_loader_config_set(&checks, "verify", verify))) {
		gristpy_raise(ret, grist_last_error());
		return -1;
	}
	grist_reader_options_init(&ro);
	ro.verify = checks.verify;
	if (self->r) {
		PyErr_SetString(PyExc_ValueError, "grist.Reader: already open");
		return -1;
	}
	if (threads_obj == Py_None) {
		/*
		 * One thread by default: a batch of a few hundred small records is about a millisecond
		 * of work, and on a busy machine (or beside Grain's own read threads) a second
		 * decoding thread rarely finds a free core (bench/README.md has the figures).
		 */
		threads = 1;
	} else {
		threads = PyLong_AsLong(threads_obj);
		if (threads == -1 && PyErr_Occurred())
			return -1;
		if (threads < 1 || threads > MAX_THREADS) {
			PyErr_Format(PyExc_ValueError, "grist.Reader: threads must be in 1..%d, not %ld", MAX_THREADS,
				     threads);
			return -1;
		}
	}
	if (gristpy_paths_from(obj, &paths))
		return -1;
	Py_BEGIN_ALLOW_THREADS
	ret = grist_reader_open((const char *const *)paths.v, paths.n, &ro, &self->r);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	gristpy_paths_free(&paths);
	if (ret) {
		self->r = NULL;
		gristpy_raise(ret, msg);
		return -1;
	}
	if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
		reader_close_all(self);
		PyErr_NoMemory();
		return -1;
	}
	self->threads = (unsigned)threads;
	self->num_records = grist_reader_num_records(self->r);
	return 0;
}

static void reader_dealloc(ReaderObject *self)
{
	reader_close_all(self);
	if (self->lock)
		PyThread_free_lock(self->lock);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t reader_len(ReaderObject *self)
{
	if (reader_open_check(self))
		return -1;
	return (Py_ssize_t)self->num_records;
}

/* An index as Python sees it (negative counts from the end) -> a record index, or -1 raised. */
static int reader_index(ReaderObject *self, PyObject *key, uint64_t *out)
{
	Py_ssize_t given = PyNumber_AsSsize_t(key, PyExc_IndexError), i = given;

	if (i == -1 && PyErr_Occurred())
		return -1;
	if (i < 0)
		i += (Py_ssize_t)self->num_records;
	if (i < 0 || (uint64_t)i >= self->num_records) {
		PyErr_Format(PyExc_IndexError, "grist.Reader: index %zd out of range for %llu records", given,
			     (unsigned long long)self->num_records);
		return -1;
	}
	*out = (uint64_t)i;
	return 0;
}

static PyObject *reader_getitem(ReaderObject *self, PyObject *key)
{
	const uint8_t *data = NULL;
	char msg[1024] = "";
	PyObject *res = NULL;
	uint64_t index;
	size_t len = 0;
	int ret;

	if (reader_open_check(self) || reader_index(self, key, &index))
		return NULL;
	gristpy_lock(self->lock);
	/* A record read (one pread when its chunk is not the cached one) is short: a read that
	 * needs the disk releases the GIL inside the lock so other threads run meanwhile. */
	Py_BEGIN_ALLOW_THREADS
	ret = grist_reader_read(self->r, index, &data, &len);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	if (!ret)
		res = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
	PyThread_release_lock(self->lock);
	if (ret)
		return gristpy_raise(ret, msg);
	return res;
}

/*
 * read(): the fetcher submits every chunk read of the call at once and decodes each chunk
 * once. Its records live in the fetcher until its next call, so the bytes objects are made
 * before the lock is let go.
 */
static PyObject *reader_read_fetch(ReaderObject *self, const uint64_t *indices, Py_ssize_t n)
{
	struct grist_fetch_record *recs = malloc(((size_t)n + 1) * sizeof(*recs));
	PyObject *list = NULL;
	char msg[1024] = "";
	Py_ssize_t i;
	int ret = 0;

	if (!recs)
		return PyErr_NoMemory();
	gristpy_lock(self->lock);
	Py_BEGIN_ALLOW_THREADS
	if (!self->fetcher) {
		struct grist_fetcher_options o = { .size = sizeof(o), .decode_threads = self->threads };

		ret = grist_fetcher_create(self->r, &o, &self->fetcher);
	}
	if (!ret)
		ret = grist_fetcher_read(self->fetcher, indices, (size_t)n, recs);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	if (ret) {
		PyThread_release_lock(self->lock);
		free(recs);
		return gristpy_raise(ret, msg);
	}
	list = PyList_New(n);
	for (i = 0; list && i < n; i++) {
		PyObject *b = PyBytes_FromStringAndSize((const char *)recs[i].data, (Py_ssize_t)recs[i].len);

		if (!b)
			Py_CLEAR(list);
		else
			PyList_SET_ITEM(list, i, b);
	}
	PyThread_release_lock(self->lock);
	free(recs);
	return list;
}

static PyObject *reader_read(ReaderObject *self, PyObject *arg)
{
	uint64_t *indices = NULL;
	PyObject *seq, *list = NULL;
	Py_ssize_t i, n;

	if (reader_open_check(self))
		return NULL;
	seq = PySequence_Fast(arg, "grist.Reader.read: indices must be a sequence of integers");
	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	indices = malloc(((size_t)n + 1) * sizeof(*indices));
	if (!indices) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < n; i++)
		if (reader_index(self, PySequence_Fast_GET_ITEM(seq, i), &indices[i]))
			goto out;
	list = reader_read_fetch(self, indices, n);
out:
	Py_DECREF(seq);
	free(indices);
	return list;
}

static PyObject *reader_info(ReaderObject *self, PyObject *unused)
{
	struct grist_file_info fi;
	PyObject *list, *d;
	size_t i, n;

	(void)unused;
	if (reader_open_check(self))
		return NULL;
	n = grist_reader_num_files(self->r);
	list = PyList_New((Py_ssize_t)n);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++) {
		int ret = grist_reader_file_info(self->r, i, &fi);

		if (ret) {
			Py_DECREF(list);
			return gristpy_raise(ret, NULL);
		}
		d = Py_BuildValue("{s:s,s:K,s:K,s:K,s:K,s:K,s:s,s:s,s:K}",
				  "path", fi.path, "records", (unsigned long long)fi.num_records,
				  "chunks", (unsigned long long)fi.num_chunks,
				  "group_size", (unsigned long long)fi.group_size,
				  "first_record", (unsigned long long)fi.first_record,
				  "file_size", (unsigned long long)fi.file_size,
				  "compression", fi.compression, "writer_options", fi.writer_options,
				  "max_record_bytes", (unsigned long long)fi.max_record_bytes);
		if (!d) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, d);
	}
	return list;
}

static PyObject *reader_close(ReaderObject *self, PyObject *unused)
{
	(void)unused;
	if (self->r) {
		gristpy_lock(self->lock); /* wait for a read running on another thread */
		reader_close_all(self);
		PyThread_release_lock(self->lock);
	}
	Py_RETURN_NONE;
}

static PyObject *reader_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	if (reader_open_check((ReaderObject *)self))
		return NULL;
	Py_INCREF(self);
	return self;
}

static PyObject *reader_exit(PyObject *self, PyObject *args)
{
	(void)args;
	return reader_close((ReaderObject *)self, NULL);
}

static PyMethodDef reader_methods[] = {
	{ "read", (PyCFunction)reader_read, METH_O,
	  "read(indices) -> list[bytes]: the records at these indices, in request order; each chunk\n"
	  "is read and decoded once, every read of the call in one batched io_uring submission (a\n"
	  "pread pool where io_uring is unavailable), the chunks decoded by the reader's threads.\n"
	  "The GIL is released while reading." },
	{ "info", (PyCFunction)reader_info, METH_NOARGS,
	  "info() -> list[dict]: per file: path, records, chunks, group_size, first_record,\n"
	  "file_size, compression, writer_options, max_record_bytes (no record is longer)." },
	{ "close", (PyCFunction)reader_close, METH_NOARGS, "close(): close the files (idempotent)." },
	{ "__enter__", reader_enter, METH_NOARGS, NULL },
	{ "__exit__", reader_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyMappingMethods reader_as_mapping = {
	.mp_length = (lenfunc)reader_len,
	.mp_subscript = (binaryfunc)reader_getitem,
};

static PyObject *reader_repr(ReaderObject *self)
{
	if (!self->r)
		return PyUnicode_FromString("grist.Reader(closed)");
	return PyUnicode_FromFormat("grist.Reader(files=%zu, records=%llu)", grist_reader_num_files(self->r),
				    (unsigned long long)self->num_records);
}

static PySequenceMethods reader_as_sequence = {
	.sq_length = (lenfunc)reader_len,
};

PyTypeObject gristpy_ReaderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "grist._grist.Reader",
	.tp_basicsize = sizeof(ReaderObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Reader(paths, threads=None): an ArrayRecord dataset (the files concatenated) read by\n"
		  "global index; read() decodes its chunks on `threads` threads (default 1).\n"
		  "Thread-safe: calls from several threads take turns.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)reader_init,
	.tp_dealloc = (destructor)reader_dealloc,
	.tp_as_mapping = &reader_as_mapping,
	.tp_as_sequence = &reader_as_sequence,
	.tp_repr = (reprfunc)reader_repr,
	.tp_methods = reader_methods,
};
