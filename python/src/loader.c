/* loader.c - grist._grist.Loader: the C loader behind a Python iterator of grist.Batch objects. */
#include "ext.h"

#include <string.h>
#include <time.h>

#include "grist/options.h"

typedef struct {
	PyObject_HEAD
	struct grist_loader *l;     /* NULL before init and after the deferred destroy */
	PyThread_type_lock lock;    /* next(), release and stats take one thread at a time */
	enum grist_batch_layout layout;
	unsigned token_bytes;       /* packing: bytes per token; 0 when not packing */
	Py_ssize_t live;            /* batches handed out and not yet given back */
	unsigned prefetch;          /* the most batches the caller may hold (the loader's resolved prefetch) */
	bool closed;                /* close() was called: destroy once live reaches 0 */
	bool ended;
	/* for repr() and stats(): what it was asked for, and what --stats measures */
	uint64_t batch_size, epochs, shard_index, shard_count;
	size_t num_datasets, num_files;
	size_t record_bytes;
	uint64_t t0_ns, first_batch_ns;  /* creation; the first batch's arrival (0: none yet) */
	uint64_t startup_ns;             /* wall time in grist_loader_create(), as --stats' start-up */
	uint64_t *per_dataset;           /* records delivered per dataset, as --stats counts them */
	PyObject *map_owner;        /* the _map capsule: its decoder outlives the engine */
} LoaderObject;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/*
 * ---- keyword arguments: parsed by the library's option table (grist/options.h), as `grist
 * load` parses its options, so a value is accepted or refused with the same message. Only
 * the keywords that are not loader options (paths, weights, state) are this file's.
 */

struct loader_args {
	struct grist_loader_config cfg;
	PyObject *paths;            /* borrowed */
	PyObject *weights;          /* borrowed; NULL or None: one dataset */
	Py_buffer state;            /* .obj is NULL when no state was given */
	PyObject *map;              /* borrowed: the _map capsule, or NULL */
};

/* A keyword's value as the table's text: an int in decimal, a bool as true/false, a str as is. */
static int option_text(const char *name, PyObject *v, PyObject **text)
{
	if (PyBool_Check(v)) {
		*text = PyUnicode_FromString(v == Py_True ? "true" : "false");
	} else if (PyLong_Check(v)) {
		*text = PyObject_Str(v);
	} else if (PyUnicode_Check(v)) {
		Py_INCREF(v);
		*text = v;
	} else if (PyIndex_Check(v)) {
		PyObject *i = PyNumber_Index(v);

		*text = i ? PyObject_Str(i) : NULL;
		Py_XDECREF(i);
	} else {
		PyErr_Format(PyExc_TypeError, "Loader: %s must be an int, a bool or a str, not %.100s", name,
			     Py_TYPE(v)->tp_name);
		return -1;
	}
	return *text ? 0 : -1;
}

static int set_option(struct loader_args *a, const char *name, PyObject *v)
{
	PyObject *text;
	const char *t;
	int ret;

	if (v == Py_None)
		return 0; /* the library's default (epochs=None: unbounded) */
	if (option_text(name, v, &text))
		return -1;
	t = PyUnicode_AsUTF8(text);
	ret = t ? grist_loader_config_set(&a->cfg, name, t) : -1;
	Py_DECREF(text);
	if (!t)
		return -1;
	if (ret) {
		PyErr_SetString(PyExc_ValueError, grist_last_error());
		return -1;
	}
	return 0;
}

/* _map: a per-record map from grist's own Python modules (grist.tfds' features decoder). */
static int kw_map(PyObject *v, struct loader_args *a)
{
	const struct gristpy_map *m;

	if (v == Py_None)
		return 0;
	m = PyCapsule_GetPointer(v, GRISTPY_MAP_CAPSULE);
	if (!m)
		return -1;
	a->cfg.map = m->fn;
	a->cfg.map_ctx = m->ctx;
	a->cfg.map_id = m->id;
	a->cfg.map_out_max = m->out_max;
	a->map = v;
	return 0;
}

