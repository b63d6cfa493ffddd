/*
 * grist/format.h - reading and writing ArrayRecord files.
 *
 * An ArrayRecord file is a Riegeli file whose records are grouped into chunks
 * of group_size records, followed by a footer that lists every chunk's offset
 * and a postscript at the last 64 KiB that points at the footer. grist reads
 * and writes the format byte for byte as Google's array_record library does:
 * files written here open with the official reader, and uncompressed files are
 * identical to the official writer's for the same records and options.
 *
 * A reader opens one file or many. Many files form one dataset: the
 * concatenation of their records in the order given, addressed by a global
 * index 0..num_records-1. Opening reads each footer once; afterwards reading a
 * record costs one positioned read of its chunk and one decode, and a batch of
 * indices reads and decodes each chunk it touches once.
 *
 * Every check the official reader makes is made here too (hashes of block
 * headers, chunk headers and chunk data; block header distances; sizes;
 * postscript magic; footer version), plus a few more that bound memory: a
 * damaged file gives -EBADMSG with a message naming the file and byte offset,
 * never a crash or an unbounded allocation. Compression: none, zstd, snappy,
 * brotli (large windows included). Transposed chunks are not supported
 * (-ENOTSUP).
 *
 * Errors follow grist/error.h: 0 or a non-negative value on success, a
 * negative errno code on failure, details in grist_last_error().
 */
#ifndef GRIST_FORMAT_PUBLIC_H
#define GRIST_FORMAT_PUBLIC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "grist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ limits */

/* The default of grist_max_chunk_bytes(): 2 GiB. */
#define GRIST_DEFAULT_MAX_CHUNK_BYTES ((uint64_t)1 << 31)

/**
 * grist_max_chunk_bytes() - the largest chunk grist decodes, process-wide: a chunk
 * whose stored data or decoded records exceed it, or whose extent on disk is larger
 * than such a chunk can be, fails with -EFBIG (file and byte offset in the message)
 * before anything is allocated for it. A record is never larger than its chunk, so
 * this is also the largest record. It applies to every reader, engine and verify.
 *
 * Return: the limit in bytes: the last grist_set_max_chunk_bytes(), else the
 * environment variable GRIST_MAX_CHUNK_BYTES (a size: 65536, 64M, 4GiB; read once; a
 * value that is no size is reported to the log callback and ignored), else
 * GRIST_DEFAULT_MAX_CHUNK_BYTES.
 * Thread-safety: safe from any thread.
 */
GRIST_API uint64_t grist_max_chunk_bytes(void);

/**
 * grist_set_max_chunk_bytes() - change the limit of grist_max_chunk_bytes() for the
 * whole process; 0 restores the default. Chunks decoded afterwards see the new value.
 * Thread-safety: safe from any thread (an atomic store).
 */
GRIST_API void grist_set_max_chunk_bytes(uint64_t bytes);

/* ------------------------------------------------------------------ reader */

struct grist_reader;

/*
 * What a read checks of each chunk (the reader's, the fetcher's and the loader's "verify").
 * GRIST_VERIFY_ALL (the default) checks everything the format can: every block header and
 * its hash, every chunk header and its hash, the HighwayHash of each chunk's data, the
 * chunk's extent, and every record size against the chunk header. GRIST_VERIFY_HEADERS
 * checks all of that except the data hash. On cold reads of uncompressed data the loader's
 * CPU per GB was 1.2-1.6 times lower without it (medians of 6 alternating pairs per case,
 * docs/tuning.md, "Checking less"). What it gives up: a flipped byte in the values of an
 * uncompressed chunk is delivered as it is, without an error; in a compressed chunk it is
 * caught only where the codec itself notices. For data already checked whole (grist
 * verify) and read again for many epochs from a disk that stores what was written.
 */
enum grist_verify {
	GRIST_VERIFY_ALL = 0,
	GRIST_VERIFY_HEADERS = 1,
};

