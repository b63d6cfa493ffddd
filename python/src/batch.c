/* batch.c - grist._grist.Batch: one delivered batch; numpy views and DLPack over its pinned slot. */
#include "ext.h"

#include <string.h>

#include "dlpack.h"

typedef struct {
	PyObject_HEAD
	PyObject *loader;           /* strong: the loader outlives its batches */
	void (*give_back)(PyObject *loader, struct grist_batch *b);
	struct grist_batch *b;      /* NULL once given back */
	Py_ssize_t exports;         /* live array views and DLPack tensors */
	bool release_asked;         /* release() was called: give back when exports reach 0 */
	enum grist_batch_layout layout;
	unsigned token_bytes;       /* packing: bytes per token (the dtype of .data); 0 otherwise */
} BatchObject;

/* The struct format of one token of @token_bytes (1, 2 or 4): numpy's uint8, uint16, uint32. */
static const char *token_format(unsigned token_bytes)
{
	return token_bytes == 4 ? "I" : token_bytes == 2 ? "H" : "B";
}

/*
 * The shape of .data, of its DLPack export and (packed) of the per-token arrays: packed,
 * (rows, L) tokens; ragged, the bytes; fixed and padded, (rows, record_bytes). Returns ndim.
 */
static int data_shape(const BatchObject *self, const struct grist_batch *b, Py_ssize_t shape[2])
{
	if (self->token_bytes) {
		shape[0] = (Py_ssize_t)b->num_rows;
		shape[1] = (Py_ssize_t)(b->record_bytes / self->token_bytes);
		return 2;
	}
	if (self->layout == GRIST_LAYOUT_RAGGED) {
		shape[0] = (Py_ssize_t)b->bytes;
		return 1;
	}
	shape[0] = (Py_ssize_t)b->num_rows;
	shape[1] = (Py_ssize_t)b->record_bytes;
	return 2;
}

/* Bytes of one element of .data: the token width when packing, else 1. */
static unsigned data_item_bytes(const BatchObject *self)
{
	return self->token_bytes ? self->token_bytes : 1;
}

PyObject *gristpy_batch_new(const struct gristpy_lend *from, struct grist_batch *b)
{
	BatchObject *self = PyObject_New(BatchObject, &gristpy_BatchType);

	if (!self)
		return NULL;
	Py_INCREF(from->lender);
	self->loader = from->lender;
	self->give_back = from->give_back;
	self->b = b;
	self->exports = 0;
	self->release_asked = false;
	self->layout = from->layout;
	self->token_bytes = from->token_bytes;
	return (PyObject *)self;
}

static void give_back(BatchObject *self)
{
	struct grist_batch *b = self->b;

	if (!b)
		return;
	self->b = NULL;
	self->give_back(self->loader, b);
}

/*
 * The exports of a batch (numpy array views, DLPack tensors): the slot goes back to the
 * loader once release() was asked for and no export is left.
 */
static void export_add(BatchObject *self)
{
	self->exports++;
}

static void export_done(PyObject *obj)
{
	BatchObject *self = (BatchObject *)obj;

	if (--self->exports == 0 && self->release_asked)
		give_back(self);
}

