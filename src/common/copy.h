/* Copies into memory this core will not read again soon: batch rows, written once. */
#ifndef GRIST_COMMON_COPY_H
#define GRIST_COMMON_COPY_H

#include <stddef.h>

/*
 * grist_copy_streaming() - memcpy() with streaming (non-temporal) stores for runs of
 * 512 bytes or more: no read-for-ownership of @dst and no eviction of the caller's
 * working set. The stores are weakly ordered: call grist_copy_streaming_done() before
 * @dst is handed to another thread.
 */
void grist_copy_streaming(void *dst, const void *src, size_t len);

/* Order every streaming store of this thread before the stores that follow (sfence). */
void grist_copy_streaming_done(void);

#endif
