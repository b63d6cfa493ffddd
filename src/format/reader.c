/* The ArrayRecord reader: footer parsing at open, then one pread + one decode per chunk touched. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec/codec.h"
#include "common/error.h"
#include "common/open.h"
#include "format/block.h"
#include "format/chunk_decode.h"
#include "format/dataset.h"
#include "format/footer.h"
#include "format/limits.h"
#include "io/remote.h"
#include "io/remote_read.h"
#include "io/url.h"

struct batch_item {
	uint64_t index;
	size_t position;
};

struct grist_reader {
	struct grist_file_geom *files;
	size_t num_files;
	uint64_t num_records;
	struct grist_reader_options opts;

	struct grist_chunk_decoder *dec;
	struct grist_buf io;            /* the extent last read; decoded records may point into it */
	/*
	 * URLs: an in-order scan (cat, convert, read_next) would cost a round trip per chunk,
	 * so once reads follow one another, one GET brings the next coalesce bytes (the remote
	 * option, 1 MiB) into ahead and the chunks are decoded from there. Decoded records may
	 * point into it, as into io: both live until the next read.
	 */
	struct grist_buf ahead;
	const struct grist_file_geom *ahead_file; /* whose bytes [ahead_off, ahead_off + ahead.len) are */
	uint64_t ahead_off;
	const struct grist_file_geom *last_file; /* the extent read last ended at last_end */
	uint64_t last_end;
	struct grist_decoded_chunk cur; /* valid when cur_file != SIZE_MAX */
	size_t cur_file;
	uint64_t cur_chunk;

	uint64_t cursor;                /* next index for read_next */
	struct batch_item *items;
	size_t items_cap;
};

int grist_file_read(const struct grist_file_geom *f, uint8_t *dst, uint64_t off, size_t len)
{
	const char *path = f->path;
	int fd = f->fd;
	size_t done = 0;
	ssize_t n;

	if (f->remote)
		return grist_remote_read(f->remote, dst, off, len);
	while (done < len) {
		n = pread(fd, dst + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return grist_fail_at(-errno, path, off + done, "read failed: %s", strerror(errno));
		}
		if (n == 0)
			return grist_fail_at(-EBADMSG, path, off + done, "file ends early (was it truncated?)");
		done += (size_t)n;
	}
	return 0;
}

/* The most one read-ahead GET brings, whatever the coalesce option says: bounds the memory. */
#define READ_AHEAD_MAX (16u << 20)

/*
 * The bytes [begin, end) of the URL @f from r->ahead (*@src), reading the next window when
 * this read follows the last one; *@src NULL: not there, read the extent alone. A random
 * read stays one small GET: a window is fetched only for a scan in order.
 */
static int read_ahead(struct grist_reader *r, const struct grist_file_geom *f, uint64_t begin, uint64_t end,
		      const uint8_t **src)
{
	struct grist_remote_options o;
	uint64_t want;
	int ret;

	*src = NULL;
	if (r->ahead_file == f && begin >= r->ahead_off && end <= r->ahead_off + r->ahead.len) {
		*src = r->ahead.data + (begin - r->ahead_off);
		return 0;
	}
	if (r->last_file != f || r->last_end != begin)
		return 0;
	grist_remote_get_options(&o);
	want = o.coalesce_bytes < READ_AHEAD_MAX ? o.coalesce_bytes : READ_AHEAD_MAX;
	if (want <= end - begin)
		return 0;
	if (want > f->size - begin)
		want = f->size - begin;
	r->ahead_file = NULL;
	r->ahead.len = 0;
	ret = grist_buf_reserve(&r->ahead, (size_t)want);
	if (ret)
		return grist_fail_at(ret, f->path, begin, "cannot allocate %llu bytes to read ahead",
				     (unsigned long long)want);
	ret = grist_file_read(f, r->ahead.data, begin, (size_t)want);
	if (ret)
		return ret;
	r->ahead.len = (size_t)want;
	r->ahead_file = f;
	r->ahead_off = begin;
	*src = r->ahead.data;
	return 0;
}

