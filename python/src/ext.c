/* ext.c - what the extension's type files share (ext.h): errors, locks, path lists, stats dicts. */
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

PyObject *gristpy_remote_stats(const struct grist_remote_stats *r, const struct grist_remote_budget_stats *b)
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
	d = Py_BuildValue("{s:K,s:K,s:N,s:K,s:d,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:d}",
			  "requests", (unsigned long long)r->requests,
			  "bytes", (unsigned long long)r->bytes, "retries", retries,
			  "errors", (unsigned long long)r->errors, "inflight_mean", r->inflight_mean,
			  "inflight_max", (unsigned long long)r->inflight_max,
			  "latency_p50_us", (unsigned long long)r->latency_p50_us,
			  "latency_p99_us", (unsigned long long)r->latency_p99_us,
			  "budget_bytes", (unsigned long long)b->budget_bytes,
			  "budget_max_bytes", (unsigned long long)b->budget_max_bytes,
			  "rtt_us", (unsigned long long)b->rtt_us, "bandwidth", (unsigned long long)b->bandwidth,
			  "inflight_bytes_mean", b->inflight_bytes_mean, "ahead_bytes_mean", b->ahead_bytes_mean);
	return d;
}
