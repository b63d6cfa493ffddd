/*
 * libFuzzer harness: chunk decoding in memory, no file per input. The first 4 bytes
 * are the file offset of the buffer (little-endian, so inputs can put a chunk next to
 * a 64 KiB block boundary); the rest is file bytes. Every chunk from the buffer start
 * to its end is decoded whole and in its two halves, as the reader and the engine do.
 */
#include <stdint.h>
#include <string.h>

#include "format/chunk_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct grist_chunk_decoder *whole, *halves;
	struct grist_decoded_chunk c, h;
	uint64_t off, pos, end;
	int n;

	if (size < 4)
		return 0;
	if (!whole && (grist_chunk_decoder_create(&whole) || grist_chunk_decoder_create(&halves)))
		return 0;
	off = (uint64_t)data[0] | (uint64_t)data[1] << 8 | (uint64_t)data[2] << 16 | (uint64_t)data[3] << 24;
	data += 4;
	size -= 4;
	end = off + size;
	for (pos = off, n = 0; pos < end && n < 64; n++) {
		int ret = grist_chunk_decode(whole, data, off, size, pos, end, "fuzz", &c);
		int sret = grist_chunk_decode_sizes(halves, data, off, size, pos, end, "fuzz", &h);

		/* the halves accept what the whole decode accepts, with the same records */
		if (!ret && (sret || h.num_records != c.num_records ||
			     (c.num_records && memcmp(h.offsets, c.offsets, (c.num_records + 1) * sizeof(*c.offsets)))))
			__builtin_trap();
		if (!sret && grist_chunk_decode_values(halves, data, off, size, pos, end, "fuzz", &h) == 0 && !ret &&
		    c.num_records && memcmp(h.values, c.values, c.offsets[c.num_records]))
			__builtin_trap();
		if (ret)
			break;
		if (c.chunk_end <= pos)
			__builtin_trap();
		pos = c.chunk_end;
	}
	return 0;
}
