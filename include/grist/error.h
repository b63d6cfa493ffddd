/*
 * grist/error.h - the one error convention of the whole library.
 *
 * Every grist call that can fail returns 0 (or a non-negative count) on
 * success and a negative errno-style code on failure, like liburing. errno is
 * never an output. Besides the code, the failing call leaves a detailed,
 * human-readable message in thread-local storage that names the file, the
 * byte offset and what is wrong; read it with grist_last_error() on the same
 * thread before the next grist call.
 *
 * The rule: -EINVAL means the request itself cannot work (a bad argument,
 * option or configuration, also one that the size of the data rules out, such
 * as more shards than records), and anything wrong in bytes that were read
 * (records, chunks, footers, checkpoints) or while producing batches gets
 * another code. So the grist CLI exits 2 (usage) for -EINVAL and 1 for every
 * other code, and a loader that was created never fails with -EINVAL.
 *
 * The codes used, and what they mean in grist:
 *   -EINVAL    a bad argument, option or configuration (usage error)
 *   -EBADMSG   corrupt data: a hash, magic, size or structure check failed
 *              (a damaged checkpoint too)
 *   -ENOTSUP   valid data that grist does not support (transposed chunks), or a
 *              feature this build lacks (OpenCL)
 *   -EFBIG     a chunk above grist_max_chunk_bytes() (grist/format.h), or a record
 *              too large for its codec
 *   -EMSGSIZE  a record or batch that does not fit the layout, max_batch_bytes
 *              or the devices' split
 *   -EOVERFLOW a map wrote more than its output room; a writer past 2^56 records
 *   -ERANGE    an index past the end of the dataset
 *   -EIO       the operating system reported an I/O error (others pass through)
 *   -ENOMEM    an allocation failed or a configured memory cap was hit
 *   -ENODEV    no usable device (OpenCL platform or device)
 *   -ESTALE    a checkpoint belongs to another dataset, configuration or
 *              sharding it cannot be restored on
 *   -EBUSY     the caller holds as many batches as it may (grist/loader.h)
 *   -E2BIG     a sized struct from a newer caller sets a field this library does
 *              not know (grist/version.h, docs/architecture.md "A stable ABI")
 *   -EDOM      a count that is not known in advance (grist_loader_num_batches())
 *   -ENOTRECOVERABLE  a loader used in a process fork()ed from the one that made it
 */
#ifndef GRIST_ERROR_H
#define GRIST_ERROR_H

#include <errno.h>
#include <stddef.h>

#include "grist/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * grist_strerror() - a short, static description of an error code.
 * @code: a value returned by a grist call (negative), or 0.
 *
 * Return: a string that lives for the whole program. Never NULL.
 * Thread-safety: safe from any thread.
 */
GRIST_API const char *grist_strerror(int code);

/**
 * grist_last_error() - the detailed message of the last failure on this thread.
 *
 * The message names the file, the byte offset (where one applies) and what
 * is wrong, for example
 * "data.ar: byte 65600: chunk data hash mismatch (stored 0x..., computed 0x...)".
 *
 * Return: a thread-local string, valid until the next grist call on this
 * thread; "" when no failure was recorded. Never NULL.
 */
GRIST_API const char *grist_last_error(void);

/**
 * grist_clear_error() - forget the message of the last failure on this thread.
 */
GRIST_API void grist_clear_error(void);

/**
 * grist_version() - the running library's version, as "MAJOR.MINOR.PATCH"
 * (GRIST_VERSION_STRING of the headers it was built from, grist/version.h).
 */
GRIST_API const char *grist_version(void);

/** grist_version_number() - the running library's GRIST_VERSION_NUMBER. */
GRIST_API unsigned grist_version_number(void);

/* ------------------------------------------------------------------ diagnostics */

/*
 * The library never prints. What it has to say besides an error (a fallback it took,
 * such as the pread pool where io_uring is unavailable) goes to a log callback the
 * caller installs; without one it is dropped. The grist CLI installs one that prints
 * "grist: <message>" on stderr.
 */
enum grist_log_level {
	GRIST_LOG_ERROR = 0,
	GRIST_LOG_WARNING,  /* the library took a slower or different road than asked */
	GRIST_LOG_INFO,
};

/*
 * grist_log_fn - receives one message: a complete line without its newline. Called from
 * whichever thread has something to say (engine threads included), never with a grist
 * lock held, so it may call grist functions; it must be thread-safe.
 */
typedef void (*grist_log_fn)(void *ctx, enum grist_log_level level, const char *message);

/**
 * grist_set_log_callback() - install @fn (NULL: drop every message) for the whole
 * process; @ctx is passed back to it.
 * Thread-safety: safe from any thread; a message being delivered while the callback
 * is replaced goes to the old or the new one.
 */
GRIST_API void grist_set_log_callback(grist_log_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