static void batch_dealloc(BatchObject *self)
{
	give_back(self);
	Py_XDECREF(self->loader);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Access to the bytes: only while the batch is held and release() was not asked for. */
static struct grist_batch *batch_held(BatchObject *self)
{
	if (self->b && !self->release_asked)
		return self->b;
	PyErr_SetString(PyExc_ValueError, "grist.Batch: the batch was released");
	return NULL;
}

/* A numpy array over @buf (memory of this batch) that holds one export until it is freed. */
static PyObject *batch_view(BatchObject *self, const void *buf, int ndim, const Py_ssize_t *shape,
			    const char *format, Py_ssize_t itemsize)
{
	export_add(self);
	return gristpy_view_array((PyObject *)self, export_done, buf, ndim, shape, format, itemsize);
}

static PyObject *batch_get_data(BatchObject *self, void *closure)
{
	struct grist_batch *b = batch_held(self);
	Py_ssize_t shape[2];
	int ndim;

	(void)closure;
	if (!b)
		return NULL;
	ndim = data_shape(self, b, shape);
	return batch_view(self, b->data, ndim, shape, token_format(self->token_bytes),
			  (Py_ssize_t)data_item_bytes(self));
}

/*
 * A per-record array of the batch: @which 'o' offsets (ragged only), 'i' indices, 'd' datasets;
 * or a per-token array of a packed batch: 's' segment ids, 'p' positions. An array the batch
 * does not have (offsets of a fixed layout; indices of packed rows; segment ids unpacked) is None.
 */
static PyObject *batch_array(BatchObject *self, void *closure)
{
	struct grist_batch *b = batch_held(self);
	char which = *(const char *)closure;
	Py_ssize_t n, shape[2];

	if (!b)
		return NULL;
	if (which == 's' || which == 'p') {
		const uint32_t *v = which == 's' ? b->segment_ids : b->positions;

		if (!v || !self->token_bytes)
			Py_RETURN_NONE;
		/* uint32 in C; int32 for the caller (values stay below 2^24, the longest row) */
		return batch_view(self, v, data_shape(self, b, shape), shape, "i", 4);
	}
	if ((which == 'd' && !b->datasets) || (which == 'i' && !b->indices) || (which == 'e' && !b->epochs))
		Py_RETURN_NONE;
	n = (Py_ssize_t)b->num_records;
	if (which == 'e')
		return batch_view(self, b->epochs, 1, &n, "Q", 8);
	if (which == 'd')
		return batch_view(self, b->datasets, 1, &n, "I", 4);
	if (which == 'i')
		return batch_view(self, b->indices, 1, &n, "Q", 8);
	if (!b->offsets)
		Py_RETURN_NONE;
	n++;
	return batch_view(self, b->offsets, 1, &n, "Q", 8);
}

static PyObject *batch_get_num_records(BatchObject *self, void *closure)
{
	struct grist_batch *b = batch_held(self);

	(void)closure;
	return b ? PyLong_FromSize_t(b->num_records) : NULL;
}

static PyObject *batch_get_sequence(BatchObject *self, void *closure)
{
	struct grist_batch *b = batch_held(self);

	(void)closure;
	return b ? PyLong_FromUnsignedLongLong(b->sequence) : NULL;
}

static PyObject *batch_get_epoch(BatchObject *self, void *closure)
{
	struct grist_batch *b = batch_held(self);

	(void)closure;
	if (!b)
		return NULL;
	if (!b->epochs || !b->num_records)
		Py_RETURN_NONE;
	return PyLong_FromUnsignedLongLong(b->epochs[0]);
}

static PyObject *batch_repr(BatchObject *self)
{
	static const char *const layouts[] = { "ragged", "fixed", "padded" };
	const struct grist_batch *b = self->b;
	char epoch[32];

	if (!b || self->release_asked)
		return PyUnicode_FromString("grist.Batch(released)");
	if (b->epochs && b->num_records)
		snprintf(epoch, sizeof(epoch), "%llu", (unsigned long long)b->epochs[0]);
	else
		snprintf(epoch, sizeof(epoch), "None");
	return PyUnicode_FromFormat("grist.Batch(records=%zu, bytes=%zu, epoch=%s, layout='%s')", b->num_records,
				    b->bytes, epoch, self->token_bytes ? "packed" : layouts[self->layout]);
}

static PyObject *batch_get_released(BatchObject *self, void *closure)
{
	(void)closure;
	return PyBool_FromLong(!self->b || self->release_asked);
}

/* records(): copies. Ragged: each record's bytes; fixed/padded: each real row (pad bytes included);
 * packed: each row's token bytes. */
static PyObject *batch_records(BatchObject *self, PyObject *unused)
{
	struct grist_batch *b = batch_held(self);
	PyObject *list, *r;
	size_t i;

	(void)unused;
	if (!b)
		return NULL;
	list = PyList_New((Py_ssize_t)b->num_records);
	if (!list)
		return NULL;
	for (i = 0; i < b->num_records; i++) {
		if (b->offsets)
			r = PyBytes_FromStringAndSize((const char *)b->data + b->offsets[i],
						      (Py_ssize_t)(b->offsets[i + 1] - b->offsets[i]));
		else
			r = PyBytes_FromStringAndSize((const char *)b->data + i * b->record_bytes,
						      (Py_ssize_t)b->record_bytes);
		if (!r) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, r);
	}
	return list;
}

/*
 * _maxtext(pad_id, batch_size, bos_id=0, bos_where=0): a packed batch of 4-byte tokens as
 * MaxText's six arrays, made in one pass into one bytearray of 6 x max(rows, batch_size) x L
 * int32: inputs, targets (inputs shifted left, pad_id last), inputs_segmentation,
 * targets_segmentation (shifted left, 0 last and wherever targets == pad_id),
 * inputs_position, targets_position; rows past the batch's are pad_id rows (batch_and_pad).
 * grist.text builds the dict from it. On the consumer's thread, which serves every worker:
 * the numpy copies, shifts and compares it replaces took about 90 us a batch of 8 x 2048,
 * most of that thread's time per batch (docs/tuning.md, "The loader's serial share"). One
 * allocation, not six: six of 64 KiB each came back from the system with their pages to fault
 * in again, every batch.
 *
 * bos_where (bit 0: inputs, bit 1: targets) is Grain's BOS replacement on those features
 * alone (ConcatThenSplitIterDataset's bos_features), for a batch packed without it: a
 * feature named has bos_id in every segment's first cell (position 0, segment id not 0)
 * before MaxText's shift, so targets[j] takes BOS where cell j + 1 begins a segment. The
 * packer replaces in the one stream both come from, so it cannot give one without the other.
 */
