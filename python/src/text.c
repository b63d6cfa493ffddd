/* text.c - grist._grist.Tokenizer: grist/text.h's tokenizers; grist.text.Tokenizer wraps it (numpy, pickling). */
#include "ext.h"

#include <string.h>

#include "grist/features.h"
#include "grist/text.h"

typedef struct {
	PyObject_HEAD
	struct grist_tokenizer *t;
	/* One cached context: a call takes it when free (no wait), else makes its own for the call. */
	struct grist_tokenizer_ctx *ctx;
	PyThread_type_lock ctx_lock;
} TokenizerObject;

static void tokenizer_dealloc(TokenizerObject *self)
{
	grist_tokenizer_ctx_destroy(self->ctx);
	grist_tokenizer_close(self->t);
	if (self->ctx_lock)
		PyThread_free_lock(self->ctx_lock);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* special_tokens: a dict {text: id} -> the C array; the strs stay alive in @keep (a list). */
static int specials_from(PyObject *dict, struct grist_special_token **out, size_t *n)
{
	Py_ssize_t pos = 0, i = 0;
	PyObject *k, *v;

	*out = NULL;
	*n = 0;
	if (!dict || dict == Py_None)
		return 0;
	if (!PyDict_Check(dict)) {
		PyErr_SetString(PyExc_TypeError, "special_tokens must be a dict {text: id}");
		return -1;
	}
	*out = PyMem_Calloc((size_t)PyDict_Size(dict) + 1, sizeof(**out));
	if (!*out) {
		PyErr_NoMemory();
		return -1;
	}
	while (PyDict_Next(dict, &pos, &k, &v)) {
		long id;

		if (!PyUnicode_Check(k) || !PyLong_Check(v)) {
			PyErr_SetString(PyExc_TypeError, "special_tokens must map str to int");
			goto fail;
		}
		(*out)[i].text = PyUnicode_AsUTF8(k);
		id = PyLong_AsLong(v);
		if (!(*out)[i].text || (id == -1 && PyErr_Occurred()))
			goto fail;
		if (id < 0 || id > INT32_MAX) {
			PyErr_Format(PyExc_ValueError, "special token %R: id %ld is not in 0..2^31-1", k, id);
			goto fail;
		}
		(*out)[i++].id = (int32_t)id;
	}
	*n = (size_t)i;
	return 0;
fail:
	PyMem_Free(*out);
	*out = NULL;
	return -1;
}

static int tokenizer_init(TokenizerObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = { "path", "pattern", "special_tokens", "sentencepiece_library", NULL };
	PyObject *path = NULL, *special = NULL;
	const char *pattern = NULL;
	struct grist_tokenizer_options o;
	struct grist_special_token *sp = NULL;
	struct grist_tokenizer *t = NULL;
	char msg[1024] = "";
	size_t n_sp = 0;
	int ret, library = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&|$zOp:Tokenizer", kwlist, PyUnicode_FSConverter, &path, &pattern,
					 &special, &library))
		return -1;
	if (self->t) {
		Py_DECREF(path);
		PyErr_SetString(PyExc_ValueError, "grist.text.Tokenizer: already open");
		return -1;
	}
	if (specials_from(special, &sp, &n_sp)) {
		Py_DECREF(path);
		return -1;
	}
	grist_tokenizer_options_init(&o);
	o.pattern = pattern;
	o.special = sp;
	o.n_special = n_sp;
	o.sentencepiece_library = library;
	Py_BEGIN_ALLOW_THREADS
	ret = grist_tokenizer_open(PyBytes_AS_STRING(path), &o, &t);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	Py_DECREF(path);
	PyMem_Free(sp);
	if (ret) {
		/* a missing file is Python's own FileNotFoundError, as open() raises */
		if (ret == -ENOENT)
			PyErr_SetString(PyExc_FileNotFoundError, msg);
		else
			gristpy_raise(ret, msg);
		return -1;
	}
	if (!(self->ctx_lock = PyThread_allocate_lock()) || grist_tokenizer_ctx_create(t, &self->ctx)) {
		grist_tokenizer_close(t);
		PyErr_NoMemory();
		return -1;
	}
	self->t = t;
	return 0;
}

static int tokenizer_check(TokenizerObject *self)
{
	if (self->t)
		return 0;
	PyErr_SetString(PyExc_ValueError, "grist.text.Tokenizer: not open");
	return -1;
}

/* The UTF-8 bytes of a str or a bytes-like object; @hold keeps them alive (a new reference or a buffer). */
static int text_of(PyObject *obj, const char **p, Py_ssize_t *len, Py_buffer *view)
{
	view->obj = NULL;
	if (PyUnicode_Check(obj)) {
		*p = PyUnicode_AsUTF8AndSize(obj, len);
		return *p ? 0 : -1;
	}
	if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
		PyErr_Format(PyExc_TypeError, "expected str or a bytes-like object, not %.100s", Py_TYPE(obj)->tp_name);
		return -1;
	}
	*p = view->buf;
	*len = view->len;
	return 0;
}

