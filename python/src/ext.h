/* ext.h - what the grist extension's type files share: the types, errors, locks, path lists (ext.c). */
#ifndef GRISTPY_EXT_H
#define GRISTPY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

#include "grist/format.h"
#include "grist/loader.h"

extern PyObject *gristpy_Error;          /* grist.Error, an OSError subclass (made by the module's init) */
extern PyTypeObject gristpy_ReaderType;
extern PyTypeObject gristpy_WriterType;
extern PyTypeObject gristpy_LoaderType;
extern PyTypeObject gristpy_BatchType;
extern PyTypeObject gristpy_ViewType;
extern PyTypeObject gristpy_FeaturesType;
extern PyTypeObject gristpy_TokenizerType;
extern PyTypeObject gristpy_TextMapType;

/*
 * Raise the exception for a failed grist call, with the message it left on this thread
 * (@msg, copied by the caller before anything else could overwrite it; NULL reads
 * grist_last_error() now). -EINVAL is a bad argument: ValueError. Everything else is a
 * data or I/O error: grist.Error with errno set. Returns NULL for `return gristpy_raise(...)`.
 */
PyObject *gristpy_raise(int code, const char *msg);
/* The remote part of a stats dict (grist/remote.h); a new reference or NULL with an exception. */
struct grist_remote_stats;
struct grist_remote_budget_stats;
PyObject *gristpy_remote_stats(const struct grist_remote_stats *r, const struct grist_remote_budget_stats *b);

/*
 * Every grist object that C calls reach with the GIL released has one lock, because the
 * library's objects take one thread at a time. The lock is only ever waited for with the
 * GIL released, so a thread holding it may always take the GIL back: no lock-order deadlock.
 */
void gristpy_lock(PyThread_type_lock lock);

/* A list of file names as C strings, from a str, a path-like object or a sequence of them. */
struct gristpy_paths {
	char **v;
	size_t n;
};
int gristpy_paths_from(PyObject *obj, struct gristpy_paths *out);
void gristpy_paths_free(struct gristpy_paths *p);

/* example.c: encode_examples(columns, n) -> list[bytes], tf.train.Example records (module function). */
PyObject *gristpy_encode_examples(PyObject *self, PyObject *args);

/* vision.c: grist.vision's module functions, and the dict -> struct grist_vision_transform reader. */
struct grist_vision_transform;
int gristpy_transform_from(PyObject *d, uint64_t seed, struct grist_vision_transform *t);
PyObject *gristpy_vision_box(PyObject *self, PyObject *args);
PyObject *gristpy_vision_apply(PyObject *self, PyObject *args);
PyObject *gristpy_vision_resize(PyObject *self, PyObject *args);
PyObject *gristpy_vision_rrc(PyObject *self, PyObject *args);
PyObject *gristpy_vision_jpeg_region(PyObject *self, PyObject *args);

/* convert.c: grist._grist.convert(), the module function behind grist.convert(). */
PyObject *gristpy_convert(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *gristpy_image_shrink(PyObject *self, PyObject *args);

/*
 * How a batch goes back to the object that lent it (a Loader, loader.c): the batch keeps
 * @lender alive and calls @give_back once release() was asked for and no export is left,
 * or when the batch object itself is freed (every export holds a reference to it). The
 * lender hands its hook over with the batch, so that the types depend one way only:
 * loader.c -> batch.c -> view.c, each owning its own count (live batches, exports).
 */
struct gristpy_lend {
	PyObject *lender;
	void (*give_back)(PyObject *lender, struct grist_batch *b);
	enum grist_batch_layout layout;
	unsigned token_bytes;       /* packing: bytes per token; 0 otherwise */
};

/* batch.c: wrap a delivered batch @b, lent as @from says. */
PyObject *gristpy_batch_new(const struct gristpy_lend *from, struct grist_batch *b);

/*
 * view.c: a read-only buffer over @ndim-dimensional memory that @batch keeps alive, with
 * struct format @format ("B", "Q", "I") and @itemsize, turned into a numpy array that holds
 * the view. The caller has counted the export; the view calls @done(@batch) exactly once:
 * when it is freed, or at once when no array could be made.
 */
PyObject *gristpy_view_array(PyObject *batch, void (*done)(PyObject *batch), const void *buf, int ndim,
			     const Py_ssize_t *shape, const char *format, Py_ssize_t itemsize);

/*
 * A per-record map for the Loader's private _map keyword (features.c makes them): the
 * callback, its context and checkpoint id, and the ragged layout's output bound (0: the
 * library's default). The capsule holds a reference to the object that owns @ctx; the
 * loader keeps the capsule until its engine is destroyed.
 */
struct gristpy_map {
	grist_map_fn fn;
	void *ctx;
	uint64_t id;
	size_t out_max;
};
#define GRISTPY_MAP_CAPSULE "grist._grist.map"
PyObject *gristpy_map_capsule(PyObject *owner, const struct gristpy_map *map);
struct grist_feature_skip;
/* (count, [(dataset, index, reason), ...]) of the records a map dropped with on_error skip (features.c). */
PyObject *gristpy_skips(uint64_t count, const struct grist_feature_skip *s, size_t n);
/* features.c: the module constants of grist/features.h's enums (WIRE_*, DTYPE_*, DECODE_*, VARLEN_*). */
int gristpy_features_add_constants(PyObject *m);

#endif
