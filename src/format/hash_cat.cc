/*
 * The Riegeli hash of bytes that lie in several pieces: libhighwayhash's HighwayHashCat,
 * which only its C++ interface offers. It hashes the pieces as if they were one run of
 * bytes, so a chunk's data can be checked where the reads left it (split by block
 * headers, or half in a slot) without first being gathered into one buffer. Also where
 * grist_hash_pieces_copy() and grist_hash_pieces_gather() choose between the fused pass of
 * hash_copy_avx2.cc and two passes.
 */
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <highwayhash/highwayhash_target.h>
#include <highwayhash/instruction_sets.h>

extern "C" {
#include "common/copy.h"
#include "format/hash.h"
#include "grist_config.h"
}

#if GRIST_HAVE_HASH_COPY_AVX2
extern "C" uint64_t grist_hash_pieces_copy_avx2(const struct grist_hash_piece *pieces, size_t n, uint64_t from,
						void *dst, size_t len, int stream);
#endif

static_assert(sizeof(grist_hash_piece) == sizeof(highwayhash::StringView) &&
		      offsetof(grist_hash_piece, data) == offsetof(highwayhash::StringView, data) &&
		      offsetof(grist_hash_piece, len) == offsetof(highwayhash::StringView, num_bytes),
	      "struct grist_hash_piece must have the layout of highwayhash::StringView");

extern "C" uint64_t grist_hash_pieces(const struct grist_hash_piece *pieces, size_t n)
{
	highwayhash::HHResult64 out = 0;

	highwayhash::InstructionSets::Run<highwayhash::HighwayHashCat>(
		*reinterpret_cast<const highwayhash::HHKey *>(grist_hash_key),
		reinterpret_cast<const highwayhash::StringView *>(pieces), n, &out);
	return out;
}

extern "C" void grist_pieces_copy(const struct grist_hash_piece *pieces, size_t n, uint64_t from, void *dst,
				  size_t len, int stream)
{
	uint64_t pos = 0, end = from + len;
	uint8_t *to = static_cast<uint8_t *>(dst);

	for (size_t k = 0; k < n && pos < end; pos += pieces[k].len, k++) {
		uint64_t a = pos > from ? pos : from, b = pos + pieces[k].len < end ? pos + pieces[k].len : end;

		if (a < b) {
			if (stream)
				grist_copy_streaming(to, pieces[k].data + (a - pos), (size_t)(b - a));
			else
				memcpy(to, pieces[k].data + (a - pos), (size_t)(b - a));
			to += b - a;
		}
	}
	if (stream)
		grist_copy_streaming_done();
}

/* Two passes, for CPUs without AVX2: the hash brings the bytes into cache for the copy. */
static uint64_t hash_then_copy(const struct grist_hash_piece *pieces, size_t n, uint64_t from, void *dst, size_t len,
			       int stream)
{
	uint64_t hash = grist_hash_pieces(pieces, n);

	grist_pieces_copy(pieces, n, from, dst, len, stream);
	return hash;
}

static uint64_t hash_copy(const struct grist_hash_piece *pieces, size_t n, uint64_t from, void *dst, size_t len,
			  int stream)
{
#if GRIST_HAVE_HASH_COPY_AVX2
	/* a load of libgcc's CPU model, filled in before main() */
	if (__builtin_cpu_supports("avx2"))
		return grist_hash_pieces_copy_avx2(pieces, n, from, dst, len, stream);
#endif
	return hash_then_copy(pieces, n, from, dst, len, stream);
}

extern "C" uint64_t grist_hash_pieces_copy(const struct grist_hash_piece *pieces, size_t n, uint64_t from,
					   void *dst, size_t len)
{
	return hash_copy(pieces, n, from, dst, len, 1);
}

extern "C" uint64_t grist_hash_pieces_gather(const struct grist_hash_piece *pieces, size_t n, void *dst)
{
	size_t len = 0;

	for (size_t k = 0; k < n; k++)
		len += pieces[k].len;
	return hash_copy(pieces, n, 0, dst, len, 0);
}
