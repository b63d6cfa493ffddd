/*
 * libFuzzer harness: checkpoint parsing through grist_loader_create() with a fuzzed
 * resume_state, on a golden file ($GRIST_TEST_DATA or tests/data). Input: a config
 * byte (shard count 1..4 and index, contiguous sharding, chunk granularity, bit 6: pack
 * best-fit into rows of 64 one-byte tokens, records cut into pieces of 5, so the
 * packer's resume (position, piece, rows) is fuzzed too), a flags byte (bit 0: recompute
 * the CRC of a 56- or 64-byte state, so mutations reach the checks behind it), then the
 * state. A loader that accepts the state must deliver a batch or end cleanly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "grist/loader.h"
#include "grist/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[4096];
	static const char *paths[1] = { path };
	struct grist_dataset_spec ds = { 0 };
	struct grist_loader_config c = { .size = sizeof(c) };
	struct grist_loader *l;
	struct grist_batch *b;
	uint8_t st[GRIST_STATE_SIZE + 64];
	size_t n;
	uint32_t crc;

	if (!path[0]) {
		const char *dir = getenv("GRIST_TEST_DATA");

		snprintf(path, sizeof(path), "%s/golden/zstd_default_g1.array_record", dir ? dir : "tests/data");
	}
	if (size < 2 || size - 2 > sizeof(st))
		return 0;
	n = size - 2;
	memcpy(st, data + 2, n);
	if ((data[1] & 1) && (n == GRIST_STATE_SIZE || n == GRIST_STATE_SIZE_V3)) {
		crc = (uint32_t)crc32(0, st, (unsigned)(n - 4));
		st[n - 4] = (uint8_t)crc;
		st[n - 3] = (uint8_t)(crc >> 8);
		st[n - 2] = (uint8_t)(crc >> 16);
		st[n - 1] = (uint8_t)(crc >> 24);
	}
	ds.paths = paths;
	ds.num_paths = 1;
	c.datasets = &ds;
	c.num_datasets = 1;
	c.batch_size = 32; /* the CLI's defaults, so states saved by `grist load` are seeds */
	c.epochs = 1;
	c.engine = GRIST_ENGINE_REF;
	c.shard_count = 1 + (data[0] & 3);
	c.shard_index = (data[0] >> 2 & 3) % c.shard_count;
	c.shard_mode = (data[0] & 16) ? GRIST_SHARD_CONTIGUOUS : GRIST_SHARD_STRIDED;
	c.granularity = (data[0] & 32) ? GRIST_GRANULARITY_CHUNK : GRIST_GRANULARITY_RECORD;
	if (data[0] & 64) { /* make_seeds.py: --pack best-fit:64:4 --token-bytes 1 --pack-piece 5 --batch-size 2 */
		c.pack = GRIST_PACK_BEST_FIT;
		c.pack_length = 64;
		c.pack_bins = 4;
		c.pack_token_bytes = 1;
		c.pack_piece = 5;
		c.batch_size = 2;
	}
	c.resume_state = st;
	c.resume_state_len = n;
	if (grist_loader_create(&c, &l) == 0) {
		if (grist_loader_next(l, &b) == 0 && b)
			grist_loader_release(l, b);
		grist_loader_destroy(l);
	}
	return 0;
}
