/* module.c - the grist._grist module: types, grist.Error, and the helpers the types share. */
#include "ext.h"

#include <string.h>

PyObject *gristpy_Error;

PyObject *gristpy_raise(int code, const char *msg)
{
	PyObject *exc;

	if (!msg || !msg[0])
		msg = grist_last_error();
	if (!msg[0])
		msg = grist_strerror(code);
	if (code == -EINVAL) {
		PyErr_SetString(PyExc_ValueError, msg);
		return NULL;
	}
	/* OSError(errno, strerror) sets .errno and .strerror; str(e) is "[Errno N] message". */
	exc = PyObject_CallFunction(gristpy_Error, "is", -code, msg);
	if (exc) {
		PyErr_SetObject(gristpy_Error, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

void gristpy_lock(PyThread_type_lock lock)
{
	if (PyThread_acquire_lock(lock, NOWAIT_LOCK))
		return;
	Py_BEGIN_ALLOW_THREADS
	PyThread_acquire_lock(lock, WAIT_LOCK);
	Py_END_ALLOW_THREADS
}

static int add_path(PyObject *item, struct gristpy_paths *p)
{
	PyObject *bytes = NULL;
	const char *s;

	if (!PyUnicode_FSConverter(item, &bytes))
		return -1;
	s = PyBytes_AS_STRING(bytes);
	p->v[p->n] = strdup(s);
	Py_DECREF(bytes);
	if (!p->v[p->n]) {
		PyErr_NoMemory();
		return -1;
	}
	p->n++;
	return 0;
}

int gristpy_paths_from(PyObject *obj, struct gristpy_paths *out)
{
	PyObject *seq = NULL;
	Py_ssize_t i, n;

	out->v = NULL;
	out->n = 0;
	if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyObject_HasAttrString(obj, "__fspath__")) {
		out->v = calloc(1, sizeof(char *));
		if (!out->v) {
			PyErr_NoMemory();
			return -1;
		}
		return add_path(obj, out);
	}
	seq = PySequence_Fast(obj, "paths must be a path or a sequence of paths");
	if (!seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n == 0) {
		PyErr_SetString(PyExc_ValueError, "paths: no files given");
		goto fail;
	}
	out->v = calloc((size_t)n, sizeof(char *));
	if (!out->v) {
		PyErr_NoMemory();
		goto fail;
	}
	for (i = 0; i < n; i++)
		if (add_path(PySequence_Fast_GET_ITEM(seq, i), out))
			goto fail;
	Py_DECREF(seq);
	return 0;
fail:
	Py_XDECREF(seq);
	gristpy_paths_free(out);
	return -1;
}

void gristpy_paths_free(struct gristpy_paths *p)
{
	size_t i;

	for (i = 0; p->v && i < p->n; i++)
		free(p->v[i]);
	free(p->v);
	p->v = NULL;
	p->n = 0;
}

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

PyObject *gristpy_remote_stats(const struct grist_remote_stats *r)
{
	PyObject *retries = PyDict_New(), *d;
	int k;

	if (!retries)
		return NULL;
	for (k = 0; k < GRIST_REMOTE_RETRY_CAUSES; k++) {
		PyObject *v = PyLong_FromUnsignedLongLong(r->retries[k]);

		if (!v || PyDict_SetItemString(retries, grist_remote_retry_cause_name(k), v)) {
			Py_XDECREF(v);
			Py_DECREF(retries);
			return NULL;
		}
		Py_DECREF(v);
	}
	d = Py_BuildValue("{s:K,s:K,s:N,s:K,s:d,s:K,s:K,s:K}", "requests", (unsigned long long)r->requests,
			  "bytes", (unsigned long long)r->bytes, "retries", retries,
			  "errors", (unsigned long long)r->errors, "inflight_mean", r->inflight_mean,
			  "inflight_max", (unsigned long long)r->inflight_max,
			  "latency_p50_us", (unsigned long long)r->latency_p50_us,
			  "latency_p99_us", (unsigned long long)r->latency_p99_us);
	return d;
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
	{ "remote_glob", module_remote_glob, METH_O, "remote_glob(pattern): the sorted URLs an s3:// or gs:// glob matches" },
	{ "remote_get", module_remote_get, METH_VARARGS,
	  "remote_get(url, max_bytes): the whole of a small object at an s3://, gs:// or http(s):// URL" },
	{ "set_remote_options", module_set_remote_options, METH_O,
	  "set_remote_options(text or None): the remote backend's options, process-wide" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef grist_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "grist._grist",
	.m_doc = "The C extension behind the grist package; use the names `grist` exports.",
	.m_size = -1,
	.m_methods = grist_functions,
};

PyMODINIT_FUNC PyInit__grist(void)
{
	PyTypeObject *types[] = { &gristpy_ReaderType, &gristpy_WriterType, &gristpy_LoaderType,
				  &gristpy_BatchType, &gristpy_ViewType,
				  &gristpy_FeaturesType };
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
	if (PyModule_AddStringConstant(m, "__version__", grist_version()) < 0 ||
	    PyModule_AddIntConstant(m, "STATE_MAX", GRIST_STATE_MAX) < 0 || gristpy_features_add_constants(m) < 0)
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
