/* The 40-byte Riegeli chunk header: sizes, hashes, type and record count. */
#ifndef GRIST_FORMAT_CHUNK_H
#define GRIST_FORMAT_CHUNK_H

#include <stdint.h>

enum grist_chunk_type {
	GRIST_CHUNK_METADATA = 0x6d,   /* 'm' */
	GRIST_CHUNK_PADDING = 0x70,    /* 'p' */
	GRIST_CHUNK_SIMPLE = 0x72,     /* 'r' */
	GRIST_CHUNK_SIGNATURE = 0x73,  /* 's' */
	GRIST_CHUNK_TRANSPOSED = 0x74, /* 't' */
};

/* A chunk holds at most 2^56 - 1 records: the count shares a u64 with the type byte. */
#define GRIST_CHUNK_MAX_RECORDS ((1ull << 56) - 1)

struct grist_chunk_header {
	uint64_t data_size;         /* logical data bytes, block headers excluded */
	uint64_t data_hash;         /* hash of those logical bytes */
	uint64_t num_records;
	uint64_t decoded_data_size; /* sum of the record sizes */
	uint8_t type;
};

/* Serialize @h into 40 bytes, computing the header hash. */
void grist_chunk_header_build(uint8_t out[40], const struct grist_chunk_header *h);

/*
 * Parse 40 logical header bytes and check their hash. @path and @offset (the
 * chunk's begin) only name the place in the error message. 0, -EBADMSG, or -EFBIG
 * when the stored or decoded size is above grist_max_chunk_bytes().
 */
int grist_chunk_header_parse(const uint8_t in[40], struct grist_chunk_header *h, const char *path,
			     uint64_t offset);

#endif
