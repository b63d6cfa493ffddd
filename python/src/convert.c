/* convert.c - grist._grist.convert(): grist_convert() with the GIL released; progress and Ctrl-C through its callback. */
#include "ext.h"

#include "grist/convert.h"
#include "convert/image_shrink.h"

struct progress_ctx {
	PyObject *progress;   /* the caller's callable, or NULL */
	PyThreadState *ts;    /* this thread's state while the GIL is released */
};

/*
 * The library's progress callback, on the converting thread (the caller's): take the GIL
 * back, let Python run its signal handlers (Ctrl-C raises KeyboardInterrupt here), call the
 * caller's progress with a dict, release the GIL again. A pending exception cancels the
 * conversion, which then leaves nothing behind; convert() re-raises it.
 */
static int on_progress(const struct grist_convert_progress *p, void *arg)
{
	struct progress_ctx *c = arg;
	int cancel = 0;

	PyEval_RestoreThread(c->ts);
	if (PyErr_CheckSignals() < 0) {
		cancel = 1;
	} else if (c->progress) {
		PyObject *d = Py_BuildValue("{s:K,s:K,s:K,s:K,s:d,s:n,s:O,s:O}",
					    "records", (unsigned long long)p->records,
					    "bytes", (unsigned long long)p->bytes,
					    "input_bytes_done", (unsigned long long)p->input_bytes_done,
					    "input_bytes_total", (unsigned long long)p->input_bytes_total,
					    "seconds", p->seconds, "input", (Py_ssize_t)p->input,
					    "counting", p->counting ? Py_True : Py_False,
					    "done", p->done ? Py_True : Py_False);
		PyObject *r = d ? PyObject_CallOneArg(c->progress, d) : NULL;

		Py_XDECREF(d);
		if (r)
			Py_DECREF(r);
		else
			cancel = 1;
	}
	c->ts = PyEval_SaveThread();
	return cancel;
}

/* The names written: OUT, or its shards. */
static PyObject *output_names(const char *out, uint64_t shards)
{
	PyObject *list = PyList_New(0);
	uint64_t s;

	for (s = 0; list && s < (shards ? shards : 1); s++) {
		int len = grist_convert_shard_name(out, s, shards, NULL, 0);
		char *name = len >= 0 ? malloc((size_t)len + 1) : NULL;
		PyObject *str;

		if (!name) {
			Py_DECREF(list);
			return len < 0 ? gristpy_raise(len, NULL) : PyErr_NoMemory();
		}
		grist_convert_shard_name(out, s, shards, name, (size_t)len + 1);
		str = PyUnicode_DecodeFSDefault(name);
		free(name);
		if (!str || PyList_Append(list, str) < 0) {
			Py_XDECREF(str);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(str);
	}
	return list;
}

PyObject *gristpy_convert(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "inputs", "output", "format", "options", "shards", "check", "progress", "features",
				  "max_side", "jpeg_quality", NULL };
	PyObject *inputs_obj, *output_obj = NULL, *format_obj = Py_None, *shards_obj = Py_None;
	PyObject *progress = Py_None;
	const char *options = "", *features = NULL;
	int check = 1, ret, quality = 0;
	unsigned int max_side = 0;
	struct gristpy_paths inputs = { 0 };
	struct grist_convert_options o;
	struct progress_ctx ctx = { 0 };
	char msg[1024];

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO&|OzOpOzIi:convert", kwlist, &inputs_obj,
					 PyUnicode_FSConverter, &output_obj, &format_obj, &options, &shards_obj,
					 &check, &progress, &features, &max_side, &quality))
		return NULL;
	grist_convert_options_init(&o);
	o.writer_options = options;
	o.no_check = !check;
	o.features = features;
	o.max_side = max_side;
	o.jpeg_quality = quality;
	if (format_obj != Py_None) {
		const char *name = PyUnicode_Check(format_obj) ? PyUnicode_AsUTF8(format_obj) : NULL;

		if (!name) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "format must be a str or None");
			goto fail;
		}
		if (grist_convert_format_parse(name, &o.format)) {
			gristpy_raise(-EINVAL, NULL);
			goto fail;
		}
	}
	if (shards_obj != Py_None) {
		unsigned long long n = PyLong_Check(shards_obj) ? PyLong_AsUnsignedLongLong(shards_obj) : 0;

		if (PyErr_Occurred() || n < 1 || n > GRIST_CONVERT_SHARDS_MAX) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError, "shards must be an int in 1..%d", GRIST_CONVERT_SHARDS_MAX);
			goto fail;
		}
		o.shards = n;
	}
	if (progress != Py_None && !PyCallable_Check(progress)) {
		PyErr_SetString(PyExc_TypeError, "progress must be callable or None");
		goto fail;
	}
	if (gristpy_paths_from(inputs_obj, &inputs))
		goto fail;
	/* Always called back, even without a progress callable: it is where Ctrl-C is seen. */
	ctx.progress = progress == Py_None ? NULL : progress;
	o.progress = on_progress;
	o.progress_arg = &ctx;
	ctx.ts = PyEval_SaveThread();
	ret = grist_convert((const char *const *)inputs.v, inputs.n, PyBytes_AS_STRING(output_obj), &o, NULL);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	PyEval_RestoreThread(ctx.ts);
	gristpy_paths_free(&inputs);
	/* An exception from the callback (KeyboardInterrupt included) is the reason it stopped. */
	if (PyErr_Occurred())
		goto fail;
	if (ret) {
		gristpy_raise(ret, msg);
		goto fail;
	}
	{
		/* imagefolder writes one dataset folder, OUT: the shards inside are dataset_info.json's to list */
		PyObject *names = o.format == GRIST_CONVERT_IMAGEFOLDER ? output_names(PyBytes_AS_STRING(output_obj), 1)
									 : output_names(PyBytes_AS_STRING(output_obj), o.shards);

		Py_DECREF(output_obj);
		return names;
	}
fail:
	gristpy_paths_free(&inputs);
	Py_XDECREF(output_obj);
	return NULL;
}

/*
 * _image_shrink(image, max_side, quality) -> bytes or None: the imagefolder converter's
 * --max-side for one image (src/convert/image_shrink.c), for from_parquet and WriteToTFDS:
 * a JPEG of the image resized to max_side on its longer side, or None where it is kept as
 * read (within max_side, alpha, 16 bits).
 */
PyObject *gristpy_image_shrink(PyObject *self, PyObject *args)
{
	struct gc_shrink s = { 0 };
	unsigned int max_side;
	int quality, ret;
	const uint8_t *out;
	size_t n = 0;
	PyObject *res;
	Py_buffer in;

	(void)self;
	if (!PyArg_ParseTuple(args, "y*Ii", &in, &max_side, &quality))
		return NULL;
	if (!max_side || quality < 1 || quality > 100) {
		PyBuffer_Release(&in);
		PyErr_Format(PyExc_ValueError, "_image_shrink: max_side %u (> 0) or quality %d (1..100)", max_side,
			     quality);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = gc_shrink_image(&s, in.buf, (size_t)in.len, max_side, quality, "image", &out, &n);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&in);
	if (ret) {
		gc_shrink_free(&s);
		return gristpy_raise(ret, NULL);
	}
	res = out ? PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)n) : Py_NewRef(Py_None);
	gc_shrink_free(&s);
	return res;
}
