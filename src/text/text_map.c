/* The text stage's per-record map: a record (or a bytes feature of its tf.train.Example) -> int32 tokens, BOS/EOS, trimmed. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/error.h"
#include "features/features_internal.h"
#include "grist/features.h"
#include "text/text_internal.h"

/* Contexts kept for the decode threads: each call takes a free one with a CAS, no lock. */
#define CTX_SLOTS 128
/* What a context keeps of its buffers between records: an outlier's are freed after it. */
#define CTX_KEEP_BYTES (1u << 20)

struct grist_text_map {
	struct grist_text_map_options o;
	char *feature;
	struct grist_features *spec; /* one bytes feature, for the Example walker; NULL: raw records */
	uint64_t id;
	struct gf_skips skips; /* records dropped with GRIST_ON_ERROR_SKIP */
	_Atomic(struct grist_tokenizer_ctx *) ctx[CTX_SLOTS];
	atomic_bool busy[CTX_SLOTS];
};

void grist_text_map_options_init(struct grist_text_map_options *o)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->bos_id = -1;
	o->eos_id = -1;
}

int grist_text_map_create(const struct grist_text_map_options *opts, struct grist_text_map **out)
{
	struct grist_tokenizer_info info = { .size = sizeof(info) };
	struct grist_text_map *m;
	int ret;
	uint64_t h = 0;

	m = calloc(1, sizeof(*m));
	if (!m)
		return grist_fail(-ENOMEM, "no memory for a text map");
	gf_skips_init(&m->skips);
	grist_text_map_options_init(&m->o);
	ret = grist_sized_in(&m->o, sizeof(m->o), opts, "grist_text_map_options");
	if (ret)
		goto fail;
	if (!m->o.tokenizer) {
		ret = grist_fail(-EINVAL, "text map: no tokenizer");
		goto fail;
	}
	if ((m->o.add_bos && m->o.bos_id < 0) || (m->o.add_eos && m->o.eos_id < 0)) {
		ret = grist_fail(-EINVAL, "text map: add_%s needs a %s id >= 0 (the tokenizer has none: give one)",
				 m->o.add_bos && m->o.bos_id < 0 ? "bos" : "eos",
				 m->o.add_bos && m->o.bos_id < 0 ? "BOS" : "EOS");
		goto fail;
	}
	if (m->o.flags & ~GRIST_ENCODE_ALLOW_SPECIAL) {
		ret = grist_fail(-EINVAL, "text map: unknown flags 0x%x", m->o.flags);
		goto fail;
	}
	if (m->o.on_error != GRIST_ON_ERROR_FAIL && m->o.on_error != GRIST_ON_ERROR_SKIP) {
		ret = grist_fail(-EINVAL, "text map: unknown on_error %d", (int)m->o.on_error);
		goto fail;
	}
	if (m->o.bos_features & ~(GRIST_TEXT_BOS_INPUTS | GRIST_TEXT_BOS_TARGETS)) {
		ret = grist_fail(-EINVAL, "text map: unknown bos_features 0x%x", m->o.bos_features);
		goto fail;
	}
	if (m->o.bos_features == (GRIST_TEXT_BOS_INPUTS | GRIST_TEXT_BOS_TARGETS)) {
		ret = grist_fail(-EINVAL, "text map: bos_features with both inputs and targets is the loader's "
				 "pack_bos (the packer replaces in the stream both come from): set that instead");
		goto fail;
	}
	if (m->o.feature) {
		m->feature = strdup(m->o.feature);
		if (!m->feature) {
			ret = grist_fail(-ENOMEM, "no memory for a text map");
			goto fail;
		}
		m->o.feature = m->feature;
		ret = grist_features_create(&m->spec);
		/* the spec serves only the Example walker (gf_parse_example), which looks at keys */
		if (!ret) {
			int64_t shape = -1;
			int i = grist_features_add(m->spec, m->feature, GRIST_WIRE_BYTES, GRIST_DTYPE_UINT8, &shape, 1);

			ret = i < 0 ? i : grist_features_set(m->spec, (size_t)i, GRIST_FEATURE_VARLEN, GRIST_VARLEN_RAGGED);
			ret = ret < 0 ? ret : grist_features_finish(m->spec);
		}
		if (ret)
			goto fail;
	}
	/* the map's checkpoint id: the tokenizer's, and everything that changes the stage's tokens */
	grist_tokenizer_get_info(m->o.tokenizer, &info);
	h = XXH3_64bits_withSeed(&info.id, sizeof(info.id), h);
	h = XXH3_64bits_withSeed(m->feature ? m->feature : "", m->feature ? strlen(m->feature) + 1 : 0, h);
	h = XXH3_64bits_withSeed(&m->o.add_bos, sizeof(m->o.add_bos), h);
	h = XXH3_64bits_withSeed(&m->o.add_eos, sizeof(m->o.add_eos), h);
	h = XXH3_64bits_withSeed(&m->o.bos_id, sizeof(m->o.bos_id), h);
	h = XXH3_64bits_withSeed(&m->o.eos_id, sizeof(m->o.eos_id), h);
	h = XXH3_64bits_withSeed(&m->o.max_length, sizeof(m->o.max_length), h);
	h = XXH3_64bits_withSeed(&m->o.flags, sizeof(m->o.flags), h);
	if (m->o.on_error == GRIST_ON_ERROR_SKIP) /* drops records: another sequence (a fail map keeps its old id) */
		h = XXH3_64bits_withSeed("skip", 4, h);
	if (m->o.bos_features) { /* only then, so maps without it keep their id (tests/text/test_text.c) */
		h = XXH3_64bits_withSeed("bosfeat", 7, h);
		h = XXH3_64bits_withSeed(&m->o.bos_features, sizeof(m->o.bos_features), h);
		h = XXH3_64bits_withSeed(&m->o.bos_features_id, sizeof(m->o.bos_features_id), h);
	}
	m->id = h | 1; /* never 0: 0 is "no map" */
	*out = m;
	return 0;
fail:
	grist_text_map_destroy(m);
	return ret;
}