static int apply_keyword(PyObject *key, PyObject *v, struct loader_args *a)
{
	const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
	const struct grist_option *o;

	if (!name) {
		PyErr_SetString(PyExc_TypeError, "Loader: keywords must be strings");
		return -1;
	}
	if (!strcmp(name, "weights")) {
		a->weights = v;
		return 0;
	}
	if (!strcmp(name, "state")) {
		if (v == Py_None)
			return 0;
		if (PyObject_GetBuffer(v, &a->state, PyBUF_SIMPLE) < 0)
			return -1;
		a->cfg.resume_state = a->state.buf;
		a->cfg.resume_state_len = (size_t)a->state.len;
		return 0;
	}
	if (!strcmp(name, "_map"))
		return kw_map(v, a);
	/* table names only, spelled as Python spells them (queue_depth, not queue-depth) */
	o = grist_loader_option_find(name);
	if (!o || strcmp(o->name, name)) {
		PyErr_Format(PyExc_TypeError, "Loader() got an unexpected keyword argument '%s'", name);
		return -1;
	}
	return set_option(a, name, v);
}

/* ---- datasets ---- */

struct datasets {
	struct grist_dataset_spec *specs;
	struct gristpy_paths *paths;
	size_t n;
};

static void datasets_free(struct datasets *d)
{
	size_t i;

	for (i = 0; d->paths && i < d->n; i++)
		gristpy_paths_free(&d->paths[i]);
	free(d->paths);
	free(d->specs);
}

/* One dataset from @paths, or with @weights one per item of @paths (a path or a list of paths). */
static int datasets_from(PyObject *paths, PyObject *weights, struct datasets *d)
{
	PyObject *ps = NULL, *ws = NULL;
	Py_ssize_t i, n = 1;

	memset(d, 0, sizeof(*d));
	if (weights && weights != Py_None) {
		ws = PySequence_Fast(weights, "Loader: weights must be a sequence of numbers");
		if (!ws)
			return -1;
		ps = PySequence_Fast(paths, "Loader: with weights, paths must be a list of datasets");
		if (!ps)
			goto fail;
		n = PySequence_Fast_GET_SIZE(ws);
		if (n == 0 || PySequence_Fast_GET_SIZE(ps) != n) {
			PyErr_Format(PyExc_ValueError, "Loader: %zd weights for %zd datasets", n,
				     PySequence_Fast_GET_SIZE(ps));
			goto fail;
		}
	}
	d->specs = calloc((size_t)n, sizeof(*d->specs));
	d->paths = calloc((size_t)n, sizeof(*d->paths));
	if (!d->specs || !d->paths) {
		PyErr_NoMemory();
		goto fail;
	}
	d->n = (size_t)n;
	for (i = 0; i < n; i++) {
		if (gristpy_paths_from(ps ? PySequence_Fast_GET_ITEM(ps, i) : paths, &d->paths[i]))
			goto fail;
		d->specs[i].paths = (const char *const *)d->paths[i].v;
		d->specs[i].num_paths = d->paths[i].n;
		d->specs[i].weight = 1.0;
		if (ws) {
			d->specs[i].weight = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(ws, i));
			if (PyErr_Occurred())
				goto fail;
		}
	}
	Py_XDECREF(ps);
	Py_XDECREF(ws);
	return 0;
fail:
	Py_XDECREF(ps);
	Py_XDECREF(ws);
	datasets_free(d);
	return -1;
}

/* ---- the type ---- */

