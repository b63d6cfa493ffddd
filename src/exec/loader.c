/* The loader: configuration checks, the shard stream, checkpoints, and the pull iterator over an engine. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "exec/loader_internal.h"
#include "exec/options_table.h"
#include "format/dataset.h"

#define DEFAULT_MAP_OUT_MAX (1u << 20)
#define DEFAULT_MAX_BATCH_BYTES ((size_t)GRIST_DEFAULT_MAX_BATCH_MIB << 20)
/* Packing: the engine's record batches are at least this many records (see docs/tuning.md). */
#define PACK_ENGINE_BATCH 256
/*
 * ... and with a map (text= tokenizes each record on the engine's threads): a record then
 * costs a tokenizer call (a 6 KB text about 0.2-0.6 ms), so 256 of them made a unit of
 * 50-150 ms of one core, each unit one worker's. A 5056-text run on 16 threads was 20
 * units: two waves, the second four workers wide, and the first batch waited for a whole
 * unit (docs/tuning.md, "The loader's serial share"). 32 records keep a unit's fixed costs
 * (its plan, a slot, a hand-over: microseconds) well under 1% of it. Exactly 32, whatever
 * batch_size is: it counts rows, which say nothing of how many records make them.
 */
#define PACK_ENGINE_BATCH_MAP 32

static struct grist_pack_params pack_params(const struct grist_loader_config *c)
{
	return (struct grist_pack_params){
		.mode = c->pack,
		.length = c->pack_length,
		.bins = c->pack_bins ? c->pack_bins : c->batch_size,
		.piece = c->pack_piece,
		.token_bytes = c->pack_token_bytes,
		.batch_rows = c->batch_size,
		.drop_remainder = c->drop_remainder,
		.bos = c->pack_bos,
		.bos_id = c->pack_bos_id,
	};
}