/* Options of grist_reader_open(): grist_reader_options_init(), then set what you need. A sized struct. */
struct grist_reader_options {
	size_t size;              /* sizeof(struct grist_reader_options), set by _init() */
	/*
	 * The largest chunk, in bytes on disk, the reader will load; larger chunks
	 * fail with -EFBIG instead of allocating. 0 means grist_max_chunk_bytes()
	 * alone, which applies in any case.
	 */
	uint64_t max_chunk_bytes;
	/* GRIST_VERIFY_ALL (0, the default) or GRIST_VERIFY_HEADERS; fetchers made from this
	   reader (grist/fetch.h) check the same */
	enum grist_verify verify;
};

/**
 * grist_reader_options_init() - zero @opts (every field's default) and set its size.
 * Inline on purpose: the size is the one this caller was compiled with (grist/version.h).
 */
static inline void grist_reader_options_init(struct grist_reader_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->size = sizeof(*opts);
}

/* What grist_reader_file_info() reports about one file of a dataset. Fields are only appended. */
struct grist_file_info {
	const char *path;
	uint64_t num_records;
	uint64_t num_chunks;
	uint64_t group_size;       /* records per chunk (the last chunk may hold fewer) */
	uint64_t first_record;     /* global index of the file's record 0 */
	uint64_t file_size;
	const char *compression;   /* "uncompressed", "zstd", "snappy" or "brotli" */
	const char *writer_options; /* as stored by the writer; "" when the file has none */
	uint64_t max_record_bytes; /* no record is longer: the largest decoded chunk the footer lists */
};

/**
 * grist_reader_open() - open a dataset of one or more ArrayRecord files.
 * @paths:   @num_paths file names; the dataset is their concatenation in this order.
 * @num_paths: at least 1.
 * @opts:    options, or NULL for defaults.
 * @out:     receives the reader.
 *
 * Opens every file, reads and checks its postscript and footer, and keeps
 * one file descriptor and 8 bytes per chunk of index per file.
 *
 * Return: 0; -EINVAL for bad arguments; -ENOENT and other OS errors from
 * open/fstat/pread; -EBADMSG when a file is not a sound ArrayRecord file;
 * -ENOTSUP for unsupported encodings; -ENOMEM.
 * Thread-safety: safe to call concurrently (no shared state).
 */
GRIST_API int grist_reader_open(const char *const *paths, size_t num_paths,
				const struct grist_reader_options *opts, struct grist_reader **out);

/**
 * grist_reader_close() - close the files and free the reader. NULL is fine.
 */
GRIST_API void grist_reader_close(struct grist_reader *r);

/**
 * grist_reader_num_records() - records in the whole dataset.
 * Thread-safety: safe concurrently with anything but close.
 */
GRIST_API uint64_t grist_reader_num_records(const struct grist_reader *r);

/**
 * grist_reader_num_files() - files in the dataset.
 */
GRIST_API size_t grist_reader_num_files(const struct grist_reader *r);

/**
 * grist_reader_file_info() - describe file @i (0-based, in the order opened).
 * Strings stay valid until grist_reader_close().
 *
 * Return: 0, or -ERANGE when @i >= grist_reader_num_files().
 */
GRIST_API int grist_reader_file_info_sized(const struct grist_reader *r, size_t i, struct grist_file_info *info,
					  size_t size);

/* grist_reader_file_info() passes the caller's sizeof: only the fields that fit are written. */
static inline int grist_reader_file_info(const struct grist_reader *r, size_t i, struct grist_file_info *info)
{
	return grist_reader_file_info_sized(r, i, info, sizeof(*info));
}

/**
 * grist_reader_read() - read the record at global index @index.
 * @data, @len: receive the record's bytes, valid until the next read call on @r.
 *
 * Reads and decodes the record's chunk (one pread of its extent), unless it
 * is the chunk the previous call decoded.
 *
 * Return: 0; -ERANGE when @index >= num_records; -EBADMSG, -ENOTSUP, -EIO, -ENOMEM.
 * Thread-safety: one thread per reader at a time (open one reader per thread).
 */
