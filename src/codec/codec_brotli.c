/* Brotli: always decoded with large windows enabled, as Riegeli's reader does. */
#include <brotli/decode.h>
#include <brotli/encode.h>
#include <errno.h>

#include "codec/codec.h"
#include "common/error.h"

/*
 * Brotli streams carry no decoded length, so the bound is the format's own
 * limit: one insert-and-copy command of a few bytes can copy at most about
 * 2^24 bytes. Announced sizes above it cannot come from a real stream.
 */
#define BROTLI_MAX_RATIO (1ull << 24)

static int brotli_bound(const uint8_t *src, size_t src_len, uint64_t *bound)
{
	(void)src;
	*bound = (uint64_t)src_len * BROTLI_MAX_RATIO;
	return 0;
}

/*
 * The decoder state cannot be reset, so each stream gets a fresh instance;
 * brotli sections are rare in ArrayRecord files (zstd is the default).
 */
static int brotli_decompress(void *ctx, const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
	BrotliDecoderState *s;
	BrotliDecoderResult r;
	size_t avail_in = src_len, avail_out = dst_len;
	const uint8_t *next_in = src;
	uint8_t *next_out = dst;
	int ret = 0;

	(void)ctx;
	s = BrotliDecoderCreateInstance(NULL, NULL, NULL);
	if (!s)
		return -ENOMEM;
	BrotliDecoderSetParameter(s, BROTLI_DECODER_PARAM_LARGE_WINDOW, 1);
	r = BrotliDecoderDecompressStream(s, &avail_in, &next_in, &avail_out, &next_out, NULL);
	switch (r) {
	case BROTLI_DECODER_RESULT_SUCCESS:
		if (avail_in)
			ret = grist_fail(-EBADMSG, "%zu bytes after the brotli stream", avail_in);
		else if (avail_out)
			ret = grist_fail(-EBADMSG, "brotli stream decodes to %zu bytes, expected %zu",
					 dst_len - avail_out, dst_len);
		break;
	case BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT:
		ret = grist_fail(-EBADMSG, "brotli stream decodes to more than %zu bytes", dst_len);
		break;
	case BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT:
		ret = grist_fail(-EBADMSG, "brotli stream is truncated");
		break;
	default:
		ret = grist_fail(-EBADMSG, "brotli: %s",
				 BrotliDecoderErrorString(BrotliDecoderGetErrorCode(s)));
		break;
	}
	BrotliDecoderDestroyInstance(s);
	return ret;
}

static int brotli_compress(void *ctx, const struct grist_codec_params *p, const uint8_t *src,
			   size_t src_len, struct grist_buf *out)
{
	int lgwin = p->window_log ? p->window_log : 22;
	size_t avail_in = src_len, avail_out;
	const uint8_t *next_in = src;
	BrotliEncoderState *s;
	uint8_t *next_out;
	int ret = 0;

	(void)ctx;
	s = BrotliEncoderCreateInstance(NULL, NULL, NULL);
	if (!s)
		return -ENOMEM;
	BrotliEncoderSetParameter(s, BROTLI_PARAM_QUALITY, (uint32_t)p->level);
	if (lgwin > BROTLI_MAX_WINDOW_BITS)
		BrotliEncoderSetParameter(s, BROTLI_PARAM_LARGE_WINDOW, 1);
	BrotliEncoderSetParameter(s, BROTLI_PARAM_LGWIN, (uint32_t)lgwin);
	BrotliEncoderSetParameter(s, BROTLI_PARAM_SIZE_HINT,
				  src_len > (1u << 30) ? (1u << 30) : (uint32_t)src_len);
	for (;;) {
		ret = grist_buf_reserve(out, out->len + src_len / 2 + 65536);
		if (ret)
			break;
		avail_out = out->cap - out->len;
		next_out = out->data + out->len;
		if (!BrotliEncoderCompressStream(s, BROTLI_OPERATION_FINISH, &avail_in, &next_in,
						 &avail_out, &next_out, NULL)) {
			ret = grist_fail(-ENOMEM, "brotli compression failed");
			break;
		}
		out->len = (size_t)(next_out - out->data);
		if (BrotliEncoderIsFinished(s))
			break;
	}
	BrotliEncoderDestroyInstance(s);
	return ret;
}

const struct grist_codec_ops grist_codec_brotli = {
	.name = "brotli",
	.type = GRIST_CODEC_BROTLI,
	.bound = brotli_bound,
	.decompress = brotli_decompress,
	.compress = brotli_compress,
};
