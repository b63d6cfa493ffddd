/* The blocking read of a remote object (remote_read.c). */
#ifndef GRIST_IO_REMOTE_READ_H
#define GRIST_IO_REMOTE_READ_H

#include <stdint.h>

#include "io/io.h"

/*
 * grist_remote_read() - read exactly [@off, @off + @len) of @o into @dst, blocking
 * (coalesced, split and retried as any read). Bytes past the object's end are an
 * -EBADMSG error, as a local file that ends early. Thread-safety: any thread.
 */
int grist_remote_read(struct grist_remote_object *o, uint8_t *dst, uint64_t off, uint64_t len);

#endif