static int check_config(const struct grist_loader_config *c)
{
	size_t d;
	int ret;

	if (!c->datasets || c->num_datasets == 0)
		return grist_fail(-EINVAL, "loader: no dataset given");
	for (d = 0; d < c->num_datasets; d++) {
		if (!c->datasets[d].paths || c->datasets[d].num_paths == 0)
			return grist_fail(-EINVAL, "loader: dataset %zu has no files", d);
		if (c->num_datasets > 1 && !(c->datasets[d].weight > 0 && isfinite(c->datasets[d].weight)))
			return grist_fail(-EINVAL, "loader: dataset %zu has weight %g; weights must be > 0 and finite",
					  d, c->datasets[d].weight);
	}
	if (c->batch_size == 0)
		return grist_fail(-EINVAL, "loader: batch size must be at least 1");
	if (c->batch_size > (1u << 24))
		return grist_fail(-EINVAL, "loader: batch size %llu is larger than the limit %u",
				  (unsigned long long)c->batch_size, 1u << 24);
	if (c->shard_count && c->shard_index >= c->shard_count)
		return grist_fail(-EINVAL, "loader: shard index %llu must be below the shard count %llu",
				  (unsigned long long)c->shard_index, (unsigned long long)c->shard_count);
	if (!c->shard_count && c->shard_index)
		return grist_fail(-EINVAL, "loader: shard index %llu given without a shard count",
				  (unsigned long long)c->shard_index);
	if (c->layout != GRIST_LAYOUT_RAGGED && c->layout != GRIST_LAYOUT_FIXED && c->layout != GRIST_LAYOUT_PADDED)
		return grist_fail(-EINVAL, "loader: unknown batch layout %d", (int)c->layout);
	if (c->layout != GRIST_LAYOUT_RAGGED && c->record_bytes == 0)
		return grist_fail(-EINVAL, "loader: fixed and padded layouts need record_bytes > 0");
	if (c->layout != GRIST_LAYOUT_RAGGED) {
		size_t max = c->max_batch_bytes ? c->max_batch_bytes : DEFAULT_MAX_BATCH_BYTES;

		if (c->record_bytes > max / c->batch_size)
			return grist_fail(-EINVAL, "loader: a batch of %llu rows of %zu bytes is larger than "
					  "max_batch_bytes (%zu); raise max_batch_bytes or use a smaller batch",
					  (unsigned long long)c->batch_size, c->record_bytes, max);
	}
	if (c->engine != GRIST_ENGINE_URING && c->engine != GRIST_ENGINE_PREAD && c->engine != GRIST_ENGINE_REF)
		return grist_fail(-EINVAL, "loader: unknown engine %d", (int)c->engine);
	if (c->verify != GRIST_VERIFY_ALL && c->verify != GRIST_VERIFY_HEADERS)
		return grist_fail(-EINVAL, "loader: unknown verify %d", (int)c->verify);
	if (c->prefetch > GRIST_MAX_PREFETCH)
		return grist_fail(-EINVAL, "loader: prefetch %u is above the limit %d", c->prefetch, GRIST_MAX_PREFETCH);
	if (c->device && c->layout == GRIST_LAYOUT_RAGGED && c->map && !c->device_slot_bytes &&
	    c->map_out_max > ((size_t)1 << 40) / c->batch_size)
		return grist_fail(-EINVAL, "loader: batch_size x map_out_max is too large for device slots");
	if (c->threads > 256)
		return grist_fail(-EINVAL, "loader: %u threads is above the limit 256", c->threads);
	ret = grist_loader_options_check(c);
	if (ret)
		return ret;
	/* a size without a pack mode would be ignored without a word */
	if (c->pack == GRIST_PACK_NONE && (c->pack_length || c->pack_bins || c->pack_token_bytes || c->pack_piece))
		return grist_fail(-EINVAL, "loader: pack_length, pack_bins, pack_piece and token_bytes need pack");
	if (c->pack == GRIST_PACK_CONCAT_SPLIT && c->pack_bins)
		return grist_fail(-EINVAL, "loader: pack_bins applies to pack first-fit and best-fit only");
	/* Grain has BOS replacement in ConcatThenSplit only; elsewhere it would be ignored */
	if (c->pack_bos && c->pack != GRIST_PACK_CONCAT_SPLIT)
		return grist_fail(-EINVAL, "loader: pack_bos applies to pack concat-split only");
	if (c->pack != GRIST_PACK_NONE) {
		struct grist_pack_params pp = pack_params(c);

		if (c->layout != GRIST_LAYOUT_RAGGED)
			return grist_fail(-EINVAL, "loader: packing makes its own rows; it needs the ragged layout");
		if (c->device)
			return grist_fail(-EINVAL, "loader: packing does not run with a device stage yet; "
					  "pack on the host and copy the batches");
		return grist_packer_check(&pp, c->max_batch_bytes ? c->max_batch_bytes : DEFAULT_MAX_BATCH_BYTES);
	}
	return 0;
}

static void close_sources(struct grist_loader *l)
{
	size_t i;

	for (i = 0; i < l->num_sources; i++) {
		grist_reader_close(l->sources[i].reader);
		free(l->sources[i].files);
	}
	free(l->sources);
	l->sources = NULL;
	l->num_sources = 0;
}

static int open_sources(struct grist_loader *l)
{
	const struct grist_loader_config *c = &l->cfg;
	struct grist_engine_source *src;
	struct grist_reader_options ro;
	struct grist_file_info info;
	size_t d, f;
	int ret;

	grist_reader_options_init(&ro);
	ro.verify = c->verify; /* the reference engine reads through these readers */

	l->sources = calloc(c->num_datasets, sizeof(*l->sources));
	if (!l->sources)
		return grist_fail(-ENOMEM, "loader: out of memory");
	l->num_sources = c->num_datasets;
	for (d = 0; d < c->num_datasets; d++) {
		src = &l->sources[d];
		ret = grist_reader_open(c->datasets[d].paths, c->datasets[d].num_paths, &ro, &src->reader);
		if (ret)
			return ret;
		src->num_files = grist_reader_num_files(src->reader);
		src->files = calloc(src->num_files, sizeof(*src->files));
		if (!src->files)
			return grist_fail(-ENOMEM, "loader: out of memory");
		for (f = 0; f < src->num_files; f++) {
			ret = grist_reader_file_info(src->reader, f, &info);
			if (ret)
				return ret;
			src->files[f].num_records = info.num_records;
			src->files[f].group_size = info.group_size ? info.group_size : 1;
		}
		src->num_records = grist_reader_num_records(src->reader);
		src->weight = c->datasets[d].weight;
	}
	return 0;
}

