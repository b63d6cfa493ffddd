/* The ArrayRecord writer: chunks compressed in parallel and written in order, footer, postscript, crash-safe commit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec/codec.h"
#include "common/error.h"
#include "format/block.h"
#include "format/chunk.h"
#include "format/footer.h"
#include "format/hash.h"
#include "format/options.h"
#include "format/simple_chunk.h"
#include "format/temp_registry.h"
#include "format/varint.h"
#include "format/writer_pool.h"
#include "grist/format.h"
#include "grist/remote.h"
#include "io/upload.h"

/* Output is handed to the kernel in pieces of this size: no per-record system calls. */
#define WRITE_BUFFER_SIZE (16u << 20)

struct grist_writer {
	char *path;      /* final name */
	char *tmp_path;  /* where bytes go until close() commits */
	struct grist_temp_entry *temp;  /* tmp_path, listed for grist_writer_remove_temporaries() */
	int fd;
	struct grist_upload *upload; /* an s3:// or gs:// path: the bytes go there, not to fd */
	bool finished;   /* grist_writer_finish() succeeded: the temporary is complete and closed */
	int error;       /* the first failure; every later call returns it */
	uint64_t pos;    /* file offset of the next byte, buffered ones included */
	struct grist_buf out;

	struct grist_writer_options opts;
	char options_text[192];
	const struct grist_codec_ops *codec;
	struct grist_codec_params params;
	struct grist_codec_set codecs;

	/* Data chunks: the caller fills the pool's current job, the pool compresses, we write in order. */
	struct grist_chunk_pool *pool;
	uint64_t record_bytes;

	/* Footer entries so far, as the records of the future footer chunk. */
	struct grist_buf footer_sizes, footer_values;
	uint64_t num_chunks, num_records;

	struct grist_buf chunk, scratch;
};

static int flush_out(struct grist_writer *w)
{
	size_t done = 0;
	ssize_t n;

	if (w->upload) {
		int ret = grist_upload_write(w->upload, w->out.data, w->out.len);

		w->out.len = 0;
		return ret;
	}
	while (done < w->out.len) {
		n = write(w->fd, w->out.data + done, w->out.len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return grist_fail_at(-errno, w->tmp_path, w->pos - w->out.len + done,
					     "write failed: %s", strerror(errno));
		}
		done += (size_t)n;
	}
	/*
	 * Start writeback of what was just written, without waiting for it: the
	 * disk then works while the next chunks compress, and the fsync() at
	 * close waits only for the tail instead of the whole file. Advisory: a
	 * failure here changes nothing, and fsync() still reports every error.
	 */
	if (w->out.len)
		sync_file_range(w->fd, (off_t)(w->pos - w->out.len), (off_t)w->out.len, SYNC_FILE_RANGE_WRITE);
	w->out.len = 0;
	return 0;
}

/*
 * Emit @n bytes of the chunk [@begin, @end) (zeros when @p is NULL), putting
 * a block header at every 64 KiB boundary the bytes reach.
 */
