/*
 * grist/fetch.h - random access by index: the records of a list of indices, read with one
 * batched submission.
 *
 * grist_reader_read_batch() reads each chunk it needs with its own pread, one after the
 * other. A fetcher issues the reads of a whole request at once through the io stage
 * (io_uring, or a pread thread pool where io_uring is unavailable), so a request of a few
 * hundred scattered records costs one submission and about one disk latency instead of a
 * few hundred:
 *
 *   indices -> locate each record's chunk (the reader's index) -> sort, one entry per chunk
 *           -> coalesce adjacent chunk extents of a file into one read
 *           -> submit every read of the request in one batch (queue_depth at a time)
 *           -> decode each chunk once -> copy its requested records out, in request order
 *
 * It is the random-access path of the exec stage (src/exec/fetch.c); it uses the reader
 * only for its chunk index and open files, and never the reader's own reads.
 *
 * Errors follow grist/error.h. Thread-safety: a fetcher belongs to one thread at a time;
 * open one per reading thread. It may pass between threads between calls, and it has no
 * read in flight between calls.
 */
#ifndef GRIST_FETCH_H
#define GRIST_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "grist/error.h"
#include "grist/remote.h"
#include "grist/format.h"

#ifdef __cplusplus
extern "C" {
#endif

struct grist_fetcher;

/** How a fetcher reads. */
enum grist_fetch_io {
	GRIST_FETCH_IO_AUTO = 0, /* io_uring when it is usable here, else the pread pool; a dataset of
				    at most 1/8 of RAM whose chunks average at most 16 KiB is mapped
				    instead (see never_map), but for a file that cannot be mapped */
	GRIST_FETCH_IO_URING,    /* io_uring or fail at create */
	GRIST_FETCH_IO_PREAD,    /* the pread thread pool */
};

/** Options of grist_fetcher_create(): grist_fetcher_options_init(), then set what you need. A sized struct. */
struct grist_fetcher_options {
	size_t size;              /* sizeof(struct grist_fetcher_options), set by _init() */
	enum grist_fetch_io io;
	unsigned queue_depth;     /* reads in flight at once (default 256, at most 32768) */
	unsigned pread_threads;   /* the pread pool's threads (default 4) */
	unsigned decode_threads;  /* threads that decode a request's chunks (default 1, at most 64): the
				     caller's and decode_threads - 1 helpers started at create, which
				     share the chunks of a request of 8 or more; a helper that starts
				     late leaves its share to the others, so none waits for it */
	size_t max_read_bytes;    /* read buffer of one wave (default 64 MiB): a request whose chunks
				     take more is read in waves of at most this (a larger chunk
				     alone); bounds the memory a request holds besides its records */
	bool never_map;           /* AUTO reads every file even where it would map a small dataset */
};

/**
 * grist_fetcher_options_init() - zero @opts (every field's default) and set its size.
 * Inline on purpose: the size is the one this caller was compiled with (grist/version.h).
 */
static inline void grist_fetcher_options_init(struct grist_fetcher_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->size = sizeof(*opts);
}

/** One record of a request: valid until the next call on the fetcher, or its destroy. An element of the
 * caller's array: frozen (a new field would be a new struct). */
struct grist_fetch_record {
	const uint8_t *data;
	size_t len;
};

/** Counters since create, see grist_fetcher_stats(). */
struct grist_fetcher_stats {
	const char *backend;      /* "uring" or "pread" */
	uint64_t requests;        /* grist_fetcher_read() calls */
	uint64_t records;         /* records returned */
	uint64_t chunks_decoded;  /* each chunk once per request */
	uint64_t reads;           /* read requests after coalescing (a read above 8 MiB is split) */
	uint64_t submissions;     /* batched submissions to the io stage */
	uint64_t bytes_read;
	struct grist_remote_stats remote; /* the GETs of URL datasets (grist/remote.h) */
	uint64_t mapped_files;    /* files read through their mapping, not the io stage (AUTO) */
	struct grist_remote_budget_stats remote_budget; /* the GETs' in-flight budget (grist/remote.h) */
};

/**
 * grist_fetcher_create() - a fetcher over the dataset of @r.
 * @r:    an open reader; it must outlive the fetcher. The fetcher reads only its immutable
 *        chunk index and registers its file descriptors (read with positioned reads), so
 *        another thread may go on using @r meanwhile.
 * @opts: options, or NULL for defaults.
 * @out:  receives the fetcher.
 *
 * Return: 0; -EINVAL for bad options; -ENOMEM; the io_uring setup error (-EPERM, -ENOSYS,
 * ...) when GRIST_FETCH_IO_URING was asked for and cannot be had.
 * Thread-safety: any thread.
 */
GRIST_API int grist_fetcher_create(const struct grist_reader *r, const struct grist_fetcher_options *opts,
				   struct grist_fetcher **out);

/**
 * grist_fetcher_read() - the records at @indices[0..@n), in request order.
 * @out: @n entries; out[i] is the record at indices[i]. A repeated index is allowed (its
 *       entries share one copy).
 *
 * Every index is checked before anything is read. Each chunk the request touches is read
 * and decoded once; the records are copied into memory the fetcher owns, which the next
 * call reuses.
 *
 * Return: 0; -ERANGE when an index >= the dataset's records (the message names it);
 * -EBADMSG for corrupt data or a file that ends inside a chunk, -EIO and other read errors,
 * each with a message naming the file and byte offset; -ENOTSUP; -EFBIG; -ENOMEM. On error
 * @out is undefined. After a failure of the io stage itself (not of one read) every later
 * call fails with the same code.
 * Thread-safety: one thread at a time per fetcher.
 */
GRIST_API int grist_fetcher_read(struct grist_fetcher *f, const uint64_t *indices, size_t n,
				 struct grist_fetch_record *out);

/** grist_fetcher_stats() - copy the counters. Same thread rule as grist_fetcher_read(). */
GRIST_API void grist_fetcher_stats_sized(const struct grist_fetcher *f, struct grist_fetcher_stats *out, size_t size);

/* grist_fetcher_stats() passes the caller's sizeof: only the fields that fit are written. */
static inline void grist_fetcher_stats(const struct grist_fetcher *f, struct grist_fetcher_stats *out)
{
	grist_fetcher_stats_sized(f, out, sizeof(*out));
}

/**
 * grist_fetcher_destroy() - free the fetcher (not the reader). NULL is fine. Nothing is in
 * flight between calls, so any thread may destroy it once no call is running.
 */
GRIST_API void grist_fetcher_destroy(struct grist_fetcher *f);

#ifdef __cplusplus
}
#endif
#endif