GRIST_API int grist_reader_read(struct grist_reader *r, uint64_t index, const uint8_t **data, size_t *len);

/**
 * grist_record_fn - receives one record of a batch.
 * @ctx:      the caller's pointer.
 * @position: where the index was in the request (0-based).
 * @index:    the global index.
 * @data, @len: the record, valid only during the call.
 *
 * Return: 0 to go on; a negative value stops the batch, which returns it.
 */
typedef int (*grist_record_fn)(void *ctx, size_t position, uint64_t index, const uint8_t *data, size_t len);

/**
 * grist_reader_read_batch() - read the records at @indices[0..@n).
 *
 * Indices are grouped by chunk: each chunk is read with one pread and decoded
 * once per batch, however many of its records are asked for. @fn is called
 * once per position in chunk order, not request order (use @position to
 * place each record); a repeated index is delivered once per position.
 * All indices are checked before any record is delivered.
 *
 * Return: 0; -ERANGE when an index >= num_records (the message names it);
 * -EBADMSG, -ENOTSUP, -EIO, -ENOMEM; or what @fn returned to stop.
 * Thread-safety: one thread per reader at a time.
 */
GRIST_API int grist_reader_read_batch(struct grist_reader *r, const uint64_t *indices, size_t n,
				      grist_record_fn fn, void *ctx);

/**
 * grist_reader_seek() - make @index the next record grist_reader_read_next() returns.
 *
 * Return: 0, or -ERANGE when @index > num_records (num_records itself means "at the end").
 */
GRIST_API int grist_reader_seek(struct grist_reader *r, uint64_t index);

/**
 * grist_reader_read_next() - read the next record in index order.
 * @data, @len: receive the record, valid until the next read call on @r.
 *
 * Each chunk is read and decoded once as the cursor passes through it.
 *
 * Return: 1 when a record was read, 0 at the end of the dataset, or a
 * negative error code (the cursor stays on the failing record).
 * Thread-safety: one thread per reader at a time.
 */
GRIST_API int grist_reader_read_next(struct grist_reader *r, const uint8_t **data, size_t *len);

/* ----------------------------------------------------------------- verify */

/* What grist_file_verify() found in a sound file. Fields are only appended. */
struct grist_verify_report {
	uint64_t file_size;
	uint64_t num_records;
	uint64_t data_chunks;     /* simple chunks listed by the footer */
	uint64_t padding_chunks;
	uint64_t other_chunks;    /* signature, metadata, footer, postscript */
	uint64_t decoded_bytes;   /* sum of the record sizes */
};

/**
 * grist_file_verify() - check every byte of one ArrayRecord file.
 *
 * Walks the file chunk by chunk from offset 0 to its end (through padding,
 * footer and postscript), checking every block header and hash and decoding
 * every chunk, then checks that the footer lists exactly the data chunks
 * found, with their record counts and sizes.
 *
 * Return: 0 and @rep filled (may be NULL) when the file is sound; -EBADMSG
 * naming the first problem's byte offset; -ENOTSUP; OS errors; -ENOMEM.
 * Thread-safety: safe to call concurrently.
 */
GRIST_API int grist_file_verify_sized(const char *path, struct grist_verify_report *rep, size_t size);

/* grist_file_verify() passes the caller's sizeof: only the fields that fit are written. */
static inline int grist_file_verify(const char *path, struct grist_verify_report *rep)
{
	return grist_file_verify_sized(path, rep, sizeof(*rep));
}

/* ------------------------------------------------------------------ writer */

struct grist_writer;

