/* The Riegeli hash key and the one call into libhighwayhash. */
#include <highwayhash/c_bindings.h>

#include "format/hash.h"

/* "Riegeli/records\n" read as two little-endian u64, repeated to fill the 256-bit key. */
static const uint64_t riegeli_key[4] = {
	0x2f696c6567656952ull, 0x0a7364726f636572ull,
	0x2f696c6567656952ull, 0x0a7364726f636572ull,
};

uint64_t grist_hash(const void *p, size_t len)
{
	return HighwayHash64(riegeli_key, (const char *)p, len);
}