static int loader_init(LoaderObject *self, PyObject *args, PyObject *kwds)
{
	struct loader_args a;
	struct grist_loader_config run;
	struct datasets ds = { 0 };
	struct grist_loader *l = NULL;
	char msg[1024] = "";
	PyObject *key, *value;
	Py_ssize_t pos = 0, nargs = PyTuple_GET_SIZE(args);
	int ret = -1, code;

	memset(&a, 0, sizeof(a));
	grist_loader_config_init(&a.cfg);
	if (self->l || self->closed) {
		PyErr_SetString(PyExc_ValueError, "grist.Loader: already initialised");
		return -1;
	}
	if (nargs < 1 || nargs > 2) {
		PyErr_Format(PyExc_TypeError, "Loader() takes paths and batch_size as positional arguments (%zd given)",
			     nargs);
		return -1;
	}
	a.paths = PyTuple_GET_ITEM(args, 0);
	if (nargs == 2 && set_option(&a, "batch_size", PyTuple_GET_ITEM(args, 1)))
		goto out;
	while (kwds && PyDict_Next(kwds, &pos, &key, &value))
		if (apply_keyword(key, value, &a))
			goto out;
	if (nargs < 2 && !(kwds && PyDict_GetItemString(kwds, "batch_size"))) {
		PyErr_SetString(PyExc_TypeError, "Loader() missing required argument 'batch_size'");
		goto out;
	}
	/*
	 * prefetch is also the most batches a caller may hold, and a `for batch in loader` loop
	 * still holds the previous batch (its variable) while it asks for the next: one more
	 * is lent here, so prefetch=1 works in a loop as `grist load --prefetch 1` does.
	 */
	if (a.cfg.prefetch && a.cfg.prefetch < grist_loader_option_find("prefetch")->max)
		a.cfg.prefetch++;
	if (datasets_from(a.paths, a.weights, &ds))
		goto out;
	a.cfg.datasets = ds.specs;
	a.cfg.num_datasets = ds.n;
	if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
		PyErr_NoMemory();
		goto out;
	}
	/* Opening the files and starting the engine threads does I/O: the GIL is released. */
	Py_BEGIN_ALLOW_THREADS
	uint64_t created_from = now_ns();
	code = grist_loader_create(&a.cfg, &l);
	self->startup_ns = now_ns() - created_from;
	if (code)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	if (code) {
		gristpy_raise(code, msg);
		goto out;
	}
	self->l = l;
	Py_XINCREF(a.map);
	self->map_owner = a.map;
	/* the values the loader runs with, its defaults resolved (0 asked for them) */
	grist_loader_config_init(&run);
	grist_loader_get_config(l, &run);
	self->prefetch = run.prefetch; /* the library's hold limit */
	self->layout = run.layout;
	self->token_bytes = run.pack ? run.pack_token_bytes : 0;
	self->batch_size = run.batch_size;
	self->epochs = run.epochs;
	self->shard_index = run.shard_index;
	self->shard_count = run.shard_count;
	self->num_datasets = ds.n;
	self->record_bytes = a.cfg.record_bytes;
	for (size_t d = 0; d < ds.n; d++)
		self->num_files += ds.specs[d].num_paths;
	self->t0_ns = now_ns();
	PyMem_Free(self->per_dataset);
	self->per_dataset = PyMem_Calloc(ds.n, sizeof(*self->per_dataset));
	if (!self->per_dataset) {
		PyErr_NoMemory();
		goto out;
	}
	ret = 0;
out:
	datasets_free(&ds);
	if (a.state.obj)
		PyBuffer_Release(&a.state);
	return ret;
}

/* Lock held. Batches hold a reference to their loader, so this runs once the last one is gone. */
static void loader_destroy_locked(LoaderObject *self)
{
	struct grist_loader *l = self->l;

	self->l = NULL;
	if (!l)
		return;
	/* Joining the engine's threads can take a moment. */
	Py_BEGIN_ALLOW_THREADS
	grist_loader_destroy(l);
	Py_END_ALLOW_THREADS
}

static void loader_dealloc(LoaderObject *self)
{
	if (self->l) {
		gristpy_lock(self->lock);
		loader_destroy_locked(self);
		PyThread_release_lock(self->lock);
	}
	if (self->lock)
		PyThread_free_lock(self->lock);
	PyMem_Free(self->per_dataset);
	Py_XDECREF(self->map_owner);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int loader_check(LoaderObject *self)
{
	if (self->l && !self->closed)
		return 0;
	PyErr_SetString(PyExc_ValueError, "grist.Loader: the loader is closed");
	return -1;
}

/* Take a batch back from Python (lock taken inside); the loader object stays alive. */
static void loader_give_back(PyObject *obj, struct grist_batch *b)
{
	LoaderObject *self = (LoaderObject *)obj;

	gristpy_lock(self->lock);
	if (self->l)
		grist_loader_release(self->l, b);
	self->live--;
	if (self->closed && self->live == 0)
		loader_destroy_locked(self);
	PyThread_release_lock(self->lock);
}

static PyObject *loader_iternext(LoaderObject *self)
{
	struct gristpy_lend lend = { .lender = (PyObject *)self, .give_back = loader_give_back,
				     .layout = self->layout, .token_bytes = self->token_bytes };
	struct grist_batch *b = NULL;
	char msg[1024] = "";
	PyObject *batch;
	int ret;

	if (loader_check(self))
		return NULL;
	if (self->ended)
		return NULL; /* StopIteration */
	gristpy_lock(self->lock);
	/* The wait for the next batch runs without the GIL: other Python threads (a training
	 * step, a prefetch thread) run meanwhile. */
	Py_BEGIN_ALLOW_THREADS
	ret = grist_loader_next(self->l, &b);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	if (!ret && b) {
		self->live++;
		if (!self->first_batch_ns)
			self->first_batch_ns = now_ns();
		for (size_t i = 0; b->datasets && i < b->num_records; i++)
			if (b->datasets[i] < self->num_datasets)
				self->per_dataset[b->datasets[i]]++;
	}
	PyThread_release_lock(self->lock);
	if (ret)
		return gristpy_raise(ret, msg);
	if (!b) {
		self->ended = true;
		return NULL;
	}
	batch = gristpy_batch_new(&lend, b);
	if (!batch) /* nobody will see this batch: hand it back at once */
		loader_give_back((PyObject *)self, b);
	return batch;
}

static PyObject *loader_get_state(LoaderObject *self, PyObject *unused)
{
	uint8_t buf[GRIST_STATE_MAX];
	size_t len = 0;
	int ret;

	(void)unused;
	if (loader_check(self))
		return NULL;
	gristpy_lock(self->lock);
	ret = grist_loader_save_state(self->l, buf, sizeof(buf), &len);
	PyThread_release_lock(self->lock);
	if (ret)
		return gristpy_raise(ret, NULL);
	return PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)len);
}

