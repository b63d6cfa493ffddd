/* `grist-bench --compare`: one core's raw codec speed on the file's own chunks, the ceiling of decode. */
#include <brotli/decode.h>
#include <brotli/encode.h> /* BROTLI_MAX_WINDOW_BITS: beyond it the writer makes large-window streams */
#include <errno.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "grist/format.h"
#define GRIST_INTERNAL /* the chunk walker and the writer's compression: see grist/internal/chunks.h */
#include "grist/internal/chunks.h"
#include "bench.h"

/*
 * Bounds of the sample: the decoded bytes it stands for (enough to leave the
 * caches, as a loader's stream does), its frame count (metadata memory), and
 * what one chunk may take. Building stops at the first bound reached.
 */
#define SAMPLE_DECODED_MAX ((uint64_t)256 << 20)
#define SAMPLE_FRAMES_MAX ((size_t)1 << 20)
#define CHUNK_EXTENT_MAX ((uint64_t)512 << 20)
#define CHUNK_DECODED_MAX ((uint64_t)256 << 20)
/* Slow codecs (brotli:11 compresses at about 1 MB/s) stop the sample after this long, or --seconds. */
#define SAMPLE_BUILD_MIN_S 5.0

/* One chunk's values stream, compressed as the writer compresses it. */
struct frame {
	size_t off, len;           /* in sample.frames */
	size_t decoded;
	uint64_t records;
};

/* Every frame, back to back. */
struct frames {
	uint8_t *data;
	size_t len, cap;
};

struct sample {
	struct grist_chunk_walker *w;
	const struct grist_chunk_file *file;
	struct grist_values_compressor *comp; /* the writer's compression */
	struct grist_values_codec opts;
	struct frames frames;
	uint8_t *out;                  /* the reused output buffer, max_decoded bytes */
	size_t out_cap;
	struct frame *f;
	size_t n, cap;
	size_t max_decoded;
	uint64_t decoded, records, stored_bytes, identical;
};

enum raw_codec { RAW_NONE, RAW_ZSTD, RAW_SNAPPY, RAW_BROTLI };

/* The codec library called directly, with one context reused for every frame. */
struct raw_decoder {
	enum raw_codec codec;
	bool large_window;             /* brotli streams with windows beyond 2^24 */
	ZSTD_DCtx *zstd;
};

static int raw_decoder_init(struct raw_decoder *d, const struct grist_values_codec *o)
{
	d->codec = !strcmp(o->codec, "zstd") ? RAW_ZSTD : !strcmp(o->codec, "snappy") ? RAW_SNAPPY
		 : !strcmp(o->codec, "brotli") ? RAW_BROTLI : RAW_NONE;
	d->large_window = o->window_log > BROTLI_MAX_WINDOW_BITS;
	d->zstd = NULL;
	if (d->codec != RAW_ZSTD)
		return 0;
	d->zstd = ZSTD_createDCtx();
	if (!d->zstd)
		return -ENOMEM;
	/* The file may use windows up to 2 GiB, as grist's reader accepts. */
	ZSTD_DCtx_setParameter(d->zstd, ZSTD_d_windowLogMax, 31);
	return 0;
}

/* Large-window brotli needs a decoder instance per stream: the one-shot call cannot enable it. */
static size_t brotli_large(const uint8_t *src, size_t len, uint8_t *dst, size_t cap)
{
	BrotliDecoderState *s = BrotliDecoderCreateInstance(NULL, NULL, NULL);
	size_t avail_in = len, avail_out = cap;
	uint8_t *next_out = dst;
	BrotliDecoderResult res;

	if (!s)
		return SIZE_MAX;
	BrotliDecoderSetParameter(s, BROTLI_DECODER_PARAM_LARGE_WINDOW, 1);
	res = BrotliDecoderDecompressStream(s, &avail_in, &src, &avail_out, &next_out, NULL);
	BrotliDecoderDestroyInstance(s);
	return res == BROTLI_DECODER_RESULT_SUCCESS && !avail_in ? cap - avail_out : SIZE_MAX;
}

