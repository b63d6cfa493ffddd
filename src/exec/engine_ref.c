/*
 * The reference engine: one thread, plain pread through the reader, one record at a
 * time in stream order. It is deliberately the most direct reading of the batch
 * definition, so the fast engines can be tested against it byte for byte.
 *
 * In device mode next() runs on the feeder thread while the consumer releases
 * batches and reads the stats, so the slot table and the counters shared by the
 * two are under e->lock or atomic; a slot itself belongs to one side at a time
 * (busy: the producer or the consumer; free: nobody).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "exec/engine.h"

#define REF_MAX_SLOTS 65

struct ref_engine {
	const struct grist_engine_params *p;
	struct grist_stream_cursor *cursor;
	pthread_mutex_t lock;  /* guards slots[], busy[] and pinned */
	struct grist_slot *slots[REF_MAX_SLOTS];
	bool busy[REF_MAX_SLOTS];
	bool pinned;           /* some delivered batch was in pinned memory */
	uint64_t bytes_read;   /* atomic: written by the producer, read by stats */
	uint64_t reads;        /* atomic, likewise */
	struct grist_slot_tally tally; /* atomic: kept by the slots themselves */
};

static int ref_start(const struct grist_engine_params *p, void **engine)
{
	struct ref_engine *e = calloc(1, sizeof(*e));
	int ret;

	if (!e)
		return grist_fail(-ENOMEM, "ref engine: out of memory");
	e->p = p;
	pthread_mutex_init(&e->lock, NULL);
	ret = grist_stream_cursor_create(p->stream, &e->cursor);
	if (!ret)
		ret = grist_stream_cursor_seek(e->cursor, p->start_position);
	if (ret) {
		grist_stream_cursor_destroy(e->cursor);
		pthread_mutex_destroy(&e->lock);
		free(e);
		return ret;
	}
	*engine = e;
	return 0;
}

static int take_slot(struct ref_engine *e, struct grist_slot **out)
{
	struct grist_slot *s;
	size_t i;
	int ret;

	pthread_mutex_lock(&e->lock);
	for (i = 0; i < REF_MAX_SLOTS && e->busy[i]; i++)
		;
	if (i == REF_MAX_SLOTS) {
		pthread_mutex_unlock(&e->lock);
		return grist_fail(-EBUSY, "ref engine: too many batches held");
	}
	if (!e->slots[i]) {
		e->slots[i] = calloc(1, sizeof(struct grist_slot));
		ret = e->slots[i] ? grist_slot_init(e->slots[i], e->p->batch_size, 0) : -ENOMEM;
		if (ret) {
			free(e->slots[i]);
			e->slots[i] = NULL;
			pthread_mutex_unlock(&e->lock);
			return ret == -ENOMEM ? grist_fail(-ENOMEM, "ref engine: out of memory") : ret;
		}
		grist_slot_account(e->slots[i], &e->tally);
	}
	e->busy[i] = true;
	s = e->slots[i];
	pthread_mutex_unlock(&e->lock);
	grist_slot_reset(s);
	if (e->p->deliver) {
		/* outside the lock: acquire may wait for the consumer to release a device slot */
		s->provider_wrapper = true;
		ret = e->p->deliver->acquire(e->p->deliver->ctx, s);
		if (ret) {
			pthread_mutex_lock(&e->lock);
			e->busy[i] = false;
			pthread_mutex_unlock(&e->lock);
			return ret;
		}
	}
	*out = s;
	return 0;
}

static void ref_release(void *engine, struct grist_slot *s);

static int ref_next(void *engine, struct grist_slot **out)
{
	struct ref_engine *e = engine;
	const struct grist_engine_params *p = e->p;
	struct grist_stream_item it;
	struct grist_map_input in;
	const uint8_t *data;
	size_t len;
	struct grist_slot *s = NULL;
	int ret;

	*out = NULL;
	ret = take_slot(e, &s);
	if (ret)
		return ret;
	s->stream_end = grist_stream_cursor_tell(e->cursor);
	while (s->count < p->batch_size) {
		uint64_t j = grist_stream_cursor_tell(e->cursor);

		ret = grist_stream_next(e->cursor, &it);
		if (ret < 0)
			goto fail;
		if (ret == 0)
			break;
		ret = grist_reader_read(p->sources[it.component].reader, it.record, &data, &len);
		if (ret)
			goto fail;
		grist_counter_add(&e->reads, 1);
		grist_counter_add(&e->bytes_read, len);
		grist_engine_map_input(p, &it, data, len, &in);
		ret = grist_slot_add(s, p->layout, &in, j);
		if (ret < 0) {
			ret = grist_engine_record_error(p->sources, p->num_sources, it.component, it.record, ret);
			goto fail;
		}
		s->stream_end = grist_stream_cursor_tell(e->cursor);
	}
	if (s->pinned) {
		pthread_mutex_lock(&e->lock);
		e->pinned = true;
		pthread_mutex_unlock(&e->lock);
	}
	*out = s;
	return 0;
fail:
	if (s->external)
		p->deliver->cancel(p->deliver->ctx, s);
	ref_release(e, s);
	return ret;
}

static void ref_release(void *engine, struct grist_slot *s)
{
	struct ref_engine *e = engine;
	size_t i;

	if (s->provider_wrapper) /* the memory was the device stage's */
		grist_slot_unbind(s);
	pthread_mutex_lock(&e->lock);
	for (i = 0; i < REF_MAX_SLOTS; i++)
		if (e->slots[i] == s)
			e->busy[i] = false;
	pthread_mutex_unlock(&e->lock);
}

/* The reference engine is synchronous: nothing waits that needs waking. */
static void ref_abort(void *engine)
{
	(void)engine;
}

static void ref_stats(void *engine, struct grist_loader_stats *out)
{
	struct ref_engine *e = engine;

	out->engine = "ref";
	out->read_mode = "buffered";
	out->threads = 1;
	out->reads_issued = grist_counter_read(&e->reads);
	out->bytes_decoded = grist_counter_read(&e->bytes_read);
	out->memory_bytes = grist_counter_read(&e->tally.memory);
	out->slot_maps = grist_counter_read(&e->tally.maps);
	pthread_mutex_lock(&e->lock);
	out->pinned = e->pinned;
	pthread_mutex_unlock(&e->lock);
}

static void ref_stop(void *engine)
{
	struct ref_engine *e = engine;
	size_t i;

	if (!e)
		return;
	for (i = 0; i < REF_MAX_SLOTS; i++) {
		if (e->slots[i]) {
			grist_slot_free(e->slots[i]);
			free(e->slots[i]);
		}
	}
	grist_stream_cursor_destroy(e->cursor);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

const struct grist_engine_ops grist_engine_ref_ops = {
	.name = "ref",
	.start = ref_start,
	.next = ref_next,
	.release = ref_release,
	.stats = ref_stats,
	.abort = ref_abort,
	.stop = ref_stop,
};
