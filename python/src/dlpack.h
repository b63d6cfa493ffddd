/*
 * dlpack.h - the DLPack structures (ABI version 0.x, the unversioned "dltensor" capsule)
 * that grist.Batch.__dlpack__ exports. Only what a CPU uint8 tensor needs is declared;
 * the layout is fixed by the DLPack specification, so numpy, JAX and torch read it.
 */
#ifndef GRISTPY_DLPACK_H
#define GRISTPY_DLPACK_H

#include <stdint.h>

enum { GRISTPY_DL_CPU = 1 };      /* DLDeviceType kDLCPU */
enum { GRISTPY_DL_UINT = 1 };     /* DLDataTypeCode kDLUInt */

typedef struct {
	int32_t device_type;
	int32_t device_id;
} gristpy_dl_device;

typedef struct {
	uint8_t code;
	uint8_t bits;
	uint16_t lanes;
} gristpy_dl_dtype;

typedef struct {
	void *data;
	gristpy_dl_device device;
	int32_t ndim;
	gristpy_dl_dtype dtype;
	int64_t *shape;
	int64_t *strides;         /* NULL: compact row-major */
	uint64_t byte_offset;
} gristpy_dl_tensor;

typedef struct gristpy_dl_managed {
	gristpy_dl_tensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct gristpy_dl_managed *self);
} gristpy_dl_managed;

#endif
