/*
 * grist/convert.h - converting datasets into ArrayRecord files.
 *
 * grist_convert() reads INPUTs in order and writes their records, in that order, to one
 * ArrayRecord file or to N shards:
 *
 *   TFRecord   plain or GZIP (told by its magic bytes), every length and data CRC-32C
 *              checked (the data CRC can be skipped);
 *   lines      text, one record per line without its newline, plain or GZIP;
 *   dir        a folder: one record per regular file under it, in bytewise order of the
 *              relative path (symbolic links and special files are skipped);
 *   arrayrecord  ArrayRecord files, re-encoded with other writer options;
 *   csv        CSV (RFC 4180: ',' between fields, '"' quoting with "" inside, CRLF or LF,
 *              newlines inside quotes; blank lines skipped; a header row names the columns),
 *              one tf.train.Example per row, typed by the features spec (below);
 *   imagefolder  TFDS's ImageFolder layout, ROOT/<split>/<label>/<image>, into a prepared
 *              TFDS dataset (below).
 *
 * The csv features spec (options.features) names the columns to write and their types:
 *
 *   spec   := column ("," column)*        e.g. "age:int64,score:float32,name:text,tags:text[]"
 *   column := NAME ":" TYPE ["[]"]        NAME: the header's name (no ':' or ','), also the key
 *   TYPE   := int64 | float32 | text      int64_list / float_list / bytes_list of one value;
 *                                         with "[]" a list: the cell's values split at spaces
 *
 * Columns the spec does not name are left out; a named column missing from the header, a
 * cell that is not a number of its type (empty included), a row with another number of
 * fields than the header, an unclosed quote: errors naming file, line and column. The
 * records equal protobuf's SerializeToString(deterministic=True) of the same Example.
 *
 * imagefolder takes one INPUT, ROOT, and writes OUT as a TFDS version folder: OUT's name
 * and its parent's give the dataset's name and version when OUT looks like a version
 * ("data/flowers/1.0.0"), else OUT's name and version 1.0.0. Every sub-folder of ROOT is a
 * split (a name of letters, digits and '_'), every sub-folder of a split a label, and
 * every file in a label folder named *.png, *.jpg or *.jpeg (any case) an image. Labels
 * are the sorted union of all splits' label folder names (bytewise), as TFDS's ImageFolder
 * builder sorts them; a label's index is its place there. Per split, records go in
 * sorted order (label, then file name; TFDS's builder shuffles them, a loader shuffles
 * anyway) into <name>-<split>.array_record-0000k-of-0000N (N = shards, default 1), each a
 * tf.train.Example {"image": the file's bytes, "image/filename": "<split>/<label>/<file>",
 * "label": the index}. Every image is decoded (libspng, TurboJPEG) before it is written:
 * one that does not decode, or has another channel count than the first, is an error
 * naming the file. Beside the shards: features.json (image (None, None, C), ClassLabel,
 * Text, as TFDS's ImageFolder declares them), label.labels.txt and dataset_info.json, so
 * tfds.builder_from_directory(OUT) opens it. The writer options default to TFDS's
 * (group_size:1,zstd:3). OUT must not exist or be an empty folder, and must not lie in
 * ROOT; the dataset is built in a temporary folder beside OUT and renamed into place whole.
 *
 * Without a format, each INPUT's is told by its file type and first bytes (never as csv or
 * imagefolder: those are named); they must agree. With N shards the records are cut into N contiguous runs whose counts differ by
 * at most one (the first ones hold the extra records), named OUT-00000-of-0000N as TFDS
 * names them; their concatenation is the input. The output is the same, byte for byte,
 * for any max_parallelism in the writer options.
 *
 * All or nothing. Every output is written under a temporary name in its folder and
 * renamed into place only once all are complete and synced. A conversion that fails or
 * is cancelled leaves nothing at the output names and no temporary (an existing file
 * there is left as it was); one that succeeds replaces them all. An output that is one
 * of the inputs (the same path, a hard link or a symbolic link to it; for a folder input,
 * any name inside it) is refused before anything is read or written.
 *
 * The library prints nothing: a failure is a negative errno with grist_last_error()
 * naming the file and the byte offset or record number (grist/error.h); progress goes to
 * an optional callback, which can also cancel.
 *
 * Thread-safety: conversions on different threads are independent. One conversion
 * runs on the calling thread (plus the writer's compression threads and a GZIP
 * inflating thread, which never call back).
 */
