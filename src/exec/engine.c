/* What every engine does with a record besides reading it: its map input, its seed, where an error about it points. */
#include "common/error.h"
#include "exec/engine.h"
#include "format/dataset.h"

/*
 * The per-record seed depends on the record's place in its dataset's own stream
 * (component, component position), never on the shard or thread that handles it,
 * so a random map gives the same bytes on any number of hosts or threads.
 */
uint64_t grist_engine_record_seed(uint64_t seed, const struct grist_stream_item *it)
{
	return grist_mix64(seed ^ grist_mix64(((uint64_t)it->component << 56) ^ grist_mix64(it->component_position)));
}

int grist_engine_record_error(const struct grist_engine_source *sources, size_t num_sources, uint32_t dataset,
			      uint64_t record, int code)
{
	struct grist_record_loc loc;
	struct grist_file_info info;

	/* the record was located when it was planned, so neither call fails (and overwrites the message) */
	if (dataset >= num_sources || grist_reader_locate(sources[dataset].reader, record, &loc) ||
	    grist_reader_file_info(sources[dataset].reader, loc.file, &info))
		return code;
	return grist_fail_prefix(code, "%s: chunk at byte %llu", info.path, (unsigned long long)loc.chunk_begin);
}

void grist_engine_map_input(const struct grist_engine_params *p, const struct grist_stream_item *it,
			    const uint8_t *data, size_t len, struct grist_map_input *in)
{
	in->data = data;
	in->len = len;
	in->index = it->record;
	in->dataset = it->component;
	in->epoch = it->epoch;
	/* only a map can use the seed; without one, skip the hashing on the hot path */
	in->random_seed = p->layout->map ? grist_engine_record_seed(p->seed, it) : 0;
}