/* Take the cached context, or make one for this call; give it back with put_ctx(). Called without the GIL. */
static struct grist_tokenizer_ctx *get_ctx(TokenizerObject *self)
{
	struct grist_tokenizer_ctx *c = NULL;

	if (PyThread_acquire_lock(self->ctx_lock, NOWAIT_LOCK))
		return self->ctx;
	return grist_tokenizer_ctx_create(self->t, &c) ? NULL : c;
}

static void put_ctx(TokenizerObject *self, struct grist_tokenizer_ctx *c)
{
	if (c == self->ctx)
		PyThread_release_lock(self->ctx_lock);
	else
		grist_tokenizer_ctx_destroy(c);
}

/* encode(text, allowed_special=False) -> bytearray of native int32 ids. */
static PyObject *tokenizer_encode(TokenizerObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = { "text", "allowed_special", NULL };
	PyObject *obj, *out = NULL;
	int allowed = 0, ret = -ENOMEM;
	Py_buffer view;
	const char *p;
	Py_ssize_t len;
	const int32_t *ids = NULL;
	size_t n = 0;
	char msg[1024] = "";
	struct grist_tokenizer_ctx *c;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|p:encode", kwlist, &obj, &allowed) || tokenizer_check(self) ||
	    text_of(obj, &p, &len, &view))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	c = get_ctx(self);
	if (c) {
		ret = grist_tokenizer_encode(c, p, (size_t)len, allowed ? GRIST_ENCODE_ALLOW_SPECIAL : 0, &ids, &n);
		if (ret)
			snprintf(msg, sizeof(msg), "%s", grist_last_error());
	}
	Py_END_ALLOW_THREADS
	if (!ret)
		out = PyByteArray_FromStringAndSize((const char *)ids, (Py_ssize_t)(n * sizeof(int32_t)));
	if (c) {
		Py_BEGIN_ALLOW_THREADS
		put_ctx(self, c);
		Py_END_ALLOW_THREADS
	}
	PyBuffer_Release(&view);
	if (ret)
		return gristpy_raise(ret, msg);
	return out;
}

/* encode_batch(texts, threads=0, allowed_special=False) -> (bytearray ids, bytes uint64 offsets). */
static PyObject *tokenizer_encode_batch(TokenizerObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = { "texts", "threads", "allowed_special", NULL };
	PyObject *seq, *tuple = NULL, *res = NULL;
	unsigned threads = 0;
	int allowed = 0, ret = 0;
	const void **texts = NULL;
	size_t *lens = NULL;
	Py_buffer *views = NULL;
	Py_ssize_t n, i, got = 0;
	struct grist_token_batch b = { 0 };
	char msg[1024] = "";

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|Ip:encode_batch", kwlist, &seq, &threads, &allowed) ||
	    tokenizer_check(self))
		return NULL;
	/* a tuple of our own: the texts cannot change under the threads while the GIL is released */
	tuple = PySequence_Tuple(seq);
	if (!tuple)
		return NULL;
	n = PyTuple_GET_SIZE(tuple);
	texts = PyMem_Calloc((size_t)n + 1, sizeof(*texts));
	lens = PyMem_Calloc((size_t)n + 1, sizeof(*lens));
	views = PyMem_Calloc((size_t)n + 1, sizeof(*views));
	if (!texts || !lens || !views) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < n; i++, got++) {
		const char *p;
		Py_ssize_t len;

		if (text_of(PyTuple_GET_ITEM(tuple, i), &p, &len, &views[i])) {
			PyErr_Format(PyExc_TypeError, "encode_batch: item %zd is not str or a bytes-like object", i);
			goto out;
		}
		texts[i] = p;
		lens[i] = (size_t)len;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = grist_tokenizer_encode_batch(self->t, texts, lens, (size_t)n, allowed ? GRIST_ENCODE_ALLOW_SPECIAL : 0,
					   threads, &b);
	if (ret)
		snprintf(msg, sizeof(msg), "%s", grist_last_error());
	Py_END_ALLOW_THREADS
	if (ret) {
		gristpy_raise(ret, msg);
		goto out;
	}
	res = Py_BuildValue("(NN)",
			    PyByteArray_FromStringAndSize((const char *)b.ids, (Py_ssize_t)(b.offsets[n] * sizeof(int32_t))),
			    PyBytes_FromStringAndSize((const char *)b.offsets, (Py_ssize_t)((n + 1) * sizeof(uint64_t))));
	grist_token_batch_free(&b);
out:
	for (i = 0; views && i < got; i++)
		if (views[i].obj)
			PyBuffer_Release(&views[i]);
	PyMem_Free(texts);
	PyMem_Free(lens);
	PyMem_Free(views);
	Py_XDECREF(tuple);
	return res;
}