/**
 * grist_writer_open() - start writing an ArrayRecord file.
 * @path:    the final name; nothing appears under it until grist_writer_close() succeeds.
 *           An s3:// or gs:// URL is written by a multipart upload (parts of the
 *           remote option `part`, `upload_inflight` at once, each MD5-checked),
 *           completed at commit and aborted by abort, by any failure, and by
 *           grist_writer_abort_all(); below 1 MiB, one PutObject at
 *           commit (grist/remote.h for the credentials and endpoints).
 * @options: the official option text, NULL or "" for defaults
 *           (group_size:1, zstd:3, window_log:20). Comma-separated:
 *           group_size:N, uncompressed | zstd[:L] | snappy | brotli[:L],
 *           window_log:N|auto, pad_to_block_boundary:true|false,
 *           max_parallelism:N|auto, saturation_delay_ms:N,
 *           transpose:false, transpose_bucket_size:N|auto, default.
 * @out:     receives the writer.
 *
 * Bytes go to a hidden temporary file in the same folder (".NAME.tmp-XXXXXX")
 * through a 16 MiB buffer. The footer stores the options exactly as the
 * official writer's Options::ToString() does. The writer holds a flock() on its
 * temporary while it lives; opening removes temporaries of the same NAME whose
 * lock nobody holds, left by writers that were killed.
 *
 * max_parallelism:N (N >= 2, or auto = the CPUs this process may use)
 * compresses chunks on N threads of the writer's own while the caller keeps
 * filling the next ones; chunks are still written in order, so the file is
 * byte-identical to what max_parallelism:1 writes. At most 2N chunks are held
 * in memory; grist_writer_write() waits when all 2N are taken. The stored
 * options keep saying max_parallelism:1, as the official writer's do whenever
 * it runs without a C++ thread pool (which is always, from Python). The
 * threads block every signal, so signal handlers run on the caller's threads.
 *
 * The temporary is listed for grist_writer_remove_temporaries() from the
 * moment it exists until it is renamed or removed.
 *
 * Return: 0; -EINVAL for bad options, transpose:true included (the message
 * names the option); OS errors creating the temporary; -EAGAIN when a thread
 * cannot start; -ENOMEM.
 * Thread-safety: a writer belongs to one thread at a time.
 */
GRIST_API int grist_writer_open(const char *path, const char *options, struct grist_writer **out);

/**
 * grist_writer_write() - append one record of @len bytes.
 *
 * The bytes are copied; @data may be reused at once. A full group is handed
 * to the compression threads (or compressed here at max_parallelism:1), and
 * every chunk that is ready is written.
 *
 * Return: 0; -ENOMEM; OS write errors; a compression error of an earlier
 * chunk; -EINVAL for a NULL argument or after grist_writer_finish();
 * -EOVERFLOW past 2^56 records; -EFBIG for a record the codec cannot take
 * (snappy: 4 GiB).
 * Errors are sticky: every later call returns the first one. After an error,
 * call grist_writer_abort().
 */
GRIST_API int grist_writer_write(struct grist_writer *w, const void *data, size_t len);

/**
 * grist_writer_finish() - complete the file under its temporary name.
 *
 * Writes the last chunk, footer and postscript, fsyncs and closes the
 * temporary, but does not rename it: a caller writing several files (shards)
 * finishes them all, then commits them all, so a failure before the last
 * commit can leave nothing at any final name. Calling it twice is fine.
 *
 * Return: 0 or a negative error code (then call grist_writer_abort()).
 * Thread-safety: as grist_writer_write().
 */
GRIST_API int grist_writer_finish(struct grist_writer *w);

/**
 * grist_writer_commit() - finish (if not done yet) and move the file to its final name.
 *
 * Renames the temporary over @path and fsyncs the folder. Frees @w whatever
 * happens; when the rename fails the temporary is removed and @path is
 * untouched.
 *
 * Return: 0 or a negative error code. An error from fsyncing the folder comes
 * after the rename, with the file already at @path.
 */
GRIST_API int grist_writer_commit(struct grist_writer *w);

/**
 * grist_writer_close() - grist_writer_finish() then grist_writer_commit().
 *
 * Return: 0 or a negative error code; @w is freed whatever happens.
 */
GRIST_API int grist_writer_close(struct grist_writer *w);