void grist_text_map_destroy(struct grist_text_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < CTX_SLOTS; i++)
		grist_tokenizer_ctx_destroy(atomic_load(&m->ctx[i]));
	grist_features_destroy(m->spec);
	gf_skips_destroy(&m->skips);
	free(m->feature);
	free(m);
}

uint64_t grist_text_map_id(const struct grist_text_map *m)
{
	return m->id;
}

uint64_t grist_text_map_skipped(struct grist_text_map *m, struct grist_feature_skip *out, size_t cap, size_t *n)
{
	if (!m) {
		if (n)
			*n = 0;
		return 0;
	}
	return gf_skips_get(&m->skips, out, cap, n);
}

/* A record's data error: dropped and counted with on_error skip (return 0, the map's "filter"), else the error. */
static int failed(struct grist_text_map *m, const struct grist_map_input *in, int ret, size_t *out_len)
{
	if (m->o.on_error != GRIST_ON_ERROR_SKIP || !gf_skippable(ret))
		return ret;
	gf_skips_add(&m->skips, in);
	*out_len = 0;
	return 0;
}

/* A free context: the slot this thread last used if it is free, else any free one; made on first use. */
static int take_ctx(struct grist_text_map *m, size_t *slot, struct grist_tokenizer_ctx **out)
{
	static _Thread_local size_t hint;
	size_t i, k;

	for (k = 0; k < CTX_SLOTS; k++) {
		bool free_ = false;

		i = (hint + k) % CTX_SLOTS;
		if (!atomic_compare_exchange_strong(&m->busy[i], &free_, true))
			continue;
		if (!atomic_load(&m->ctx[i])) {
			struct grist_tokenizer_ctx *c = NULL;
			int ret = grist_tokenizer_ctx_create(m->o.tokenizer, &c);

			if (ret) {
				atomic_store(&m->busy[i], false);
				return ret;
			}
			atomic_store(&m->ctx[i], c);
		}
		hint = i;
		*slot = i;
		*out = atomic_load(&m->ctx[i]);
		return 0;
	}
	return grist_fail(-EAGAIN, "text map: more than %d threads at once", CTX_SLOTS);
}

