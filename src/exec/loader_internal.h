/* The loader object: its configuration, sources, stream and engine (the engines see only exec/engine.h). */
#ifndef GRIST_EXEC_LOADER_INTERNAL_H
#define GRIST_EXEC_LOADER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "grist/format.h"
#include "grist/loader.h"
#include "grist/plan.h"
#include "exec/engine.h"
#include "exec/pack.h"
#include "exec/slot.h"
#include "io/io.h"

struct grist_loader;
struct grist_loader_device;

/* Size of the held table: the largest prefetch. A caller may hold cfg.prefetch batches. */
#define GRIST_LOADER_MAX_HELD 64

/*
 * Who takes batches from an engine, and how far that taker got. Each thread that pulls
 * owns its own, so the position of what was pulled never mixes with the position of
 * what the consumer was handed (in device mode the feeder runs ahead of the consumer).
 */
struct grist_pull {
	const struct grist_engine_ops *ops;
	void *engine;
	uint64_t batch_size;
	bool drop_remainder;
	uint64_t end; /* shard position just past the last batch pulled or dropped */
};

/*
 * Test hooks: run the async engine's reads through another io backend, such as the
 * fault injector, to prove that errors surface cleanly. Not part of the public API.
 */
struct grist_loader_hooks {
	bool io_override;
	enum grist_io_kind io_kind;      /* e.g. GRIST_IO_FAULT */
	struct grist_io_config io_config; /* queue depth etc. are still taken from the loader config */
};

struct grist_loader {
	struct grist_loader_config cfg; /* copy; pointers below own the copied arrays */
	struct grist_engine_source *sources;
	size_t num_sources;
	struct grist_stream *stream;
	struct grist_layout layout;
	uint64_t extra;          /* configuration digest mixed into checkpoint fingerprints */
	uint64_t start_position; /* shard position the run starts at (resume) */
	uint64_t consumed;       /* shard positions consumed by the batches delivered so far */
	uint64_t batches;        /* batches delivered so far (sequence of the next one) */
	bool lockstep;           /* no record was filtered: every host consumed the same count */
	bool ended;
	int error;
	pid_t pid;               /* the process that created it: its engine threads live there only */
	unsigned fork_generation; /* fork() children seen when it was made (loader.c: forked()) */

	struct grist_loader_hooks hooks;
	const struct grist_slot_provider *provider; /* device mode: batches live in device-stage slots */
	struct grist_loader_device *device;         /* device mode state (device_feed.c) */
	struct grist_engine_params params; /* what the engine reads: filled once the stream is built */
	struct grist_pull pull;  /* host mode: the consumer's puller (device mode: the feeder owns its own) */
	const struct grist_engine_ops *ops;
	void *engine;
	/*
	 * Packing: the packer consumes the engine's record batches and delivers rows. The
	 * engine then runs with a ragged layout, at least PACK_ENGINE_BATCH (loader.c)
	 * records per batch and no drop_remainder (cfg holds those); pack_params hold what
	 * the caller asked for.
	 */
	struct grist_packer *pack;
	struct grist_pack_params pack_params;
	uint64_t pack_skip;      /* checkpoint: rows / tokens delivered past consumed */
	uint64_t pack_piece;     /* checkpoint: the piece of the record at consumed a round began with */
	const char *engine_name;
	struct grist_loader_stats counters; /* consumer-side counters */
	struct grist_slot *held[GRIST_LOADER_MAX_HELD]; /* batches handed out, for release() */
};

/* grist_loader_create() with test hooks (may be NULL). */
int grist_loader_create_hooked(const struct grist_loader_config *cfg, const struct grist_loader_hooks *hooks,
			       struct grist_loader **out);

/*
 * The next batch from p's engine with drop_remainder applied (pull.c): *out is NULL at
 * the end, and then p->end says how far the stream was consumed. Returns 0 or the
 * engine's error. Not thread-safe: one puller belongs to one thread.
 */
int grist_pull_next(struct grist_pull *p, struct grist_slot **out);

/* Device mode (device_feed.c; -ENOTSUP without OpenCL). */
int grist_loader_device_start(struct grist_loader *l);  /* create the stage: before the engine */
int grist_loader_device_run(struct grist_loader *l);    /* start the feeder: after the engine */
/* The next batch, in order; at the end *out is NULL and *end is how far the feeder pulled. */
int grist_loader_device_next(struct grist_loader *l, struct grist_slot **out, uint64_t *end);
int grist_loader_device_release(struct grist_loader *l, struct grist_slot *s, unsigned n, void *const *events);
void grist_loader_device_quiesce(struct grist_loader *l); /* stop the feeder; the stage stays */
void grist_loader_device_stop(struct grist_loader *l);    /* quiesce, then free the stage */
void *grist_loader_device_handle(const struct grist_loader *l);

#endif