/* Read the extent [begin, end) of @f and decode the chunk at @begin into r->cur. */
static int load_extent(struct grist_reader *r, const struct grist_file_geom *f, uint64_t begin, uint64_t end)
{
	size_t len;
	int ret;

	r->cur_file = SIZE_MAX;
	if (end > f->size || begin >= end)
		return grist_fail_at(-EBADMSG, f->path, begin, "chunk extent ends at %llu, past the file size %llu",
				     (unsigned long long)end, (unsigned long long)f->size);
	ret = grist_check_chunk_extent(f->path, begin, end, 0);
	if (ret)
		return ret;
	len = (size_t)(end - begin);
	if (f->remote) {
		const uint8_t *src = NULL;

		ret = read_ahead(r, f, begin, end, &src);
		r->last_file = f;
		r->last_end = end;
		if (ret)
			return ret;
		if (src)
			return grist_chunk_decode(r->dec, src, begin, len, begin, end, f->path, &r->cur);
	}
	ret = grist_buf_reserve(&r->io, len);
	if (ret)
		return grist_fail_at(ret, f->path, begin, "cannot allocate %zu bytes to read the chunk", len);
	ret = grist_file_read(f, r->io.data, begin, len);
	if (ret)
		return ret;
	return grist_chunk_decode(r->dec, r->io.data, begin, len, begin, end, f->path, &r->cur);
}

static int load_chunk(struct grist_reader *r, size_t file, uint64_t chunk)
{
	const struct grist_file_geom *f = &r->files[file];
	int ret;

	if (r->cur_file == file && r->cur_chunk == chunk)
		return 0;
	ret = grist_check_chunk_extent(f->path, f->chunk_offsets[chunk], f->chunk_offsets[chunk + 1],
				       r->opts.max_chunk_bytes);
	if (ret)
		return ret;
	ret = load_extent(r, f, f->chunk_offsets[chunk], f->chunk_offsets[chunk + 1]);
	if (ret)
		return ret;
	ret = grist_file_check_chunk_records(f, chunk, r->cur.chunk_type, r->cur.num_records);
	if (ret)
		return ret;
	r->cur_file = file;
	r->cur_chunk = chunk;
	return 0;
}

int grist_file_check_chunk_records(const struct grist_file_geom *f, uint64_t chunk, uint8_t chunk_type,
				   uint64_t num_records)
{
	uint64_t want = grist_file_chunk_records(f, chunk);

	if (chunk_type != 'r' || num_records != want)
		return grist_fail_at(-EBADMSG, f->path, f->chunk_offsets[chunk],
				     "chunk %llu holds %llu records (type 0x%02x), the footer implies %llu",
				     (unsigned long long)chunk, (unsigned long long)num_records, chunk_type,
				     (unsigned long long)want);
	return 0;
}

/* Decode the simple chunk at [begin, end) and check it is one; records land in r->cur. */
static int load_meta_chunk(struct grist_reader *r, const struct grist_file_geom *f, uint64_t begin,
			   uint64_t end, const char *what)
{
	int ret = load_extent(r, f, begin, end);

	if (ret)
		return grist_fail_prefix(ret, "%s", what);
	if (r->cur.chunk_type != 'r' || r->cur.num_records < 1)
		return grist_fail_at(-EBADMSG, f->path, begin, "%s: not a chunk of records (type 0x%02x)",
				     what, r->cur.chunk_type);
	return 0;
}

#define REC(r, i) ((r)->cur.values + (r)->cur.offsets[i]), \
		  ((size_t)((r)->cur.offsets[(i) + 1] - (r)->cur.offsets[i]))

