/* Internal side of the error convention: record a detailed message and return the code. */
#ifndef GRIST_COMMON_ERROR_H
#define GRIST_COMMON_ERROR_H

#include <stdint.h>
#include "grist/error.h"

#define GRIST_PRINTF(f, a) __attribute__((format(printf, f, a)))

/*
 * grist_fail() - record "<message>" as this thread's last error; returns @code.
 * Use as `return grist_fail(-EINVAL, "batch size must be > 0");`.
 */
int grist_fail(int code, const char *fmt, ...) GRIST_PRINTF(2, 3);

/*
 * grist_fail_at() - record "<path>: byte <offset>: <message>"; returns @code.
 * The shape every data error takes, so users can find the bad bytes.
 */
int grist_fail_at(int code, const char *path, uint64_t offset, const char *fmt, ...)
	GRIST_PRINTF(4, 5);

/*
 * grist_fail_prefix() - put "<prefix>: " before the message already recorded
 * (a caller adding context, such as which record of a batch failed); returns @code.
 */
int grist_fail_prefix(int code, const char *fmt, ...) GRIST_PRINTF(2, 3);

/*
 * grist_log() - hand a diagnostic to the caller's log callback (grist_set_log_callback()),
 * or drop it when none is installed. The library's only way to say something that is
 * not an error: it never writes to stdout or stderr.
 */
void grist_log(enum grist_log_level level, const char *fmt, ...) GRIST_PRINTF(2, 3);

/*
 * grist_sized_in() - read a caller's sized struct (leading `size_t size`, grist/version.h's
 * rule): copy what fits of @src into @dst (@dst_size bytes, the library's own struct),
 * zero the rest. A caller built against an older, shorter struct keeps working: its
 * missing fields read as 0, which is every field's default.
 * Return: 0; -EINVAL when @src is NULL or src->size is smaller than the size field itself (the struct
 * was not initialised with its _init()), or -E2BIG when the caller's struct is longer
 * than the library's and its extra bytes are not all zero (a newer caller asking for
 * something this library cannot do). @name goes into the message.
 */
int grist_sized_in(void *dst, size_t dst_size, const void *src, const char *name);

/*
 * grist_sized_out() - write @src (@src_size bytes, the library's struct) to the caller's
 * @dst of @dst_size bytes: only what fits, so an older caller's shorter struct is never
 * overrun.
 */
void grist_sized_out(void *dst, size_t dst_size, const void *src, size_t src_size);

#endif