static int emit(struct grist_writer *w, const uint8_t *p, uint64_t n, uint64_t begin, uint64_t end)
{
	int ret;

	while (n) {
		uint64_t take;

		if (!(w->pos & (GRIST_BLOCK_SIZE - 1))) {
			uint8_t hdr[GRIST_BLOCK_HEADER_SIZE];

			grist_block_header_build(hdr, w->pos, begin, end);
			ret = grist_buf_append(&w->out, hdr, sizeof(hdr));
			if (ret)
				return ret;
			w->pos += GRIST_BLOCK_HEADER_SIZE;
		}
		take = grist_block_remaining(w->pos);
		if (take > n)
			take = n;
		ret = grist_buf_reserve(&w->out, w->out.len + take);
		if (ret)
			return ret;
		if (p) {
			memcpy(w->out.data + w->out.len, p, take);
			p += take;
		} else {
			memset(w->out.data + w->out.len, 0, take);
		}
		w->out.len += take;
		w->pos += take;
		n -= take;
		if (w->out.len >= WRITE_BUFFER_SIZE) {
			ret = flush_out(w);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* Write one chunk whose data hashes to @hash. */
static int write_chunk_hashed(struct grist_writer *w, uint8_t type, const uint8_t *data, uint64_t data_size,
			      uint64_t hash, uint64_t num_records, uint64_t decoded_data_size)
{
	struct grist_chunk_header h = {
		.data_size = data_size,
		.data_hash = hash,
		.num_records = num_records,
		.decoded_data_size = decoded_data_size,
		.type = type,
	};
	uint64_t begin = w->pos, end = grist_chunk_end(begin, data_size, num_records);
	uint8_t hdr[GRIST_CHUNK_HEADER_SIZE];
	int ret;

	grist_chunk_header_build(hdr, &h);
	ret = emit(w, hdr, sizeof(hdr), begin, end);
	if (!ret)
		ret = emit(w, data, data_size, begin, end);
	/* Zero padding gives each record a distinct position begin + index. */
	if (!ret && w->pos < end)
		ret = emit(w, NULL, end - w->pos, begin, end);
	return ret;
}

static int write_chunk(struct grist_writer *w, uint8_t type, const uint8_t *data, uint64_t data_size,
		       uint64_t num_records, uint64_t decoded_data_size)
{
	return write_chunk_hashed(w, type, data, data_size, grist_hash(data ? data : (const uint8_t *)"", data_size),
				  num_records, decoded_data_size);
}

/* A padding chunk that ends exactly at the next block boundary (none when already there). */
static int write_padding(struct grist_writer *w)
{
	uint64_t len = grist_block_remaining(w->pos);
	int ret;

	if (!len)
		return 0;
	if (len < GRIST_CHUNK_HEADER_SIZE)
		len += GRIST_BLOCK_USABLE;
	len -= GRIST_CHUNK_HEADER_SIZE;
	ret = grist_buf_reserve(&w->scratch, len ? len : 1);
	if (ret)
		return ret;
	memset(w->scratch.data, 0, len);
	return write_chunk(w, GRIST_CHUNK_PADDING, w->scratch.data, len, 0, 0);
}

/* Encode @sizes/@values as a simple chunk with @codec and write it. */
static int write_simple(struct grist_writer *w, const struct grist_codec_ops *codec,
			const struct grist_buf *sizes, const struct grist_buf *values, uint64_t num_records)
{
	void *ctx;
	int ret;

	ret = grist_codec_set_get(&w->codecs, codec, &ctx);
	if (!ret)
		ret = grist_simple_chunk_encode(codec, ctx, &w->params, sizes->data, sizes->len,
						values->data, values->len, &w->scratch, &w->chunk);
	if (!ret)
		ret = write_chunk(w, GRIST_CHUNK_SIMPLE, w->chunk.data, w->chunk.len, num_records,
				  values->len);
	return ret;
}

/* Write the oldest encoded chunk, its padding and its footer entry, then hand its job back. */
static int emit_job(struct grist_writer *w, const struct grist_chunk_job *j)
{
	struct grist_footer_entry e = {
		.chunk_offset = w->pos,
		.decoded_data_size = j->values.len,
		.num_records = j->num_records,
	};
	size_t before = w->footer_values.len;
	int ret;

	if (j->ret)
		return grist_fail(j->ret, "%s: chunk %llu: %s", w->path, (unsigned long long)w->num_chunks, j->msg);
	ret = write_chunk_hashed(w, GRIST_CHUNK_SIMPLE, j->chunk.data, j->chunk.len, j->hash, j->num_records,
				 j->values.len);
	if (!ret && w->opts.pad_to_block_boundary)
		ret = write_padding(w);
	if (!ret)
		ret = grist_footer_entry_append(&w->footer_values, &e);
	if (!ret) {
		uint8_t v[GRIST_VARINT64_MAX];

		ret = grist_buf_append(&w->footer_sizes, v,
				       grist_varint_write(v, w->footer_values.len - before));
	}
	if (ret)
		return ret;
	w->num_chunks++;
	grist_chunk_pool_retire(w->pool);
	return 0;
}

/*
 * Write every encoded chunk at the head of the queue; with @all, wait for and
 * write every submitted chunk. Without @all it still waits when the ring is
 * full, which is what bounds memory to the ring.
 */
static int drain(struct grist_writer *w, bool all)
{
	struct grist_chunk_job *j;
	int ret;

	while ((j = grist_chunk_pool_oldest(w->pool, all || grist_chunk_pool_full(w->pool)))) {
		ret = emit_job(w, j);
		if (ret)
			return ret;
	}
	return 0;
}

/* Submit the open group, if it holds records, and write what is ready. */
static int flush_group(struct grist_writer *w, bool all)
{
	if (grist_chunk_pool_job(w->pool)->num_records && !grist_chunk_pool_full(w->pool))
		grist_chunk_pool_submit(w->pool);
	return drain(w, all);
}

/* Stop the threads and free the buffers: all a writer needs until its tail is written. */
static void writer_release_work(struct grist_writer *w)
{
	grist_chunk_pool_destroy(w->pool);
	w->pool = NULL;
	grist_buf_free(&w->out);
	grist_buf_free(&w->footer_sizes);
	grist_buf_free(&w->footer_values);
	grist_buf_free(&w->chunk);
	grist_buf_free(&w->scratch);
	grist_codec_set_clear(&w->codecs);
}

static void writer_free(struct grist_writer *w)
{
	writer_release_work(w);
	grist_upload_abort(w->upload); /* not committed: nothing may be left at the key */
	grist_temp_release(w->temp);
	free(w->path);
	free(w->tmp_path);
	free(w);
}

/*
 * Remove temporaries of earlier writers to the same target that died before close
 * or abort (a kill, a crash, a power cut). Every live writer holds an exclusive
 * flock() on its temporary, and the kernel drops it when the process dies, so a
 * temporary whose lock can be taken belongs to nobody. Best effort: a name that
 * vanishes or cannot be opened is left alone.
 */
static void remove_stale_temporaries(const char *dir, const char *base, const char *own)
{
	size_t plen = strlen(base) + 6; /* "." base ".tmp-" */
	struct dirent *de;
	char *prefix, *p;
	DIR *d;
	int fd;

	if (asprintf(&prefix, ".%s.tmp-", base) < 0)
		return;
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, prefix, plen) || strlen(de->d_name) != plen + 6)
			continue;
		if (asprintf(&p, "%s/%s", dir, de->d_name) < 0)
			break;
		if (strcmp(p, own)) {
			fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
			if (fd >= 0) {
				if (flock(fd, LOCK_EX | LOCK_NB) == 0)
					unlink(p);
				close(fd);
			}
		}
		free(p);
	}
	if (d)
		closedir(d);
	free(prefix);
}

