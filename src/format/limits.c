/* The process-wide bound on chunk sizes that every allocation driven by a size claim is checked against. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/error.h"
#include "format/block.h"
#include "format/chunk.h"
#include "format/limits.h"
#include "grist/options.h"

/* 0 = not set by grist_set_max_chunk_bytes(): use the environment or the default */
static _Atomic uint64_t limit_set;
static uint64_t limit_env;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/*
 * GRIST_MAX_CHUNK_BYTES is a size like every other (grist_parse_size(): 4096, 64M, 4GiB). A
 * value that is no size, or 0, leaves the default, and the log callback hears why: a typo
 * must not quietly mean 2 GiB, yet no open should fail for an environment variable.
 */
static void read_env(void)
{
	const char *s = getenv("GRIST_MAX_CHUNK_BYTES");
	uint64_t v;

	limit_env = GRIST_DEFAULT_MAX_CHUNK_BYTES;
	if (!s)
		return;
	if (grist_parse_size(s, &v) == 0 && v)
		limit_env = v;
	else
		grist_log(GRIST_LOG_WARNING, "GRIST_MAX_CHUNK_BYTES='%s' is not a size (bytes, or with K, M, G, T or "
			  "KiB, MiB, GiB, TiB: powers of 1024) above 0; the default, %llu bytes, applies", s,
			  (unsigned long long)GRIST_DEFAULT_MAX_CHUNK_BYTES);
}

GRIST_API uint64_t grist_max_chunk_bytes(void)
{
	uint64_t v = atomic_load_explicit(&limit_set, memory_order_relaxed);

	if (v)
		return v;
	pthread_once(&env_once, read_env);
	return limit_env;
}

GRIST_API void grist_set_max_chunk_bytes(uint64_t bytes)
{
	atomic_store_explicit(&limit_set, bytes, memory_order_relaxed);
}

uint64_t grist_max_chunk_extent(void)
{
	uint64_t l = grist_max_chunk_bytes(), logical;

	if (l > UINT64_MAX / 4)
		return UINT64_MAX;
	/* header + data, a block header every 64 KiB - 24 logical bytes (+2 for the ends), padding to a block */
	logical = GRIST_CHUNK_HEADER_SIZE + l;
	return logical + GRIST_BLOCK_HEADER_SIZE * (logical / (GRIST_BLOCK_SIZE - GRIST_BLOCK_HEADER_SIZE) + 2) +
	       GRIST_BLOCK_SIZE;
}

int grist_check_chunk_extent(const char *path, uint64_t begin, uint64_t end, uint64_t reader_max)
{
	uint64_t len = end - begin, max = grist_max_chunk_extent();

	if (reader_max && len > reader_max)
		return grist_fail_at(-EFBIG, path, begin, "chunk of %llu bytes exceeds the reader's max_chunk_bytes %llu",
				     (unsigned long long)len, (unsigned long long)reader_max);
	if (len > max)
		return grist_fail_at(-EFBIG, path, begin,
				     "chunk extent of %llu bytes is larger than a chunk of at most %llu bytes can be "
				     "(the limit GRIST_MAX_CHUNK_BYTES, grist_set_max_chunk_bytes())",
				     (unsigned long long)len, (unsigned long long)grist_max_chunk_bytes());
	return 0;
}