/**
 * grist_writer_abort() - drop the file: stop the threads, remove the
 * temporary and free @w. Works at any point before the commit, including
 * after grist_writer_finish(). NULL is fine.
 */
GRIST_API void grist_writer_abort(struct grist_writer *w);

/**
 * grist_writer_temp_path() - the path of @w's temporary file, for a program that
 * removes it from a signal handler (unlink() is async-signal-safe) when it is
 * killed before grist_writer_close(). Valid while @w lives; NULL for NULL.
 * Thread-safety: read-only.
 */
GRIST_API const char *grist_writer_temp_path(const struct grist_writer *w);

/**
 * grist_writer_options_text() - the normalized options the footer will store,
 * e.g. "group_size:1,transpose:false,pad_to_block_boundary:false,zstd:3,window_log:20,max_parallelism:1".
 * Valid while @w lives.
 */
GRIST_API const char *grist_writer_options_text(const struct grist_writer *w);

/* What grist_writer_get_stats() reports: progress so far. Fields are only appended. */
struct grist_writer_stats {
	uint64_t records;         /* records accepted by grist_writer_write() */
	uint64_t record_bytes;    /* their total size */
	uint64_t chunks_written;  /* data chunks already in the file */
	uint64_t file_bytes;      /* bytes of the file so far, buffered ones included */
	unsigned threads;         /* compression threads; 0 when the caller's thread compresses */
};

/**
 * grist_writer_get_stats() - fill @st with @w's progress.
 * Thread-safety: as grist_writer_write() (call it from the writer's thread).
 */
GRIST_API void grist_writer_get_stats_sized(const struct grist_writer *w, struct grist_writer_stats *st, size_t size);

/* grist_writer_get_stats() passes the caller's sizeof: only the fields that fit are written. */
static inline void grist_writer_get_stats(const struct grist_writer *w, struct grist_writer_stats *st)
{
	grist_writer_get_stats_sized(w, st, sizeof(*st));
}

/**
 * grist_writer_remove_temporaries() - unlink the temporary file of every
 * writer of this process not yet committed or aborted.
 *
 * For signal handlers: async-signal-safe (atomic loads and unlink(2) only,
 * no locks, no allocation). Local files only: a writer to an s3:// or gs://
 * URL has no temporary but a multipart upload, which a handler cannot abort
 * (that takes HTTP, hence locks and allocation); grist_writer_abort_all()
 * does both, from an ordinary thread. A handler for SIGINT/SIGTERM/SIGHUP
 * calls it, then restores the default action and re-raises the signal. The
 * writers themselves stay allocated; the process is expected to end.
 *
 * Thread-safety: safe from any thread and from a signal handler.
 */
GRIST_API void grist_writer_remove_temporaries(void);

/**
 * grist_writer_abort_all() - leave nothing of this process's writers behind:
 * for a program that is ending, typically on a signal taken by a thread of its
 * own (sigwait(); the grist CLI does this), never from a signal handler.
 * @timeout_ms: the most the uploads' aborts may take (the CLI gives 10000).
 *
 * Waits for a temporary being made (so it is listed) and for a commit of a set
 * of shards under way (grist_convert()), so that set appears whole; then
 * unlinks every temporary as grist_writer_remove_temporaries() does, and
 * aborts every multipart upload not yet committed (its running PUTs
 * cancelled, then AbortMultipartUpload, all at once). From then on no writer
 * of the process makes a temporary, starts an upload or commits a set of
 * shards (-ECANCELED); an upload's next write or commit fails with
 * -ECANCELED, a local writer's commit finds its temporary gone. A small
 * object's one PutObject or an upload's CompleteMultipartUpload already on
 * the wire may still land: the object is then whole.
 *
 * Return: 0; or the first upload not known to be aborted (-ETIMEDOUT when the
 * time ran out, or the server's answer), its URL in the message; -ENOMEM.
 * Thread-safety: any thread but a signal handler; once per process.
 */
GRIST_API int grist_writer_abort_all(unsigned timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
