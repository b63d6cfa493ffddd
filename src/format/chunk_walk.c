/* grist/internal/chunks.h: one file chunk by chunk, and the writer's compression, for grist's own benchmarks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GRIST_INTERNAL
#include "grist/internal/chunks.h"
#include "grist/format.h"
#include "codec/codec.h"
#include "common/buf.h"
#include "common/error.h"
#include "format/block.h"
#include "format/chunk.h"
#include "format/chunk_decode.h"
#include "format/dataset.h"
#include "format/limits.h"
#include "format/options.h"

struct grist_chunk_walker {
	struct grist_reader *reader;
	const struct grist_file_geom *g;
	struct grist_chunk_file file;
	struct grist_chunk_decoder *dec;
	struct grist_buf extent;   /* the chunk's file bytes */
	struct grist_buf stored;   /* its stored values stream, copied: the decoder's lives one call */
};

static const char *codec_name(uint8_t type)
{
	const struct grist_codec_ops *ops = grist_codec_find(type);

	return ops ? ops->name : "unknown";
}

int grist_chunk_walker_open(const char *path, struct grist_chunk_walker **out)
{
	struct grist_chunk_walker *w = calloc(1, sizeof(*w));
	int ret;

	*out = NULL;
	if (!w)
		return grist_fail(-ENOMEM, "out of memory");
	ret = grist_reader_open(&path, 1, NULL, &w->reader);
	if (!ret)
		ret = grist_chunk_decoder_create(&w->dec);
	if (ret) {
		grist_chunk_walker_close(w);
		return ret;
	}
	w->g = grist_reader_file_geom(w->reader, 0);
	w->file = (struct grist_chunk_file){
		.path = w->g->path, .size = w->g->size, .num_records = w->g->num_records,
		.num_chunks = w->g->num_chunks, .max_chunk_decoded = w->g->max_chunk_decoded,
		.writer_options = w->g->writer_options, .codec = codec_name(w->g->compression),
	};
	*out = w;
	return 0;
}

void grist_chunk_walker_close(struct grist_chunk_walker *w)
{
	if (!w)
		return;
	grist_chunk_decoder_destroy(w->dec);
	grist_reader_close(w->reader);
	grist_buf_free(&w->extent);
	grist_buf_free(&w->stored);
	free(w);
}

const struct grist_chunk_file *grist_chunk_walker_file(const struct grist_chunk_walker *w)
{
	return &w->file;
}

int grist_chunk_walker_extent(const struct grist_chunk_walker *w, uint64_t k, struct grist_chunk_extent *out)
{
	const struct grist_file_geom *g = w->g;

	if (k >= g->num_chunks)
		return grist_fail(-ERANGE, "%s: no chunk %llu: the file holds %llu", g->path, (unsigned long long)k,
				  (unsigned long long)g->num_chunks);
	*out = (struct grist_chunk_extent){ .begin = g->chunk_offsets[k], .end = g->chunk_offsets[k + 1],
					    .num_records = grist_file_chunk_records(g, k) };
	return 0;
}

uint64_t grist_chunk_data_byte_offset(uint64_t chunk_begin, uint64_t i)
{
	uint64_t p = grist_block_add_with_overhead(chunk_begin, GRIST_CHUNK_HEADER_SIZE + i);

	/* where the bytes before it end at a block boundary, the block's header comes first */
	return p % GRIST_BLOCK_SIZE ? p : p + GRIST_BLOCK_HEADER_SIZE;
}

int grist_chunk_walker_read(struct grist_chunk_walker *w, uint64_t k, struct grist_chunk_view *out)
{
	const struct grist_file_geom *g = w->g;
	struct grist_chunk_extent e;
	struct grist_decoded_chunk c;
	const uint8_t *stream;
	size_t len;
	int ret;

	ret = grist_chunk_walker_extent(w, k, &e);
	if (!ret)
		ret = grist_check_chunk_extent(g->path, e.begin, e.end, 0);
	if (!ret)
		ret = grist_buf_reserve(&w->extent, e.end - e.begin);
	if (ret)
		return ret;
	ret = grist_file_read(g, w->extent.data, e.begin, e.end - e.begin);
	if (ret)
		return ret;
	w->extent.len = e.end - e.begin;
	/* the stored stream first: it lives only until the decoder's next call */
	ret = grist_chunk_stored_values(w->dec, w->extent.data, e.begin, w->extent.len, e.begin, e.end, g->path,
					&stream, &len);
	if (!ret)
		ret = grist_buf_reserve(&w->stored, len ? len : 1);
	if (ret)
		return ret;
	memcpy(w->stored.data, stream, len);
	w->stored.len = len;
	ret = grist_chunk_decode(w->dec, w->extent.data, e.begin, w->extent.len, e.begin, e.end, g->path, &c);
	if (ret)
		return ret;
	*out = (struct grist_chunk_view){
		.extent = e,
		.simple = c.chunk_type == GRIST_CHUNK_SIMPLE && c.num_records,
		.codec = c.chunk_type == GRIST_CHUNK_SIMPLE ? codec_name(c.compression) : "",
		.values = c.values, .values_len = c.decoded_data_size,
		.stored = w->stored.data, .stored_len = w->stored.len,
	};
	return 0;
}

struct grist_values_compressor {
	const struct grist_codec_ops *ops;
	struct grist_codec_params params;
	struct grist_codec_set ctxs;
	struct grist_buf out;
};

int grist_values_compressor_create(const char *writer_options, struct grist_values_compressor **out,
				   struct grist_values_codec *codec)
{
	struct grist_writer_options o;
	struct grist_values_compressor *c;
	int ret;

	*out = NULL;
	ret = grist_writer_options_parse(writer_options, &o);
	if (ret)
		return ret;
	c = calloc(1, sizeof(*c));
	if (!c)
		return grist_fail(-ENOMEM, "out of memory");
	c->ops = grist_codec_find(o.compression);
	c->params = (struct grist_codec_params){ .level = o.level, .window_log = o.window_log };
	*codec = (struct grist_values_codec){ .codec = c->ops->name, .level = o.level, .window_log = o.window_log };
	*out = c;
	return 0;
}

void grist_values_compressor_destroy(struct grist_values_compressor *c)
{
	if (!c)
		return;
	grist_codec_set_clear(&c->ctxs);
	grist_buf_free(&c->out);
	free(c);
}

int grist_values_compress(struct grist_values_compressor *c, const void *src, size_t len,
			  const uint8_t **stream, size_t *stream_len)
{
	void *ctx;
	int ret = grist_codec_set_get(&c->ctxs, c->ops, &ctx);

	c->out.len = 0;
	if (!ret)
		ret = c->ops->compress(ctx, &c->params, src, len, &c->out);
	if (ret)
		return ret;
	*stream = c->out.data;
	*stream_len = c->out.len;
	return 0;
}