#ifndef GRIST_CONVERT_PUBLIC_H
#define GRIST_CONVERT_PUBLIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "grist/error.h"
#include "grist/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most shards a name can number: TFDS writes five digits. */
#define GRIST_CONVERT_SHARDS_MAX 99999

enum grist_convert_format {
	GRIST_CONVERT_AUTO = 0,        /* each input's, by its file type and first bytes */
	GRIST_CONVERT_TFRECORD,
	GRIST_CONVERT_LINES,
	GRIST_CONVERT_DIR,
	GRIST_CONVERT_ARRAYRECORD,
	GRIST_CONVERT_IMAGEFOLDER,     /* ROOT/<split>/<label>/<image> into a TFDS dataset folder */
	GRIST_CONVERT_CSV,             /* CSV rows into tf.train.Example records (needs .features) */
};

/*
 * Where a conversion is, handed to the progress callback. The library fills it (size =
 * its sizeof): a caller built against an older, shorter struct reads the fields it knows.
 */
struct grist_convert_progress {
	size_t size;
	uint64_t records;              /* records written so far */
	uint64_t bytes;                /* record bytes written so far */
	uint64_t input_bytes_done;     /* input bytes on disk consumed (compressed bytes for GZIP) */
	uint64_t input_bytes_total;    /* the inputs' sizes on disk; 0 when not known (a folder input) */
	double seconds;                /* since the conversion started */
	size_t input;                  /* index of the input being read (num_inputs once all are read) */
	bool counting;                 /* shards > 1: the first pass, which counts the records */
	bool done;                     /* the last call: every output is in place */
};

/*
 * A progress callback: called on the converting thread before each input is opened,
 * then at most every progress_interval seconds while records are written, and once
 * with p->done set after the outputs are in place. Return 0 to go on; nonzero cancels
 * the conversion, which then returns -ECANCELED and leaves nothing behind (the value
 * returned from the done call is ignored: the outputs are already in place).
 */
typedef int (*grist_convert_progress_fn)(const struct grist_convert_progress *p, void *arg);

/*
 * How to convert. A sized struct: set it up with grist_convert_options_init(), which
 * sets .size; every field's default is its zero value, so a caller built against an
 * older, shorter struct keeps working.
 */
struct grist_convert_options {
	size_t size;                       /* sizeof(struct grist_convert_options) */
	enum grist_convert_format format;  /* GRIST_CONVERT_AUTO: told per input */
	const char *writer_options;        /* the official writer option text ("group_size:64,zstd:3,
					      max_parallelism:4"); NULL or "" for the defaults */
	uint64_t shards;                   /* 0 or 1: one file named OUT; N: OUT-%05u-of-%05N, N up to
					      GRIST_CONVERT_SHARDS_MAX */
	bool no_check;                     /* TFRecord: skip each record's data CRC (lengths are still checked) */
	grist_convert_progress_fn progress; /* NULL: none */
	void *progress_arg;
	double progress_interval;          /* seconds between progress calls while writing; 0: 0.1 */
	const char *features;              /* csv: the features spec (see the top); NULL for other formats */
	/* A per-record transform before writing (a grist_map_fn, grist/loader.h; its input's index
	 * counts the records of all inputs, dataset 0), e.g. grist_text_map() for pre-tokenized int32
	 * records. It must keep every record (return 1): a drop or an error stops the conversion,
	 * naming the input and record. NULL: records are written as read. */
	grist_map_fn map;
	void *map_ctx;
	size_t map_out_max;                /* the map's output room per record, bytes; > 0 with map */
	uint32_t max_side;                 /* imagefolder: an image whose longer side is larger is resized
					      to that side (Pillow's antialiased bilinear, the shorter side
					      rounded) and re-encoded as JPEG by TurboJPEG (4:2:0, or gray);
					      smaller ones and 4-channel images are written as read; 0: off */
	int jpeg_quality;                  /* imagefolder with max_side: the re-encoding's quality, 1..100;
					      0: 90 */
};