/* decode(ids) -> bytes; ids: a buffer of native int32. */
static PyObject *tokenizer_decode(TokenizerObject *self, PyObject *arg)
{
	Py_buffer view;
	PyObject *out = NULL;
	const char *text = NULL;
	size_t len = 0;
	char msg[1024] = "";
	int ret = -ENOMEM;
	struct grist_tokenizer_ctx *c;

	if (tokenizer_check(self) || PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
		return NULL;
	if (view.len % (Py_ssize_t)sizeof(int32_t)) {
		PyBuffer_Release(&view);
		PyErr_SetString(PyExc_ValueError, "decode: the ids buffer is not a whole number of int32");
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	c = get_ctx(self);
	if (c) {
		ret = grist_tokenizer_decode(c, view.buf, (size_t)view.len / sizeof(int32_t), &text, &len);
		if (ret)
			snprintf(msg, sizeof(msg), "%s", grist_last_error());
	}
	Py_END_ALLOW_THREADS
	if (!ret)
		out = PyBytes_FromStringAndSize(text, (Py_ssize_t)len);
	if (c) {
		Py_BEGIN_ALLOW_THREADS
		put_ctx(self, c);
		Py_END_ALLOW_THREADS
	}
	PyBuffer_Release(&view);
	return ret ? gristpy_raise(ret, msg) : out;
}

/* info() -> dict: kind, vocab_size, bos_id, eos_id, pad_id, unk_id. */
static PyObject *tokenizer_info(TokenizerObject *self, PyObject *unused)
{
	struct grist_tokenizer_info in = { .size = sizeof(in) };

	(void)unused;
	if (tokenizer_check(self))
		return NULL;
	grist_tokenizer_get_info(self->t, &in);
	return Py_BuildValue("{s:s,s:K,s:i,s:i,s:i,s:i}", "kind",
			     in.kind == GRIST_TOKENIZER_SENTENCEPIECE ? "sentencepiece" : "tiktoken", "vocab_size",
			     (unsigned long long)in.vocab_size, "bos_id", in.bos_id, "eos_id", in.eos_id, "pad_id",
			     in.pad_id, "unk_id", in.unk_id);
}

static PyMethodDef tokenizer_methods[] = {
	{ "encode", (PyCFunction)(void (*)(void))tokenizer_encode, METH_VARARGS | METH_KEYWORDS,
	  "encode(text, allowed_special=False) -> bytearray of native int32 ids (the GIL released)." },
	{ "encode_batch", (PyCFunction)(void (*)(void))tokenizer_encode_batch, METH_VARARGS | METH_KEYWORDS,
	  "encode_batch(texts, threads=0, allowed_special=False) -> (bytearray int32 ids, bytes uint64 offsets)." },
	{ "decode", (PyCFunction)tokenizer_decode, METH_O, "decode(ids: int32 buffer) -> bytes." },
	{ "info", (PyCFunction)tokenizer_info, METH_NOARGS, "info() -> dict of kind, vocab_size and the special ids." },
	{ NULL, NULL, 0, NULL },
};

PyTypeObject gristpy_TokenizerType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "grist._grist.Tokenizer",
	.tp_basicsize = sizeof(TokenizerObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Tokenizer(path, *, pattern=None, special_tokens=None, sentencepiece_library=False): grist/text.h; use grist.text.Tokenizer.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)tokenizer_init,
	.tp_dealloc = (destructor)tokenizer_dealloc,
	.tp_methods = tokenizer_methods,
};

/*
 * grist._grist.TextMap(tokenizer, feature=None, add_bos=False, add_eos=False, bos_id=-1, eos_id=-1,
 * max_length=0, allowed_special=False, skip=False, bos_features=0, bos_features_id=0): grist_text_map()
 * for a Loader's _map keyword. It keeps its Tokenizer alive; map(out_max) gives the capsule, which keeps
 * this object alive.
 */
typedef struct {
	PyObject_HEAD
	PyObject *tokenizer;
	struct grist_text_map *m;
	struct gristpy_map map;
	unsigned bos_features; /* as given to grist_text_map_create(), for Batch._maxtext */
	int bos_features_id;
} TextMapObject;

static void textmap_dealloc(TextMapObject *self)
{
	grist_text_map_destroy(self->m);
	Py_XDECREF(self->tokenizer);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int textmap_init(TextMapObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = { "tokenizer", "feature", "add_bos", "add_eos", "bos_id", "eos_id", "max_length",
				  "allowed_special", "skip", "bos_features", "bos_features_id", NULL };
	struct grist_text_map_options o;
	TokenizerObject *tok;
	const char *feature = NULL;
	int add_bos = 0, add_eos = 0, allowed = 0, skip = 0, ret;
	int bos = -1, eos = -1, bos_features_id = 0;
	unsigned bos_features = 0;
	Py_ssize_t max_length = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!|zppiinppIi:TextMap", kwlist, &gristpy_TokenizerType, &tok,
					 &feature, &add_bos, &add_eos, &bos, &eos, &max_length, &allowed, &skip,
					 &bos_features, &bos_features_id) ||
	    tokenizer_check(tok))
		return -1;
	if (self->m) {
		PyErr_SetString(PyExc_ValueError, "TextMap: already made");
		return -1;
	}
	if (max_length < 0) {
		PyErr_SetString(PyExc_ValueError, "TextMap: max_length must be >= 0");
		return -1;
	}
	grist_text_map_options_init(&o);
	o.tokenizer = tok->t;
	o.feature = feature;
	o.add_bos = add_bos;
	o.add_eos = add_eos;
	o.bos_id = bos;
	o.eos_id = eos;
	o.max_length = (size_t)max_length;
	o.flags = allowed ? GRIST_ENCODE_ALLOW_SPECIAL : 0;
	o.on_error = skip ? GRIST_ON_ERROR_SKIP : GRIST_ON_ERROR_FAIL;
	o.bos_features = bos_features;
	o.bos_features_id = bos_features_id;
	ret = grist_text_map_create(&o, &self->m);
	if (ret) {
		gristpy_raise(ret, NULL);
		return -1;
	}
	Py_INCREF(tok);
	self->tokenizer = (PyObject *)tok;
	self->map.fn = grist_text_map;
	self->map.ctx = self->m;
	self->map.id = grist_text_map_id(self->m);
	self->bos_features = bos_features;
	self->bos_features_id = bos_features_id;
	return 0;
}

