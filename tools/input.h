/* Record sources of `grist convert`: one ops table per input format (fio-style), and the byte source they share. */
#ifndef GRIST_TOOLS_INPUT_H
#define GRIST_TOOLS_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

/*
 * A buffered byte stream over one file, plain or GZIP (detected by the magic
 * bytes 1f 8b, decompressed with zlib; concatenated members are one stream).
 * Offsets are of the (decompressed) stream.
 */
struct input_source {
	const char *path;
	int fd;
	struct input_inflater *gz;  /* GZIP: the inflating thread; NULL for a plain file */
	uint64_t file_size;  /* on disk (compressed for GZIP) */
	uint8_t *buf;
	size_t start, end, cap;  /* unread bytes are buf[start, end) */
	uint64_t offset;         /* stream offset of buf[start] */
	bool eof;
};

/*
 * input_source_open() - open @path (no stdin: inputs are re-read for --shards).
 * Return: 0, or a negative errno with the message recorded (naming @path).
 */
int input_source_open(struct input_source *s, const char *path);
void input_source_close(struct input_source *s);

/*
 * input_source_fill() - make at least @n bytes readable at buf + start, or
 * all that is left when the stream ends first.
 * Return: the bytes readable (end - start, may be < @n only at the end), or
 * a negative errno (read error, damaged or truncated GZIP) with the message
 * naming the file and the stream offset.
 */
int64_t input_source_fill(struct input_source *s, size_t n);

/* Mark @n readable bytes as consumed. */
static inline void input_source_consume(struct input_source *s, size_t n)
{
	s->start += n;
	s->offset += n;
}

/* Bytes of the file on disk consumed so far (compressed bytes for GZIP): drives --progress. */
uint64_t input_source_disk_offset(const struct input_source *s);

/*
 * GZIP streams inflate on a thread of their own, a few MiB ahead of the
 * reader (input_inflate.c). input_inflater_start() takes @gz (closed by
 * input_inflater_stop()); 0 or a negative errno with the message recorded.
 * input_inflater_read() copies up to @n bytes: the count, 0 at the end, or a
 * negative errno with *@why saying what zlib found (valid until stop).
 * input_inflater_disk_offset(): compressed bytes consumed so far.
 */
struct input_inflater;
int input_inflater_start(gzFile gz, const char *path, struct input_inflater **out);
int64_t input_inflater_read(struct input_inflater *f, uint8_t *dst, size_t n, const char **why);
uint64_t input_inflater_disk_offset(struct input_inflater *f);
void input_inflater_stop(struct input_inflater *f);

struct input;

/* One input format. */
struct input_ops {
	const char *name;  /* as --from spells it */
	/* Open one INPUT argument. 0 or a negative errno (message recorded). */
	int (*open)(struct input *in, const char *path);
	/*
	 * The next record: 1 with @data/@len valid until the next call, 0 at the
	 * end, or a negative errno whose message names the file and byte offset or
	 * record number.
	 */
	int (*next)(struct input *in, const uint8_t **data, size_t *len);
	/*
	 * Records in the INPUT, when the format can tell without reading them all
	 * (the footer, the directory listing); NULL otherwise, and --shards counts
	 * with a pass of next().
	 */
	int (*count)(struct input *in, uint64_t *records);
	/*
	 * Bytes of the INPUT file consumed so far, for the --progress percentage
	 * over the files' sizes. NULL for folders, whose size is not known before
	 * they are listed: the progress line then shows no percentage.
	 */
	uint64_t (*done_bytes)(const struct input *in);
	void (*close)(struct input *in);
};

struct input {
	const struct input_ops *ops;
	const char *path;
	bool check_data;      /* TFRecord: check each record's data CRC (--no-check clears it) */
	uint64_t record;      /* records returned so far from this INPUT */
	void *priv;           /* the format's state */
};

/*
 * A TFRecord record starts with a 12-byte header: u64 length (LE), then the
 * masked CRC-32C of those 8 bytes. input_tfrecord_header() checks that CRC at
 * @h; true and *@length set when it matches. Format detection and the
 * TFRecord input share it.
 */
#define TFRECORD_HEADER 12
bool input_tfrecord_header(const uint8_t *h, uint64_t *length);

extern const struct input_ops input_tfrecord_ops;
extern const struct input_ops input_lines_ops;
extern const struct input_ops input_dir_ops;
extern const struct input_ops input_arrayrecord_ops;

/* The ops whose name is @name, or NULL. */
const struct input_ops *input_find(const char *name);

/*
 * input_detect() - the format of @path by its file type and first bytes:
 * a directory; an ArrayRecord file (the Riegeli signature); TFRecord (plain or
 * GZIP) whose first header's length CRC checks out; text (lines).
 * Return: 0 and *ops set; 0 and *ops NULL for an empty file (no records in
 * any stream format: the caller takes the other inputs' format); or a
 * negative errno with a message saying why it cannot tell (then the user
 * gives --from).
 */
int input_detect(const char *path, const struct input_ops **ops);

#endif
