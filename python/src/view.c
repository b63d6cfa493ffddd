/* view.c - grist._grist._View: a read-only buffer over a batch's memory that keeps the batch alive. */
#include "ext.h"

typedef struct {
	PyObject_HEAD
	PyObject *batch;            /* strong: the slot stays lent while this view lives */
	void (*done)(PyObject *batch); /* uncounts this export (batch.c) */
	void *buf;
	int ndim;
	Py_ssize_t shape[2];
	Py_ssize_t strides[2];
	Py_ssize_t itemsize;
	const char *format;
} ViewObject;

static int view_getbuffer(ViewObject *self, Py_buffer *view, int flags)
{
	if (flags & PyBUF_WRITABLE) {
		PyErr_SetString(PyExc_BufferError, "grist batch memory is read-only");
		return -1;
	}
	view->obj = (PyObject *)self;
	Py_INCREF(self);
	view->buf = self->buf;
	view->len = self->itemsize * self->shape[0] * (self->ndim == 2 ? self->shape[1] : 1);
	view->readonly = 1;
	view->itemsize = self->itemsize;
	view->format = (flags & PyBUF_FORMAT) ? (char *)self->format : NULL;
	view->ndim = self->ndim;
	view->shape = (flags & PyBUF_ND) == PyBUF_ND ? self->shape : NULL;
	view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
	view->suboffsets = NULL;
	view->internal = NULL;
	return 0;
}

static void view_dealloc(ViewObject *self)
{
	PyObject *batch = self->batch;
	void (*done)(PyObject *batch) = self->done;

	Py_TYPE(self)->tp_free((PyObject *)self);
	if (batch) {
		done(batch);
		Py_DECREF(batch);
	}
}

static PyBufferProcs view_as_buffer = {
	.bf_getbuffer = (getbufferproc)view_getbuffer,
};

PyTypeObject gristpy_ViewType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "grist._grist._View",
	.tp_basicsize = sizeof(ViewObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Read-only memory of a grist.Batch (the base of its numpy arrays).",
	.tp_dealloc = (destructor)view_dealloc,
	.tp_as_buffer = &view_as_buffer,
};

static PyObject *np_asarray;

PyObject *gristpy_view_array(PyObject *batch, void (*done)(PyObject *batch), const void *buf, int ndim,
			     const Py_ssize_t *shape, const char *format, Py_ssize_t itemsize)
{
	static const char empty[8];
	ViewObject *v;
	PyObject *arr;

	if (!np_asarray) {
		PyObject *np = PyImport_ImportModule("numpy");

		if (!np)
			goto fail;
		np_asarray = PyObject_GetAttrString(np, "asarray");
		Py_DECREF(np);
		if (!np_asarray)
			goto fail;
	}
	v = PyObject_New(ViewObject, &gristpy_ViewType);
	if (!v)
		goto fail;
	v->batch = NULL;
	v->buf = buf ? (void *)buf : (void *)empty; /* an empty batch may have no memory yet */
	v->ndim = ndim;
	v->itemsize = itemsize;
	v->format = format;
	v->shape[0] = shape[0];
	v->shape[1] = ndim == 2 ? shape[1] : 1;
	v->strides[1] = itemsize;
	v->strides[0] = ndim == 2 ? itemsize * shape[1] : itemsize;
	/* From here the view's dealloc uncounts the export, whether or not the array is made. */
	Py_INCREF(batch);
	v->batch = batch;
	v->done = done;
	arr = PyObject_CallOneArg(np_asarray, (PyObject *)v);
	Py_DECREF(v);
	return arr;
fail:
	done(batch);
	return NULL;
}