/* Everything besides the stream itself that changes the delivered bytes. */
static uint64_t config_digest(const struct grist_loader_config *c)
{
	uint64_t h = grist_mix64(0x67726973746c6472ull ^ (uint64_t)c->layout);

	h = grist_mix64(h ^ (uint64_t)c->record_bytes);
	h = grist_mix64(h ^ (uint64_t)c->pad_value);
	h = grist_mix64(h ^ (c->map ? 1 : 0));
	h = grist_mix64(h ^ c->map_id);
	if (c->pack != GRIST_PACK_NONE) { /* only then, so unpacked checkpoints keep their fingerprint */
		struct grist_pack_params pp = pack_params(c);

		h = grist_mix64(h ^ 0x7061636b00000000ull ^ (uint64_t)pp.mode);
		h = grist_mix64(h ^ pp.length);
		h = grist_mix64(h ^ (pp.mode != GRIST_PACK_CONCAT_SPLIT ? pp.bins : 0));
		h = grist_mix64(h ^ pp.token_bytes);
		if (pp.piece) /* only then, so checkpoints of whole records keep theirs */
			h = grist_mix64(h ^ 0x7069656365000000ull ^ pp.piece);
		if (pp.bos) /* the same: checkpoints without BOS replacement keep theirs */
			h = grist_mix64(h ^ 0x626f730000000000ull ^ pp.bos_id);
	}
	return h;
}

static void plan_config(const struct grist_loader *l, struct grist_plan_config *pc,
			struct grist_plan_component *comps)
{
	const struct grist_loader_config *c = &l->cfg;
	size_t d;

	grist_plan_config_init(pc);
	for (d = 0; d < l->num_sources; d++) {
		comps[d].files = l->sources[d].files;
		comps[d].num_files = l->sources[d].num_files;
		comps[d].weight = l->num_sources > 1 ? c->datasets[d].weight : 1.0;
	}
	pc->components = comps;
	pc->num_components = l->num_sources;
	pc->seed = c->seed;
	pc->epochs = c->epochs;
	pc->shuffle = !c->no_shuffle;
	pc->reshuffle = !c->same_order_each_epoch;
	pc->granularity = c->granularity;
	pc->window = c->window_chunks ? c->window_chunks : GRIST_PLAN_DEFAULT_WINDOW;
	pc->shard_mode = c->shard_mode;
	pc->shard_index = c->shard_index;
	pc->shard_count = c->shard_count ? c->shard_count : 1;
}

