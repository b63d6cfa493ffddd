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

#endif