/* Py_NewRef() of Python 3.10, for 3.9 */
static PyObject *newref(PyObject *o)
{
	Py_INCREF(o);
	return o;
}

/* Adds @key: @value to @d and drops the reference to @value; -1 on failure (either). */
static int put(PyObject *d, const char *key, PyObject *value)
{
	int ret = value ? PyDict_SetItemString(d, key, value) : -1;

	Py_XDECREF(value);
	return ret;
}

/*
 * Everything `grist load --stats` prints, by name: the library's counters, and what the
 * CLI measures around them (seconds since creation, records/s, the first batch's arrival,
 * queue occupancy per batch, packing efficiency, records per dataset).
 */
static PyObject *loader_stats(LoaderObject *self, PyObject *unused)
{
	struct grist_loader_stats st;
	double seconds, batches;
	PyObject *d, *per;
	size_t i;

	(void)unused;
	if (loader_check(self))
		return NULL;
	gristpy_lock(self->lock);
	grist_loader_stats(self->l, &st);
	PyThread_release_lock(self->lock);
	seconds = (double)(now_ns() - self->t0_ns) / 1e9;
	batches = st.batches ? (double)st.batches : 1.0;
	d = PyDict_New();
	per = PyList_New((Py_ssize_t)self->num_datasets);
	if (!d || !per)
		goto fail;
	for (i = 0; i < self->num_datasets; i++) {
		PyObject *n = PyLong_FromUnsignedLongLong(self->per_dataset[i]);

		if (!n)
			goto fail;
		PyList_SET_ITEM(per, (Py_ssize_t)i, n);
	}
#define U64(k, v) put(d, k, PyLong_FromUnsignedLongLong((unsigned long long)(v)))
#define F64(k, v) put(d, k, PyFloat_FromDouble(v))
	if (put(d, "engine", PyUnicode_FromString(st.engine ? st.engine : "?")) ||
	    put(d, "read_mode", PyUnicode_FromString(st.read_mode ? st.read_mode : "?")) ||
	    U64("threads", st.threads) || U64("batches", st.batches) || U64("records", st.records) ||
	    U64("records_filtered", st.records_filtered) || F64("seconds", seconds) ||
	    F64("records_per_second", seconds > 0 ? (double)st.records / seconds : 0.0) ||
	    U64("reads_issued", st.reads_issued) || U64("bytes_read", st.bytes_read) ||
	    U64("chunks_decoded", st.chunks_decoded) || U64("bytes_decoded", st.bytes_decoded) ||
	    U64("io_wait_ns", st.io_wait_ns) || U64("decode_ns", st.decode_ns) || U64("assemble_ns", st.assemble_ns) ||
	    U64("consumer_stall_ns", st.consumer_stall_ns) || U64("producer_stall_ns", st.producer_stall_ns) ||
	    F64("reads_in_flight_mean", st.reads_in_flight_mean) || U64("reads_in_flight_max", st.reads_in_flight_max) ||
	    U64("queue_occupancy_sum", st.queue_occupancy_sum) ||
	    F64("queue_occupancy", (double)st.queue_occupancy_sum / batches) || U64("memory_bytes", st.memory_bytes) ||
	    U64("slot_maps", st.slot_maps) || put(d, "pinned", PyBool_FromLong(st.pinned)) ||
	    put(d, "registered_buffers", PyBool_FromLong(st.registered_buffers)) ||
	    put(d, "first_batch_seconds",
		self->first_batch_ns ? PyFloat_FromDouble((double)(self->first_batch_ns - self->t0_ns) / 1e9)
				     : newref(Py_None)) ||
	    F64("startup_seconds", (double)self->startup_ns / 1e9) ||
	    U64("pack_tokens", st.pack_tokens) || U64("pack_capacity", st.pack_capacity) ||
	    F64("pack_efficiency", st.pack_capacity ? (double)st.pack_tokens / (double)st.pack_capacity : 0.0) ||
	    put(d, "dataset_records", newref(per)) || put(d, "remote", gristpy_remote_stats(&st.remote, &st.remote_budget)))
		goto fail;
#undef U64
#undef F64
	Py_DECREF(per);
	return d;
fail:
	Py_XDECREF(per);
	Py_XDECREF(d);
	return NULL;
}

