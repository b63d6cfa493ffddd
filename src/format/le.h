/* Little-endian u64 loads and stores for block and chunk headers. */
#ifndef GRIST_FORMAT_LE_H
#define GRIST_FORMAT_LE_H

#include <stdint.h>
#include <string.h>

static inline uint64_t grist_le64_get(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline void grist_le64_put(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	memcpy(p, &v, 8);
}

#endif
