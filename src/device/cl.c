/* OpenCL glue of the device stage: error names and codes, event waits, device selection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "device/stage.h"

/* Not in the 1.2 core headers: what the ICD loader returns with no vendor. */
#define GRIST_CL_PLATFORM_NOT_FOUND_KHR (-1001)
#define GRIST_SELECT_MAX_DEVICES 64

const char *grist_cl_error_name(cl_int err)
{
	switch (err) {
#define N(x) case x: return #x
	N(CL_SUCCESS);
	N(CL_DEVICE_NOT_FOUND);
	N(CL_DEVICE_NOT_AVAILABLE);
	N(CL_COMPILER_NOT_AVAILABLE);
	N(CL_MEM_OBJECT_ALLOCATION_FAILURE);
	N(CL_OUT_OF_RESOURCES);
	N(CL_OUT_OF_HOST_MEMORY);
	N(CL_PROFILING_INFO_NOT_AVAILABLE);
	N(CL_MEM_COPY_OVERLAP);
	N(CL_IMAGE_FORMAT_MISMATCH);
	N(CL_IMAGE_FORMAT_NOT_SUPPORTED);
	N(CL_BUILD_PROGRAM_FAILURE);
	N(CL_MAP_FAILURE);
	N(CL_MISALIGNED_SUB_BUFFER_OFFSET);
	N(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
	N(CL_COMPILE_PROGRAM_FAILURE);
	N(CL_LINKER_NOT_AVAILABLE);
	N(CL_LINK_PROGRAM_FAILURE);
	N(CL_DEVICE_PARTITION_FAILED);
	N(CL_KERNEL_ARG_INFO_NOT_AVAILABLE);
	N(CL_INVALID_VALUE);
	N(CL_INVALID_DEVICE_TYPE);
	N(CL_INVALID_PLATFORM);
	N(CL_INVALID_DEVICE);
	N(CL_INVALID_CONTEXT);
	N(CL_INVALID_QUEUE_PROPERTIES);
	N(CL_INVALID_COMMAND_QUEUE);
	N(CL_INVALID_HOST_PTR);
	N(CL_INVALID_MEM_OBJECT);
	N(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
	N(CL_INVALID_IMAGE_SIZE);
	N(CL_INVALID_SAMPLER);
	N(CL_INVALID_BINARY);
	N(CL_INVALID_BUILD_OPTIONS);
	N(CL_INVALID_PROGRAM);
	N(CL_INVALID_PROGRAM_EXECUTABLE);
	N(CL_INVALID_KERNEL_NAME);
	N(CL_INVALID_KERNEL_DEFINITION);
	N(CL_INVALID_KERNEL);
	N(CL_INVALID_ARG_INDEX);
	N(CL_INVALID_ARG_VALUE);
	N(CL_INVALID_ARG_SIZE);
	N(CL_INVALID_KERNEL_ARGS);
	N(CL_INVALID_WORK_DIMENSION);
	N(CL_INVALID_WORK_GROUP_SIZE);
	N(CL_INVALID_WORK_ITEM_SIZE);
	N(CL_INVALID_GLOBAL_OFFSET);
	N(CL_INVALID_EVENT_WAIT_LIST);
	N(CL_INVALID_EVENT);
	N(CL_INVALID_OPERATION);
	N(CL_INVALID_GL_OBJECT);
	N(CL_INVALID_BUFFER_SIZE);
	N(CL_INVALID_MIP_LEVEL);
	N(CL_INVALID_GLOBAL_WORK_SIZE);
	N(CL_INVALID_PROPERTY);
	N(CL_INVALID_IMAGE_DESCRIPTOR);
	N(CL_INVALID_COMPILER_OPTIONS);
	N(CL_INVALID_LINKER_OPTIONS);
	N(CL_INVALID_DEVICE_PARTITION_COUNT);
#undef N
	case GRIST_CL_PLATFORM_NOT_FOUND_KHR:
		return "CL_PLATFORM_NOT_FOUND_KHR";
	default:
		return "CL_UNKNOWN_ERROR";
	}
}

static int cl_errno(cl_int err)
{
	switch (err) {
	case CL_OUT_OF_HOST_MEMORY:
	case CL_OUT_OF_RESOURCES:
	case CL_MEM_OBJECT_ALLOCATION_FAILURE:
		return -ENOMEM;
	case CL_DEVICE_NOT_FOUND:
	case CL_DEVICE_NOT_AVAILABLE:
	case GRIST_CL_PLATFORM_NOT_FOUND_KHR:
		return -ENODEV;
	case CL_INVALID_BUFFER_SIZE:
	case CL_INVALID_VALUE:
		return -EINVAL;
	default:
		/* A failed command, or an API misuse that is grist's bug: report as I/O. */
		return -EIO;
	}
}

int grist_cl_fail(cl_int err, const char *what)
{
	return grist_fail(cl_errno(err), "%s: %s (%d)", what, grist_cl_error_name(err), (int)err);
}

int grist_cl_sub_buffer(cl_mem parent, size_t origin, size_t size, cl_mem *out)
{
	cl_buffer_region r = { .origin = origin, .size = size };
	cl_int err;

	*out = clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
	if (err != CL_SUCCESS) {
		*out = NULL;
		return grist_cl_fail(err, "clCreateSubBuffer");
	}
	return 0;
}

int grist_cl_wait_release(cl_event *ev, unsigned n)
{
	cl_event live[GRIST_SELECT_MAX_DEVICES];
	unsigned i, m = 0;
	cl_int err = CL_SUCCESS;
	int ret = 0;

	for (i = 0; i < n; i++) {
		if (!ev[i])
			continue;
		live[m++] = ev[i];
		/* Wait in batches so any number of events fits the local array. */
		if (m == GRIST_SELECT_MAX_DEVICES) {
			err = clWaitForEvents(m, live);
			if (err != CL_SUCCESS && !ret)
				ret = grist_cl_fail(err, "waiting for a transfer or consumer event");
			m = 0;
		}
	}
	if (m) {
		err = clWaitForEvents(m, live);
		if (err != CL_SUCCESS && !ret)
			ret = grist_cl_fail(err, "waiting for a transfer or consumer event");
	}
	grist_cl_release_events(ev, n);
	return ret;
}

void grist_cl_release_events(cl_event *ev, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		if (ev[i])
			clReleaseEvent(ev[i]);
		ev[i] = NULL;
	}
}

/* Append "platform P 'name': D 'name' (TYPE[, host-unified]), ..." for every platform. */
static void describe_devices(char *buf, size_t cap, cl_platform_id *plats, cl_uint np)
{
	size_t len = 0;
	cl_uint p, d;

#define PUT(...) do { \
		int w_ = snprintf(buf + len, cap - len, __VA_ARGS__); \
		if (w_ < 0 || (size_t)w_ >= cap - len) \
			return; \
		len += (size_t)w_; \
	} while (0)
	buf[0] = '\0';
	for (p = 0; p < np; p++) {
		cl_device_id devs[GRIST_SELECT_MAX_DEVICES];
		char name[96] = "?";
		cl_uint nd = 0;

		clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof(name), name, NULL);
		PUT("%splatform %u '%s':", p ? "; " : "", p, name);
		if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, GRIST_SELECT_MAX_DEVICES, devs, &nd) !=
		    CL_SUCCESS || nd == 0) {
			PUT(" no devices");
			continue;
		}
		if (nd > GRIST_SELECT_MAX_DEVICES)
			nd = GRIST_SELECT_MAX_DEVICES;
		for (d = 0; d < nd; d++) {
			cl_device_type type = 0;
			cl_bool unified = CL_FALSE;

			strcpy(name, "?");
			clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof(name), name, NULL);
			clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof(type), &type, NULL);
			clGetDeviceInfo(devs[d], CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof(unified), &unified, NULL);
			PUT("%s device %u '%s' (%s%s)", d ? "," : "", d, name,
			    type & CL_DEVICE_TYPE_GPU ? "GPU" : type & CL_DEVICE_TYPE_CPU ? "CPU" :
			    type & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator" : "other",
			    unified ? ", host-unified" : "");
		}
	}