/* Decompress one frame into @dst; the decoded length, or SIZE_MAX when the library fails. */
static size_t raw_decode(const struct raw_decoder *d, const uint8_t *src, size_t len, uint8_t *dst, size_t cap)
{
	size_t n = cap;

	switch (d->codec) {
	case RAW_ZSTD:
		n = ZSTD_decompressDCtx(d->zstd, dst, cap, src, len);
		return ZSTD_isError(n) ? SIZE_MAX : n;
	case RAW_SNAPPY:
		return snappy_uncompress((const char *)src, len, (char *)dst, &n) == SNAPPY_OK ? n : SIZE_MAX;
	case RAW_BROTLI:
		if (d->large_window)
			return brotli_large(src, len, dst, cap);
		return BrotliDecoderDecompress(len, src, &n, dst) == BROTLI_DECODER_RESULT_SUCCESS ? n : SIZE_MAX;
	default:
		if (len > cap)
			return SIZE_MAX;
		memcpy(dst, src, len);
		return len;
	}
}

/* The library call the timed loop makes, for the note. */
static const char *raw_call(const struct raw_decoder *d)
{
	switch (d->codec) {
	case RAW_ZSTD:
		return "ZSTD_decompressDCtx, one DCtx";
	case RAW_SNAPPY:
		return "snappy_uncompress";
	case RAW_BROTLI:
		return d->large_window ? "BrotliDecoderDecompressStream, large window" : "BrotliDecoderDecompress";
	default:
		return "memcpy";
	}
}

static int frames_append(struct frames *f, const uint8_t *p, size_t n)
{
	if (f->len + n > f->cap) {
		size_t ncap = f->cap ? f->cap : 1 << 20;
		uint8_t *nd;

		while (ncap < f->len + n)
			ncap *= 2;
		nd = realloc(f->data, ncap);
		if (!nd)
			return -ENOMEM;
		f->data = nd;
		f->cap = ncap;
	}
	memcpy(f->data + f->len, p, n);
	f->len += n;
	return 0;
}

/*
 * Add chunk @k: read and decode it, compress its values as the writer does,
 * compare with the stored section, and check once that the raw library call
 * gives the decoded bytes back exactly.
 */
static int sample_add(struct sample *s, const struct raw_decoder *rd, uint64_t k, char *why, size_t cap)
{
	struct grist_chunk_extent e;
	struct grist_chunk_view c;
	const uint8_t *stream;
	struct frame *fr;
	size_t off, len;
	int ret;

	grist_chunk_walker_extent(s->w, k, &e);
	if (e.end - e.begin > CHUNK_EXTENT_MAX) {
		snprintf(why, cap, "the chunk at byte %llu spans %llu bytes, beyond the baseline's %llu",
			 (unsigned long long)e.begin, (unsigned long long)(e.end - e.begin),
			 (unsigned long long)CHUNK_EXTENT_MAX);
		return -ENOMEM;
	}
	ret = grist_chunk_walker_read(s->w, k, &c);
	if (ret) {
		snprintf(why, cap, "%s", grist_last_error());
		return ret;
	}
	if (!c.simple)
		return 0;
	if (strcmp(c.codec, s->opts.codec)) {
		snprintf(why, cap, "the chunk at byte %llu uses %s, the writer options say %s",
			 (unsigned long long)e.begin, c.codec, s->opts.codec);
		return -EBADMSG;
	}
	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 1024;
		struct frame *nf = realloc(s->f, ncap * sizeof(*nf));

		if (!nf)
			goto nomem;
		s->f = nf;
		s->cap = ncap;
	}
	off = s->frames.len;
	ret = grist_values_compress(s->comp, c.values, c.values_len, &stream, &len);
	if (ret) {
		snprintf(why, cap, "%s compression of the chunk at byte %llu failed: %s", s->opts.codec,
			 (unsigned long long)e.begin, grist_last_error());
		return ret;
	}
	if (frames_append(&s->frames, stream, len))
		goto nomem;
	if (c.values_len > s->out_cap) {
		uint8_t *o = realloc(s->out, c.values_len);

		if (!o)
			goto nomem;
		s->out = o;
		s->out_cap = c.values_len;
	}
	fr = &s->f[s->n];
	*fr = (struct frame){ .off = off, .len = len, .decoded = c.values_len, .records = e.num_records };
	if (raw_decode(rd, s->frames.data + off, fr->len, s->out, s->out_cap) != fr->decoded ||
	    (fr->decoded && memcmp(s->out, c.values, fr->decoded))) {
		snprintf(why, cap, "%s does not give back the %zu decoded bytes of the chunk at byte %llu",
			 raw_call(rd), fr->decoded, (unsigned long long)e.begin);
		return -EBADMSG;
	}
	if (fr->len == c.stored_len && !memcmp(s->frames.data + off, c.stored, fr->len))
		s->identical++;
	s->stored_bytes += c.stored_len;
	s->decoded += fr->decoded;
	s->records += fr->records;
	if (fr->decoded > s->max_decoded)
		s->max_decoded = fr->decoded;
	s->n++;
	return 0;