static int build_stream(struct grist_loader *l)
{
	struct grist_plan_component *comps;
	struct grist_plan_config pc;
	struct grist_state_ex x;
	const struct grist_state *st = &x.state;
	uint64_t base = 0, j = 0;
	int ret;

	comps = calloc(l->num_sources, sizeof(*comps));
	if (!comps)
		return grist_fail(-ENOMEM, "loader: out of memory");
	plan_config(l, &pc, comps);
	l->lockstep = true;
	if (l->cfg.resume_state) {
		ret = grist_stream_restore_ex(&pc, l->extra, l->cfg.resume_state, l->cfg.resume_state_len,
					      &base, &j, &x);
		if (ret) {
			free(comps);
			return grist_fail_prefix(ret, "cannot resume from the given state");
		}
		l->batches = st->batches;
		l->lockstep = (st->flags & GRIST_STATE_LOCKSTEP) != 0;
		if (!(st->flags & GRIST_STATE_PACKED) != (l->cfg.pack == GRIST_PACK_NONE)) {
			free(comps);
			return grist_fail(-ESTALE, "cannot resume from the given state: it was saved %s packing",
					  st->flags & GRIST_STATE_PACKED ? "with" : "without");
		}
		l->pack_skip = st->pack_skip;
		l->pack_piece = x.pack_piece;
	}
	pc.base = base;
	ret = grist_stream_create(&pc, &l->stream);
	free(comps);
	if (ret)
		return ret;
	if (j > grist_stream_length(l->stream))
		return grist_fail(-EBADMSG, "resume state: position %llu is past the end of the stream (%llu)",
				  (unsigned long long)j, (unsigned long long)grist_stream_length(l->stream));
	l->start_position = j;
	l->consumed = j;
	return 0;
}

static int copy_config(struct grist_loader *l, const struct grist_loader_config *cfg)
{
	struct grist_dataset_spec *specs;
	size_t d, p;
	char **paths;

	l->cfg = *cfg;
	l->cfg.datasets = NULL;
	l->cfg.resume_state = NULL;
	l->cfg.device = NULL;
	specs = calloc(cfg->num_datasets, sizeof(*specs));
	if (!specs)
		return grist_fail(-ENOMEM, "loader: out of memory");
	l->cfg.datasets = specs;
	for (d = 0; d < cfg->num_datasets; d++) {
		specs[d] = cfg->datasets[d];
		paths = calloc(cfg->datasets[d].num_paths, sizeof(*paths));
		specs[d].paths = (const char *const *)paths;
		if (!paths)
			return grist_fail(-ENOMEM, "loader: out of memory");
		for (p = 0; p < cfg->datasets[d].num_paths; p++) {
			paths[p] = strdup(cfg->datasets[d].paths[p]);
			if (!paths[p])
				return grist_fail(-ENOMEM, "loader: out of memory");
		}
	}
	if (cfg->device) {
		l->cfg.device = strdup(cfg->device);
		if (!l->cfg.device)
			return grist_fail(-ENOMEM, "loader: out of memory");
	}
	if (cfg->resume_state) {
		uint8_t *st = malloc(cfg->resume_state_len ? cfg->resume_state_len : 1);

		if (!st)
			return grist_fail(-ENOMEM, "loader: out of memory");
		memcpy(st, cfg->resume_state, cfg->resume_state_len);
		l->cfg.resume_state = st;
	}
	if (!l->cfg.shard_count)
		l->cfg.shard_count = 1;
	if (!l->cfg.prefetch)
		l->cfg.prefetch = GRIST_DEFAULT_PREFETCH;
	if (!l->cfg.map_out_max)
		l->cfg.map_out_max = DEFAULT_MAP_OUT_MAX;
	if (!l->cfg.max_batch_bytes)
		l->cfg.max_batch_bytes = DEFAULT_MAX_BATCH_BYTES;
	return 0;
}

static void free_config(struct grist_loader *l)
{
	size_t d, p;

	if (l->cfg.datasets) {
		for (d = 0; d < l->cfg.num_datasets; d++) {
			if (!l->cfg.datasets[d].paths)
				continue;
			for (p = 0; p < l->cfg.datasets[d].num_paths; p++)
				free((char *)l->cfg.datasets[d].paths[p]);
			free((void *)l->cfg.datasets[d].paths);
		}
		free((void *)l->cfg.datasets);
	}
	free((void *)l->cfg.resume_state);
	free((void *)l->cfg.device);
}

static const struct grist_engine_ops *pick_engine(const struct grist_loader_config *c)
{
	return c->engine == GRIST_ENGINE_REF ? &grist_engine_ref_ops : &grist_engine_async_ops;
}

