/* module.c - the grist._grist module: its functions, its types and constants, grist.Error. */
#include "ext.h"

#include <string.h>

#include "grist/options.h"

/* remote_glob(pattern) -> list[str]: grist_remote_glob(), the GIL released while it lists. */
static PyObject *module_remote_glob(PyObject *self, PyObject *arg)
{
	const char *pattern = PyUnicode_AsUTF8(arg);
	PyObject *list;
	char **urls = NULL;
	size_t n = 0, i;
	int ret;

	(void)self;
	if (!pattern)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	ret = grist_remote_glob(pattern, &urls, &n);
	Py_END_ALLOW_THREADS
	if (ret)
		return gristpy_raise(ret, grist_last_error());
	list = PyList_New((Py_ssize_t)n);
	for (i = 0; list && i < n; i++) {
		PyObject *u = PyUnicode_FromString(urls[i]);

		if (!u) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, u);
	}
	grist_remote_glob_free(urls, n);
	return list;
}

/* remote_get(url, max_bytes) -> bytes: grist_remote_get(), the GIL released while it reads. */
static PyObject *module_remote_get(PyObject *self, PyObject *args)
{
	const char *url;
	Py_ssize_t max_bytes;
	PyObject *out;
	void *data = NULL;
	size_t len = 0;
	int ret;

	(void)self;
	if (!PyArg_ParseTuple(args, "sn:remote_get", &url, &max_bytes))
		return NULL;
	if (max_bytes < 0) {
		PyErr_SetString(PyExc_ValueError, "remote_get: max_bytes must be >= 0");
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = grist_remote_get(url, (size_t)max_bytes, &data, &len);
	Py_END_ALLOW_THREADS
	if (ret)
		return gristpy_raise(ret, grist_last_error());
	out = PyBytes_FromStringAndSize(data, (Py_ssize_t)len);
	grist_remote_get_free(data);
	return out;
}

/* remote_put(url, data): grist_remote_put(), the GIL released while it uploads. */
static PyObject *module_remote_put(PyObject *self, PyObject *args)
{
	const char *url;
	Py_buffer view;
	char msg[1024] = "";
	int ret;

	(void)self;
	if (!PyArg_ParseTuple(args, "sy*:remote_put", &url, &view))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	ret = grist_remote_put(url, view.buf, (size_t)view.len);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&view);
	if (ret)
		return gristpy_raise(ret, msg);
	Py_RETURN_NONE;
}

/* remote_delete(url): grist_remote_delete(), the GIL released. */
static PyObject *module_remote_delete(PyObject *self, PyObject *arg)
{
	const char *url = PyUnicode_AsUTF8(arg);
	char msg[1024] = "";
	int ret;

	(void)self;
	if (!url)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	ret = grist_remote_delete(url);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	if (ret)
		return gristpy_raise(ret, msg);
	Py_RETURN_NONE;
}

/* set_remote_options(text or None): grist_remote_options_parse() over the defaults, then set. */
static PyObject *module_set_remote_options(PyObject *self, PyObject *arg)
{
	struct grist_remote_options o;
	const char *text;
	int ret;

	(void)self;
	if (arg == Py_None) {
		grist_remote_set_options(NULL);
		Py_RETURN_NONE;
	}
	text = PyUnicode_AsUTF8(arg);
	if (!text)
		return NULL;
	grist_remote_set_options(NULL);
	grist_remote_get_options(&o);
	ret = grist_remote_options_parse(text, &o);
	if (!ret)
		ret = grist_remote_set_options(&o);
	if (ret)
		return gristpy_raise(ret, grist_last_error());
	Py_RETURN_NONE;
}

/*
 * loader_options() -> list[dict]: libgrist's option table (grist_loader_option_at()), so the
 * package documents every Loader keyword from the one place that parses it.
 */
