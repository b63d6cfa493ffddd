/*
 * Engine sizing: every count and byte budget of the engines and the device stage, from
 * the parameters and the files' geometry, in one pure function.
 *
 * Memory is bounded by the configuration. At most nunits = prefetch + works x workers
 * units are claimed and not yet consumed (a worker may claim unit u only once unit
 * u - nunits has been consumed), where works = 2 + 2 x queue_depth / U (at record
 * granularity more when a larger read-ahead needs more units to fill it; for URLs at
 * chunk granularity U counts the unit's reads, not its items, and works is at most the
 * units whose reads fit the arena; at most MAX_WORKS), so at most that many slots exist,
 * each taken when its unit's decoding starts (with a slot provider, only slot_window =
 * prefetch + 2 x workers units may hold one; without, about ASSEMBLY_BYTES of slots,
 * REMOTE_ASSEMBLY_BYTES for URLs at chunk granularity, the caller's batches included, but
 * never fewer than one per worker, and with a map never fewer than slot_window; a budget
 * the caller set, assembly_bytes, is kept as set, at least one slot).
 * Read buffers are each worker's arena (read_ahead bytes), plus one unit's reads in heap
 * memory when a unit alone is larger than the arena and cannot be streamed through it
 * (engine_async_plan.c).
 */
#include "exec/engine.h"
#include "exec/options_table.h"
#include "format/dataset.h"
#include "io/remote.h"
#include "plan/read_plan.h"

#define MAX_WORKS 1024                     /* units one worker reads ahead, at most */
#define DEFAULT_READ_AHEAD_MAX ((uint64_t)GRIST_DEFAULT_READ_AHEAD_MAX_MIB << 20) /* per worker */
#define DEVICE_SLOTS_MAX 4096
/* bytes of host slots the units being assembled ahead of the consumer may hold, about */
#define ASSEMBLY_BYTES (512ull << 20)
/*
 * URL datasets: the reads one engine thread hands the http backend at once by default
 * are as many as its read-ahead holds (the arena keeps the reads in flight and as many
 * landed: the read-ahead over twice the largest extent), at least the worker's share of
 * REMOTE_PROCESS_QUEUE_DEPTH, at most REMOTE_QUEUE_DEPTH_MAX.
 * The GET scheduler makes its GETs from the reads waiting, and a GET carries about the
 * object's bytes over the bytes of reads waiting in its span, so what keeps GETs dense is
 * the bytes the reads cover, not their count: a cap of 16,384 reads held the 611-byte
 * chunks of a 122 MB object to 11 MB waiting, and each GET carried 8.5-8.7 bytes of body
 * per byte wanted (docs/tuning.md, "group_size 1: the read-ahead in bytes"). 1 MiB chunks
 * stay at 4096 reads. The io object's bytes in flight (64 MiB) still bound the reads out:
 * 110,000 of those chunks. The reads' bookkeeping is about 200 bytes each beyond their bytes
 * (the engine's request and plan, the scheduler's piece and its sort's copy), so this cap
 * on the process's reads (its workers' shares) bounds it at about 50 MB, and the
 * scheduler's work per GET (a walk of the reads waiting) with it.
 */
#define REMOTE_QUEUE_DEPTH_MAX GRIST_IO_MAX_REMOTE_QUEUE_DEPTH
/*
 * URL datasets: the read-ahead bytes and queue depth of a process's workers together, by
 * default. Every worker's reads wait in the process's one GET scheduler (io/sched.c), and
 * a GET carries about the object's bytes over the bytes of reads waiting, so what keeps
 * GETs dense is the process's read-ahead, not a worker's: 4 workers of 64 MiB and 4096
 * reads sent 1.20-1.27 bytes of GET body per byte wanted on a 103 MB object, one worker
 * 2.4-3.0 (docs/tuning.md, run H). So fewer workers each take a larger share, never less
 * than the per-worker default; the share above that is at most twice the URL files' bytes
 * (the reads of two passes over them), so a small dataset keeps today's arena.
 */