/* The record's text: the first value of the bytes feature, or the whole record. */
static int text_of(const struct grist_text_map *m, const struct grist_map_input *in, const uint8_t **p, size_t *len)
{
	struct gf_span span;
	struct gf_values v;
	int ret;

	if (!m->spec) {
		*p = in->data;
		*len = in->len;
		return 0;
	}
	ret = gf_parse_example(m->spec, in->data, in->len, &span);
	if (!ret && !span.p)
		ret = grist_fail(-EBADMSG, "no feature '%s' in the tf.train.Example", m->feature);
	if (!ret)
		ret = gf_values_scan(&span, &v);
	if (!ret && (v.kind != GRIST_WIRE_BYTES || v.count == 0))
		ret = grist_fail(-EBADMSG, "feature '%s' is not a bytes_list with a value", m->feature);
	if (ret)
		return ret;
	*p = v.first;
	*len = v.first_len;
	return 0;
}

static void put_le32(uint8_t *out, int32_t v)
{
	uint32_t u = (uint32_t)v;

	out[0] = (uint8_t)u;
	out[1] = (uint8_t)(u >> 8);
	out[2] = (uint8_t)(u >> 16);
	out[3] = (uint8_t)(u >> 24);
}

int grist_text_map(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t out_cap, size_t *out_len)
{
	struct grist_text_map *m = ctx;
	struct grist_tokenizer_ctx *c = NULL;
	const uint8_t *text;
	const int32_t *ids;
	size_t len, n, slot = 0, total, k = 0, i, limit;
	int ret = text_of(m, in, &text, &len);

	/* errors say what is wrong; the loader puts "map failed on dataset D record R" before them */
	if (ret)
		return failed(m, in, ret, out_len);
	ret = take_ctx(m, &slot, &c);
	if (ret)
		return ret;
	ret = grist_tokenizer_encode(c, text, len, m->o.flags, &ids, &n);
	if (ret) {
		grist_tokenizer_ctx_trim(c, CTX_KEEP_BYTES);
		atomic_store(&m->busy[slot], false);
		return failed(m, in, ret, out_len);
	}
	/* MaxText: [BOS] + ids + [EOS], then cut to max_length (so a long text loses its EOS) */
	total = n + (m->o.add_bos ? 1 : 0) + (m->o.add_eos ? 1 : 0);
	limit = m->o.max_length && total > m->o.max_length ? m->o.max_length : total;
	if (limit * 4 > out_cap) {
		atomic_store(&m->busy[slot], false);
		return failed(m, in, grist_fail(-EMSGSIZE, "%zu tokens do not fit the map's %zu bytes (set max_length, "
						"or map_out_max)", limit, out_cap), out_len);
	}
	if (m->o.add_bos && k < limit)
		put_le32(out + 4 * k++, m->o.bos_id);
	for (i = 0; i < n && k < limit; i++)
		put_le32(out + 4 * k++, ids[i]);
	if (m->o.add_eos && k < limit)
		put_le32(out + 4 * k++, m->o.eos_id);
	grist_tokenizer_ctx_trim(c, CTX_KEEP_BYTES);
	atomic_store(&m->busy[slot], false);
	*out_len = 4 * k;
	return 1;
}

size_t grist_text_map_retained(struct grist_text_map *m)
{
	size_t total = 0;

	for (size_t i = 0; i < CTX_SLOTS; i++) {
		struct grist_tokenizer_ctx *c = atomic_load(&m->ctx[i]);

		total += c ? grist_tokenizer_ctx_retained(c) : 0;
	}
	return total;
}