static PyObject *batch_maxtext(BatchObject *self, PyObject *args)
{
	struct grist_batch *b = batch_held(self);
	Py_ssize_t batch_size, rows, total, L, r, j, n;
	PyObject *out;
	int32_t *in, *tg, *sg, *ts, *ps, *tp;
	int pad, bos = 0, where = 0;

	if (!b || !PyArg_ParseTuple(args, "in|ii:_maxtext", &pad, &batch_size, &bos, &where))
		return NULL;
	if (self->token_bytes != 4 || !b->segment_ids || !b->positions) {
		PyErr_SetString(PyExc_ValueError, "grist.Batch._maxtext: not a packed batch of 4-byte tokens");
		return NULL;
	}
	rows = (Py_ssize_t)b->num_rows;
	L = (Py_ssize_t)(b->record_bytes / 4);
	total = rows > batch_size ? rows : batch_size;
	if (L < 1 || total > PY_SSIZE_T_MAX / 24 / L) {
		PyErr_SetString(PyExc_ValueError, "grist.Batch._maxtext: bad batch shape");
		return NULL;
	}
	n = total * L; /* int32 per array */
	out = PyByteArray_FromStringAndSize(NULL, 6 * n * 4);
	if (!out)
		return NULL;
	in = (int32_t *)PyByteArray_AS_STRING(out);
	tg = in + n, sg = tg + n, ts = sg + n, ps = ts + n, tp = ps + n;
	for (r = 0; r < total; r++, in += L, tg += L, sg += L, ts += L, ps += L, tp += L) {
		if (r >= rows) {
			for (j = 0; j < L; j++) {
				in[j] = tg[j] = sg[j] = ps[j] = tp[j] = pad;
				ts[j] = 0;
			}
			continue;
		}
		memcpy(in, (const uint8_t *)b->data + r * L * 4, (size_t)L * 4);
		memcpy(sg, b->segment_ids + r * L, (size_t)L * 4);
		memcpy(ps, b->positions + r * L, (size_t)L * 4);
		memcpy(tp, ps, (size_t)L * 4);
		for (j = 0; j + 1 < L; j++) {
			tg[j] = (where & 2) && ps[j + 1] == 0 && sg[j + 1] ? bos : in[j + 1];
			ts[j] = tg[j] == pad ? 0 : sg[j + 1];
		}
		tg[L - 1] = pad;
		ts[L - 1] = 0;
		if (where & 1) /* after targets took the row as packed */
			for (j = 0; j < L; j++)
				if (ps[j] == 0 && sg[j])
					in[j] = bos;
	}
	return out;
}

static PyObject *batch_release(BatchObject *self, PyObject *unused)
{
	(void)unused;
	self->release_asked = true;
	if (self->exports == 0)
		give_back(self);
	Py_RETURN_NONE;
}

static PyObject *batch_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	if (!batch_held((BatchObject *)self))
		return NULL;
	Py_INCREF(self);
	return self;
}

static PyObject *batch_exit(PyObject *self, PyObject *args)
{
	(void)args;
	return batch_release((BatchObject *)self, NULL);
}

/* ---- DLPack ---- */

struct dl_export {
	gristpy_dl_managed managed;
	int64_t shape[2];
	PyObject *batch;
};

/* May run on any thread, with or without the GIL (a consumer frees the tensor when done). */
static void dl_deleter(gristpy_dl_managed *m)
{
	struct dl_export *e = m->manager_ctx;
	PyGILState_STATE g = PyGILState_Ensure();

	export_done(e->batch);
	Py_DECREF(e->batch);
	free(e);
	PyGILState_Release(g);
}

static void dl_capsule_destructor(PyObject *capsule)
{
	gristpy_dl_managed *m;

	/* A consumer that took the tensor renamed the capsule and owns it now. */
	if (PyCapsule_IsValid(capsule, "used_dltensor"))
		return;
	m = PyCapsule_GetPointer(capsule, "dltensor");
	if (!m) {
		PyErr_Clear();
		return;
	}
	m->deleter(m);
}

