/* Varint writing (reading is inline in varint.h for the decode hot loop). */
#include <errno.h>

#include "format/varint.h"

_Static_assert(EBADMSG == 74, "varint.h hard-codes -EBADMSG as -74");

size_t grist_varint_write(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

size_t grist_varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}
