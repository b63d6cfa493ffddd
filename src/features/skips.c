/* The records a per-record map dropped (on_error skip): counted, the first few kept with their reason.
 * One log for every stage that skips (features, text), so stats() reads them the same way. */
#include <errno.h>
#include <stdio.h>

#include "common/error.h"
#include "features/features_internal.h"

void gf_skips_init(struct gf_skips *s)
{
	pthread_mutex_init(&s->lock, NULL);
	s->count = 0;
}

void gf_skips_destroy(struct gf_skips *s)
{
	pthread_mutex_destroy(&s->lock);
}

/* Data errors a skipping stage drops its record for; ENOMEM and friends still stop the loader. */
bool gf_skippable(int ret)
{
	return ret == -EBADMSG || ret == -ENOTSUP || ret == -EFBIG || ret == -EMSGSIZE || ret == -EILSEQ;
}

void gf_skips_add(struct gf_skips *s, const struct grist_map_input *in)
{
	pthread_mutex_lock(&s->lock);
	if (s->count < GF_SKIPS_KEPT) {
		struct grist_feature_skip *k = &s->kept[s->count];

		k->dataset = in->dataset;
		k->index = in->index;
		snprintf(k->reason, sizeof(k->reason), "%s", grist_last_error());
	}
	s->count++;
	pthread_mutex_unlock(&s->lock);
}

uint64_t gf_skips_get(struct gf_skips *s, struct grist_feature_skip *out, size_t cap, size_t *n)
{
	uint64_t count;
	size_t k = 0;

	pthread_mutex_lock(&s->lock);
	count = s->count;
	for (; out && k < cap && k < count && k < GF_SKIPS_KEPT; k++)
		out[k] = s->kept[k];
	pthread_mutex_unlock(&s->lock);
	if (n)
		*n = k;
	return count;
}