#define REMOTE_PROCESS_READ_AHEAD (256ull << 20)
/*
 * URL datasets: the least queue depth of a process's workers together (each takes its
 * share). It is the process's count, not a worker's, for the reason above: the reads of
 * every worker wait in one scheduler, and the GETs are made from all of them. The value:
 * 512 reads per thread (one backend each, then) covered 5% of a 12 MB object of 1 KiB
 * chunks and GETs were mostly gap bytes; 4096 per thread took 3 epochs of chunk windows
 * behind a 20 ms proxy to 0.66x (group_size 1) and 0.74x (group_size 64) of 512's wall
 * time; with the one scheduler, 4 workers of 4096 (16,384 in all) sent 1.20-1.27 bytes of
 * body per byte wanted at group_size 64, and one worker of 4096 2.4-3.0, so one worker now
 * takes all 16,384 (docs/tuning.md, run H). Small chunks get more: as many as the
 * read-ahead holds (remote_queue_depth()).
 */
#define REMOTE_PROCESS_QUEUE_DEPTH 16384
/*
 * URL datasets at chunk granularity: bytes of host slots ahead of the consumer, about
 * (instead of ASSEMBLY_BYTES). A GET lands the reads of many units at once, so the
 * workers decoded up to 100-450 units ahead of the consumer into a slot each (1 MiB at
 * group_size 64), fresh memory that mlock faulted in (docs/tuning.md, run F).
 */
#define REMOTE_ASSEMBLY_BYTES (64ull << 20)

void grist_engine_geometry_read(const struct grist_engine_params *p, unsigned online_cpus,
				struct grist_engine_geometry *g)
{
	uint64_t limit = grist_max_chunk_bytes(), len, per, c;
	const struct grist_file_geom *fg;
	size_t d, f;

	*g = (struct grist_engine_geometry){ .online_cpus = online_cpus, .smallest_group = UINT64_MAX,
					     .all_remote = true };
	for (d = 0; d < p->num_sources; d++) {
		for (f = 0; f < p->sources[d].num_files; f++) {
			if (p->sources[d].files[f].group_size && p->sources[d].files[f].group_size < g->smallest_group)
				g->smallest_group = p->sources[d].files[f].group_size;
			fg = grist_reader_file_geom(p->sources[d].reader, f);
			if (!fg)
				continue;
			if (fg->remote) {
				g->any_remote = true;
				if (fg->num_chunks)
					g->remote_bytes += fg->chunk_offsets[fg->num_chunks] - fg->chunk_offsets[0];
			} else
				g->all_remote = false;
			/*
			 * A chunk above the limit is refused, with its file and offset, when a unit
			 * reaches it (grist_reader_locate()); it must not size the arenas first, or a
			 * footer that claims 100 GB would have the engine map 100 GB before any check.
			 */
			for (c = 0; c < fg->num_chunks; c++) {
				len = fg->chunk_offsets[c + 1] - fg->chunk_offsets[c];
				if (len > g->largest_extent && len <= limit)
					g->largest_extent = len;
			}
			if (fg->max_chunk_decoded > g->max_chunk_decoded)
				g->max_chunk_decoded = fg->max_chunk_decoded;
			if (fg->group_size) {
				per = (fg->max_chunk_decoded + fg->group_size - 1) / fg->group_size;
				if (per > g->row_bytes)
					g->row_bytes = per;
			}
		}
	}
	if (g->smallest_group == UINT64_MAX)
		g->smallest_group = 1;
	if (!g->any_remote)
		g->all_remote = false;
	/* what the run will deliver: read buffers and slots are never sized for more (issue 37) */
	if (p->stream) {
		len = grist_stream_length(p->stream);
		if (len != UINT64_MAX && len > p->start_position)
			g->positions = len - p->start_position;
	}
}

