/*
 * grist_io_create(): which backend serves each kind of io object. This is the one file that
 * names the backends (fio's ioengines list): they depend on the core (io.c), this depends on
 * them, and nothing depends back on it but the callers.
 */
#include <errno.h>

#include "common/error.h"
#include "io/io.h"

int grist_io_create(enum grist_io_kind kind, const struct grist_io_config *cfg,
		    struct grist_io **out)
{
	const struct grist_io_ops *ops;
	struct grist_io_config rc, inner_cfg;
	struct grist_io *io = NULL, *inner = NULL;
	int ret;

	if (!out)
		return grist_fail(-EINVAL, "grist_io_create: out is NULL");
	*out = NULL;
	ret = grist_io_config_resolve(kind, cfg, &rc);
	if (ret)
		return ret;
	switch (kind) {
	case GRIST_IO_AUTO:
		ops = grist_io_probe(NULL, 0) == 0 ? &grist_io_uring_ops : &grist_io_pread_ops;
		break;
	case GRIST_IO_URING:
		ops = &grist_io_uring_ops;
		break;
	case GRIST_IO_PREAD:
		ops = &grist_io_pread_ops;
		break;
	case GRIST_IO_FAULT:
		ops = &grist_io_fault_ops;
		break;
	case GRIST_IO_HTTP:
		ops = &grist_io_http_ops;
		break;
	default:
		return grist_fail(-EINVAL, "unknown io backend kind %d", (int)kind);
	}
	ret = grist_io_create_ops(ops, &rc, &io);
	if (ret)
		return ret;
	if (kind == GRIST_IO_FAULT) {
		/* The injector's own backend, of the inner kind, with the same caps and no faults. */
		inner_cfg = rc;
		inner_cfg.fault.faults = NULL;
		inner_cfg.fault.nr_faults = 0;
		ret = grist_io_create(rc.fault.inner, &inner_cfg, &inner);
		if (ret) {
			grist_io_destroy(io);
			return ret;
		}
		grist_io_fault_wrap(io, inner);
	}
	*out = io;
	return 0;
}