/* Create and list the temporary under the guard: no cleanup finds it made but not listed. */
static int create_temporary(struct grist_writer *w)
{
	struct grist_temp_guard g;
	int ret;

	ret = grist_temp_guard_enter(&g);
	if (ret)
		return grist_fail(ret, "%s: %s", w->path, grist_last_error());
	w->fd = mkostemp(w->tmp_path, O_CLOEXEC);
	if (w->fd < 0)
		ret = grist_fail(-errno, "%s: cannot create temporary file: %s", w->tmp_path, strerror(errno));
	else if ((ret = grist_temp_register(w->tmp_path, &w->temp)))
		unlink(w->tmp_path);
	grist_temp_guard_leave(&g);
	return ret;
}

GRIST_API int grist_writer_open(const char *path, const char *options, struct grist_writer **out)
{
	struct grist_writer *w;
	char *dir_copy = NULL, *base_copy = NULL;
	int ret;

	*out = NULL;
	if (!path || !*path)
		return grist_fail(-EINVAL, "writer path is empty");
	w = calloc(1, sizeof(*w));
	if (!w)
		return grist_fail(-ENOMEM, "cannot allocate a writer");
	w->fd = -1;
	ret = grist_writer_options_parse(options, &w->opts);
	if (ret)
		goto fail;
	grist_writer_options_format(&w->opts, w->options_text, sizeof(w->options_text));
	w->codec = grist_codec_find(w->opts.compression);
	w->params.level = w->opts.level;
	w->params.window_log = w->opts.window_log;
	ret = grist_chunk_pool_create(w->codec, &w->params, w->opts.max_parallelism, &w->pool);
	if (ret)
		goto fail;

	ret = -ENOMEM;
	w->path = strdup(path);
	if (w->path && grist_path_is_url(path)) {
		/* object storage: a multipart upload, which nothing sees before commit (io/upload.h) */
		ret = grist_upload_open(path, &w->upload);
		if (!ret)
			ret = grist_buf_reserve(&w->out, WRITE_BUFFER_SIZE + GRIST_BLOCK_SIZE);
		if (!ret)
			ret = write_chunk(w, GRIST_CHUNK_SIGNATURE, NULL, 0, 0, 0);
		if (ret)
			goto fail;
		*out = w;
		return 0;
	}
	dir_copy = strdup(path);
	base_copy = strdup(path);
	if (!w->path || !dir_copy || !base_copy)
		goto fail;
	/* A hidden temporary in the same folder, so the final rename() is atomic. */
	if (asprintf(&w->tmp_path, "%s/.%s.tmp-XXXXXX", dirname(dir_copy), basename(base_copy)) < 0) {
		w->tmp_path = NULL;
		goto fail;
	}
	ret = create_temporary(w);
	if (ret)
		goto fail;
	/* the mark of a live writer (see remove_stale_temporaries()); a file system without locks loses only the cleanup */
	if (flock(w->fd, LOCK_EX | LOCK_NB) == 0) {
		free(dir_copy);
		dir_copy = strdup(path);
		if (dir_copy)
			remove_stale_temporaries(dirname(dir_copy), basename(base_copy), w->tmp_path);
	}
	/* mkostemp makes the file 0600; the finished file gets the mode open(..., 0666) would give. */
	{
		mode_t mask = umask(0);

		umask(mask);
		if (fchmod(w->fd, 0666 & ~mask)) {
			ret = grist_fail(-errno, "%s: cannot set the file mode: %s", w->tmp_path, strerror(errno));
			goto fail_unlink;
		}
	}
	ret = grist_buf_reserve(&w->out, WRITE_BUFFER_SIZE + GRIST_BLOCK_SIZE);
	if (ret)
		goto fail_unlink;
	/* The file signature: an empty 's' chunk, so every file starts with the same 64 bytes. */
	ret = write_chunk(w, GRIST_CHUNK_SIGNATURE, NULL, 0, 0, 0);
	if (ret)
		goto fail_unlink;
	free(dir_copy);
	free(base_copy);
	*out = w;
	return 0;

fail_unlink:
	unlink(w->tmp_path);
fail:
	if (w->fd >= 0)
		close(w->fd);
	free(dir_copy);
	free(base_copy);
	writer_free(w);
	return ret;
}

