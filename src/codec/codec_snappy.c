/* Snappy, raw (unframed) format: its own varint32 length preamble gives the exact size. */
#include <errno.h>
#include <snappy-c.h>

#include "codec/codec.h"
#include "common/error.h"

/*
 * The most a snappy stream can expand per input byte: its densest element is a copy of
 * 64 bytes coded in 3 (literals are 1:1 plus a tag), so 32 leaves room to spare.
 */
#define SNAPPY_MAX_RATIO 32

/* The preamble's length, but never more than the stream can produce: preambles can lie. */
static int snappy_bound(const uint8_t *src, size_t src_len, uint64_t *bound)
{
	uint64_t by_ratio = (uint64_t)src_len * SNAPPY_MAX_RATIO;
	size_t n;

	if (snappy_uncompressed_length((const char *)src, src_len, &n) != SNAPPY_OK)
		return grist_fail(-EBADMSG, "snappy stream has no valid length preamble");
	*bound = n < by_ratio ? n : by_ratio;
	return 0;
}

static int snappy_decompress(void *ctx, const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
	size_t n;

	(void)ctx;
	if (snappy_uncompressed_length((const char *)src, src_len, &n) != SNAPPY_OK)
		return grist_fail(-EBADMSG, "snappy stream has no valid length preamble");
	if (n != dst_len)
		return grist_fail(-EBADMSG, "snappy stream announces %zu bytes, expected %zu", n, dst_len);
	if (snappy_uncompress((const char *)src, src_len, (char *)dst, &n) != SNAPPY_OK)
		return grist_fail(-EBADMSG, "snappy stream is corrupt");
	if (n != dst_len)
		return grist_fail(-EBADMSG, "snappy stream decodes to %zu bytes, expected %zu", n, dst_len);
	return 0;
}

static int snappy_compress_section(void *ctx, const struct grist_codec_params *p,
				   const uint8_t *src, size_t src_len, struct grist_buf *out)
{
	size_t cap = snappy_max_compressed_length(src_len);
	int err;

	(void)ctx;
	(void)p;
	if (src_len >= (1ull << 32) - 1)
		return grist_fail(-EFBIG, "snappy cannot compress %zu bytes (limit 4 GiB)", src_len);
	err = grist_buf_reserve(out, out->len + cap);
	if (err)
		return err;
	if (snappy_compress((const char *)src, src_len, (char *)out->data + out->len, &cap) != SNAPPY_OK)
		return grist_fail(-ENOMEM, "snappy compression failed");
	out->len += cap;
	return 0;
}

const struct grist_codec_ops grist_codec_snappy = {
	.name = "snappy",
	.type = GRIST_CODEC_SNAPPY,
	.bound = snappy_bound,
	.decompress = snappy_decompress,
	.compress = snappy_compress_section,
};
