/*
 * The Riegeli hash of bytes that lie in several pieces: libhighwayhash's HighwayHashCat,
 * which only its C++ interface offers. It hashes the pieces as if they were one run of
 * bytes, so a chunk's data can be checked where the reads left it (split by block
 * headers, or half in a slot) without first being gathered into one buffer.
 */
#include <cstddef>
#include <cstdint>

#include <highwayhash/highwayhash_target.h>
#include <highwayhash/instruction_sets.h>

extern "C" {
#include "format/hash.h"
}

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