/* The packer's source: the engine's batches in order, laid out as ragged records. */
static int pack_pull(void *ctx, struct grist_slot **out)
{
	struct grist_loader *l = ctx;
	struct grist_slot *s = NULL;
	int ret;

	*out = NULL;
	ret = l->ops->next(l->engine, &s);
	if (ret || !s)
		return ret;
	ret = grist_slot_publish(s, &l->layout, 0);
	if (ret) {
		l->ops->release(l->engine, s);
		return ret;
	}
	*out = s;
	return 0;
}

static void pack_release(void *ctx, struct grist_slot *s)
{
	struct grist_loader *l = ctx;

	l->ops->release(l->engine, s);
}

static int pack_record_error(void *ctx, uint32_t dataset, uint64_t record, int code)
{
	const struct grist_loader *l = ctx;

	return grist_engine_record_error(l->sources, l->num_sources, dataset, record, code);
}

/* What the engine reads of the loader: its narrow view (exec/engine.h). */
static void engine_params(struct grist_loader *l)
{
	const struct grist_loader_config *c = &l->cfg;

	l->params = (struct grist_engine_params){
		.stream = l->stream,
		.sources = l->sources,
		.num_sources = l->num_sources,
		.start_position = l->start_position,
		.layout = &l->layout,
		.batch_size = c->batch_size,
		.seed = c->seed,
		.engine = c->engine,
		.read_mode = c->read_mode,
		.granularity = c->granularity,
		.window_chunks = c->window_chunks,
		.shard_count = c->shard_count,
		.shuffled = !c->no_shuffle,
		.threads = c->threads,
		.queue_depth = c->queue_depth,
		.prefetch = c->prefetch,
		.read_ahead_bytes = c->read_ahead_bytes,
		.remote = c->remote.size ? &c->remote : NULL,
		.read_trace = c->read_trace,
		.read_trace_ctx = c->read_trace_ctx,
		.verify = c->verify,
		.io_override = l->hooks.io_override,
		.io_kind = l->hooks.io_kind,
		.io_config = l->hooks.io_config,
		.assembly_bytes = c->assembly_bytes,
		.deliver = l->provider,
		/*
		 * the packer cuts the records into its own rows; a device stage, whose batches are
		 * units, is never given a packer (check_config())
		 */
		.unit_sizes_unseen = c->pack != GRIST_PACK_NONE,
	};
}

/* fork() children seen by this process: a loader made before the last one belongs to a parent. */
static unsigned fork_generation;
static pthread_once_t fork_watch_once = PTHREAD_ONCE_INIT;

static void fork_child(void)
{
	__atomic_add_fetch(&fork_generation, 1, __ATOMIC_RELEASE);
}