/* Average decoded bytes per record as the footers announce them (for sizing slots, not a bound). */
static size_t row_bytes_hint(const struct grist_engine_params *p, const struct grist_engine_geometry *g)
{
	if (p->layout->kind != GRIST_LAYOUT_RAGGED)
		return p->layout->record_bytes;
	if (p->layout->map)
		return 0;
	return g->row_bytes > (1u << 20) ? 0 : (size_t)g->row_bytes;
}

/*
 * U at chunk granularity: enough positions for every dataset to bring about one whole
 * window into a unit. A mixed unit cannot end on every dataset's window boundary at
 * once, but this way a window is split over at most about two units.
 */
static void size_chunk_units(const struct grist_engine_params *p, struct grist_engine_sizes *s)
{
	uint64_t window = p->window_chunks ? p->window_chunks : GRIST_PLAN_DEFAULT_WINDOW, group, per_unit;
	double total = 0, most = 0, share, need;
	size_t d, f;

	for (d = 0; d < p->num_sources; d++)
		total += p->num_sources > 1 ? p->sources[d].weight : 1.0;
	for (d = 0; d < p->num_sources; d++) {
		share = (p->num_sources > 1 ? p->sources[d].weight : 1.0) / total;
		group = 1;
		for (f = 0; f < p->sources[d].num_files; f++)
			if (p->sources[d].files[f].group_size > group)
				group = p->sources[d].files[f].group_size;
		need = (double)window * (double)group / (double)p->shard_count / share;
		if (need > most)
			most = need;
	}
	per_unit = most < (double)(1u << 20) ? (uint64_t)most : 1u << 20;
	per_unit = (per_unit + p->batch_size - 1) / p->batch_size * p->batch_size;
	if (per_unit > s->unit_items)
		s->unit_items = (size_t)per_unit;
	/* only a map keeps a window's chunks decoded at once (see advance_in_order()) */
	s->decoders = p->layout->map ? (size_t)(window < 62 ? window : 62) + 2 : 1;
	s->max_unit_items = 4 * s->unit_items;
}

/* The most read-ahead one worker takes by default: DEFAULT_READ_AHEAD_MAX, or its share of REMOTE_PROCESS_READ_AHEAD. */
static uint64_t remote_read_ahead_max(const struct grist_engine_geometry *g, const struct grist_engine_sizes *s)
{
	uint64_t share = REMOTE_PROCESS_READ_AHEAD / s->workers;

	if (!g->any_remote || share <= DEFAULT_READ_AHEAD_MAX)
		return DEFAULT_READ_AHEAD_MAX;
	if (share - DEFAULT_READ_AHEAD_MAX > 2 * g->remote_bytes)
		share = DEFAULT_READ_AHEAD_MAX + 2 * g->remote_bytes;
	return share;
}

/*
 * Read-ahead bytes per worker. By default: twice the queue depth of the largest chunk
 * extent, so the ring stays full while as many landed reads wait to be decoded, and at
 * least two units' reads (a unit larger than half the arena waits for the whole units
 * before it, streamed or read alone, so the ring would drain there), at most 64 MiB. A budget set in the configuration is split over the
 * workers as given.
 */