static PyObject *loader_num_records(LoaderObject *self, PyObject *args)
{
	Py_ssize_t d = 0;

	if (!PyArg_ParseTuple(args, "|n:num_records", &d))
		return NULL;
	if (loader_check(self))
		return NULL;
	if (d < 0 || (size_t)d >= self->num_datasets) {
		PyErr_Format(PyExc_IndexError, "grist.Loader.num_records: dataset %zd of %zu (0 .. %zu)", d,
			     self->num_datasets, self->num_datasets - 1);
		return NULL;
	}
	return PyLong_FromUnsignedLongLong(grist_loader_num_records(self->l, (size_t)d));
}

/* len(): the batches it yields from its start (or its resume state) to the end. */
static Py_ssize_t loader_len(LoaderObject *self)
{
	uint64_t n;
	int ret;

	if (loader_check(self))
		return -1;
	ret = grist_loader_num_batches(self->l, &n);
	if (ret) {
		/* unbounded (epochs=None) or packed: no len(), as for any iterator of unknown length;
		 * said in the caller's words (the library's "epochs 0" is Python's epochs=None) */
		if (!self->epochs)
			PyErr_SetString(PyExc_TypeError, "grist.Loader has no len(): epochs=None (or 0) is an unbounded stream");
		else
			PyErr_Format(PyExc_TypeError, "grist.Loader has no len(): %s", grist_last_error());
		return -1;
	}
	if (n > (uint64_t)PY_SSIZE_T_MAX) {
		PyErr_SetString(PyExc_OverflowError, "grist.Loader: more batches than sys.maxsize");
		return -1;
	}
	return (Py_ssize_t)n;
}

/* A loader is always true, whatever len() says (an unbounded one has none). */
static int loader_bool(PyObject *self)
{
	(void)self;
	return 1;
}

static PyObject *loader_repr(LoaderObject *self)
{
	static const char *const layouts[] = { "ragged", "fixed", "padded" };
	char epochs[32];

	if (!self->l && !self->closed)
		return PyUnicode_FromString("grist.Loader(<not initialised>)");
	if (self->epochs)
		snprintf(epochs, sizeof(epochs), "%llu", (unsigned long long)self->epochs);
	else
		snprintf(epochs, sizeof(epochs), "None");
	return PyUnicode_FromFormat("grist.Loader(datasets=%zu, files=%zu, batch_size=%llu, epochs=%s, shard='%llu/%llu', "
				    "layout='%s'%s)",
				    self->num_datasets, self->num_files, (unsigned long long)self->batch_size, epochs,
				    (unsigned long long)self->shard_index, (unsigned long long)self->shard_count,
				    self->token_bytes ? "packed" : layouts[self->layout], self->closed ? ", closed" : "");
}

static PySequenceMethods loader_as_sequence = { .sq_length = (lenfunc)loader_len };
static PyNumberMethods loader_as_number = { .nb_bool = loader_bool };

