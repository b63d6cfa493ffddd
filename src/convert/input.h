/* Record sources of grist_convert(): one ops table per input format (fio-style), and the byte source they share. */
#ifndef GRIST_CONVERT_INPUT_H
#define GRIST_CONVERT_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

/*
 * A buffered byte stream over one file, plain or GZIP (detected by the magic
 * bytes 1f 8b, decompressed with zlib; concatenated members are one stream).
 * Offsets are of the (decompressed) stream.
 */
struct grist_input_source {
	const char *path;
	int fd;
	struct grist_inflater *gz;  /* GZIP: the inflating thread; NULL for a plain file */
	uint64_t file_size;  /* on disk (compressed for GZIP) */
	uint8_t *buf;
	size_t start, end, cap;  /* unread bytes are buf[start, end) */
	uint64_t offset;         /* stream offset of buf[start] */
	bool eof;
};

/*
 * grist_input_source_open() - open @path (no stdin: inputs are re-read for shards).
 * A folder is -EISDIR; a FIFO, socket or device -EINVAL, found without blocking.
 * Return: 0, or a negative errno with the message recorded (naming @path).
 */
int grist_input_source_open(struct grist_input_source *s, const char *path);
void grist_input_source_close(struct grist_input_source *s);

/*
 * grist_input_source_fill() - make at least @n bytes readable at buf + start, or
 * all that is left when the stream ends first.
 * Return: the bytes readable (end - start, may be < @n only at the end), or
 * a negative errno (read error, damaged or truncated GZIP) with the message
 * naming the file and the stream offset.
 */
int64_t grist_input_source_fill(struct grist_input_source *s, size_t n);

/* Mark @n readable bytes as consumed. */
static inline void grist_input_source_consume(struct grist_input_source *s, size_t n)
{
	s->start += n;
	s->offset += n;
}

/* Bytes of the file on disk consumed so far (compressed bytes for GZIP): drives the progress percentage. */
uint64_t grist_input_source_disk_offset(const struct grist_input_source *s);

/*
 * GZIP streams inflate on a thread of their own, a few MiB ahead of the
 * reader (input_inflate.c). grist_inflater_start() takes @gz (closed by
 * grist_inflater_stop()); 0 or a negative errno with the message recorded.
 * grist_inflater_read() copies up to @n bytes: the count, 0 at the end, or a
 * negative errno with *@why saying what zlib found (valid until stop).
 * grist_inflater_disk_offset(): compressed bytes consumed so far.
 */
struct grist_inflater;
int grist_inflater_start(gzFile gz, const char *path, struct grist_inflater **out);
int64_t grist_inflater_read(struct grist_inflater *f, uint8_t *dst, size_t n, const char **why);
uint64_t grist_inflater_disk_offset(struct grist_inflater *f);
void grist_inflater_stop(struct grist_inflater *f);

struct grist_input;

/* One input format. */
struct grist_input_ops {
	const char *name;  /* as grist_convert_format_name() spells it */
	/* Open one INPUT argument. 0 or a negative errno (message recorded). */
	int (*open)(struct grist_input *in, const char *path);
	/*
	 * The next record: 1 with @data/@len valid until the next call, 0 at the
	 * end, or a negative errno whose message names the file and byte offset or
	 * record number.
	 */
	int (*next)(struct grist_input *in, const uint8_t **data, size_t *len);
	/*
	 * Records in the INPUT, when the format can tell without reading them all
	 * (the footer, the directory listing); NULL otherwise, and sharding counts
	 * with a pass of next().
	 */
	int (*count)(struct grist_input *in, uint64_t *records);
	/*
	 * Bytes of the INPUT file consumed so far, for the progress percentage
	 * over the files' sizes. NULL for folders, whose size is not known before
	 * they are listed: the progress line then shows no percentage.
	 */
	uint64_t (*done_bytes)(const struct grist_input *in);
	void (*close)(struct grist_input *in);
};

struct grist_input {
	const struct grist_input_ops *ops;
	const char *path;
	bool check_data;      /* TFRecord: check each record's data CRC (options.no_check clears it) */
	uint64_t record;      /* records returned so far from this INPUT */
	const char *features; /* csv: the features spec (options.features), checked by grist_csv_spec_check() */
	void *shared;         /* imagefolder: the listed tree (input_imagefolder.h) */
	void *priv;           /* the format's state */
};

/*
 * A TFRecord record starts with a 12-byte header: u64 length (LE), then the
 * masked CRC-32C of those 8 bytes. grist_tfrecord_header() checks that CRC at
 * @h; true and *@length set when it matches. Format detection and the
 * TFRecord input share it.
 */
#define GRIST_TFRECORD_HEADER 12
bool grist_tfrecord_header(const uint8_t *h, uint64_t *length);

extern const struct grist_input_ops grist_input_tfrecord_ops;
extern const struct grist_input_ops grist_input_lines_ops;
extern const struct grist_input_ops grist_input_dir_ops;
extern const struct grist_input_ops grist_input_arrayrecord_ops;
extern const struct grist_input_ops grist_input_imagefolder_ops;
extern const struct grist_input_ops grist_input_csv_ops;

/*
 * grist_input_read_file() - the whole of regular file @path into *@buf (grown as
 * needed, *@cap its size), *@len its length; @record names it in messages. A file
 * over 2 GiB or one that grows while read is an error. The dir and imagefolder
 * inputs share it. Return: 0 or a negative errno with the message recorded.
 */
int grist_input_read_file(const char *path, uint64_t record, uint8_t **buf, size_t *cap, size_t *len);

/* grist_csv_spec_check() - 0 when @spec is a well-formed csv features spec, else -EINVAL naming the fault. */
int grist_csv_spec_check(const char *spec);

/* The ops whose name is @name, or NULL. */
const struct grist_input_ops *grist_input_find(const char *name);

/*
 * grist_input_detect() - the format of @path by its file type and first bytes:
 * a directory; an ArrayRecord file (the Riegeli signature); TFRecord (plain or
 * GZIP) whose first header's length CRC checks out; text (lines).
 * Return: 0 and *ops set; 0 and *ops NULL for an empty file (no records in
 * any stream format: the caller takes the other inputs' format); or a
 * negative errno with a message saying why it cannot tell (then the user
 * names the format).
 */
int grist_input_detect(const char *path, const struct grist_input_ops **ops);

#endif