static size_t size_read_ahead(const struct grist_engine_params *p, const struct grist_engine_geometry *g,
			      const struct grist_engine_sizes *s, uint64_t max_extent)
{
	uint64_t read_ahead, reads, unit_reads;

	if (p->read_ahead_bytes) {
		read_ahead = p->read_ahead_bytes / s->workers;
	} else {
		/* a unit reads one chunk per item at record granularity, its windows' chunks at chunk granularity */
		reads = p->granularity == GRIST_GRANULARITY_CHUNK ? s->unit_items / g->smallest_group + 2 : s->unit_items;
		unit_reads = max_extent * reads;
		if (unit_reads > DEFAULT_READ_AHEAD_MAX / 2)
			unit_reads = DEFAULT_READ_AHEAD_MAX / 2;
		read_ahead = 2 * s->queue_depth * max_extent;
		if (read_ahead < 2 * unit_reads)
			read_ahead = 2 * unit_reads;
		if (read_ahead > remote_read_ahead_max(g, s))
			read_ahead = remote_read_ahead_max(g, s);
	}
	/*
	 * Never more than the whole run reads (each position reads at most one chunk; a unit
	 * above half of it is then streamed through it). The arena is pinned and registered at
	 * start-up, so a short run (a few records of 1 MiB) would otherwise fault in 64 MiB per
	 * worker that it never uses (issue 37).
	 */
	if (g->positions && g->positions < read_ahead / max_extent)
		read_ahead = g->positions * max_extent;
	if (read_ahead < max_extent)
		read_ahead = max_extent;
	return (size_t)((read_ahead + GRIST_ENGINE_MEM_ALIGN - 1) & ~(uint64_t)(GRIST_ENGINE_MEM_ALIGN - 1));
}

/*
 * The default queue depth for URL datasets: the reads of @max_extent bytes the worker's
 * read-ahead holds, each landed read beside one in flight, at most the worker's share of
 * REMOTE_QUEUE_DEPTH_MAX (the process's reads, whatever its threads: see there); at least
 * the worker's share of REMOTE_PROCESS_QUEUE_DEPTH.
 */
static unsigned remote_queue_depth(const struct grist_engine_geometry *g, const struct grist_engine_sizes *s,
				   uint64_t max_extent)
{
	uint64_t q = remote_read_ahead_max(g, s) / (2 * max_extent);

	if (q > REMOTE_QUEUE_DEPTH_MAX / s->workers)
		q = REMOTE_QUEUE_DEPTH_MAX / s->workers;
	if (q < REMOTE_PROCESS_QUEUE_DEPTH / s->workers)
		q = REMOTE_PROCESS_QUEUE_DEPTH / s->workers;
	return (unsigned)q;
}

void grist_engine_size(const struct grist_engine_params *p, const struct grist_engine_geometry *g,
		       struct grist_engine_sizes *s)
{
	/*
	 * The most read buffer one chunk read takes: rounded out to O_DIRECT pages at both
	 * ends, or for URLs only to the cache line its region starts on (read_plan.h).
	 */
	uint64_t max_extent = g->all_remote ? grist_read_buf_len(g->largest_extent, GRIST_READ_BUF_ALIGN_REMOTE)
					    : g->largest_extent + 2 * GRIST_ENGINE_MEM_ALIGN;
	/*
	 * URL chunk windows: the backend makes its GETs from many units' reads at once and
	 * lands them together, so the claim window counts reads and the slots ahead of the
	 * consumer get their own budget (below).
	 */
	bool url_windows = g->any_remote && p->granularity == GRIST_GRANULARITY_CHUNK;
	uint64_t slots;
	size_t works;