#undef PUT
}

/* Parse a decimal index with nothing else around it; -1 when malformed. */
static long parse_index(const char *s, size_t n)
{
	long v = 0;
	size_t i;

	if (n == 0 || n > 6)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

struct selection {
	long platform;
	bool all;
	unsigned n;
	long dev[GRIST_SELECT_MAX_DEVICES];
};

static int parse_selector(const char *sel, struct selection *out)
{
	const char *colon, *p;

	memset(out, 0, sizeof(*out));
	if (strcmp(sel, "all") == 0) {
		out->all = true;
		return 0;
	}
	colon = strchr(sel, ':');
	if (!colon)
		goto bad;
	out->platform = parse_index(sel, (size_t)(colon - sel));
	if (out->platform < 0)
		goto bad;
	p = colon + 1;
	if (strcmp(p, "all") == 0) {
		out->all = true;
		return 0;
	}
	for (;;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		long d = parse_index(p, n);
		unsigned i;

		if (d < 0 || out->n == GRIST_SELECT_MAX_DEVICES)
			goto bad;
		for (i = 0; i < out->n; i++)
			if (out->dev[i] == d)
				return grist_fail(-EINVAL, "OpenCL device selector '%s' names device %ld twice",
						  sel, d);
		out->dev[out->n++] = d;
		if (!end)
			return 0;
		p = end + 1;
	}
bad:
	return grist_fail(-EINVAL, "malformed OpenCL device selector '%s' (want \"P:D\", \"P:D,D,...\", "
			  "\"P:all\" or \"all\")", sel);
}

int grist_cl_select_devices(const char *selector, cl_platform_id *platform,
			    cl_device_id **devices, unsigned *num_devices)
{
	cl_platform_id plats[GRIST_SELECT_MAX_DEVICES];
	cl_device_id devs[GRIST_SELECT_MAX_DEVICES];
	char listing[768];
	struct selection sel;
	cl_uint np = 0, nd = 0;
	cl_device_id *picked;
	unsigned i;
	cl_int err;
	int ret;

	if (!selector)
		selector = getenv("GRIST_OPENCL_DEVICE");
	if (!selector || !*selector)
		selector = "0:0";
	ret = parse_selector(selector, &sel);
	if (ret)
		return ret;

	err = clGetPlatformIDs(GRIST_SELECT_MAX_DEVICES, plats, &np);
	if (err == GRIST_CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && np == 0))
		return grist_fail(-ENODEV, "no OpenCL platform found (the ICD loader found no vendor "
				  "in /etc/OpenCL/vendors or OCL_ICD_VENDORS)");
	if (err != CL_SUCCESS)
		return grist_cl_fail(err, "clGetPlatformIDs");
	if (np > GRIST_SELECT_MAX_DEVICES)
		np = GRIST_SELECT_MAX_DEVICES;
	describe_devices(listing, sizeof(listing), plats, np);
	if ((cl_uint)sel.platform >= np)
		return grist_fail(-ENODEV, "OpenCL device selector '%s': no platform %ld; available: %s",
				  selector, sel.platform, listing);
	err = clGetDeviceIDs(plats[sel.platform], CL_DEVICE_TYPE_ALL, GRIST_SELECT_MAX_DEVICES, devs, &nd);
	if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && nd == 0))
		return grist_fail(-ENODEV, "OpenCL device selector '%s': platform %ld has no devices; "
				  "available: %s", selector, sel.platform, listing);
	if (err != CL_SUCCESS)
		return grist_cl_fail(err, "clGetDeviceIDs");
	if (nd > GRIST_SELECT_MAX_DEVICES)
		nd = GRIST_SELECT_MAX_DEVICES;
	if (sel.all) {
		sel.n = nd;
		for (i = 0; i < nd; i++)
			sel.dev[i] = i;
	}
	for (i = 0; i < sel.n; i++)
		if ((cl_uint)sel.dev[i] >= nd)
			return grist_fail(-ENODEV, "OpenCL device selector '%s': platform %ld has no device "
					  "%ld; available: %s", selector, sel.platform, sel.dev[i], listing);
	picked = calloc(sel.n, sizeof(*picked));
	if (!picked)
		return grist_fail(-ENOMEM, "out of memory selecting OpenCL devices");
	for (i = 0; i < sel.n; i++)
		picked[i] = devs[sel.dev[i]];
	*platform = plats[sel.platform];
	*devices = picked;
	*num_devices = sel.n;
	return 0;
}