static int parse_footer(struct grist_reader *r, struct grist_file_geom *f, uint64_t footer_offset)
{
	struct grist_footer_metadata m;
	struct grist_footer_entry e;
	uint64_t i, n, total;
	int ret;

	ret = load_meta_chunk(r, f, footer_offset, f->size - GRIST_BLOCK_SIZE, "footer");
	if (ret)
		return ret;
	if (grist_footer_metadata_parse(REC(r, 0), &m) < 0)
		return grist_fail_at(-EBADMSG, f->path, footer_offset, "footer metadata is not a valid RiegeliFooterMetadata");
	if (m.version != 1)
		return grist_fail_at(-EBADMSG, f->path, footer_offset, "footer metadata version %llu, expected 1",
				     (unsigned long long)m.version);
	n = r->cur.num_records - 1;
	if (m.num_chunks != n)
		return grist_fail_at(-EBADMSG, f->path, footer_offset,
				     "footer metadata promises %llu chunks, the footer lists %llu",
				     (unsigned long long)m.num_chunks, (unsigned long long)n);
	f->writer_options = strndup(m.writer_options ? (const char *)m.writer_options : "", m.writer_options_len);
	/* n + 1 <= decoded records, already in memory: this allocation is bounded by real data. */
	f->chunk_offsets = malloc((n + 1) * sizeof(uint64_t));
	if (!f->writer_options || !f->chunk_offsets)
		return grist_fail(-ENOMEM, "cannot allocate the chunk index of %s", f->path);
	f->compression = r->cur.compression;
	f->num_chunks = n;
	f->num_records = m.num_records;
	f->group_size = 0;
	total = 0;
	for (i = 0; i < n; i++) {
		if (grist_footer_entry_parse(REC(r, i + 1), &e) < 0 || !e.has_chunk_offset)
			return grist_fail_at(-EBADMSG, f->path, footer_offset,
					     "footer entry %llu is not a valid ArrayRecordFooter", (unsigned long long)i);
		if (e.chunk_offset < 64 || e.chunk_offset >= footer_offset ||
		    (i && e.chunk_offset <= f->chunk_offsets[i - 1]) || !grist_block_valid_chunk_begin(e.chunk_offset))
			return grist_fail_at(-EBADMSG, f->path, footer_offset,
					     "footer entry %llu: chunk offset %llu is not increasing inside [64, %llu)",
					     (unsigned long long)i, (unsigned long long)e.chunk_offset,
					     (unsigned long long)footer_offset);
		if (i == 0)
			f->group_size = e.num_records; /* the official reader's rule */
		if (e.num_records > f->group_size || (e.num_records < f->group_size && i + 1 < n) || !e.num_records)
			return grist_fail_at(-EBADMSG, f->path, footer_offset,
					     "footer entry %llu: %llu records in a chunk of a group_size %llu file",
					     (unsigned long long)i, (unsigned long long)e.num_records,
					     (unsigned long long)f->group_size);
		/* a wrapped sum could equal the metadata's count and pass the check below */
		if (__builtin_add_overflow(total, e.num_records, &total))
			return grist_fail_at(-EBADMSG, f->path, footer_offset,
					     "footer entry %llu: record counts overflow 2^64 (%llu records in chunks "
					     "of group_size %llu)", (unsigned long long)i,
					     (unsigned long long)e.num_records, (unsigned long long)f->group_size);
		f->chunk_offsets[i] = e.chunk_offset;
		if (e.decoded_data_size > f->max_chunk_decoded)
			f->max_chunk_decoded = e.decoded_data_size;
	}
	f->chunk_offsets[n] = footer_offset;
	if (total != f->num_records)
		return grist_fail_at(-EBADMSG, f->path, footer_offset,
				     "footer metadata says %llu records, its chunks hold %llu",
				     (unsigned long long)f->num_records, (unsigned long long)total);
	return 0;
}

/*
 * Open @path (a URL's object is already open in f->remote) and read its postscript:
 * *@footer_offset is where its footer begins.
 */
static int open_file(struct grist_reader *r, struct grist_file_geom *f, const char *path, uint64_t *footer_offset)
{
	struct grist_postscript ps;
	uint64_t ps_off;
	struct stat st;
	int ret;

	f->path = strdup(path);
	if (!f->path)
		return grist_fail(-ENOMEM, "cannot copy a path");
	if (f->remote) {
		f->size = f->remote->size;
	} else {
		f->fd = grist_open_regular(path, 0, &st);
		if (f->fd < 0)
			return f->fd;
		f->size = (uint64_t)st.st_size;
	}
	if (f->size < GRIST_BLOCK_SIZE + 64)
		return grist_fail_at(-EBADMSG, path, f->size,
				     "file is %llu bytes; an ArrayRecord file holds at least its 64-byte signature and a 64 KiB postscript block",
				     (unsigned long long)f->size);
	ps_off = f->size - GRIST_BLOCK_SIZE;
	ret = load_meta_chunk(r, f, ps_off, f->size, "postscript");
	if (ret)
		return ret;
	if (grist_postscript_parse(REC(r, 0), &ps) < 0)
		return grist_fail_at(-EBADMSG, path, ps_off, "postscript is not a valid RiegeliPostscript");
	if (ps.magic != GRIST_POSTSCRIPT_MAGIC)
		return grist_fail_at(-EBADMSG, path, ps_off, "postscript magic 0x%016llx, expected 0x%016llx",
				     (unsigned long long)ps.magic, (unsigned long long)GRIST_POSTSCRIPT_MAGIC);
	if (ps.footer_offset < 64 || ps.footer_offset >= ps_off)
		return grist_fail_at(-EBADMSG, path, ps_off, "postscript points at footer offset %llu, outside [64, %llu)",
				     (unsigned long long)ps.footer_offset, (unsigned long long)ps_off);
	*footer_offset = ps.footer_offset;
	return 0;
}