/* What a finished conversion wrote (a sized struct too: set .size, or use grist_convert_stats_init()). */
struct grist_convert_stats {
	size_t size;
	uint64_t records;                  /* in all outputs */
	uint64_t bytes;                    /* record bytes in all outputs */
	uint64_t shards;                   /* files written */
	uint64_t images_resized;           /* imagefolder with max_side: images re-encoded smaller */
	uint64_t image_bytes_in;           /* imagefolder: the images' bytes as read */
	uint64_t image_bytes_out;          /* imagefolder: the images' bytes as written */
};

/*
 * Defaults: every field zero, .size set. Inline on purpose: the size is the one this caller
 * was compiled with (docs/architecture.md, "A stable ABI").
 */
static inline void grist_convert_options_init(struct grist_convert_options *o)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
}

static inline void grist_convert_stats_init(struct grist_convert_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->size = sizeof(*s);
}

/**
 * grist_convert() - convert @inputs[0..@num_inputs) into @output (see the top of this file).
 * @o:     options, or NULL for the defaults.
 * @stats: filled on success (may be NULL).
 *
 * Return: 0; -EINVAL for a request that cannot work as asked, before anything is written
 * (bad writer options or shard count, no inputs, inputs of different formats, an input
 * whose format cannot be told, an output that is an input, a FIFO or device as input);
 * -ECANCELED when the progress callback cancelled; another negative errno for bad or
 * unreadable input or a failed write (-EBADMSG for damaged data, -ENOENT, -EISDIR,
 * -ENOTDIR, -EFBIG, -ENOSPC, -ENOMEM, ...), the message naming the file and where.
 * Thread-safety: see the top of this file.
 */
GRIST_API int grist_convert(const char *const *inputs, size_t num_inputs, const char *output,
			    const struct grist_convert_options *o, struct grist_convert_stats *stats);

/**
 * grist_convert_shard_name() - the name of shard @shard of @shards for @output:
 * @output itself when @shards <= 1, else "<output>-%05llu-of-%05llu".
 * Return: the length of the name (snprintf-like: at most @cap - 1 bytes are written),
 * or -EINVAL when @shard >= @shards or @shards exceeds GRIST_CONVERT_SHARDS_MAX.
 */
GRIST_API int grist_convert_shard_name(const char *output, uint64_t shard, uint64_t shards, char *buf,
				       size_t cap);

/**
 * grist_convert_format_parse() - the format that @name spells: "tfrecord", "lines",
 * "dir", "arrayrecord", "imagefolder", "csv" (or "auto"). Return: 0, or -EINVAL naming the choices.
 */
GRIST_API int grist_convert_format_parse(const char *name, enum grist_convert_format *out);

/* The name of @f ("auto", "tfrecord", ...), or NULL for a value that is none of them. */
GRIST_API const char *grist_convert_format_name(enum grist_convert_format f);

/**
 * grist_convert_detect() - the format of @path as GRIST_CONVERT_AUTO would tell it.
 * Return: 0 with *@out set (GRIST_CONVERT_AUTO for an empty file, which holds no records
 * in any format); -EINVAL when the bytes are none of the formats; -ENOENT and the like.
 */
GRIST_API int grist_convert_detect(const char *path, enum grist_convert_format *out);

#ifdef __cplusplus
}
#endif

#endif
