/* Zstandard: exactly one frame per section, large windows accepted (windowLogMax 31). */
#define ZSTD_STATIC_LINKING_ONLY
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "codec/codec.h"
#include "common/error.h"

struct zstd_ctx {
	ZSTD_DCtx *d;
	ZSTD_CCtx *c;
};

static int zstd_ctx_create(void **out)
{
	struct zstd_ctx *z = calloc(1, sizeof(*z));

	if (!z)
		return -ENOMEM;
	z->d = ZSTD_createDCtx();
	if (!z->d) {
		free(z);
		return -ENOMEM;
	}
	/* Riegeli's reader accepts windows up to 2 GiB; so must we. */
	ZSTD_DCtx_setParameter(z->d, ZSTD_d_windowLogMax, 31);
	*out = z;
	return 0;
}

static void zstd_ctx_destroy(void *ctx)
{
	struct zstd_ctx *z = ctx;

	if (!z)
		return;
	ZSTD_freeDCtx(z->d);
	ZSTD_freeCCtx(z->c);
	free(z);
}

/*
 * The most a zstd frame can decode to per input byte: a block decodes to at most
 * 128 KiB and takes at least 4 bytes (a 3-byte header and one RLE byte).
 */
#define ZSTD_MAX_RATIO (ZSTD_BLOCKSIZE_MAX / 4)

/*
 * ZSTD_decompressBound() believes a frame header's content size, which a damaged
 * or hostile frame can set to 2^60; the decoder only rejects it after the caller
 * allocated that much. The ratio bound holds for every frame the decoder accepts.
 */
static int zstd_bound(const uint8_t *src, size_t src_len, uint64_t *bound)
{
	unsigned long long b = ZSTD_decompressBound(src, src_len);
	uint64_t by_ratio = (uint64_t)src_len * ZSTD_MAX_RATIO;

	if (b == ZSTD_CONTENTSIZE_ERROR)
		return grist_fail(-EBADMSG, "not a valid zstd frame");
	*bound = b < by_ratio ? b : by_ratio;
	return 0;
}

/*
 * A frame of one raw or RLE block is its own content. zstd writes such frames for input
 * it cannot shrink: every few-byte sizes section of a one-record chunk is one, and so is
 * an incompressible record. Copying it directly skips the decoder's per-frame setup,
 * which costs several times the copy. Returns 1 when done; 0 for any other frame or any
 * irregularity, which the library then decodes (or reports) as usual.
 */
static int zstd_trivial_frame(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
	ZSTD_frameHeader fh;
	const uint8_t *b;
	uint32_t bh, type, size;

	if (ZSTD_getFrameHeader(&fh, src, src_len) != 0 || fh.frameType != ZSTD_frame || fh.checksumFlag ||
	    fh.dictID || src_len - fh.headerSize < 3)
		return 0;
	b = src + fh.headerSize;
	bh = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16;
	type = (bh >> 1) & 3;
	size = bh >> 3;
	/* the last block, of the promised size, ending the input exactly, within the frame's limits */
	if (!(bh & 1) || size != dst_len || size > fh.blockSizeMax ||
	    (fh.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN && fh.frameContentSize != size))
		return 0;
	if (type == 0 && src_len - fh.headerSize - 3 == size) {
		if (size)
			memcpy(dst, b + 3, size);
		return 1;
	}
	if (type == 1 && src_len - fh.headerSize - 3 == 1) {
		memset(dst, b[3], size);
		return 1;
	}
	return 0;
}

static int zstd_decompress(void *ctx, const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
	struct zstd_ctx *z = ctx;
	size_t frame_len, ret;

	/* One frame only: anything after it is corruption, as in Riegeli (concatenate=false). */
	frame_len = ZSTD_findFrameCompressedSize(src, src_len);
	if (ZSTD_isError(frame_len))
		return grist_fail(-EBADMSG, "zstd frame: %s", ZSTD_getErrorName(frame_len));
	if (frame_len != src_len)
		return grist_fail(-EBADMSG, "%zu bytes after the zstd frame", src_len - frame_len);
	/*
	 * Only a frame about as long as its content (raw) or a few bytes long (RLE: a header
	 * of at most 18 bytes, a block header, one byte) can be trivial: compressed frames
	 * skip the extra header parse.
	 */
	if ((src_len > dst_len || src_len <= 22) && zstd_trivial_frame(src, src_len, dst, dst_len))
		return 0;
	/*
	 * The whole frame is here and the output has its exact size, so the one-shot call
	 * does it: no streaming stage, no window buffer, no second parse of the frame header.
	 * A frame that decodes to more than @dst_len fails inside it with dstSize_tooSmall.
	 */
	ret = ZSTD_decompressDCtx(z->d, dst, dst_len, src, src_len);
	if (ZSTD_isError(ret)) {
		if (ZSTD_getErrorCode(ret) == ZSTD_error_dstSize_tooSmall)
			return grist_fail(-EBADMSG, "zstd frame decodes to more than %zu bytes", dst_len);
		return grist_fail(-EBADMSG, "zstd: %s", ZSTD_getErrorName(ret));
	}
	if (ret != dst_len)
		return grist_fail(-EBADMSG, "zstd frame decodes to %zu bytes, expected %zu", ret, dst_len);
	return 0;
}

static int zstd_compress(void *ctx, const struct grist_codec_params *p, const uint8_t *src,
			 size_t src_len, struct grist_buf *out)
{
	struct zstd_ctx *z = ctx;
	size_t cap = ZSTD_compressBound(src_len), ret;
	int err;

	if (!z->c) {
		z->c = ZSTD_createCCtx();
		if (!z->c)
			return -ENOMEM;
	}
	err = grist_buf_reserve(out, out->len + cap);
	if (err)
		return err;
	ZSTD_CCtx_reset(z->c, ZSTD_reset_session_and_parameters);
	ret = ZSTD_CCtx_setParameter(z->c, ZSTD_c_compressionLevel, p->level);
	if (!ZSTD_isError(ret) && p->window_log)
		ret = ZSTD_CCtx_setParameter(z->c, ZSTD_c_windowLog, p->window_log);
	if (ZSTD_isError(ret))
		return grist_fail(-EINVAL, "zstd parameters: %s", ZSTD_getErrorName(ret));
	ret = ZSTD_compress2(z->c, out->data + out->len, cap, src, src_len);
	if (ZSTD_isError(ret))
		return grist_fail(-ENOMEM, "zstd: %s", ZSTD_getErrorName(ret));
	out->len += ret;
	return 0;
}

const struct grist_codec_ops grist_codec_zstd = {
	.name = "zstd",
	.type = GRIST_CODEC_ZSTD,
	.ctx_create = zstd_ctx_create,
	.ctx_destroy = zstd_ctx_destroy,
	.bound = zstd_bound,
	.decompress = zstd_decompress,
	.compress = zstd_compress,
};
