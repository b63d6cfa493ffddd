/* ArrayRecord writer options: the official text grammar, and the exact text the official writer stores. */
#ifndef GRIST_FORMAT_OPTIONS_H
#define GRIST_FORMAT_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* max_parallelism above this is clamped to it. */
#define GRIST_WRITER_MAX_PARALLELISM 256

struct grist_writer_options {
	uint64_t group_size;  /* records per chunk, 1..2^31-1 */
	uint8_t compression;  /* a GRIST_CODEC_* byte */
	int level;            /* zstd -131072..22, brotli 0..11 */
	int window_log;       /* 10..31, or 0 for the codec's default */
	bool pad_to_block_boundary;
	/*
	 * Chunks compressed at once (max_parallelism:N, "auto" = the CPUs this
	 * process may run on). It changes how the writer works, never what it
	 * writes: the stored text keeps saying max_parallelism:1, as the official
	 * writer's does when it runs without a C++ thread pool (always, from Python).
	 */
	unsigned max_parallelism;
};

/*
 * Parse @text (NULL or "" = defaults: group_size:1, zstd:3, window_log:20).
 * Accepts the official keys: default, group_size, max_parallelism,
 * saturation_delay_ms, transpose, transpose_bucket_size, uncompressed,
 * brotli, zstd, snappy, window_log, pad_to_block_boundary.
 * Return: 0; -EINVAL for a malformed, repeated, conflicting or out-of-range
 * option, transpose:true included (not supported). A message names the option.
 */
int grist_writer_options_parse(const char *text, struct grist_writer_options *o);

/*
 * The options as the official writer stores them in the footer, e.g.
 * "group_size:1,transpose:false,pad_to_block_boundary:false,zstd:3,window_log:20,max_parallelism:1".
 * Writes at most @cap bytes including the NUL; returns the full length (snprintf-like).
 */
size_t grist_writer_options_format(const struct grist_writer_options *o, char *out, size_t cap);

#endif