/* What the opening of a reader's URLs needs to parse each one as it opens. */
struct url_opening {
	struct grist_reader *r;
	const char *const *paths;
	size_t *file;              /* the file of each URL */
	uint64_t *footer_offsets;  /* per file */
	struct grist_buf *pre;     /* per file: its footer, read with the opening */
};

/* @o, the URL of file u->file[@k], is open: its postscript says where the footer to read is. */
static int url_opened(void *ud, size_t k, struct grist_remote_object *o, struct grist_remote_range *more)
{
	struct url_opening *u = ud;
	size_t i = u->file[k];
	struct grist_file_geom *f = &u->r->files[i];
	uint64_t len;
	int ret;

	f->remote = o; /* lent for the postscript, which the opening GET brought */
	ret = open_file(u->r, f, u->paths[i], &u->footer_offsets[i]);
	f->remote = NULL;
	if (ret || u->footer_offsets[i] >= o->tail_off)
		return ret;
	/* the footer runs up to the postscript's block; bounded by the object's size */
	len = f->size - GRIST_BLOCK_SIZE - u->footer_offsets[i];
	ret = grist_buf_reserve(&u->pre[i], (size_t)len);
	if (ret)
		return grist_fail_at(ret, f->path, u->footer_offsets[i], "cannot allocate %llu bytes for the footer",
				     (unsigned long long)len);
	u->pre[i].len = (size_t)len;
	*more = (struct grist_remote_range){ u->footer_offsets[i], len, u->pre[i].data };
	return 0;
}

/*
 * The URLs among @paths, opened at once: their opening GETs together, each followed by
 * its footer's GET on the same connection (grist_remote_open_many()), each object into
 * its file's f->remote, each footer into @pre. One at a time, 200 shards behind a 20 ms
 * round trip took 8.9 s to open.
 */
static int open_urls(struct grist_reader *r, const char *const *paths, uint64_t *footer_offsets,
		     struct grist_buf *pre)
{
	struct url_opening u = { r, paths, NULL, footer_offsets, pre };
	const char **urls;
	struct grist_remote_object **objs;
	size_t i, k = 0;
	int ret;

	urls = calloc(r->num_files, sizeof(*urls));
	objs = calloc(r->num_files, sizeof(*objs));
	u.file = calloc(r->num_files, sizeof(*u.file));
	if (!urls || !objs || !u.file) {
		ret = grist_fail(-ENOMEM, "cannot open %zu files: out of memory", r->num_files);
		goto out;
	}
	for (i = 0; i < r->num_files; i++)
		if (grist_url_scheme(paths[i]) != GRIST_URL_LOCAL) {
			u.file[k] = i;
			urls[k++] = paths[i];
		}
	ret = grist_remote_open_many(urls, k, objs, url_opened, &u);
	for (i = 0; !ret && i < k; i++)
		r->files[u.file[i]].remote = objs[i];
out:
	free(urls);
	free(objs);
	free(u.file);
	return ret;
}

