/* reader.c - grist._grist.Reader: random and batched reads of a dataset (grist_reader_*). */
#include "ext.h"

#include <pthread.h>

#include "grist/fetch.h"
#include <string.h>

#define MAX_READERS 64

typedef struct {
	PyObject_HEAD
	struct grist_reader *r;     /* readers[0]; NULL once closed */
	struct grist_reader *readers[MAX_READERS]; /* one per thread of a batched read */
	unsigned nreaders;
	/*
	 * read()'s one-thread path: every chunk read of a call in one batched submission. Made
	 * on the first read(); a fetcher takes one thread at a time, and the lock sees to that.
	 */
	struct grist_fetcher *fetcher;
	PyThread_type_lock lock;    /* the readers take one call at a time */
	uint64_t num_records;
} ReaderObject;

static void reader_close_all(ReaderObject *self)
{
	unsigned k;

	grist_fetcher_destroy(self->fetcher); /* before the reader whose index it uses */
	self->fetcher = NULL;
	for (k = 0; k < self->nreaders; k++)
		grist_reader_close(self->readers[k]);
	memset(self->readers, 0, sizeof(self->readers));
	self->nreaders = 0;
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
	static char *kwlist[] = { "paths", "threads", NULL };
	struct gristpy_paths paths;
	PyObject *obj, *threads_obj = Py_None;
	char msg[1024] = "";
	long threads;
	unsigned k = 0;
	int ret = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:Reader", kwlist, &obj, &threads_obj))
		return -1;
	if (self->r) {
		PyErr_SetString(PyExc_ValueError, "grist.Reader: already open");
		return -1;
	}
	if (threads_obj == Py_None) {
		/*
		 * One thread by default: a batch of a few hundred small records is about a millisecond
		 * of work, and a helper thread that the scheduler starts late (on a busy machine, or
		 * beside Grain's own read threads) makes the call slower, not faster.
		 */
		threads = 1;
	} else {
		threads = PyLong_AsLong(threads_obj);
		if (threads == -1 && PyErr_Occurred())
			return -1;
		if (threads < 1 || threads > MAX_READERS) {
			PyErr_Format(PyExc_ValueError, "grist.Reader: threads must be in 1..%d, not %ld", MAX_READERS,
				     threads);
			return -1;
		}
	}
	if (gristpy_paths_from(obj, &paths))
		return -1;
	Py_BEGIN_ALLOW_THREADS
	for (k = 0; k < (unsigned)threads && !ret; k++) {
		ret = grist_reader_open((const char *const *)paths.v, paths.n, NULL, &self->readers[k]);
		if (ret)
			snprintf(msg, sizeof(msg), "%s", grist_last_error());
		else
			self->nreaders = k + 1;
	}
	Py_END_ALLOW_THREADS
	gristpy_paths_free(&paths);
	if (ret) {
		reader_close_all(self);
		gristpy_raise(ret, msg);
		return -1;
	}
	if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
		reader_close_all(self);
		PyErr_NoMemory();
		return -1;
	}
	self->r = self->readers[0];
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
	Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);

	if (i == -1 && PyErr_Occurred())
		return -1;
	if (i < 0)
		i += (Py_ssize_t)self->num_records;
	if (i < 0 || (uint64_t)i >= self->num_records) {
		PyErr_Format(PyExc_IndexError, "grist.Reader: index %zd out of range for %llu records",
			     PyNumber_AsSsize_t(key, NULL), (unsigned long long)self->num_records);
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
 * What the batched read's callback fills with the GIL released: every record copied into one
 * arena. Several threads call in, so the arena is appended to under a mutex.
 */
struct gather {
	pthread_mutex_t mu;
	uint8_t *arena;
	size_t used, cap;
	size_t *off, *len;      /* per request position */
};

static int gather_record(void *ctx, size_t position, uint64_t index, const uint8_t *data, size_t len)
{
	struct gather *g = ctx;
	uint8_t *n;
	size_t cap;

	(void)index;
	pthread_mutex_lock(&g->mu);
	if (g->used + len > g->cap) {
		cap = g->cap * 2 > g->used + len ? g->cap * 2 : g->used + len;
		n = realloc(g->arena, cap);
		if (!n) {
			pthread_mutex_unlock(&g->mu);
			return -ENOMEM;
		}
		g->arena = n;
		g->cap = cap;
	}
	memcpy(g->arena + g->used, data, len);
	g->off[position] = g->used;
	g->len[position] = len;
	g->used += len;
	pthread_mutex_unlock(&g->mu);
	return 0;
}

/* read() with threads=N > 1: the request's chunks split over N readers, one thread each. */
static PyObject *reader_read_parallel(ReaderObject *self, const uint64_t *indices, Py_ssize_t n)
{
	struct gather g = { .mu = PTHREAD_MUTEX_INITIALIZER };
	PyObject *list = NULL;
	char msg[1024] = "";
	Py_ssize_t i;
	int ret;

	g.off = malloc(((size_t)n + 1) * sizeof(*g.off));
	g.len = malloc(((size_t)n + 1) * sizeof(*g.len));
	if (!g.off || !g.len) {
		PyErr_NoMemory();
		goto out;
	}
	gristpy_lock(self->lock);
	Py_BEGIN_ALLOW_THREADS
	ret = grist_reader_read_batch_parallel(self->readers, self->nreaders, indices, (size_t)n, gather_record, &g);
	if (ret == -ENOMEM && !grist_last_error()[0])
		snprintf(msg, sizeof(msg), "grist.Reader.read: cannot allocate %zu bytes", g.used);
	else if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	PyThread_release_lock(self->lock);
	if (ret) {
		gristpy_raise(ret, msg);
		goto out;
	}
	list = PyList_New(n);
	if (!list)
		goto out;
	for (i = 0; i < n; i++) {
		PyObject *b = PyBytes_FromStringAndSize((const char *)g.arena + g.off[i], (Py_ssize_t)g.len[i]);

		if (!b) {
			Py_CLEAR(list);
			goto out;
		}
		PyList_SET_ITEM(list, i, b);
	}
out:
	free(g.off);
	free(g.len);
	free(g.arena);
	return list;
}

/*
 * read() on one thread: the fetcher submits every chunk read of the call at once and decodes
 * each chunk once. Its records live in the fetcher until its next call, so the bytes objects
 * are made before the lock is let go.
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
	if (!self->fetcher)
		ret = grist_fetcher_create(self->r, NULL, &self->fetcher);
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
	if (self->nreaders > 1)
		list = reader_read_parallel(self, indices, n);
	else
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
		d = Py_BuildValue("{s:s,s:K,s:K,s:K,s:K,s:K,s:s,s:s}",
				  "path", fi.path, "records", (unsigned long long)fi.num_records,
				  "chunks", (unsigned long long)fi.num_chunks,
				  "group_size", (unsigned long long)fi.group_size,
				  "first_record", (unsigned long long)fi.first_record,
				  "file_size", (unsigned long long)fi.file_size,
				  "compression", fi.compression, "writer_options", fi.writer_options);
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
	  "is read and decoded once. With one thread (the default) every read of the call goes to\n"
	  "io_uring in one batched submission (a pread pool where io_uring is unavailable); with\n"
	  "threads=N the chunks are split over N threads. The GIL is released while reading." },
	{ "info", (PyCFunction)reader_info, METH_NOARGS,
	  "info() -> list[dict]: per file: path, records, chunks, group_size, first_record,\n"
	  "file_size, compression, writer_options." },
	{ "close", (PyCFunction)reader_close, METH_NOARGS, "close(): close the files (idempotent)." },
	{ "__enter__", reader_enter, METH_NOARGS, NULL },
	{ "__exit__", reader_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyMappingMethods reader_as_mapping = {
	.mp_length = (lenfunc)reader_len,
	.mp_subscript = (binaryfunc)reader_getitem,
};

static PySequenceMethods reader_as_sequence = {
	.sq_length = (lenfunc)reader_len,
};

PyTypeObject gristpy_ReaderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "grist._grist.Reader",
	.tp_basicsize = sizeof(ReaderObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Reader(paths, threads=None): an ArrayRecord dataset (the files concatenated) read by\n"
		  "global index; read() splits its chunks over `threads` threads (default 1).\n"
		  "Thread-safe: calls from several threads take turns.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)reader_init,
	.tp_dealloc = (destructor)reader_dealloc,
	.tp_as_mapping = &reader_as_mapping,
	.tp_as_sequence = &reader_as_sequence,
	.tp_methods = reader_methods,
};