static PyObject *textmap_map(TextMapObject *self, PyObject *arg)
{
	Py_ssize_t out_max = PyNumber_AsSsize_t(arg, PyExc_OverflowError);

	if (out_max == -1 && PyErr_Occurred())
		return NULL;
	if (!self->m || out_max <= 0) {
		PyErr_SetString(PyExc_ValueError, "TextMap.map: not made, or out_max <= 0");
		return NULL;
	}
	self->map.out_max = (size_t)out_max;
	return gristpy_map_capsule((PyObject *)self, &self->map);
}

static PyObject *textmap_get_id(TextMapObject *self, void *closure)
{
	(void)closure;
	return PyLong_FromUnsignedLongLong(self->m ? self->map.id : 0);
}

static PyObject *textmap_get_bos_features(TextMapObject *self, void *closure)
{
	(void)closure;
	return Py_BuildValue("(iI)", self->bos_features_id, self->bos_features);
}

/* skipped() -> (count, [(dataset, index, reason), ...]): records the map dropped (skip=True). */
static PyObject *textmap_skipped(TextMapObject *self, PyObject *unused)
{
	struct grist_feature_skip s[16];
	size_t n = 0;
	uint64_t count;

	(void)unused;
	count = grist_text_map_skipped(self->m, s, 16, &n);
	return gristpy_skips(count, s, n);
}

static PyMethodDef textmap_methods[] = {
	{ "skipped", (PyCFunction)textmap_skipped, METH_NOARGS,
	  "skipped() -> (count, [(dataset, index, reason), ...]): records the map dropped (skip=True), the first 16." },
	{ "map", (PyCFunction)textmap_map, METH_O, "map(out_max) -> the Loader's _map capsule (out_max bytes per record)." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef textmap_getset[] = {
	{ "id", (getter)textmap_get_id, NULL, "the map's checkpoint id (grist_text_map_id())", NULL },
	{ "bos_features", (getter)textmap_get_bos_features, NULL,
	  "(bos_features_id, bos_features): the BOS replacement made where MaxText's arrays are (Batch._maxtext)", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject gristpy_TextMapType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "grist._grist.TextMap",
	.tp_basicsize = sizeof(TextMapObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "TextMap(tokenizer, feature=None, add_bos=False, add_eos=False, bos_id=-1, eos_id=-1, max_length=0,\n"
		  "allowed_special=False, skip=False, bos_features=0, bos_features_id=0): grist_text_map(); use\n"
		  "grist.text.TextSpec with grist.Loader.",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)textmap_init,
	.tp_dealloc = (destructor)textmap_dealloc,
	.tp_methods = textmap_methods,
	.tp_getset = textmap_getset,
};