GRIST_API int grist_reader_open(const char *const *paths, size_t num_paths,
				const struct grist_reader_options *opts, struct grist_reader **out)
{
	struct grist_reader_options o = { .size = sizeof(o) };
	struct grist_reader *r;
	uint64_t *footer_offsets = NULL;
	struct grist_buf *pre = NULL;
	size_t i;
	int ret;

	*out = NULL;
	if (!paths || !num_paths)
		return grist_fail(-EINVAL, "grist_reader_open: no files given");
	if (opts && (ret = grist_sized_in(&o, sizeof(o), opts, "grist_reader_options")))
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r)
		return grist_fail(-ENOMEM, "cannot allocate a reader");
	r->cur_file = SIZE_MAX;
	r->opts = o;
	r->files = calloc(num_paths, sizeof(*r->files));
	footer_offsets = calloc(num_paths, sizeof(*footer_offsets));
	pre = calloc(num_paths, sizeof(*pre));
	if (!r->files || !footer_offsets || !pre) {
		ret = grist_fail(-ENOMEM, "cannot allocate %zu file entries", num_paths);
		goto fail;
	}
	for (i = 0; i < num_paths; i++)
		r->files[i].fd = -1;
	r->num_files = num_paths;
	for (i = 0; i < num_paths; i++)
		if (!paths[i]) {
			ret = grist_fail(-EINVAL, "grist_reader_open: path %zu is NULL", i);
			goto fail;
		}
	if (o.verify != GRIST_VERIFY_ALL && o.verify != GRIST_VERIFY_HEADERS) {
		ret = grist_fail(-EINVAL, "grist_reader_open: verify %d is neither GRIST_VERIFY_ALL nor "
				 "GRIST_VERIFY_HEADERS", (int)o.verify);
		goto fail;
	}
	ret = grist_chunk_decoder_create(&r->dec);
	if (!ret) {
		grist_chunk_decoder_check_data(r->dec, o.verify == GRIST_VERIFY_ALL);
		ret = open_urls(r, paths, footer_offsets, pre);
	}
	for (i = 0; !ret && i < num_paths; i++)
		if (!r->files[i].remote)
			ret = open_file(r, &r->files[i], paths[i], &footer_offsets[i]);
	if (ret)
		goto fail;
	for (i = 0; i < num_paths; i++) {
		struct grist_file_geom *f = &r->files[i];

		if (pre[i].data) {
			/* the footer read ahead: parse_footer() finds it where a scan's read-ahead goes */
			grist_buf_free(&r->ahead);
			r->ahead = pre[i];
			pre[i] = (struct grist_buf){ 0 };
			r->ahead_file = f;
			r->ahead_off = footer_offsets[i];
		}
		ret = parse_footer(r, f, footer_offsets[i]);
		if (ret)
			goto fail;
		f->first_record = r->num_records;
		if (f->num_records > UINT64_MAX - r->num_records) {
			ret = grist_fail(-EBADMSG, "%s: record count overflows the dataset", paths[i]);
			goto fail;
		}
		r->num_records += f->num_records;
	}
	/* The footer decode left r->cur pointing at footer records, r->ahead holding one; forget them. */
	r->cur_file = SIZE_MAX;
	r->ahead_file = NULL;
	r->last_file = NULL;
	grist_buf_free(&r->ahead);
	free(footer_offsets);
	free(pre);
	*out = r;
	return 0;
fail:
	for (i = 0; pre && i < num_paths; i++)
		grist_buf_free(&pre[i]);
	free(pre);
	free(footer_offsets);
	grist_reader_close(r);
	return ret;
}

GRIST_API void grist_reader_close(struct grist_reader *r)
{
	size_t i;

	if (!r)
		return;
	for (i = 0; r->files && i < r->num_files; i++) {
		if (r->files[i].fd >= 0)
			close(r->files[i].fd);
		grist_remote_unref(r->files[i].remote);
		free(r->files[i].path);
		free(r->files[i].chunk_offsets);
		free(r->files[i].writer_options);
	}
	free(r->files);
	grist_chunk_decoder_destroy(r->dec);
	grist_buf_free(&r->io);
	grist_buf_free(&r->ahead);
	free(r->items);
	free(r);
}

GRIST_API uint64_t grist_reader_num_records(const struct grist_reader *r)
{
	return r->num_records;
}

GRIST_API size_t grist_reader_num_files(const struct grist_reader *r)
{
	return r->num_files;
}

enum grist_verify grist_reader_verify(const struct grist_reader *r)
{
	return r->opts.verify;
}

const struct grist_file_geom *grist_reader_file_geom(const struct grist_reader *r, size_t i)
{
	return i < r->num_files ? &r->files[i] : NULL;
}

GRIST_API int grist_reader_file_info_sized(const struct grist_reader *r, size_t i, struct grist_file_info *caller,
					  size_t size)
{
	const struct grist_file_geom *f = grist_reader_file_geom(r, i);
	const struct grist_codec_ops *c;
	struct grist_file_info local = { 0 }, *info = &local;

	if (!f)
		return grist_fail(-ERANGE, "file %zu of a %zu-file dataset", i, r->num_files);
	c = grist_codec_find(f->compression);
	info->path = f->path;
	info->num_records = f->num_records;
	info->num_chunks = f->num_chunks;
	info->group_size = f->group_size;
	info->first_record = f->first_record;
	info->file_size = f->size;
	info->compression = c ? c->name : "unknown";
	info->writer_options = f->writer_options;
	info->max_record_bytes = f->max_chunk_decoded;
	grist_sized_out(caller, size, info, sizeof(*info));
	return 0;
}

/* The file holding @index: the last whose first_record <= index (files may be empty). */
static size_t find_file(const struct grist_reader *r, uint64_t index)
{
	size_t lo = 0, hi = r->num_files;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->files[mid].first_record <= index)
			lo = mid;
		else
			hi = mid;
	}
	while (lo + 1 < r->num_files && r->files[lo].num_records <= index - r->files[lo].first_record)
		lo++;
	return lo;
}

