/* The pull side of an engine: drop_remainder applied, and the stream position of what was pulled. */
#include "exec/loader_internal.h"

/*
 * Invariant: p->end is the shard position just past the last batch this puller took
 * from the engine, delivered or dropped. Only the thread that pulls touches it (the
 * consumer in host mode, the feeder in device mode); the consumer reads the feeder's
 * copy only after joining it, so no lock is needed.
 */
int grist_pull_next(struct grist_pull *p, struct grist_slot **out)
{
	struct grist_slot *s = NULL;
	int ret;

	*out = NULL;
	ret = p->ops->next(p->engine, &s);
	if (ret || !s)
		return ret;
	p->end = s->stream_end;
	if (s->count < p->batch_size && p->drop_remainder) {
		/* The short final batch: its positions count as consumed but it is not delivered. */
		p->ops->release(p->engine, s);
		return 0;
	}
	if (s->count == 0) { /* everything after the last batch was filtered out */
		p->ops->release(p->engine, s);
		return 0;
	}
	*out = s;
	return 0;
}