/*
 * close() stops the loader. Batches still alive keep their memory: the engine is destroyed
 * when the last of them is given back (each holds a reference to this object).
 */
static PyObject *loader_close(LoaderObject *self, PyObject *unused)
{
	(void)unused;
	if (!self->l || self->closed)
		Py_RETURN_NONE;
	gristpy_lock(self->lock);
	self->closed = true;
	if (self->live == 0)
		loader_destroy_locked(self);
	PyThread_release_lock(self->lock);
	Py_RETURN_NONE;
}

static PyObject *loader_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	if (loader_check((LoaderObject *)self))
		return NULL;
	Py_INCREF(self);
	return self;
}

static PyObject *loader_exit(PyObject *self, PyObject *args)
{
	(void)args;
	return loader_close((LoaderObject *)self, NULL);
}

static PyObject *loader_iter(PyObject *self)
{
	Py_INCREF(self);
	return self;
}

/*
 * held: the batches lent now (each alive until its arrays are gone). Wrappers that keep
 * batches in buffers (grist.grain, grist.jax) read it with prefetch to know when the next
 * batch would be the last free slot, and hand out a copy instead of blocking the loader.
 */
static PyObject *loader_get_held(LoaderObject *self, void *closure)
{
	Py_ssize_t n;

	(void)closure;
	if (!self->lock)
		return PyLong_FromLong(0); /* not initialised: nothing was lent */
	gristpy_lock(self->lock);
	n = self->live;
	PyThread_release_lock(self->lock);
	return PyLong_FromSsize_t(n);
}

static PyObject *loader_get_prefetch(LoaderObject *self, void *closure)
{
	(void)closure;
	return PyLong_FromUnsignedLong(self->prefetch);
}

static PyGetSetDef loader_getset[] = {
	{ "held", (getter)loader_get_held, NULL,
	  "batches lent to the caller now: given back when released or when their arrays are gone.", NULL },
	{ "prefetch", (getter)loader_get_prefetch, NULL,
	  "the most batches the caller may hold at once (one more than prefetch= asked for: a for loop\n"
	  "holds the previous batch); next() refuses one more (grist.Error, EBUSY).", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyMethodDef loader_methods[] = {
	{ "get_state", (PyCFunction)loader_get_state, METH_NOARGS,
	  "get_state() -> bytes: the checkpoint after the last batch returned; Loader(..., state=s)\n"
	  "continues with exactly the next batch." },
	{ "stats", (PyCFunction)loader_stats, METH_NOARGS,
	  "stats() -> dict: everything `grist load --stats` prints, by name: engine, read_mode, threads,\n"
	  "batches, records, records_filtered, seconds (since creation), records_per_second, reads_issued,\n"
	  "bytes_read, chunks_decoded, bytes_decoded, io_wait_ns, decode_ns, assemble_ns,\n"
	  "consumer_stall_ns, producer_stall_ns, reads_in_flight_mean, reads_in_flight_max,\n"
	  "queue_occupancy (and _sum), memory_bytes, slot_maps, pinned, registered_buffers, first_batch_seconds,\n"
	  "startup_seconds (in grist_loader_create()), pack_tokens, pack_capacity, pack_efficiency,\n"
	  "dataset_records (delivered per dataset)." },
	{ "num_records", (PyCFunction)loader_num_records, METH_VARARGS,
	  "num_records(dataset=0) -> int: records per epoch of that dataset (before sharding);\n"
	  "IndexError for a dataset that does not exist." },
	{ "close", (PyCFunction)loader_close, METH_NOARGS,
	  "close(): stop the loader; batches still alive stay valid until they are released." },
	{ "__enter__", loader_enter, METH_NOARGS, NULL },
	{ "__exit__", loader_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

PyTypeObject gristpy_LoaderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "grist._grist.Loader",
	.tp_basicsize = sizeof(LoaderObject),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Loader(paths, batch_size, **options): shuffled, sharded batches (see grist.Loader).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)loader_init,
	.tp_dealloc = (destructor)loader_dealloc,
	.tp_iter = loader_iter,
	.tp_iternext = (iternextfunc)loader_iternext,
	.tp_methods = loader_methods,
	.tp_getset = loader_getset,
	.tp_repr = (reprfunc)loader_repr,
	.tp_as_sequence = &loader_as_sequence,
	.tp_as_number = &loader_as_number,
};