int grist_reader_locate(const struct grist_reader *r, uint64_t global_index, struct grist_record_loc *loc)
{
	const struct grist_file_geom *f;
	uint64_t local;

	if (global_index >= r->num_records)
		return grist_fail(-ERANGE, "record index %llu is past the end of the dataset (%llu records)",
				  (unsigned long long)global_index, (unsigned long long)r->num_records);
	loc->file = find_file(r, global_index);
	f = &r->files[loc->file];
	local = global_index - f->first_record;
	loc->chunk = local / f->group_size;
	loc->record_in_chunk = local - loc->chunk * f->group_size;
	loc->chunk_begin = f->chunk_offsets[loc->chunk];
	loc->chunk_end = f->chunk_offsets[loc->chunk + 1];
	/* every engine reads the extent it is given here: bound it before anyone allocates for it */
	return grist_check_chunk_extent(f->path, loc->chunk_begin, loc->chunk_end, r->opts.max_chunk_bytes);
}

void grist_reader_locate_prefetch(const struct grist_reader *r, uint64_t global_index)
{
	const struct grist_file_geom *f;

	if (global_index >= r->num_records)
		return;
	f = &r->files[find_file(r, global_index)];
	__builtin_prefetch(&f->chunk_offsets[(global_index - f->first_record) / f->group_size]);
}

GRIST_API int grist_reader_read(struct grist_reader *r, uint64_t index, const uint8_t **data, size_t *len)
{
	struct grist_record_loc loc;
	int ret;

	ret = grist_reader_locate(r, index, &loc);
	if (!ret)
		ret = load_chunk(r, loc.file, loc.chunk);
	if (ret)
		return ret;
	*data = r->cur.values + r->cur.offsets[loc.record_in_chunk];
	*len = (size_t)(r->cur.offsets[loc.record_in_chunk + 1] - r->cur.offsets[loc.record_in_chunk]);
	return 0;
}

static int cmp_item(const void *a, const void *b)
{
	const struct batch_item *x = a, *y = b;

	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	return x->position < y->position ? -1 : x->position > y->position;
}

GRIST_API int grist_reader_read_batch(struct grist_reader *r, const uint64_t *indices, size_t n,
				      grist_record_fn fn, void *ctx)
{
	struct grist_record_loc loc;
	size_t i;
	int ret;

	if (!n)
		return 0;
	if (!indices || !fn)
		return grist_fail(-EINVAL, "grist_reader_read_batch: null indices or callback");
	if (n > r->items_cap) {
		struct batch_item *p = realloc(r->items, n * sizeof(*p));

		if (!p)
			return grist_fail(-ENOMEM, "cannot allocate a batch of %zu", n);
		r->items = p;
		r->items_cap = n;
	}
	for (i = 0; i < n; i++) {
		if (indices[i] >= r->num_records)
			return grist_fail(-ERANGE, "index %llu (position %zu) is past the end of the dataset (%llu records)",
					  (unsigned long long)indices[i], i, (unsigned long long)r->num_records);
		r->items[i].index = indices[i];
		r->items[i].position = i;
	}
	/* Sorted indices make each chunk's records adjacent: one read and one decode per chunk. */
	qsort(r->items, n, sizeof(*r->items), cmp_item);
	for (i = 0; i < n; i++) {
		ret = grist_reader_locate(r, r->items[i].index, &loc);
		if (!ret)
			ret = load_chunk(r, loc.file, loc.chunk);
		if (!ret)
			ret = fn(ctx, r->items[i].position, r->items[i].index, REC(r, loc.record_in_chunk));
		if (ret)
			return ret;
	}
	return 0;
}

GRIST_API int grist_reader_seek(struct grist_reader *r, uint64_t index)
{
	if (index > r->num_records)
		return grist_fail(-ERANGE, "cannot seek to %llu: the dataset has %llu records",
				  (unsigned long long)index, (unsigned long long)r->num_records);
	r->cursor = index;
	return 0;
}

GRIST_API int grist_reader_read_next(struct grist_reader *r, const uint8_t **data, size_t *len)
{
	int ret;

	if (r->cursor >= r->num_records)
		return 0;
	ret = grist_reader_read(r, r->cursor, data, len);
	if (ret)
		return ret;
	r->cursor++;
	return 1;
}
