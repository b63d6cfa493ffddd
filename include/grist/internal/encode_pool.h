/*
 * grist/internal/encode_pool.h - UNSTABLE: the writer's chunk encoding on its own, for
 * bench/bench_write.c, which times it on one core and at N threads beside the whole writer.
 * Chunks go in filled with records, come out encoded (simple chunk, hashed) in the order
 * they went in: exactly the work grist_writer_write() hands its pool (src/format/writer_pool.h).
 *
 * Internal API, declared as such: not installed, not exported from libgrist.so (link
 * libgrist.a), no API or ABI promise; it may change in any commit. Define GRIST_INTERNAL
 * before including it to say you know. Errors follow grist/error.h.
 */
#ifndef GRIST_INTERNAL_ENCODE_POOL_H
#define GRIST_INTERNAL_ENCODE_POOL_H

#ifndef GRIST_INTERNAL
#error "grist/internal/encode_pool.h is grist's unstable internal API: define GRIST_INTERNAL to use it"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/error.h"

struct grist_encode_pool;

/*
 * An encoder for chunks as a writer with @writer_options (the official text; its codec,
 * level and window_log apply) encodes them. @threads 0 or 1: on the caller's thread, at
 * submit; N >= 2: N workers over a ring of 2N chunks. Return: 0, -EINVAL (bad options), -ENOMEM, -EAGAIN.
 */
int grist_encode_pool_create(const char *writer_options, unsigned threads, struct grist_encode_pool **out);
void grist_encode_pool_destroy(struct grist_encode_pool *p);

/* Records per chunk in a file written with those options (group_size). */
uint64_t grist_encode_pool_group_size(const struct grist_encode_pool *p);

/* True when every chunk of the ring is submitted and uncollected: collect before submitting. */
bool grist_encode_pool_full(const struct grist_encode_pool *p);

/*
 * Copy @n records (record i is @lens[i] bytes, all back to back at @values) into the next
 * chunk, as the writer copies them, and hand it to the pool. Not while full. 0 or -ENOMEM.
 */
int grist_encode_pool_submit(struct grist_encode_pool *p, const void *values, const uint64_t *lens, size_t n);

/*
 * Wait for the oldest submitted chunk, give its encoded size in *@chunk_len and recycle it.
 * Return: 0; -ENOENT when none is submitted; the encoder's error (message recorded).
 */
int grist_encode_pool_collect(struct grist_encode_pool *p, size_t *chunk_len);

#endif
