/* Riegeli's checksum: 64-bit HighwayHash keyed with "Riegeli/records\n" twice. */
#ifndef GRIST_FORMAT_HASH_H
#define GRIST_FORMAT_HASH_H

#include <stddef.h>
#include <stdint.h>

/* "Riegeli/records\n" read as two little-endian u64, repeated to fill the 256-bit key. */
extern const uint64_t grist_hash_key[4];

/* HighwayHash-64 of @len bytes at @p with the Riegeli key. Thread-safe, pure. */
uint64_t grist_hash(const void *p, size_t len);

/* One piece of a run of bytes (the layout of highwayhash::StringView). */
struct grist_hash_piece {
	const char *data;
	size_t len;
};

/*
 * grist_hash() of the concatenation of @n pieces, without concatenating them
 * (hash_cat.cc). Thread-safe, pure.
 */
uint64_t grist_hash_pieces(const struct grist_hash_piece *pieces, size_t n);

/*
 * grist_hash_pieces() of @n pieces, and bytes [@from, @from + @len) of their
 * concatenation copied to @dst with streaming stores (grist_copy_streaming(), fenced
 * before it returns), in one pass where the CPU has AVX2: a few KiB hashed, then the same
 * bytes, still in L1, copied. @dst is written whatever the hash turns out to be: check
 * it before anyone reads @dst. Thread-safe.
 */
uint64_t grist_hash_pieces_copy(const struct grist_hash_piece *pieces, size_t n, uint64_t from, void *dst,
				size_t len);

/*
 * grist_hash_pieces() of @n pieces, all of them gathered back to back into @dst in the
 * same pass, with ordinary stores: for bytes the caller reads next (a codec's input).
 * Thread-safe.
 */
uint64_t grist_hash_pieces_gather(const struct grist_hash_piece *pieces, size_t n, void *dst);

/*
 * Bytes [@from, @from + @len) of the concatenation of @n pieces copied to @dst, with no
 * hash: streaming stores (fenced before it returns) when @stream, else ordinary ones. The
 * copy half of the two calls above where they cannot fuse it with the hash, and all of
 * what a decoder told not to check data hashes does (GRIST_VERIFY_HEADERS). Thread-safe.
 */
void grist_pieces_copy(const struct grist_hash_piece *pieces, size_t n, uint64_t from, void *dst, size_t len,
		       int stream);

#endif