static PyObject *module_loader_options(PyObject *self, PyObject *unused)
{
	static const char *const types[] = { "number", "size", "bool", "choice", "text" };
	const struct grist_option *o;
	PyObject *list = PyList_New(0);
	size_t i;

	(void)self;
	(void)unused;
	if (!list)
		return NULL;
	for (i = 0; (o = grist_loader_option_at(i)); i++) {
		PyObject *d = Py_BuildValue("{s:s,s:s,s:K,s:K,s:s,s:s,s:s}", "name", o->name, "type", types[o->type],
					    "min", (unsigned long long)o->min, "max", (unsigned long long)o->max,
					    "choices", o->choices ? o->choices : "", "default",
					    o->default_value ? o->default_value : "", "help", o->help ? o->help : "");
		if (!d || PyList_Append(list, d)) {
			Py_XDECREF(d);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(d);
	}
	return list;
}

static PyMethodDef grist_functions[] = {
	{ "convert", (PyCFunction)(void (*)(void))gristpy_convert, METH_VARARGS | METH_KEYWORDS,
	  "convert(inputs, output, format=None, options='', shards=None, check=True, progress=None):\n"
	  "grist_convert(); use grist.convert()." },
	{ "encode_examples", gristpy_encode_examples, METH_VARARGS,
	  "encode_examples(columns, n) -> list[bytes]: n tf.train.Example records, features sorted by key.\n"
	  "Each column is (key, 'int64' | 'float', values, rows) or (key, 'bytes', data, rows, offsets):\n"
	  "values an int64 or float32 array; data bytes with uint64 offsets (m + 1) bounding each value;\n"
	  "rows int64 (n + 1), row r holding values (bytes: offsets) rows[r] .. rows[r + 1]." },
	{ "loader_options", module_loader_options, METH_NOARGS,
	  "loader_options() -> list[dict]: the loader's option table (name, type, min, max, choices,\n"
	  "default, help), as 'grist load --options' prints it" },
	{ "remote_glob", module_remote_glob, METH_O, "remote_glob(pattern): the sorted URLs an s3:// or gs:// glob matches" },
	{ "remote_get", module_remote_get, METH_VARARGS,
	  "remote_get(url, max_bytes): the whole of a small object at an s3://, gs:// or http(s):// URL" },
	{ "remote_put", module_remote_put, METH_VARARGS,
	  "remote_put(url, data): data as the object at an s3:// or gs:// URL (an upload, MD5-checked)" },
	{ "remote_delete", module_remote_delete, METH_O, "remote_delete(url): delete the object at an s3:// or gs:// URL" },
	{ "set_remote_options", module_set_remote_options, METH_O,
	  "set_remote_options(text or None): the remote backend's options, process-wide" },
	{ "vision_box", gristpy_vision_box, METH_VARARGS,
	  "vision_box(spec, height, width, seed, epoch, index, key) -> (top, left, height, width, flipped)" },
	{ "vision_apply", gristpy_vision_apply, METH_VARARGS,
	  "vision_apply(spec, image, seed, epoch, index, key) -> (bytes, box): one image transformed" },
	{ "_vision_resize", gristpy_vision_resize, METH_VARARGS,
	  "_vision_resize(pixels, h, w, c, out_h, out_w, interp[, simd]) -> bytes: the resize alone (tests)" },
	{ "_vision_rrc", gristpy_vision_rrc, METH_VARARGS,
	  "_vision_rrc(h, w, scale, ratio, uniforms[, sampler, min_covered]) -> (top, left, height, width): a sampler\n"
	  "(0 torchvision, 1 tf, 2 dali) on given uniforms (tests)" },
	{ "_image_shrink", gristpy_image_shrink, METH_VARARGS,
	  "_image_shrink(image, max_side, quality) -> bytes or None: convert's --max-side on one image" },
	{ "_vision_jpeg_region", gristpy_vision_jpeg_region, METH_VARARGS,
	  "_vision_jpeg_region(jpeg, top, left, height, width[, scan_limit]) -> (bytes, channels): the region decode (tests)" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef grist_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "grist._grist",
	.m_doc = "The C extension behind the grist package; use the names `grist` exports.",
	.m_size = -1,
	.m_methods = grist_functions,
};

/*
 * The library's diagnostics (grist_set_log_callback()) into Python's logging, as the logger
 * "grist": a trainer routes, raises or silences them as it does every other library's (the
 * package gives that logger a NullHandler, so nothing shows until logging is configured). Called
 * from any thread, engine threads included, never with a grist lock held: it takes the GIL.
 * The Python calls that wait for engine threads (create, next, close) release the GIL first,
 * so an engine thread waiting for it here cannot deadlock them. Nothing is logged once the
 * interpreter is finalizing: a thread must not take the GIL then.
 */
static void log_to_python(void *ctx, enum grist_log_level level, const char *message)
{
	static const int levels[] = { 40, 30, 20 }; /* logging.ERROR, WARNING, INFO */
	PyGILState_STATE st;
	PyObject *logging, *r = NULL;

	(void)ctx;
#if PY_VERSION_HEX >= 0x030D0000
	if (Py_IsFinalizing())
#else
	if (_Py_IsFinalizing())
#endif
		return;
	st = PyGILState_Ensure();
	logging = PyImport_ImportModule("logging");
	if (logging) {
		PyObject *logger = PyObject_CallMethod(logging, "getLogger", "s", "grist");

		if (logger) {
			r = PyObject_CallMethod(logger, "log", "is",
						(unsigned)level < sizeof(levels) / sizeof(levels[0]) ? levels[level] : 30,
						message);
			Py_DECREF(logger);
		}
		Py_DECREF(logging);
	}
	if (!r)
		PyErr_Clear(); /* a failing handler must not turn into an error of an unrelated call */
	Py_XDECREF(r);
	PyGILState_Release(st);
}

PyMODINIT_FUNC PyInit__grist(void)
{
	PyTypeObject *types[] = { &gristpy_ReaderType, &gristpy_WriterType, &gristpy_LoaderType,
				  &gristpy_BatchType, &gristpy_ViewType,
				  &gristpy_FeaturesType, &gristpy_TokenizerType, &gristpy_TextMapType };
	PyObject *m;
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (PyType_Ready(types[i]) < 0)
			return NULL;
	m = PyModule_Create(&grist_module);
	if (!m)
		return NULL;
	gristpy_Error = PyErr_NewExceptionWithDoc("grist.Error",
		"A data or I/O error from grist: an OSError whose errno is set and whose message\n"
		"names the file and byte offset.", PyExc_OSError, NULL);
	if (!gristpy_Error || PyModule_AddObject(m, "Error", gristpy_Error) < 0)
		goto fail;
	Py_INCREF(gristpy_Error); /* the module's reference was stolen; keep ours */
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		const char *name = strrchr(types[i]->tp_name, '.') + 1;

		Py_INCREF(types[i]);
		if (PyModule_AddObject(m, name, (PyObject *)types[i]) < 0) {
			Py_DECREF(types[i]);
			goto fail;
		}
	}
	grist_set_log_callback(log_to_python, NULL);
	/*
	 * GRIST_MAX_CHUNK_BYTES is read (and a bad value logged) here, on the importing thread,
	 * which holds the GIL: read later on a decode thread, its message would wait for the GIL
	 * that a Python thread may be holding while it waits on that decode thread.
	 */
	(void)grist_max_chunk_bytes();
	if (PyModule_AddStringConstant(m, "__version__", grist_version()) < 0 ||
	    PyModule_AddIntConstant(m, "STATE_MAX", GRIST_STATE_MAX) < 0 || gristpy_features_add_constants(m) < 0)
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
