/*
 * The reference engine: one thread, plain pread through the reader, one record at a
 * time in stream order. It is deliberately the most direct reading of the batch
 * definition, so the fast engines can be tested against it byte for byte.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "exec/loader_internal.h"

#define REF_MAX_SLOTS 65

struct ref_engine {
	struct grist_loader *l;
	struct grist_stream_cursor *cursor;
	struct grist_slot *slots[REF_MAX_SLOTS];
	bool busy[REF_MAX_SLOTS];
	uint64_t bytes_read;
	uint64_t reads;
	uint64_t slot_memory; /* kept by the slots; read only from the consumer thread */
};

static int ref_start(struct grist_loader *l, void **engine)
{
	struct ref_engine *e = calloc(1, sizeof(*e));
	int ret;

	if (!e)
		return grist_fail(-ENOMEM, "ref engine: out of memory");
	e->l = l;
	ret = grist_stream_cursor_create(l->stream, &e->cursor);
	if (!ret)
		ret = grist_stream_cursor_seek(e->cursor, l->start_position);
	if (ret) {
		grist_stream_cursor_destroy(e->cursor);
		free(e);
		return ret;
	}
	*engine = e;
	return 0;
}

static int take_slot(struct ref_engine *e, struct grist_slot **out)
{
	size_t i;
	int ret;

	for (i = 0; i < REF_MAX_SLOTS; i++) {
		if (e->busy[i])
			continue;
		if (!e->slots[i]) {
			e->slots[i] = calloc(1, sizeof(struct grist_slot));
			if (!e->slots[i])
				return grist_fail(-ENOMEM, "ref engine: out of memory");
			ret = grist_slot_init(e->slots[i], e->l->cfg.batch_size, 0);
			if (ret) {
				free(e->slots[i]);
				e->slots[i] = NULL;
				return ret;
			}
			grist_slot_account(e->slots[i], &e->slot_memory);
		}
		grist_slot_reset(e->slots[i]);
		if (e->l->provider) {
			e->slots[i]->provider_wrapper = true;
			ret = e->l->provider->acquire(e->l->provider->ctx, e->slots[i]);
			if (ret)
				return ret;
		}
		e->busy[i] = true;
		*out = e->slots[i];
		return 0;
	}
	return grist_fail(-EBUSY, "ref engine: too many batches held");
}

static void ref_release(void *engine, struct grist_slot *s);

static int ref_next(void *engine, struct grist_slot **out)
{
	struct ref_engine *e = engine;
	struct grist_loader *l = e->l;
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
	while (s->count < l->cfg.batch_size) {
		uint64_t j = grist_stream_cursor_tell(e->cursor);

		ret = grist_stream_next(e->cursor, &it);
		if (ret < 0)
			goto fail;
		if (ret == 0)
			break;
		ret = grist_reader_read(l->sources[it.component].reader, it.record, &data, &len);
		if (ret)
			goto fail;
		e->reads++;
		e->bytes_read += len;
		grist_loader_map_input(l, &it, data, len, &in);
		ret = grist_slot_add(s, &l->layout, &in, j);
		if (ret < 0) {
			ret = grist_loader_record_error(l, it.component, it.record, ret);
			goto fail;
		}
		s->stream_end = grist_stream_cursor_tell(e->cursor);
	}
	*out = s;
	return 0;
fail:
	if (s->external)
		l->provider->cancel(l->provider->ctx, s);
	ref_release(e, s);
	return ret;
}

static void ref_release(void *engine, struct grist_slot *s)
{
	struct ref_engine *e = engine;
	size_t i;

	if (s->provider_wrapper) /* the memory was the device stage's */
		grist_slot_unbind(s);
	for (i = 0; i < REF_MAX_SLOTS; i++)
		if (e->slots[i] == s)
			e->busy[i] = false;
}

/* The reference engine is synchronous: nothing waits that needs waking. */
static void ref_abort(void *engine)
{
	(void)engine;
}

static void ref_stats(void *engine, struct grist_loader_stats *out)
{
	struct ref_engine *e = engine;
	size_t i;

	out->engine = "ref";
	out->read_mode = "buffered";
	out->threads = 1;
	out->reads_issued = e->reads;
	out->bytes_decoded = e->bytes_read;
	out->memory_bytes = e->slot_memory;
	for (i = 0; i < REF_MAX_SLOTS; i++)
		if (e->slots[i])
			out->pinned = out->pinned || e->slots[i]->pinned;
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
