/* Lookup of the codec table by Riegeli compression byte, and per-thread context sets. */
#include <errno.h>

#include "codec/codec.h"

static const struct grist_codec_ops *const codecs[] = {
	&grist_codec_none,
	&grist_codec_zstd,
	&grist_codec_snappy,
	&grist_codec_brotli,
};

static int codec_slot(const struct grist_codec_ops *ops)
{
	unsigned i;

	for (i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++)
		if (codecs[i] == ops)
			return (int)i;
	return -1;
}

const struct grist_codec_ops *grist_codec_find(uint8_t type)
{
	unsigned i;

	for (i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++)
		if (codecs[i]->type == type)
			return codecs[i];
	return NULL;
}

int grist_codec_set_get(struct grist_codec_set *set, const struct grist_codec_ops *ops, void **ctx)
{
	int slot = codec_slot(ops);
	int ret;

	if (slot < 0)
		return -EINVAL;
	if (!(set->created & (1u << slot))) {
		set->ctx[slot] = NULL;
		if (ops->ctx_create) {
			ret = ops->ctx_create(&set->ctx[slot]);
			if (ret < 0)
				return ret;
		}
		set->created |= 1u << slot;
	}
	*ctx = set->ctx[slot];
	return 0;
}

void grist_codec_set_clear(struct grist_codec_set *set)
{
	unsigned i;

	for (i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++) {
		if ((set->created & (1u << i)) && codecs[i]->ctx_destroy)
			codecs[i]->ctx_destroy(set->ctx[i]);
		set->ctx[i] = NULL;
	}
	set->created = 0;
}
