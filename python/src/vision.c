/* vision.c - grist.vision's C side: transforms (grist/vision.h) from Python dicts, and private test hooks. */
#include "ext.h"

#include <string.h>

#include "grist/vision.h"
#include "features/vision_internal.h"

/* A float pair from a dict entry, when present. */
static int pair_from(PyObject *d, const char *name, double out[2])
{
	PyObject *v = PyDict_GetItemString(d, name);

	if (!v || v == Py_None)
		return 0;
	if (!PyArg_ParseTuple(v, "dd", &out[0], &out[1])) {
		PyErr_Format(PyExc_ValueError, "transform: %s must be a pair of numbers", name);
		return -1;
	}
	return 0;
}

static int triple_from(PyObject *d, const char *name, float out[3])
{
	PyObject *v = PyDict_GetItemString(d, name);
	double a, b, c;

	if (!v || v == Py_None)
		return 0;
	if (!PyArg_ParseTuple(v, "ddd", &a, &b, &c)) {
		PyErr_Format(PyExc_ValueError, "transform: %s must be three numbers", name);
		return -1;
	}
	out[0] = (float)a;
	out[1] = (float)b;
	out[2] = (float)c;
	return 0;
}

static int u64_from(PyObject *d, const char *name, uint64_t *out)
{
	PyObject *v = PyDict_GetItemString(d, name);

	if (!v || v == Py_None)
		return 0;
	*out = PyLong_AsUnsignedLongLongMask(v);
	return PyErr_Occurred() ? -1 : 0;
}

static int double_from(PyObject *d, const char *name, double *out)
{
	PyObject *v = PyDict_GetItemString(d, name);

	if (!v || v == Py_None)
		return 0;
	*out = PyFloat_AsDouble(v);
	return PyErr_Occurred() ? -1 : 0;
}

/*
 * The dict grist.vision's classes build (_spec()): op, out (h, w), scale, ratio, interp,
 * resize, crop_fraction, flip, mean, std (normalize when given), dtype, layout, max_pixels,
 * scan_limit, channels, decode, exif_orientation, sampler, min_object_covered, exact_resize; the seed is the caller's.
 */
int gristpy_transform_from(PyObject *d, uint64_t seed, struct grist_vision_transform *t)
{
	uint64_t op = 0, interp = 0, resize = 0, dtype = 0, layout = 0, maxpx = 0, scans = 0, channels = 0, decode = 0;
	uint64_t sampler = 0;
	double out[2] = { 0, 0 };

	grist_vision_transform_init(t);
	if (!PyDict_Check(d)) {
		PyErr_SetString(PyExc_TypeError, "transform: a dict from grist.vision expected");
		return -1;
	}
	if (u64_from(d, "op", &op) || pair_from(d, "out", out) || pair_from(d, "scale", t->scale) ||
	    pair_from(d, "ratio", t->ratio) || u64_from(d, "interp", &interp) || u64_from(d, "resize", &resize) ||
	    double_from(d, "crop_fraction", &t->crop_fraction) || double_from(d, "flip", &t->flip) ||
	    triple_from(d, "mean", t->mean) || triple_from(d, "std", t->std) || u64_from(d, "dtype", &dtype) ||
	    u64_from(d, "layout", &layout) || u64_from(d, "max_pixels", &maxpx) || u64_from(d, "scan_limit", &scans) ||
	    u64_from(d, "channels", &channels) || u64_from(d, "decode", &decode) || u64_from(d, "sampler", &sampler) ||
	    double_from(d, "min_object_covered", &t->min_object_covered))
		return -1;
	t->op = (enum grist_vision_op)op;
	t->out_height = (uint32_t)out[0];
	t->out_width = (uint32_t)out[1];
	t->interp = (enum grist_vision_interp)interp;
	t->resize = (uint32_t)resize;
	t->normalize = PyDict_GetItemString(d, "mean") && PyDict_GetItemString(d, "mean") != Py_None;
	t->dtype = (enum grist_dtype)dtype;
	t->layout = (enum grist_vision_layout)layout;
	t->max_pixels = maxpx;
	t->scan_limit = (uint32_t)scans;
	t->channels = (uint32_t)channels;
	t->decode = (enum grist_vision_decode)decode;
	t->sampler = (enum grist_vision_sampler)sampler;
	t->exif_orientation = PyDict_GetItemString(d, "exif_orientation") &&
			      PyObject_IsTrue(PyDict_GetItemString(d, "exif_orientation")) == 1;
	t->exact_resize = PyDict_GetItemString(d, "exact_resize") &&
			  PyObject_IsTrue(PyDict_GetItemString(d, "exact_resize")) == 1;
	t->seed = seed;
	return 0;
}

static PyObject *box_tuple(const struct grist_vision_box *b)
{
	return Py_BuildValue("(iiiii)", b->top, b->left, b->height, b->width, b->flipped);
}

/* vision_box(spec, height, width, seed, epoch, index, key) -> (top, left, height, width, flipped) */
PyObject *gristpy_vision_box(PyObject *self, PyObject *args)
{
	struct grist_vision_transform t;
	struct grist_vision_box b;
	unsigned long long seed, epoch, index;
	unsigned int h, w;
	PyObject *spec;
	const char *key;
	int ret;

	(void)self;
	if (!PyArg_ParseTuple(args, "OIIKKKs", &spec, &h, &w, &seed, &epoch, &index, &key))
		return NULL;
	if (gristpy_transform_from(spec, seed, &t))
		return NULL;
	ret = grist_vision_box(&t, h, w, epoch, index, key, &b);
	if (ret)
		return gristpy_raise(ret, NULL);
	return box_tuple(&b);
}