static void fork_watch(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

int grist_loader_create(const struct grist_loader_config *cfg, struct grist_loader **out)
{
	return grist_loader_create_hooked(cfg, NULL, out);
}

int grist_loader_create_hooked(const struct grist_loader_config *caller_cfg, const struct grist_loader_hooks *hooks,
			       struct grist_loader **out)
{
	struct grist_loader_config copy, *cfg = &copy;
	struct grist_loader *l;
	int ret;

	*out = NULL;
	if (!caller_cfg)
		return grist_fail(-EINVAL, "loader: no configuration");
	ret = grist_sized_in(&copy, sizeof(copy), caller_cfg, "grist_loader_config");
	if (ret)
		return ret;
	ret = check_config(cfg);
	if (ret)
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l)
		return grist_fail(-ENOMEM, "loader: out of memory");
	if (hooks)
		l->hooks = *hooks;
	pthread_once(&fork_watch_once, fork_watch);
	l->pid = getpid();
	l->fork_generation = __atomic_load_n(&fork_generation, __ATOMIC_ACQUIRE);
	ret = copy_config(l, cfg);
	if (ret)
		goto fail;
	l->extra = config_digest(&l->cfg);
	if (l->cfg.pack != GRIST_PACK_NONE) {
		/* the engine delivers plain records; the packer makes the caller's rows */
		l->pack_params = pack_params(&l->cfg);
		if (l->cfg.map)
			l->cfg.batch_size = PACK_ENGINE_BATCH_MAP;
		else if (l->cfg.batch_size < PACK_ENGINE_BATCH)
			l->cfg.batch_size = PACK_ENGINE_BATCH;
		l->cfg.drop_remainder = false;
	}
	l->layout = (struct grist_layout){
		.kind = l->cfg.layout,
		.record_bytes = l->cfg.record_bytes,
		.pad_value = l->cfg.pad_value,
		.map = l->cfg.map,
		.map_ctx = l->cfg.map_ctx,
		.map_out_max = l->cfg.map_out_max,
		.batch_size = l->cfg.batch_size,
		.max_batch_bytes = l->cfg.max_batch_bytes,
	};
	ret = open_sources(l);
	if (ret)
		goto fail;
	ret = build_stream(l);
	if (ret)
		goto fail;
	engine_params(l);
	if (l->cfg.device) {
		/* before the engine: the stage lends the memory the engine assembles into */
		ret = grist_loader_device_start(l);
		if (ret)
			goto fail;
	}
	l->ops = pick_engine(&l->cfg);
	ret = l->ops->start(&l->params, &l->engine);
	if (ret) {
		l->ops = NULL;
		goto fail;
	}
	l->pull = (struct grist_pull){
		.ops = l->ops,
		.engine = l->engine,
		.batch_size = l->cfg.batch_size,
		.drop_remainder = l->cfg.drop_remainder,
		.end = l->start_position,
	};
	if (l->device) {
		ret = grist_loader_device_run(l);
		if (ret)
			goto fail;
	}
	if (l->cfg.pack != GRIST_PACK_NONE) {
		const struct grist_pack_source src = {
			.pull = pack_pull, .release = pack_release, .record_error = pack_record_error, .ctx = l,
		};

		const struct grist_pack_resume at = { .position = l->consumed, .piece = l->pack_piece,
						      .skip = l->pack_skip };

		ret = grist_packer_create(&l->pack_params, &src, &at, &l->pack);
		if (ret)
			goto fail;
	}
	*out = l;
	return 0;
fail:
	grist_loader_destroy(l);
	return ret;
}

/* Record a delivered batch: the checkpoint position moves past it. */
static void account(struct grist_loader *l, struct grist_slot *s)
{
	if (s->filtered)
		l->lockstep = false;
	l->counters.records_filtered += s->filtered;
	l->counters.records += s->count;
	l->counters.batches++;
	l->consumed = s->stream_end;
	l->batches++;
}

/* Record a delivered batch of packed rows: the checkpoint is the packer's pair after it. */
static void account_packed(struct grist_loader *l, struct grist_slot *s)
{
	struct grist_pack_resume after;
	uint64_t tokens;

	grist_packer_batch_info(s, &after, &tokens);
	l->consumed = after.position;
	l->pack_piece = after.piece;
	l->pack_skip = after.skip;
	s->batch.sequence = l->batches;
	l->lockstep = false;
	l->counters.records += s->batch.num_rows;
	l->counters.pack_tokens += tokens;
	l->counters.pack_capacity += (uint64_t)s->batch.num_rows * l->pack_params.length;
	l->counters.batches++;
	l->batches++;
}

/*
 * A free entry of the held table, or -EBUSY when the caller holds prefetch batches
 * already. The limit is what keeps device mode from blocking: its slot ring has room
 * for the units in flight plus prefetch held batches, and no more (device_feed.c).
 * Host mode follows the same rule so that a program behaves the same in both.
 */
