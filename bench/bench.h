/* Internal interface between the pieces of grist-bench: the run, its baselines and the sweep. */
#ifndef GRIST_TOOLS_BENCH_H
#define GRIST_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "grist/loader.h"

/* What a dataset is made of; the cache key of a generated file. */
struct bench_data {
	const char *dir;
	uint64_t records;
	uint64_t record_size;
	uint64_t group_size;
	const char *compression;   /* writer option text: zstd:3, uncompressed, snappy, brotli:6 ... */
};

/* One benchmark configuration: the loader knobs plus how long to run. */
struct bench_config {
	struct grist_loader_config loader; /* datasets are filled in per run */
	double seconds;            /* stop after this long (when batches is 0) */
	uint64_t batches;          /* stop after this many batches; 0 = time-limited */
	bool cold;                 /* O_DIRECT reads, page cache dropped first */
	bool progress;             /* \r progress line on stderr (only when it is a terminal) */
	unsigned baselines;        /* with --compare: bit i runs baseline i (bench_baseline_keys) */
};

/* What one loader run measured. Rates are per second of wall time from the first batch request. */
struct bench_result {
	double seconds;            /* create -> last next() returns */
	double first_batch_s;      /* create -> first next() returns */
	double records_per_s, batches_per_s;
	double read_bytes_per_s, delivered_bytes_per_s, decoded_bytes_per_s;
	double cpu_cores;          /* (user + sys) / wall */
	double batch_p50_s, batch_p99_s;   /* time between consecutive next() returns */
	double consumer_stall_share;       /* of wall */
	double io_wait_share, decode_share, producer_stall_share; /* of wall * threads */
	uint64_t records, batches, bytes_delivered;
	struct grist_loader_stats stats;
};

/* The file of @d under d->dir, made with the grist writer unless an intact copy is there. 0 or exit status. */
int bench_dataset_ensure(const struct bench_data *d, char *path, size_t cap, bool progress);

/* Read @path once so a warm run finds it in the page cache. 0 or -errno. */
int bench_warm_file(const char *path);

/* Drop the page cache (root only). 0, or -errno with a sentence in @why. */
int bench_drop_caches(char *why, size_t cap);

/* Run the loader over @paths per @c; 0 or a CLI exit status (the error is printed). */
int bench_run_loader(const char *const *paths, size_t num_paths, const struct bench_config *c,
		     struct bench_result *r);

/* Monotonic seconds. */
double bench_now(void);

/*
 * Index of the median of @v[0..n) (the lower middle one for an even count, the earliest
 * of equal values), n >= 1; @v is left as is, so the caller can pick the run it belongs to.
 */
size_t bench_median_index(const double *v, unsigned n);

/* A progress line on stderr, \r-updated; silent unless stderr is a terminal and it is enabled. */
struct bench_progress {
	bool on;
	double start, last;        /* bench_now() at begin and at the last print */
	const char *label;
};

void bench_progress_begin(struct bench_progress *p, bool enabled, const char *label);
/* @done of @total units so far at @rate units/s (@unit names them); prints at most 5 times a second. */
void bench_progress_update(struct bench_progress *p, double done, double total, double rate, const char *unit);
/* Clear the line. */
void bench_progress_end(struct bench_progress *p);

/* A baseline beside grist: its rate, or why it could not run. */
struct bench_baseline {
	const char *name;
	bool ran;
	char why[256];             /* when !ran: what went wrong */
	char note[320];            /* how it was measured */
	double records_per_s;
	double bytes_per_s;        /* 0 when the baseline reports no bytes */
	bool skipped;              /* left out by --baselines: printed nowhere */
	/*
	 * bytes_per_s are decoded bytes on one core: grist's decoded (not read)
	 * bytes/s is compared with them, and divided by them x decode threads.
	 */
	bool decoded;
	/*
	 * The codec only: the same frames decoded in a shuffled order, as a globally shuffled
	 * loader meets them (0 when not measured). The order alone costs the codec 13-26% more
	 * time on 1 KiB frames (docs/tuning.md), so this is the ceiling a shuffled reader can reach.
	 */
	double shuffled_bytes_per_s;
};

enum { BENCH_BASELINES = 6 };

/* The baselines' short names, in output order: fio, pread, official, grain, codec, pyloader. */
extern const char *const bench_baseline_keys[BENCH_BASELINES];

/* @prog is on PATH; else @why says so and that package @pkg (tools/install-deps) provides it. */
bool bench_have_program(const char *prog, const char *pkg, char *why, size_t cap);

/* Run the baselines @c->baselines selects on @path, for @c->seconds each. */
void bench_run_baselines(const char *path, const struct bench_config *c, struct bench_baseline out[BENCH_BASELINES]);

/*
 * One core's raw decompression speed on @path's own chunks: a sample of them
 * (up to 256 MiB decoded, spread over the file) recompressed with the file's
 * writer options, then decompressed by the codec library in one thread for
 * @c->seconds (one whole pass at least). Pure C: runs wherever grist does.
 */
void bench_baseline_codec(const char *path, const struct bench_config *c, struct bench_baseline *b);

/* How to sweep: which axes, and what to run beside each point. */
struct bench_sweep_opts {
	const char *axes;          /* comma-separated axis names; NULL: all but batch_size */
	const char *out_dir;       /* CSV and PNG go here */
	bool json;
	bool compare;              /* fio beside every point; plots show grist/fio */
	unsigned repeat;           /* rounds per point (medians; with compare, alternating order) */
};

/* The --sweep: one axis at a time around @base; CSV and PNG under o->out_dir. 0 or exit status. */
int bench_sweep(const char *const *paths, size_t num_paths, const struct bench_data *d,
		const struct bench_config *base, const struct bench_sweep_opts *o);

/* grist-bench --vision (grist_bench_vision.c): the training transform alone on N threads. */
struct bench_vision_opts {
	uint64_t images;           /* generated images when no file is given */
	unsigned threads;
	unsigned repeat;           /* rounds; medians */
	double seconds;            /* per round */
	bool fast;                 /* decode="fast" */
	bool json;
};

/* Transform the images of @paths (files or folders; none: generated) for o->seconds per round. */
int bench_run_vision(const char *const *paths, size_t num_paths, const struct bench_vision_opts *o);

/* The JSON object of one run on @f ("{...}", no newline). */
void bench_print_result_json(FILE *f, const struct bench_result *r);

#endif
