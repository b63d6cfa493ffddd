/* Protobuf/LEB128 base-128 varints, as Riegeli and the ArrayRecord footer use them. */
#ifndef GRIST_FORMAT_VARINT_H
#define GRIST_FORMAT_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define GRIST_VARINT64_MAX 10

/*
 * Read a varint64 from [*p, end). Non-shortest forms are accepted (as Riegeli
 * does) but never more than 10 bytes or a value above 2^64-1.
 * Returns 0 and advances *p, or -EBADMSG (no message recorded: callers know where).
 */
static inline int grist_varint_read(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	const uint8_t *q = *p;
	uint64_t v = 0;
	unsigned shift;

	for (shift = 0; shift < 70 && q < end; shift += 7) {
		uint8_t b = *q++;

		if (shift == 63 && b > 1)
			return -74; /* -EBADMSG: overflows 64 bits */
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*p = q;
			*out = v;
			return 0;
		}
	}
	return -74;
}

/* Write @v in shortest form at @p (room for 10 bytes); returns the byte count. */
size_t grist_varint_write(uint8_t *p, uint64_t v);
/* Bytes the shortest form of @v takes. */
size_t grist_varint_len(uint64_t v);

#endif