GRIST_API int grist_writer_write(struct grist_writer *w, const void *data, size_t len)
{
	uint8_t v[GRIST_VARINT64_MAX];
	struct grist_chunk_job *j;
	int ret;

	if (!w || (!data && len))
		return grist_fail(-EINVAL, "grist_writer_write: null writer or data");
	if (w->num_records == GRIST_CHUNK_MAX_RECORDS)
		return grist_fail(-EOVERFLOW, "%s: too many records", w->path);
	if (w->error || w->finished)
		return w->error ? w->error : grist_fail(-EINVAL, "%s: write after grist_writer_finish()", w->path);
	j = grist_chunk_pool_job(w->pool);
	ret = grist_buf_append(&j->sizes, v, grist_varint_write(v, len));
	if (!ret)
		ret = grist_buf_append(&j->values, data, len);
	if (ret)
		return w->error = ret;
	j->num_records++;
	w->num_records++;
	w->record_bytes += len;
	if (j->num_records >= w->opts.group_size) {
		ret = flush_group(w, false);
		if (ret)
			return w->error = ret;
	}
	return 0;
}

/* Footer (file codec), padding, postscript (stored, 3 copies), padding. */
static int write_tail(struct grist_writer *w)
{
	struct grist_footer_metadata m = {
		.version = 1,
		.writer_options = (const uint8_t *)w->options_text,
		.writer_options_len = strlen(w->options_text),
	};
	struct grist_buf sizes = { 0 }, values = { 0 };
	struct grist_postscript ps = { .footer_offset = 0, .magic = GRIST_POSTSCRIPT_MAGIC };
	size_t meta_len;
	int ret, i;

	ret = flush_group(w, true);
	if (ret)
		return ret;
	m.num_chunks = w->num_chunks;
	m.num_records = w->num_records;
	ps.footer_offset = w->pos;
	ret = grist_footer_metadata_append(&values, &m);
	if (ret)
		goto out;
	meta_len = values.len;
	ret = grist_buf_append(&values, w->footer_values.data, w->footer_values.len);
	if (!ret) {
		uint8_t v[GRIST_VARINT64_MAX];

		ret = grist_buf_append(&sizes, v, grist_varint_write(v, meta_len));
	}
	if (!ret)
		ret = grist_buf_append(&sizes, w->footer_sizes.data, w->footer_sizes.len);
	if (!ret)
		ret = write_simple(w, w->codec, &sizes, &values, w->num_chunks + 1);
	if (!ret)
		ret = write_padding(w);
	if (ret)
		goto out;
	sizes.len = 0;
	values.len = 0;
	for (i = 0; i < 3 && !ret; i++) {
		size_t before = values.len;

		ret = grist_postscript_append(&values, &ps);
		if (!ret) {
			uint8_t v[GRIST_VARINT64_MAX];

			ret = grist_buf_append(&sizes, v, grist_varint_write(v, values.len - before));
		}
	}
	if (!ret)
		ret = write_simple(w, &grist_codec_none, &sizes, &values, 3);
	if (!ret)
		ret = write_padding(w);
	if (!ret)
		ret = flush_out(w);
out:
	grist_buf_free(&sizes);
	grist_buf_free(&values);
	return ret;
}