static int free_hold(struct grist_loader *l)
{
	int i, held = 0, free_at = -1;

	for (i = 0; i < GRIST_LOADER_MAX_HELD; i++) {
		if (l->held[i])
			held++;
		else if (free_at < 0)
			free_at = i;
	}
	if (held >= (int)l->cfg.prefetch || free_at < 0)
		return grist_fail(-EBUSY, "loader: %d batches are held, the most a caller may hold (prefetch = %u); "
				  "release one before asking for the next, or raise prefetch", held, l->cfg.prefetch);
	return free_at;
}

/*
 * fork() copies the loader but not its engine threads: in the child nothing would ever
 * fill a batch, and their locks may be held forever. So a child gets an error from
 * next() and stats(), and release() and destroy() there touch nothing the threads share
 * (destroy leaks the copy rather than join threads that do not exist).
 */
static bool forked(const struct grist_loader *l)
{
	/* a counter the child's atfork handler bumps: no getpid() syscall per batch */
	return __atomic_load_n(&fork_generation, __ATOMIC_ACQUIRE) != l->fork_generation;
}

int grist_loader_next(struct grist_loader *l, struct grist_batch **out)
{
	struct grist_slot *s = NULL;
	uint64_t t0 = grist_now_ns(), end = 0;
	int ret, hold;

	*out = NULL;
	if (forked(l))
		return grist_fail(-ENOTRECOVERABLE,
				  "loader: created in process %d, used in process %d after fork(): its engine "
				  "threads did not survive the fork; create the loader in the child (for "
				  "example Loader(..., state=parent_loader.get_state()))",
				  (int)l->pid, (int)getpid());
	if (l->error)
		return grist_fail(l->error, "loader: stopped by an earlier error");
	if (l->ended)
		return 0;
	hold = free_hold(l);
	if (hold < 0)
		return hold;
	if (l->pack) {
		ret = grist_packer_next(l->pack, &s);
	} else if (l->device) {
		ret = grist_loader_device_next(l, &s, &end);
	} else {
		ret = grist_pull_next(&l->pull, &s);
		end = l->pull.end;
		if (!ret && s) {
			ret = grist_slot_publish(s, &l->layout, l->batches);
			if (ret)
				l->ops->release(l->engine, s);
		}
	}
	l->counters.consumer_stall_ns += grist_now_ns() - t0;
	if (ret) {
		l->error = ret;
		return ret;
	}
	if (!s) {
		l->consumed = l->pack ? grist_packer_end_position(l->pack) : end;
		l->pack_skip = 0;
		l->pack_piece = 0;
		l->ended = true;
		return 0;
	}
	if (l->pack)
		account_packed(l, s);
	else
		account(l, s);
	l->held[hold] = s;
	*out = &s->batch;
	return 0;
}

static struct grist_slot *unhold(struct grist_loader *l, struct grist_batch *b)
{
	struct grist_slot *s;
	int i;

	for (i = 0; i < GRIST_LOADER_MAX_HELD; i++) {
		s = l->held[i];
		if (s && &s->batch == b) {
			l->held[i] = NULL;
			return s;
		}
	}
	return NULL;
}

int grist_loader_release_after(struct grist_loader *l, struct grist_batch *b, unsigned num_events,
			       void *const *events)
{
	struct grist_slot *s;

	if (l && forked(l))
		return 0; /* the engine that lent it is in the parent */
	if (!l || !b || !(s = unhold(l, b)))
		return grist_fail(-EINVAL, "loader: release of a batch that is not held");
	if (l->device)
		return grist_loader_device_release(l, s, num_events, events);
	if (l->pack)
		grist_packer_release(l->pack, s);
	else
		l->ops->release(l->engine, s);
	return 0;
}

void grist_loader_release(struct grist_loader *l, struct grist_batch *b)
{
	grist_loader_release_after(l, b, 0, NULL);
}

void *grist_loader_device_stage(const struct grist_loader *l)
{
	return l->device ? grist_loader_device_handle(l) : NULL;
}