/* vision_apply(spec, image bytes, seed, epoch, index, key) -> (bytes, box) */
PyObject *gristpy_vision_apply(PyObject *self, PyObject *args)
{
	struct grist_vision_transform t;
	struct grist_vision_box b;
	unsigned long long seed, epoch, index;
	PyObject *spec, *out, *res;
	const char *key;
	Py_buffer img;
	size_t n;
	int ret;

	(void)self;
	if (!PyArg_ParseTuple(args, "Oy*KKKs", &spec, &img, &seed, &epoch, &index, &key))
		return NULL;
	if (gristpy_transform_from(spec, seed, &t)) {
		PyBuffer_Release(&img);
		return NULL;
	}
	n = grist_vision_out_bytes(&t);
	out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n ? n : 1));
	if (!out) {
		PyBuffer_Release(&img);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = grist_vision_apply(&t, img.buf, (size_t)img.len, epoch, index, key, PyBytes_AS_STRING(out), n, &b);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&img);
	if (ret) {
		Py_DECREF(out);
		return gristpy_raise(ret, NULL);
	}
	res = Py_BuildValue("(NN)", out, box_tuple(&b));
	return res;
}

/* _vision_resize(pixels, h, w, c, out_h, out_w, interp[, simd]) -> bytes: the resize alone, for tests. */
PyObject *gristpy_vision_resize(PyObject *self, PyObject *args)
{
	unsigned int h, w, c, oh, ow, interp;
	int simd = 1;
	PyObject *out;
	Py_buffer in;
	int ret;

	(void)self;
	if (!PyArg_ParseTuple(args, "y*IIIIII|p", &in, &h, &w, &c, &oh, &ow, &interp, &simd))
		return NULL;
	if ((size_t)in.len != (size_t)h * w * c || !oh || !ow) {
		PyBuffer_Release(&in);
		PyErr_SetString(PyExc_ValueError, "_vision_resize: the buffer is not h x w x c bytes");
		return NULL;
	}
	out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)oh * ow * c);
	if (!out) {
		PyBuffer_Release(&in);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = gv_resize_with(in.buf, h, w, (size_t)w * c, c, oh, ow, 0, 0, (uint8_t *)PyBytes_AS_STRING(out), oh, ow,
			     (size_t)ow * c, (enum grist_vision_interp)interp, simd);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&in);
	if (ret) {
		Py_DECREF(out);
		return gristpy_raise(ret, NULL);
	}
	return out;
}

/*
 * _vision_rrc(h, w, scale, ratio, uniforms[, sampler, min_covered]) -> (top, left, height, width): the sampler
 * on injected uniforms (0 torchvision's; 1 TF's sample_distorted_bounding_box, its own fallback included;
 * 2 DALI's).
 */
PyObject *gristpy_vision_rrc(PyObject *self, PyObject *args)
{
	double scale[2], ratio[2], *u;
	struct grist_vision_box b = { 0 };
	struct gv_draws d = { 0 };
	unsigned int h, w;
	PyObject *seq, *fast;
	Py_ssize_t n;
	int sampler = 0;
	double covered = 0.1;

	(void)self;
	if (!PyArg_ParseTuple(args, "II(dd)(dd)O|id", &h, &w, &scale[0], &scale[1], &ratio[0], &ratio[1], &seq, &sampler,
			      &covered))
		return NULL;
	fast = PySequence_Fast(seq, "_vision_rrc: uniforms must be a sequence");
	if (!fast)
		return NULL;
	n = PySequence_Fast_GET_SIZE(fast);
	u = PyMem_Malloc(sizeof(double) * (size_t)(n ? n : 1));
	if (!u) {
		Py_DECREF(fast);
		return PyErr_NoMemory();
	}
	for (Py_ssize_t i = 0; i < n; i++)
		u[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
	Py_DECREF(fast);
	if (PyErr_Occurred()) {
		PyMem_Free(u);
		return NULL;
	}
	d.list = u;
	d.n = (size_t)n;
	if (sampler == GRIST_VISION_SAMPLER_TF)
		gv_tf_params(h, w, scale, ratio, covered, &d, &b);
	else if (sampler == GRIST_VISION_SAMPLER_DALI)
		gv_dali_params(h, w, scale, ratio, &d, &b);
	else
		gv_rrc_params(h, w, scale, ratio, &d, &b);
	PyMem_Free(u);
	return Py_BuildValue("(iiii)", b.top, b.left, b.height, b.width);
}

/* _vision_jpeg_region(jpeg, top, left, height, width) -> (bytes, channels): the region decode alone. */
PyObject *gristpy_vision_jpeg_region(PyObject *self, PyObject *args)
{
	unsigned int top, left, h, w, scans = 500;
	struct gv_jpeg_info info;
	PyObject *out;
	Py_buffer in;
	int ret;

	(void)self;
	if (!PyArg_ParseTuple(args, "y*IIII|I", &in, &top, &left, &h, &w, &scans))
		return NULL;
	ret = gv_jpeg_header(in.buf, (size_t)in.len, &info);
	if (ret) {
		PyBuffer_Release(&in);
		return gristpy_raise(ret, NULL);
	}
	out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)h * w * 3 + 1);
	if (!out) {
		PyBuffer_Release(&in);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	ret = gv_jpeg_decode_region(in.buf, (size_t)in.len, top, left, h, w, info.components == 1,
				    (uint8_t *)PyBytes_AS_STRING(out), (size_t)w * (info.components == 1 ? 1 : 3), scans);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&in);
	if (ret) {
		Py_DECREF(out);
		return gristpy_raise(ret, NULL);
	}
	if (_PyBytes_Resize(&out, (Py_ssize_t)h * w * (info.components == 1 ? 1 : 3)))
		return NULL;
	return Py_BuildValue("(Ni)", out, info.components == 1 ? 1 : 3);
}