nomem:
	snprintf(why, cap, "out of memory for the chunk at byte %llu", (unsigned long long)e.begin);
	return -ENOMEM;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * Visit the chunks in the order 0, p, 2p, ... mod n with p coprime to n near
 * n / golden ratio: every prefix of the order is spread over the whole file,
 * so a sample cut short by its bounds still stands for all of it.
 */
static uint64_t spread_step(uint64_t n)
{
	uint64_t p = (uint64_t)((double)n * 0.6180339887498949);

	if (p < 1)
		p = 1;
	while (gcd(p, n) != 1)
		p++;
	return p;
}

static int sample_build(struct sample *s, const struct raw_decoder *rd, double limit_s, char *why, size_t cap)
{
	uint64_t n = s->file->num_chunks, step = spread_step(n), k = 0, j;
	double t0 = bench_now();
	int ret;

	for (j = 0; j < n; j++, k = (k + step) % n) {
		if (s->decoded >= SAMPLE_DECODED_MAX || s->n == SAMPLE_FRAMES_MAX ||
		    (s->n && bench_now() - t0 > limit_s))
			break;
		ret = sample_add(s, rd, k, why, cap);
		if (ret)
			return ret;
	}
	if (!s->n) {
		snprintf(why, cap, "%s holds no records to decode", s->file->path);
		return -EINVAL;
	}
	return 0;
}

/* The file's writer options; a file without them gets its codec's defaults. */
static int sample_options(struct sample *s, char *why, size_t cap)
{
	const char *text = s->file->writer_options[0] ? s->file->writer_options : s->file->codec;

	if (grist_values_compressor_create(text, &s->comp, &s->opts)) {
		snprintf(why, cap, "writer options '%s': %s", text, grist_last_error());
		return -EINVAL;
	}
	if (strcmp(s->opts.codec, s->file->codec)) {
		snprintf(why, cap, "the writer options '%s' disagree with the file's codec %s", text, s->file->codec);
		return -EBADMSG;
	}
	if (s->file->max_chunk_decoded > CHUNK_DECODED_MAX) {
		snprintf(why, cap, "a chunk decodes to %llu bytes, beyond the baseline's %llu",
			 (unsigned long long)s->file->max_chunk_decoded, (unsigned long long)CHUNK_DECODED_MAX);
		return -ENOMEM;
	}
	return 0;
}

static void sample_free(struct sample *s)
{
	grist_values_compressor_destroy(s->comp);
	grist_chunk_walker_close(s->w);
	free(s->frames.data);
	free(s->out);
	free(s->f);
}

/* "zstd:3, window_log 20" and the like. */
static void codec_label(const struct sample *s, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s", s->opts.codec);

	if (!strcmp(s->opts.codec, "zstd") || !strcmp(s->opts.codec, "brotli"))
		n += snprintf(buf + n, cap - (size_t)n, ":%d", s->opts.level);
	if (s->opts.window_log && strcmp(s->opts.codec, "uncompressed") && (size_t)n < cap)
		snprintf(buf + n, cap - (size_t)n, ", window_log %d", s->opts.window_log);
}

/* What timed_passes() measured, and where it stopped when a frame failed. */
struct pass_result {
	uint64_t bytes, records;
	unsigned passes;               /* whole passes over the sample */
	double seconds;
	size_t failed;                 /* frame index (in file order) that did not decode */
};

/*
 * One thread, frame after frame into one buffer, in @order (NULL: file order), whole
 * passes until @seconds are up (one pass at least). Return 0, or -EBADMSG when a frame
 * does not decode to its size (r->failed and r->passes say which).
 */