int grist_loader_save_state(const struct grist_loader *l, uint8_t *buf, size_t cap, size_t *len)
{
	int ret;

	if (l->cfg.pack != GRIST_PACK_NONE)
		ret = grist_stream_save_packed_ex(l->stream, l->consumed, l->pack_piece, l->pack_skip, l->batches,
						  l->extra, buf, cap);
	else
		ret = grist_stream_save(l->stream, l->consumed, l->batches, l->lockstep, l->extra, buf, cap);
	if (ret < 0)
		return ret;
	*len = (size_t)ret;
	return 0;
}

void grist_loader_stats_sized(const struct grist_loader *l, struct grist_loader_stats *caller, size_t size)
{
	struct grist_loader_stats st, *out = &st;

	memset(out, 0, sizeof(*out));
	if (l->ops && l->ops->stats && !forked(l))
		l->ops->stats(l->engine, out);
	out->batches = l->counters.batches;
	out->records = l->counters.records;
	out->records_filtered = l->counters.records_filtered;
	out->consumer_stall_ns = l->counters.consumer_stall_ns;
	if (l->pack) {
		out->records_filtered = grist_packer_filtered(l->pack);
		out->pack_tokens = l->counters.pack_tokens;
		out->pack_capacity = l->counters.pack_capacity;
		out->memory_bytes += grist_packer_memory(l->pack);
	}
	grist_sized_out(caller, size, out, sizeof(*out));
}

int grist_loader_get_config(const struct grist_loader *l, struct grist_loader_config *out)
{
	struct grist_loader_config c = l->cfg;
	size_t size;

	if (!out || out->size < sizeof(out->size))
		return grist_fail(-EINVAL, "grist_loader_get_config: @out was not set up by grist_loader_config_init()");
	size = out->size;
	if (l->pack) {
		/* cfg holds the engine's record batches: the caller asked for rows */
		c.batch_size = l->pack_params.batch_rows;
		c.drop_remainder = l->pack_params.drop_remainder;
		if (c.pack != GRIST_PACK_CONCAT_SPLIT)
			c.pack_bins = l->pack_params.bins;
	}
	grist_sized_out(out, size, &c, sizeof(c));
	out->size = size;
	return 0;
}

int grist_loader_num_batches(const struct grist_loader *l, uint64_t *out)
{
	uint64_t len = grist_stream_length(l->stream), left, b = l->cfg.batch_size;

	*out = 0;
	if (len == UINT64_MAX)
		return grist_fail(-EDOM, "loader: an unbounded stream (epochs 0) has no batch count");
	if (l->cfg.map)
		return grist_fail(-EDOM, "loader: with a map (which may filter records) the batch count is not "
				  "known in advance");
	if (l->pack)
		return grist_fail(-EDOM, "loader: packed rows depend on the tokens; their count is not known in "
				  "advance");
	left = len > l->start_position ? len - l->start_position : 0;
	*out = l->cfg.drop_remainder ? left / b : left / b + (left % b != 0);
	return 0;
}

uint64_t grist_loader_num_records(const struct grist_loader *l, size_t d)
{
	return d < l->num_sources ? l->sources[d].num_records : 0;
}

void grist_loader_destroy(struct grist_loader *l)
{
	size_t i;

	if (!l || forked(l))
		return;
	if (l->device) {
		/* the feeder thread may be waiting on the engine: wake it, then stop it */
		if (l->ops)
			l->ops->abort(l->engine);
		grist_loader_device_quiesce(l);
	}
	/* the packer's batches are its own memory; it hands every engine batch back as it goes */
	grist_packer_destroy(l->pack);
	if (l->pack)
		memset(l->held, 0, sizeof(l->held));
	if (l->ops) {
		for (i = 0; i < GRIST_LOADER_MAX_HELD; i++)
			if (l->held[i])
				l->ops->release(l->engine, l->held[i]);
		/* units still bound to device slots cancel them here: the stage must outlive this */
		l->ops->stop(l->engine);
	}
	grist_loader_device_stop(l);
	grist_stream_destroy(l->stream);
	close_sources(l);
	free_config(l);
	free(l);
}
