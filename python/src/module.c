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

static PyMethodDef grist_functions[] = {
	{ "convert", (PyCFunction)(void (*)(void))gristpy_convert, METH_VARARGS | METH_KEYWORDS,
	  "convert(inputs, output, format=None, options='', shards=None, check=True, progress=None):\n"
	  "grist_convert(); use grist.convert()." },
	{ "encode_examples", gristpy_encode_examples, METH_VARARGS,
	  "encode_examples(columns, n) -> list[bytes]: n tf.train.Example records, features sorted by key.\n"
	  "Each column is (key, 'int64' | 'float', values, rows) or (key, 'bytes', data, rows, offsets):\n"
	  "values an int64 or float32 array; data bytes with uint64 offsets (m + 1) bounding each value;\n"
	  "rows int64 (n + 1), row r holding values (bytes: offsets) rows[r] .. rows[r + 1]." },
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
