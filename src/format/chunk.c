/* Chunk header serialization and its hash check. */
#include <errno.h>

#include "common/error.h"
#include "format/chunk.h"
#include "format/hash.h"
#include "format/limits.h"
#include "format/le.h"

void grist_chunk_header_build(uint8_t out[40], const struct grist_chunk_header *h)
{
	grist_le64_put(out + 8, h->data_size);
	grist_le64_put(out + 16, h->data_hash);
	grist_le64_put(out + 24, (uint64_t)h->type | (h->num_records << 8));
	grist_le64_put(out + 32, h->decoded_data_size);
	grist_le64_put(out, grist_hash(out + 8, 32));
}

int grist_chunk_header_parse(const uint8_t in[40], struct grist_chunk_header *h, const char *path,
			     uint64_t offset)
{
	uint64_t stored = grist_le64_get(in), computed = grist_hash(in + 8, 32);
	uint64_t word;

	if (stored != computed)
		return grist_fail_at(-EBADMSG, path, offset,
				     "chunk header hash mismatch (stored 0x%016llx, computed 0x%016llx)",
				     (unsigned long long)stored, (unsigned long long)computed);
	h->data_size = grist_le64_get(in + 8);
	h->data_hash = grist_le64_get(in + 16);
	word = grist_le64_get(in + 24);
	h->type = (uint8_t)word;
	h->num_records = word >> 8;
	h->decoded_data_size = grist_le64_get(in + 32);
	/*
	 * Every buffer a chunk makes anyone allocate, and every extent anyone walks, is
	 * sized by one of these claims. A record takes at least one byte of the sizes
	 * section, so num_records (which also pads the chunk's extent) obeys the limit too.
	 */
	if (h->data_size > grist_max_chunk_bytes() || h->decoded_data_size > grist_max_chunk_bytes() ||
	    h->num_records > grist_max_chunk_bytes())
		return grist_fail_at(-EFBIG, path, offset,
				     "chunk claims %llu stored bytes, %llu records and %llu decoded bytes, above the "
				     "limit of %llu (GRIST_MAX_CHUNK_BYTES, grist_set_max_chunk_bytes())",
				     (unsigned long long)h->data_size, (unsigned long long)h->num_records,
				     (unsigned long long)h->decoded_data_size, (unsigned long long)grist_max_chunk_bytes());
	return 0;
}
