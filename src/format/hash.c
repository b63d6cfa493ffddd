/* The Riegeli hash key, and the hash of bytes in one piece (pieces: hash_cat.cc). */
#include <highwayhash/c_bindings.h>

#include "format/hash.h"

const uint64_t grist_hash_key[4] = {
	0x2f696c6567656952ull, 0x0a7364726f636572ull,
	0x2f696c6567656952ull, 0x0a7364726f636572ull,
};

uint64_t grist_hash(const void *p, size_t len)
{
	return HighwayHash64(grist_hash_key, (const char *)p, len);
}