static int timed_passes(const struct sample *s, const struct raw_decoder *rd, const size_t *order,
			double seconds, struct pass_result *r)
{
	double t0 = bench_now();
	size_t i;

	*r = (struct pass_result){ 0 };
	for (;;) {
		for (i = 0; i < s->n; i++) {
			size_t k = order ? order[i] : i;
			const struct frame *f = &s->f[k];

			if (raw_decode(rd, s->frames.data + f->off, f->len, s->out, s->out_cap) != f->decoded) {
				r->failed = k;
				return -EBADMSG;
			}
			r->bytes += f->decoded;
			r->records += f->records;
			/* After the first whole pass, stop as soon as the time is up. */
			if (r->passes && (i & 63) == 63 && bench_now() - t0 >= seconds)
				break;
		}
		r->seconds = bench_now() - t0;
		if (i == s->n)
			r->passes++;
		if (r->seconds >= seconds)
			return 0;
	}
}

/*
 * The same frames in a shuffled order (a fixed seed), each from its own place in the
 * sample buffer: how a globally shuffled loader meets them. Decoded bytes/s into @out;
 * return 0, or -EBADMSG when a frame does not decode to its size, -ENOMEM.
 */
static int shuffled_pass(const struct sample *s, const struct raw_decoder *rd, double seconds, double *out)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	size_t *order = malloc(s->n * sizeof(*order)), i, j, tmp;
	struct pass_result r;
	int ret;

	*out = 0;
	if (!order)
		return -ENOMEM;
	for (i = 0; i < s->n; i++)
		order[i] = i;
	for (i = s->n - 1; i > 0; i--) { /* Fisher-Yates with xorshift64 */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		j = (size_t)(x % (i + 1));
		tmp = order[i];
		order[i] = order[j];
		order[j] = tmp;
	}
	ret = timed_passes(s, rd, order, seconds, &r);
	free(order);
	if (!ret)
		*out = (double)r.bytes / r.seconds;
	return ret;
}

void bench_baseline_codec(const char *path, const struct bench_config *c, struct bench_baseline *b)
{
	struct raw_decoder rd = { 0 };
	struct sample s = { 0 };
	struct pass_result pr;
	char label[64];

	b->name = "codec, one core";
	b->decoded = true;
	if (grist_chunk_walker_open(path, &s.w)) {
		snprintf(b->why, sizeof(b->why), "%s", grist_last_error());
		return;
	}
	s.file = grist_chunk_walker_file(s.w);
	if (!s.file->num_chunks) {
		snprintf(b->why, sizeof(b->why), "%s holds no records", path);
		goto out;
	}
	if (sample_options(&s, b->why, sizeof(b->why)))
		goto out;
	if (raw_decoder_init(&rd, &s.opts)) {
		snprintf(b->why, sizeof(b->why), "out of memory for the decoders");
		goto out;
	}
	if (sample_build(&s, &rd, c->seconds > SAMPLE_BUILD_MIN_S ? c->seconds : SAMPLE_BUILD_MIN_S, b->why,
			 sizeof(b->why)))
		goto out;
	if (timed_passes(&s, &rd, NULL, c->seconds, &pr)) {
		snprintf(b->why, sizeof(b->why), "%s failed on frame %zu in pass %u", raw_call(&rd), pr.failed,
			 pr.passes + 1);
		goto out;
	}
	b->ran = true;
	b->bytes_per_s = (double)pr.bytes / pr.seconds;
	b->records_per_s = (double)pr.records / pr.seconds;
	if (shuffled_pass(&s, &rd, c->seconds, &b->shuffled_bytes_per_s)) {
		snprintf(b->why, sizeof(b->why), "%s failed in the shuffled passes", raw_call(&rd));
		b->ran = false;
		goto out;
	}
	codec_label(&s, label, sizeof(label));
	snprintf(b->note, sizeof(b->note),
		 "%s, %s, 1 thread, %u passes; %zu chunks of the file recompressed as the writer does, mean "
		 "%.1f KiB decoded; %llu frames byte-identical to the file's, %.2f MiB of frames vs %.2f MiB stored",
		 label, raw_call(&rd), pr.passes, s.n, (double)s.decoded / (double)s.n / 1024,
		 (unsigned long long)s.identical, (double)s.frames.len / 1048576, (double)s.stored_bytes / 1048576);
out:
	ZSTD_freeDCtx(rd.zstd);
	sample_free(&s);
}
