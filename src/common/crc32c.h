/* CRC-32C (Castagnoli), as TFRecord framing uses it, with TensorFlow's mask. */
#ifndef GRIST_COMMON_CRC32C_H
#define GRIST_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * grist_crc32c() - extend @crc (0 to start) over @n bytes at @p.
 * grist_crc32c(0, "123456789", 9) == 0xe3069283. Uses the SSE4.2 crc32
 * instruction when the CPU has it, else slicing-by-8 tables; both give the
 * same value. Thread-safe.
 */
uint32_t grist_crc32c(uint32_t crc, const void *p, size_t n);

/* TFRecord's masked form: rotate right by 15 and add 0xa282ead8. */
static inline uint32_t grist_crc32c_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* The portable path alone, so tests can check the two against each other. */
uint32_t grist_crc32c_portable(uint32_t crc, const void *p, size_t n);

#endif