	/*
	 * URL files whose chunks are all above the limit (refused when a unit reaches one) or
	 * that have none leave no extent: size for a cache line's read, never divide by 0.
	 */
	if (!max_extent)
		max_extent = GRIST_READ_BUF_ALIGN_REMOTE;
	*s = (struct grist_engine_sizes){ 0 };
	s->workers = p->engine == GRIST_ENGINE_REF ? 1 : p->threads ? p->threads : g->online_cpus;
	if (s->workers < 1)
		s->workers = 1;
	/* U: one batch for record granularity; about one window of chunks for chunk granularity */
	s->unit_items = p->batch_size;
	s->max_unit_items = s->unit_items;
	s->decoders = p->layout->map ? 2 : 1;
	if (p->granularity == GRIST_GRANULARITY_CHUNK)
		size_chunk_units(p, s);
	/*
	 * No more workers than the run has units (record granularity, where every unit but the
	 * last holds unit_items): each takes a ring and a pinned arena at start-up, and one
	 * that never gets a unit would fault its arena in for nothing (issue 37).
	 */
	if (p->granularity != GRIST_GRANULARITY_CHUNK && g->positions &&
	    (g->positions + s->unit_items - 1) / s->unit_items < s->workers)
		s->workers = (unsigned)((g->positions + s->unit_items - 1) / s->unit_items);
	s->row_bytes_hint = row_bytes_hint(p, g);
	s->positions = g->positions;
	/*
	 * Remote reads: the backend keeps at most its in-flight budget of GETs out and coalesces
	 * what waits, so the engine hands it more reads than a disk ring would take: its read-ahead
	 * window, which the GETs are made from (REMOTE_PROCESS_QUEUE_DEPTH above).
	 */
	s->queue_depth = p->queue_depth ? p->queue_depth
		       : g->any_remote && !p->io_override ? remote_queue_depth(g, s, max_extent)
						     : GRIST_DEFAULT_QUEUE_DEPTH;
	s->read_ahead = size_read_ahead(p, g, s, max_extent);
	/*
	 * Read depth is its own quantity: each worker reads up to `works` units ahead, enough
	 * for twice the queue depth even when a unit is one small batch (and for the whole
	 * read-ahead budget when one was set larger), and the read-ahead arena bounds the
	 * bytes. The claim window holds the batches ready ahead of the consumer and every
	 * worker's pipeline: at least two units each (one being decoded, one just published;
	 * without that slack a worker would wait for its neighbour).
	 *
	 * Any claimed unit may take a slot when its decoding starts: a worker's oldest unit
	 * can be far ahead of another's when units are small, and both must decode. Only a
	 * slot provider (device mode), whose ring is sized for the batches ready ahead plus
	 * two units per worker, gets that smaller assembly window.
	 */
	works = 2 + 2 * (size_t)s->queue_depth / s->unit_items;
	/*
	 * URL datasets at chunk granularity: count the unit's reads, not its items. A unit of
	 * group_size 64 chunks holds 64 items per read, so counting items kept a window of
	 * 10 units (160 chunk reads) per thread, far fewer than the queue depth the backend's
	 * GETs are made from; the arena still bounds the bytes.
	 */
	if (url_windows) {
		uint64_t unit_reads = s->unit_items / g->smallest_group + 2, in_arena;

		works = 2 + 2 * (size_t)s->queue_depth / unit_reads;
		/*
		 * No more than the arena holds: a unit is admitted only once its reads fit, so
		 * the units claimed beyond that only take plans (each its own memory to fault
		 * in) and, decoded, slots far ahead of the consumer.
		 */
		in_arena = 2 + s->read_ahead / (unit_reads * max_extent);
		if (in_arena < works)
			works = (size_t)in_arena;
	}
	/* a larger read-ahead budget than that needs more units to fill it (record granularity) */
	if (p->granularity != GRIST_GRANULARITY_CHUNK && s->read_ahead / (max_extent * s->unit_items) > works)
		works = s->read_ahead / (max_extent * s->unit_items);
	if (works > MAX_WORKS)
		works = MAX_WORKS;
	s->works = works;
	s->nunits = p->prefetch + (unsigned)works * s->workers;
	s->slot_window = p->prefetch + 2 * s->workers;
	s->assembly = p->deliver ? s->slot_window : s->nunits;
	/*
	 * Slots are counted in bytes as well: at 256 records of 1 MiB each unit's slot is
	 * 256 MiB, and a window of 8 such units would fault in 2 GiB that the reads cannot
	 * fill any faster. At most ASSEMBLY_BYTES of typical slots then (the row hint), but
	 * never fewer than one per worker and two in all, so every worker can decode. The
	 * batches the caller holds count against the same bytes: only the oldest unit takes
	 * a slot beyond them (engine_async.c, wait_assembly()), so a caller holding batch 0
	 * while units 1 and 2 are ready does not make a third 256 MiB slot (issue 22).
	 */
	if (s->row_bytes_hint && s->unit_items) {
		uint64_t rows = g->positions && g->positions < s->unit_items ? g->positions : s->unit_items,
			 slot_bytes = rows * s->row_bytes_hint,
			 budget = p->assembly_bytes ? p->assembly_bytes
				  : url_windows    ? REMOTE_ASSEMBLY_BYTES
						   : ASSEMBLY_BYTES,
			 most = budget / slot_bytes;

		/*
		 * A budget the caller set holds: the floors below only buy speed (the oldest
		 * unconsumed unit always gets a slot, slot_window() in engine_async.c, so any
		 * window makes progress, and the batches are the same), and a caller who bounds
		 * the memory has chosen that trade. At least one slot: a budget below one batch
		 * decodes one batch at a time.
		 */
		if (p->assembly_bytes) {
			if (most < 1)
				most = 1;
		} else {
			if (most < s->workers)
				most = s->workers;
			/*
			 * With a map, decoding a unit is CPU work (64 images decoded, cropped and resized:
			 * about 100 ms of one core), and units complete in order for the consumer. A worker
			 * holds two units (the one it decodes and the one it read ahead), so a unit may be
			 * up to two per worker ahead of the oldest; a window of one slot per worker, less
			 * the batch the caller holds, left the workers whose next unit lay beyond it idle
			 * until the consumer caught up: on 16 cores the loader kept about 7 of them busy
			 * (docs/tuning.md, "The loader's serial share"). So each worker gets room for two
			 * units, plus the batches the caller may hold (the slot window): at 16 threads,
			 * batch 64 of 224x224x3 float32 (38.5 MB a slot), 36 slots, 1.39 GB, where the
			 * byte budget alone gave 16 (616 MB). Not for URL chunk windows, whose slots are
			 * bounded for another reason (above).
			 */
			if (p->layout->map && !url_windows && most < s->slot_window)
				most = s->slot_window;
			if (most < 2)
				most = 2;
		}
		if (most < s->assembly) {
			s->assembly = (unsigned)most;
			s->assembly_in_bytes = true;
		}
	}

