/* The codec table: one set of function pointers per Riegeli compression type (fio-style). */
#ifndef GRIST_CODEC_CODEC_H
#define GRIST_CODEC_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Riegeli's compression type bytes, as stored in a simple chunk. */
enum grist_codec_type {
	GRIST_CODEC_NONE = 0x00,
	GRIST_CODEC_BROTLI = 0x62, /* 'b' */
	GRIST_CODEC_SNAPPY = 0x73, /* 's' */
	GRIST_CODEC_ZSTD = 0x7a,   /* 'z' */
};

/* Compression settings of a writer; window_log 0 means the codec's default. */
struct grist_codec_params {
	int level;
	int window_log;
};

struct grist_codec_ops {
	const char *name;
	uint8_t type;
	/* Make a per-thread context (may set *ctx = NULL when none is needed). 0 or -ENOMEM. */
	int (*ctx_create)(void **ctx);
	void (*ctx_destroy)(void *ctx);
	/*
	 * An upper bound of what @src can decompress to, without decoding it, so a
	 * caller can reject an absurd announced size before allocating.
	 * 0 or -EBADMSG (message recorded) when the stream header is already wrong.
	 */
	int (*bound)(const uint8_t *src, size_t src_len, uint64_t *bound);
	/*
	 * Decompress one whole stream into exactly @dst_len bytes. Producing fewer
	 * or more bytes, trailing input, or a damaged stream is -EBADMSG.
	 */
	int (*decompress)(void *ctx, const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len);
	/* Compress @src and append the stream to @out. 0, -ENOMEM or -EINVAL. */
	int (*compress)(void *ctx, const struct grist_codec_params *p, const uint8_t *src,
			size_t src_len, struct grist_buf *out);
};

extern const struct grist_codec_ops grist_codec_none;
extern const struct grist_codec_ops grist_codec_zstd;
extern const struct grist_codec_ops grist_codec_snappy;
extern const struct grist_codec_ops grist_codec_brotli;

/* The codec for a compression type byte, or NULL when the byte is unknown. */
const struct grist_codec_ops *grist_codec_find(uint8_t type);

/*
 * Per-thread contexts for every codec, created on first use and reused, so the
 * steady state allocates nothing per chunk.
 */
struct grist_codec_set {
	void *ctx[4];
	unsigned created; /* bit i set when ctx[i] was made */
};

/* Context of @ops in @set, creating it on first use. 0 or -ENOMEM. */
int grist_codec_set_get(struct grist_codec_set *set, const struct grist_codec_ops *ops, void **ctx);
/* Destroy every context made in @set; leaves it empty and reusable. */
void grist_codec_set_clear(struct grist_codec_set *set);

#endif
