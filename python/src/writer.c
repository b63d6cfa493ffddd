/* writer.c - grist._grist.Writer: writing an ArrayRecord file (grist_writer_*), crash-safe. */
#include "ext.h"

typedef struct {
	PyObject_HEAD
	struct grist_writer *w;     /* NULL once closed or aborted */
	PyThread_type_lock lock;    /* a writer takes one thread at a time */
	unsigned long long file_bytes; /* the file's size once close() succeeded */
	bool remote;                /* s3:// or gs://: a write may wait on the network */
} WriterObject;

/*
 * Abort @w without the GIL: an s3:// or gs:// writer's abort is an AbortMultipartUpload,
 * retried as any request is, so seconds against a server that went away, and Python's
 * other threads must not stop for it. The library's log line about a failed abort takes
 * the GIL itself (module.c, log_to_python()).
 */
static void writer_abort_released(struct grist_writer *w)
{
	if (!w)
		return;
	Py_BEGIN_ALLOW_THREADS
	grist_writer_abort(w);
	Py_END_ALLOW_THREADS
}

static int writer_check(WriterObject *self)
{
	if (self->w)
		return 0;
	PyErr_SetString(PyExc_ValueError, "grist.Writer: the writer is closed");
	return -1;
}

static int writer_init(WriterObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = { "path", "options", NULL };
	PyObject *path = NULL;
	const char *options = "";
	char msg[1024] = "";
	struct grist_writer *w = NULL;
	bool remote;
	int ret;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&|s:Writer", kwlist, PyUnicode_FSConverter, &path, &options))
		return -1;
	if (self->w) {
		Py_DECREF(path);
		PyErr_SetString(PyExc_ValueError, "grist.Writer: already open");
		return -1;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = grist_writer_open(PyBytes_AS_STRING(path), options, &w);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	remote = grist_path_is_url(PyBytes_AS_STRING(path));
	Py_DECREF(path);
	if (ret) {
		gristpy_raise(ret, msg);
		return -1;
	}
	if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
		grist_writer_abort(w);
		PyErr_NoMemory();
		return -1;
	}
	self->w = w;
	self->remote = remote;
	return 0;
}

/* A writer dropped without close() leaves nothing at its path: the C writer's temporary goes. */
static void writer_dealloc(WriterObject *self)
{
	writer_abort_released(self->w);
	if (self->lock)
		PyThread_free_lock(self->lock);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *writer_write(WriterObject *self, PyObject *arg)
{
	char msg[1024] = "";
	Py_buffer view;
	int ret;

	if (writer_check(self) || PyObject_GetBuffer(arg, &view, PyBUF_CONTIG_RO) < 0)
		return NULL;
	gristpy_lock(self->lock);
	if (!self->w) { /* closed by another thread meanwhile */
		PyThread_release_lock(self->lock);
		PyBuffer_Release(&view);
		writer_check(self);
		return NULL;
	}
	/*
	 * Filling a chunk compresses it: small records stay under the GIL, where a release costs
	 * more. Not to s3:// or gs://: a write that fills a part waits for an upload slot, seconds
	 * of network, and Python's other threads must not stop for it (one may be the very
	 * server or proxy the parts go through).
	 */
	if (view.len >= 65536 || self->remote) {
		Py_BEGIN_ALLOW_THREADS
		ret = grist_writer_write(self->w, view.buf, (size_t)view.len);
		if (ret)
			snprintf(msg, sizeof(msg), "%s", grist_last_error());
		Py_END_ALLOW_THREADS
	} else {
		ret = grist_writer_write(self->w, view.buf, (size_t)view.len);
		if (ret)
			snprintf(msg, sizeof(msg), "%s", grist_last_error());
	}
	if (ret) { /* the C writer wants an abort after a failed write: nothing is committed */
		writer_abort_released(self->w);
		self->w = NULL;
	}
	PyThread_release_lock(self->lock);
	PyBuffer_Release(&view);
	if (ret)
		return gristpy_raise(ret, msg);
	Py_RETURN_NONE;
}

static PyObject *writer_close(WriterObject *self, PyObject *unused)
{
	struct grist_writer *w;
	char msg[1024] = "";
	int ret;

	(void)unused;
	if (!self->w)
		Py_RETURN_NONE;
	gristpy_lock(self->lock);
	w = self->w;
	self->w = NULL;
	ret = 0;
	if (w) {
		Py_BEGIN_ALLOW_THREADS
		ret = grist_writer_finish(w); /* the tail written: the size is final */
		if (!ret) {
			struct grist_writer_stats st;

			grist_writer_get_stats(w, &st);
			self->file_bytes = st.file_bytes;
			ret = grist_writer_close(w);
		} else {
			grist_writer_abort(w);
		}
		if (ret)
			snprintf(msg, sizeof(msg), "%s", grist_last_error());
		Py_END_ALLOW_THREADS
	}
	PyThread_release_lock(self->lock);
	if (ret)
		return gristpy_raise(ret, msg);
	Py_RETURN_NONE;
}

static PyObject *writer_abort(WriterObject *self, PyObject *unused)
{
	(void)unused;
	if (self->w) {
		struct grist_writer *w;

		gristpy_lock(self->lock);
		w = self->w;
		self->w = NULL;
		writer_abort_released(w);
		PyThread_release_lock(self->lock);
	}
	Py_RETURN_NONE;
}

static PyObject *writer_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	if (writer_check((WriterObject *)self))
		return NULL;
	Py_INCREF(self);
	return self;
}

/* Leaving a `with` block by an exception drops the file; otherwise it is committed. */
static PyObject *writer_exit(PyObject *self, PyObject *args)
{
	PyObject *type = Py_None, *value = Py_None, *tb = Py_None;

	if (!PyArg_UnpackTuple(args, "__exit__", 0, 3, &type, &value, &tb))
		return NULL;
	if (type != Py_None)
		return writer_abort((WriterObject *)self, NULL);
	return writer_close((WriterObject *)self, NULL);
}

static PyObject *writer_file_bytes(PyObject *self, PyObject *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLongLong(((WriterObject *)self)->file_bytes);
}

static PyMethodDef writer_methods[] = {
	{ "write", (PyCFunction)writer_write, METH_O, "write(record): append one record (any bytes-like object)." },
	{ "close", (PyCFunction)writer_close, METH_NOARGS,
	  "close(): finish the file, fsync it and rename it into place. Before close succeeds\n"
	  "nothing exists at the path." },
	{ "abort", (PyCFunction)writer_abort, METH_NOARGS, "abort(): drop the file (nothing appears at the path)." },
	{ "__enter__", writer_enter, METH_NOARGS, NULL },
	{ "file_bytes", writer_file_bytes, METH_NOARGS,
	  "file_bytes(): the file's size in bytes, once close() succeeded (0 before)." },
	{ "__exit__", writer_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

PyTypeObject gristpy_WriterType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "grist._grist.Writer",
	.tp_basicsize = sizeof(WriterObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Writer(path, options=''): write an ArrayRecord file; options as the official writer's\n"
		  "(e.g. 'group_size:1,zstd:3'). Leaving `with` by an exception drops the file.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)writer_init,
	.tp_dealloc = (destructor)writer_dealloc,
	.tp_methods = writer_methods,
};
