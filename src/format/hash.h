/* Riegeli's checksum: 64-bit HighwayHash keyed with "Riegeli/records\n" twice. */
#ifndef GRIST_FORMAT_HASH_H
#define GRIST_FORMAT_HASH_H

#include <stddef.h>
#include <stdint.h>

/* HighwayHash-64 of @len bytes at @p with the Riegeli key. Thread-safe, pure. */
uint64_t grist_hash(const void *p, size_t len);

#endif
