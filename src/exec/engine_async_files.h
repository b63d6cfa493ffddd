/*
 * Async engine, its files: each dataset file opened the way the engine reads it (its own
 * descriptor, maybe O_DIRECT, maybe mapped, or a URL). Opened once at start and only
 * read after that, by every worker and every stage: the bottom of the engine.
 */
#ifndef GRIST_EXEC_ENGINE_ASYNC_FILES_H
#define GRIST_EXEC_ENGINE_ASYNC_FILES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/map_guard.h"
#include "exec/engine.h"

struct async_file {
	int fd;
	bool direct;
	uint32_t align;
	const uint8_t *map;  /* read mode mmap: the whole file, read-only */
	uint64_t size;
	const char *path;    /* owned by the reader's info */
	struct grist_remote_object *remote; /* a URL (fd -1): read through the http backend */
};

struct async_files {
	struct async_file **at;     /* [component][file] */
	size_t num_sources;
	const struct grist_engine_source *sources;
	bool any_direct, any_buffered, any_mapped, any_remote;
	/*
	 * Where regions start in the read buffers (read_plan.h): a cache line when only URLs
	 * are read into them, else 4 KiB, so every local read stays aligned beside them.
	 */
	uint32_t buf_align;
	struct grist_map_range *map_ranges; /* the mapped files: decoding from them runs under a guard */
	size_t num_map_ranges;
};

static inline const struct async_file *grist_async_file(const struct async_files *fs, uint32_t component,
							uint32_t file)
{
	return &fs->at[component][file];
}

/* Whether any file is read into buffers (not every file mapped): only then does a worker need a read arena. */
static inline bool grist_async_files_read_any(const struct async_files *fs)
{
	return fs->any_direct || fs->any_buffered || fs->any_remote;
}

/* Open every file of @p's sources as its read mode asks. Returns 0 or a negative errno code (message set). */
int grist_async_files_open(const struct grist_engine_params *p, struct async_files *fs);

/* Unmap and close what was opened (also after a failed open). */
void grist_async_files_close(struct async_files *fs);

#endif