static PyObject *batch_dlpack(BatchObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = { "stream", "max_version", "dl_device", "copy", NULL };
	PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
	struct grist_batch *b = batch_held(self);
	struct dl_export *e;
	Py_ssize_t shape[2];
	PyObject *capsule;
	int i;

	if (!b)
		return NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOOO:__dlpack__", kwlist, &stream, &max_version, &dl_device,
					 &copy))
		return NULL;
	if (copy == Py_True) {
		PyErr_SetString(PyExc_BufferError, "grist.Batch: __dlpack__ exports without a copy; use records()");
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return PyErr_NoMemory();
	e->managed.dl_tensor.data = (void *)b->data;
	e->managed.dl_tensor.device.device_type = GRISTPY_DL_CPU;
	e->managed.dl_tensor.dtype.code = GRISTPY_DL_UINT;
	e->managed.dl_tensor.dtype.bits = (uint8_t)(8 * data_item_bytes(self));
	e->managed.dl_tensor.dtype.lanes = 1;
	e->managed.dl_tensor.ndim = data_shape(self, b, shape);
	for (i = 0; i < e->managed.dl_tensor.ndim; i++)
		e->shape[i] = (int64_t)shape[i];
	e->managed.dl_tensor.shape = e->shape;
	e->managed.manager_ctx = e;
	e->managed.deleter = dl_deleter;
	Py_INCREF(self);
	e->batch = (PyObject *)self;
	export_add(self);
	capsule = PyCapsule_New(&e->managed, "dltensor", dl_capsule_destructor);
	if (!capsule)
		dl_deleter(&e->managed);
	return capsule;
}

static PyObject *batch_dlpack_device(BatchObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	return Py_BuildValue("(ii)", GRISTPY_DL_CPU, 0);
}

static PyGetSetDef batch_getset[] = {
	{ "data", (getter)batch_get_data, NULL,
	  "numpy uint8 view of the batch's bytes: 1-D (ragged) or (rows, record_bytes) (fixed, padded);\n"
	  "packed: (rows, pack_length) tokens, uint8/uint16/uint32 for token_bytes 1/2/4.", NULL },
	{ "offsets", (getter)batch_array, NULL, "ragged: numpy uint64, num_records + 1 offsets; else None.", "o" },
	{ "indices", (getter)batch_array, NULL,
	  "numpy uint64: each record's index within its dataset (None when packing).", "i" },
	{ "datasets", (getter)batch_array, NULL, "numpy uint32: each record's dataset (None when packing).", "d" },
	{ "segment_ids", (getter)batch_array, NULL,
	  "packed: numpy int32 (rows, pack_length): 1, 2, ... per sequence of a row, 0 for padding;\n"
	  "else None.", "s" },
	{ "positions", (getter)batch_array, NULL,
	  "packed: numpy int32 (rows, pack_length): 0, 1, ... within each sequence, 0 for padding;\n"
	  "else None.", "p" },
	{ "epochs", (getter)batch_array, NULL,
	  "numpy uint64: each record's epoch of its dataset (None when packing).", "e" },
	{ "epoch", (getter)batch_get_epoch, NULL,
	  "the epoch of the batch's first record (of its dataset, when mixing); None when packing.", NULL },
	{ "num_records", (getter)batch_get_num_records, NULL, "records in the batch (pad rows not counted).", NULL },
	{ "sequence", (getter)batch_get_sequence, NULL, "0 for the first batch of a run; continues across resume.", NULL },
	{ "released", (getter)batch_get_released, NULL, "True once release() was called.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyMethodDef batch_methods[] = {
	{ "records", (PyCFunction)batch_records, METH_NOARGS, "records() -> list[bytes]: copies of the records." },
	{ "_maxtext", (PyCFunction)batch_maxtext, METH_VARARGS,
	  "_maxtext(pad_id, batch_size, bos_id=0, bos_where=0) -> bytearray: a packed batch as MaxText's\n"
	  "six arrays (grist.text's outputs=\"maxtext\"), copied: int32, 6 x max(rows, batch_size) x\n"
	  "pack_length; bos_where (bit 0 inputs, bit 1 targets) replaces those features' segment-first\n"
	  "tokens with bos_id before the shift, as Grain's bos_features." },
	{ "release", (PyCFunction)batch_release, METH_NOARGS,
	  "release(): give the slot back to the loader now, or as soon as the arrays taken from this\n"
	  "batch are gone. The batch's fields are unusable afterwards." },
	{ "__enter__", batch_enter, METH_NOARGS, NULL },
	{ "__exit__", batch_exit, METH_VARARGS, NULL },
	{ "__dlpack__", (PyCFunction)(void (*)(void))batch_dlpack, METH_VARARGS | METH_KEYWORDS,
	  "DLPack export of .data (CPU; uint8, or the token dtype when packing), without a copy; the\n"
	  "tensor keeps the batch alive." },
	{ "__dlpack_device__", (PyCFunction)batch_dlpack_device, METH_NOARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

PyTypeObject gristpy_BatchType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "grist._grist.Batch",
	.tp_basicsize = sizeof(BatchObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A batch from grist.Loader: zero-copy views of a pinned batch slot.",
	.tp_dealloc = (destructor)batch_dealloc,
	.tp_getset = batch_getset,
	.tp_methods = batch_methods,
	.tp_repr = (reprfunc)batch_repr,
};
