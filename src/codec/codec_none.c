/* The identity codec: Riegeli compression type 0, sections stored as they are. */
#include <errno.h>
#include <string.h>

#include "codec/codec.h"
#include "common/error.h"

static int none_bound(const uint8_t *src, size_t src_len, uint64_t *bound)
{
	(void)src;
	*bound = src_len;
	return 0;
}

static int none_decompress(void *ctx, const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
	(void)ctx;
	if (src_len != dst_len)
		return grist_fail(-EBADMSG, "stored section holds %zu bytes, expected %zu", src_len, dst_len);
	if (dst_len)
		memcpy(dst, src, dst_len);
	return 0;
}

static int none_compress(void *ctx, const struct grist_codec_params *p, const uint8_t *src,
			 size_t src_len, struct grist_buf *out)
{
	(void)ctx;
	(void)p;
	return grist_buf_append(out, src, src_len);
}

const struct grist_codec_ops grist_codec_none = {
	.name = "uncompressed",
	.type = GRIST_CODEC_NONE,
	.bound = none_bound,
	.decompress = none_decompress,
	.compress = none_compress,
};