static int sync_dir_of(const char *path)
{
	char *copy = strdup(path);
	int fd, ret = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		ret = grist_fail(-errno, "%s: cannot sync the folder: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(copy);
	return ret;
}

GRIST_API int grist_writer_finish(struct grist_writer *w)
{
	int ret;

	if (!w)
		return grist_fail(-EINVAL, "grist_writer_finish: null writer");
	if (w->finished)
		return 0;
	if (w->error)
		return w->error;
	ret = write_tail(w);
	if (w->upload) {
		/* every part sent; the object appears at commit */
		if (!ret)
			ret = grist_upload_finish(w->upload);
		if (ret)
			return w->error = ret;
		w->finished = true;
		writer_release_work(w);
		return 0;
	}
	if (!ret && fsync(w->fd) < 0)
		ret = grist_fail(-errno, "%s: fsync failed: %s", w->tmp_path, strerror(errno));
	if (!ret) {
		/* close() releases the descriptor even when it fails: never close it twice. */
		int fd = w->fd;

		w->fd = -1;
		if (close(fd) < 0)
			ret = grist_fail(-errno, "%s: close failed: %s", w->tmp_path, strerror(errno));
	}
	if (ret)
		return w->error = ret;
	w->finished = true;
	/*
	 * A finished writer waits only for commit or abort: give back the threads
	 * and buffers now, so a caller holding many finished shards holds little.
	 */
	writer_release_work(w);
	return 0;
}

GRIST_API int grist_writer_commit(struct grist_writer *w)
{
	int ret;

	if (!w)
		return grist_fail(-EINVAL, "grist_writer_commit: null writer");
	ret = grist_writer_finish(w);
	if (!ret && w->upload) {
		struct grist_upload *u = w->upload;

		w->upload = NULL;
		ret = grist_upload_commit(u); /* aborts on failure */
		writer_free(w);
		return ret;
	}
	if (!ret && rename(w->tmp_path, w->path) < 0)
		ret = grist_fail(-errno, "%s: cannot rename %s into place: %s", w->path, w->tmp_path,
				 strerror(errno));
	if (ret) {
		grist_writer_abort(w);
		return ret;
	}
	/* Renamed: the temporary name is gone, so a signal handler must not chase it. */
	grist_temp_release(w->temp);
	w->temp = NULL;
	ret = sync_dir_of(w->path);
	writer_free(w);
	return ret;
}

GRIST_API int grist_writer_close(struct grist_writer *w)
{
	return grist_writer_commit(w);
}

GRIST_API void grist_writer_abort(struct grist_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp_path)
		unlink(w->tmp_path);
	writer_free(w);
}

GRIST_API const char *grist_writer_options_text(const struct grist_writer *w)
{
	return w->options_text;
}

GRIST_API void grist_writer_get_stats_sized(const struct grist_writer *w, struct grist_writer_stats *caller,
					  size_t size)
{
	struct grist_writer_stats local = { 0 }, *st = &local;

	st->records = w->num_records;
	st->record_bytes = w->record_bytes;
	st->chunks_written = w->num_chunks;
	st->file_bytes = w->pos;
	st->threads = w->opts.max_parallelism >= 2 ? w->opts.max_parallelism : 0;
	grist_sized_out(caller, size, st, sizeof(*st));
}

GRIST_API const char *grist_writer_temp_path(const struct grist_writer *w)
{
	return w ? w->tmp_path : NULL;
}
