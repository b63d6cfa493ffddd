/* Block header building and checking, and the position arithmetic Riegeli writers use. */
#include <errno.h>
#include <string.h>

#include "common/error.h"
#include "format/block.h"
#include "format/hash.h"
#include "format/le.h"

uint64_t grist_block_add_with_overhead(uint64_t begin, uint64_t len)
{
	uint64_t blocks = (len + (begin + GRIST_BLOCK_USABLE - 1) % GRIST_BLOCK_SIZE) / GRIST_BLOCK_USABLE;
	uint64_t end;

	if (len > UINT64_MAX / 2 || begin > UINT64_MAX / 4)
		return UINT64_MAX;
	end = begin + len + GRIST_BLOCK_HEADER_SIZE * blocks;
	return end < begin ? UINT64_MAX : end;
}

uint64_t grist_chunk_end(uint64_t begin, uint64_t data_size, uint64_t num_records)
{
	uint64_t a, b;

	if (data_size > UINT64_MAX / 2 || num_records > UINT64_MAX / 4 || begin > UINT64_MAX / 4)
		return UINT64_MAX;
	a = grist_block_add_with_overhead(begin, GRIST_CHUNK_HEADER_SIZE + data_size);
	b = grist_block_round_up_chunk_boundary(begin + num_records);
	return a > b ? a : b;
}

void grist_block_header_build(uint8_t out[24], uint64_t block_begin, uint64_t chunk_begin,
			      uint64_t chunk_end)
{
	grist_le64_put(out + 8, block_begin - chunk_begin);
	grist_le64_put(out + 16, chunk_end - block_begin);
	grist_le64_put(out, grist_hash(out + 8, 16));
}

int grist_block_header_check(const uint8_t hdr[24], uint64_t block_begin, uint64_t chunk_begin,
			     uint64_t chunk_end, const char *path)
{
	uint64_t stored = grist_le64_get(hdr), computed = grist_hash(hdr + 8, 16);
	uint64_t prev = grist_le64_get(hdr + 8), next = grist_le64_get(hdr + 16);

	if (stored != computed)
		return grist_fail_at(-EBADMSG, path, block_begin,
				     "block header hash mismatch (stored 0x%016llx, computed 0x%016llx)",
				     (unsigned long long)stored, (unsigned long long)computed);
	if (prev != block_begin - chunk_begin)
		return grist_fail_at(-EBADMSG, path, block_begin,
				     "block header says the chunk began %llu bytes earlier, expected %llu",
				     (unsigned long long)prev,
				     (unsigned long long)(block_begin - chunk_begin));
	if (chunk_end && next != chunk_end - block_begin)
		return grist_fail_at(-EBADMSG, path, block_begin,
				     "block header says the chunk ends %llu bytes later, expected %llu",
				     (unsigned long long)next, (unsigned long long)(chunk_end - block_begin));
	return 0;
}
