/* The conversion engine (engine.c): its state, set up by grist_convert() (convert.c) and by the imagefolder driver. */
#ifndef GRIST_CONVERT_ENGINE_H
#define GRIST_CONVERT_ENGINE_H

#include <stdbool.h>
#include <time.h>

#include "grist/convert.h"
#include "convert/input.h"

struct convert {
	const char *const *inputs;
	size_t ninputs;
	const char *out;
	struct grist_convert_options o;
	uint64_t shards;
	const struct grist_input_ops **ops;  /* per input */
	bool always_number;                  /* name even one shard OUT-00000-of-00001 (TFDS's names) */
	bool not_last;                       /* a driver runs more outputs after this one: no done call yet */
	void *shared;                        /* handed to every input as grist_input.shared */

	/* The outputs: every shard stays open (finished, not committed) until all are done. */
	struct grist_writer **w;
	char **names;
	uint64_t *quota;                     /* records per shard */
	uint8_t *map_buf;                    /* o.map's output, o.map_out_max bytes */

	struct grist_convert_progress p;     /* records, bytes and the input totals so far (across runs) */
	struct timespec start, last;
	bool started;
	uint64_t in_done_before;             /* input bytes of the inputs already finished */
	uint64_t shards_written;             /* across runs */
	uint64_t images_resized, image_bytes_in, image_bytes_out;  /* the imagefolder driver's, for the stats */
};

/*
 * grist_convert_run() - convert c->inputs into c->out (c->shards shards), committing them
 * when all are complete; then grist_convert_run_cleanup() frees what the run allocated
 * (aborting uncommitted shards). c->names[] and c->quota[] stay readable between the two.
 */
int grist_convert_run(struct convert *c);
void grist_convert_run_cleanup(struct convert *c);

/* The last progress call (p.done set), for a driver that ran with not_last. */
int grist_convert_report_done(struct convert *c);

#endif