	/* the device stage: the async engine's units are whole batches only at record granularity */
	s->device_copy = p->engine != GRIST_ENGINE_REF && p->granularity == GRIST_GRANULARITY_CHUNK;
	if (s->device_copy) {
		/*
		 * One copier per eight decode threads: a copy is cheap next to decoding, and on
		 * the H100 at 16 threads two helpers did as well as four (each extra thread
		 * competes with the decode workers for the cores).
		 */
		s->device_helpers = (s->workers + 7) / 8 < GRIST_ENGINE_MAX_HELPERS ? (s->workers + 7) / 8
										    : GRIST_ENGINE_MAX_HELPERS;
		/*
		 * The batches the consumer may hold (prefetch, see free_hold() in loader.c), two
		 * jobs per helper (one copied, one queued), and as many batches queued or
		 * submitted ahead as the engine's slot window (prefetch + 2 per worker): the
		 * feeder blocks on a full ring, and the engine's window with it. `grist load
		 * --device opencl --stats` counts the acquires that found the ring full. Slots
		 * get memory only when used.
		 */
		slots = 2ull * p->prefetch + 2ull * s->workers + 2ull * s->device_helpers + 2;
	} else {
		s->device_helpers = 1;
		/*
		 * The units that may hold a slot while they decode (the slot window), the
		 * packer's batch, the batches the consumer may hold (prefetch), and as many
		 * again as the slot window queued for submission or submitted ahead of the
		 * consumer: without that slack a consumer a few batches behind takes slots from
		 * the workers (the acquires that waited are counted in `--stats`). Slots get
		 * memory only when used.
		 */
		slots = 2ull * s->slot_window + p->prefetch + 2;
	}
	s->device_slots = slots < DEVICE_SLOTS_MAX ? (unsigned)slots : DEVICE_SLOTS_MAX;
}
