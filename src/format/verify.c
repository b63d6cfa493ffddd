/* Whole-file verification: walk every chunk from offset 0, then cross-check the footer. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/map_guard.h"
#include "format/block.h"
#include "format/chunk.h"
#include "format/chunk_decode.h"
#include "format/dataset.h"
#include "io/io.h"
#include "format/footer.h"

struct found_chunk {
	uint64_t offset, num_records, decoded_data_size;
};

/* Compare the data chunks found by the walk with the footer entries (records 1.. of @footer). */
static int cross_check(const char *path, const struct grist_file_geom *g, const struct found_chunk *found,
		       uint64_t nfound, const struct grist_decoded_chunk *footer)
{
	struct grist_footer_entry e;
	uint64_t i;

	if (nfound != g->num_chunks)
		return grist_fail_at(-EBADMSG, path, g->chunk_offsets[g->num_chunks],
				     "the file holds %llu data chunks, the footer lists %llu",
				     (unsigned long long)nfound, (unsigned long long)g->num_chunks);
	for (i = 0; i < nfound; i++) {
		const uint8_t *p = footer->values + footer->offsets[i + 1];
		size_t len = (size_t)(footer->offsets[i + 2] - footer->offsets[i + 1]);

		if (grist_footer_entry_parse(p, len, &e) < 0)
			return grist_fail_at(-EBADMSG, path, g->chunk_offsets[g->num_chunks],
					     "footer entry %llu is corrupt", (unsigned long long)i);
		if (e.chunk_offset != found[i].offset || e.num_records != found[i].num_records ||
		    e.decoded_data_size != found[i].decoded_data_size)
			return grist_fail_at(-EBADMSG, path, found[i].offset,
					     "data chunk %llu (%llu records, %llu bytes) does not match its footer entry "
					     "(offset %llu, %llu records, %llu bytes)",
					     (unsigned long long)i, (unsigned long long)found[i].num_records,
					     (unsigned long long)found[i].decoded_data_size,
					     (unsigned long long)e.chunk_offset, (unsigned long long)e.num_records,
					     (unsigned long long)e.decoded_data_size);
	}
	return 0;
}

/*
 * No hash covers the zeros between a chunk's data and its end (a chunk holding more
 * records than bytes is padded so record positions stay unique), so check them here:
 * zeros, except for the block headers crossed, which must be sound.
 */
static int check_padding(const char *path, const uint8_t *buf, uint64_t buf_off, uint64_t chunk_begin,
			 uint64_t data_end, uint64_t chunk_end)
{
	uint64_t pos = data_end, stop;
	int ret;

	while (pos < chunk_end) {
		if (pos % GRIST_BLOCK_SIZE == 0) {
			ret = grist_block_header_check(buf + (pos - buf_off), pos, chunk_begin, chunk_end, path);
			if (ret)
				return ret;
			pos += GRIST_BLOCK_HEADER_SIZE;
			continue;
		}
		stop = pos + grist_block_remaining(pos);
		if (stop > chunk_end)
			stop = chunk_end;
		for (; pos < stop; pos++)
			if (buf[pos - buf_off])
				return grist_fail_at(-EBADMSG, path, pos,
						     "padding of the chunk at byte %llu is not zero",
						     (unsigned long long)chunk_begin);
	}
	return 0;
}

/*
 * The bytes walk() reads: a local file's mapping (all of it), or for a URL or a file that
 * cannot be mapped a window of VIEW_WINDOW bytes (more for a larger chunk) read as the
 * walk reaches it, so that verifying a file of any size takes memory of the order of its
 * largest chunk.
 */
#define VIEW_WINDOW (16u << 20)

struct view {
	const uint8_t *buf; /* the file bytes [off, off + len) */
	uint64_t off, len;
	const struct grist_file_geom *file; /* read in windows; NULL: buf maps the whole file */
	struct grist_buf win;
	uint64_t size;
};

/* Make the view cover [begin, end) of the file: one read of at least VIEW_WINDOW bytes. */
static int view_cover(struct view *v, uint64_t begin, uint64_t end)
{
	uint64_t want = end - begin > VIEW_WINDOW ? end - begin : VIEW_WINDOW;
	int ret;

	if (begin >= v->off && end <= v->off + v->len)
		return 0;
	if (want > v->size - begin)
		want = v->size - begin;
	v->len = 0;
	ret = grist_buf_reserve(&v->win, (size_t)want);
	if (ret)
		return grist_fail(ret, "%s: cannot allocate %llu bytes to verify", v->file->path,
				  (unsigned long long)want);
	ret = grist_file_read(v->file, v->win.data, begin, (size_t)want);
	if (ret)
		return ret;
	v->buf = v->win.data;
	v->off = begin;
	v->len = want;
	return 0;
}

/*
 * For a file read in windows: the extent of the chunk at @pos, from its header, read into the view.
 * A header that does not parse gets a window's worth, and the decoder says what is wrong.
 */
static int view_chunk(struct view *v, const char *path, uint64_t pos, uint64_t *ext_end)
{
	uint64_t hdr_end = grist_block_add_with_overhead(pos, GRIST_CHUNK_HEADER_SIZE), q, end;
	struct grist_chunk_header h;
	uint8_t hdr[GRIST_CHUNK_HEADER_SIZE];
	size_t n = 0;
	int ret;

	*ext_end = v->size - pos > VIEW_WINDOW ? pos + VIEW_WINDOW : v->size;
	if (hdr_end > v->size)
		return view_cover(v, pos, *ext_end);
	ret = view_cover(v, pos, hdr_end);
	if (ret)
		return ret;
	/* the 40 logical bytes, past a block header the chunk's header may straddle */
	for (q = pos; q < hdr_end && n < sizeof(hdr); q++) {
		if (q % GRIST_BLOCK_SIZE == 0) {
			q += GRIST_BLOCK_HEADER_SIZE - 1;
			continue;
		}
		hdr[n++] = v->buf[q - v->off];
	}
	if (n == sizeof(hdr) && grist_chunk_header_parse(hdr, &h, path, pos) == 0) {
		end = grist_chunk_end(pos, h.data_size, h.num_records);
		if (end > pos && end <= v->size)
			*ext_end = end;
	}
	return view_cover(v, pos, *ext_end);
}

static int walk(const char *path, struct view *v, const struct grist_file_geom *g,
		struct grist_chunk_decoder *dec, struct grist_verify_report *rep)
{
	uint64_t pos = 0, footer_offset = g->chunk_offsets[g->num_chunks], ps_offset = g->size - GRIST_BLOCK_SIZE;
	struct found_chunk *found = NULL;
	struct grist_decoded_chunk c;
	uint64_t nfound = 0, cap = 0;
	bool saw_footer = false, saw_ps = false;
	int ret = 0;

	while (pos < g->size) {
		uint64_t ext_end = g->size;

		if (v->file) {
			ret = view_chunk(v, path, pos, &ext_end);
			if (ret)
				goto out;
		}
		ret = grist_chunk_decode(dec, v->buf, v->off, (size_t)v->len, pos, ext_end, path, &c);
		if (ret)
			goto out;
		ret = check_padding(path, v->buf, v->off, pos, c.data_end, c.chunk_end);
		if (ret)
			goto out;
		if (pos == 0 && c.chunk_type != GRIST_CHUNK_SIGNATURE) {
			ret = grist_fail_at(-EBADMSG, path, 0, "the file does not start with a signature chunk");
			goto out;
		}
		if (c.chunk_type == GRIST_CHUNK_PADDING) {
			rep->padding_chunks++;
		} else if (c.chunk_type != GRIST_CHUNK_SIMPLE) {
			rep->other_chunks++;
		} else if (pos == footer_offset) {
			saw_footer = true;
			rep->other_chunks++;
			ret = cross_check(path, g, found, nfound, &c);
			if (ret)
				goto out;
		} else if (pos == ps_offset) {
			saw_ps = true;
			rep->other_chunks++;
		} else {
			if (pos > footer_offset) {
				ret = grist_fail_at(-EBADMSG, path, pos, "a chunk of records after the footer");
				goto out;
			}
			if (nfound == cap) {
				struct found_chunk *p;

				cap = cap ? cap * 2 : 64;
				p = realloc(found, cap * sizeof(*p));
				if (!p) {
					ret = grist_fail(-ENOMEM, "cannot allocate the chunk list");
					goto out;
				}
				found = p;
			}
			found[nfound].offset = pos;
			found[nfound].num_records = c.num_records;
			found[nfound].decoded_data_size = c.decoded_data_size;
			nfound++;
			rep->data_chunks++;
			rep->num_records += c.num_records;
			rep->decoded_bytes += c.decoded_data_size;
		}
		pos = c.chunk_end;
	}
	if (!saw_footer || !saw_ps)
		ret = grist_fail_at(-EBADMSG, path, saw_footer ? ps_offset : footer_offset,
				    "no chunk begins at the %s offset", saw_footer ? "postscript" : "footer");
out:
	free(found);
	return ret;
}

/*
 * walk() through the mapping under a guard: a file that shrinks while it is verified is an
 * error naming it and the byte (common/map_guard.h), not a SIGBUS that kills the caller.
 * The decoder may be left mid-chunk; it is only destroyed afterwards.
 */
static int walk_guarded(const char *path, const uint8_t *map, const struct grist_file_geom *g,
			struct grist_chunk_decoder *dec, struct grist_verify_report *rep)
{
	struct grist_map_guard guard;
	struct view v = { .buf = map, .off = 0, .len = g->size, .size = g->size };
	int ret;

	grist_map_guard_push_one(&guard, map, g->size, path);
	if (sigsetjmp(guard.env, 0))
		return grist_map_guard_fail(&guard);
	ret = walk(path, &v, g, dec, rep);
	grist_map_guard_pop(&guard);
	return ret;
}

GRIST_API int grist_file_verify_sized(const char *path, struct grist_verify_report *caller, size_t size)
{
	struct grist_verify_report local, *rep = &local;
	struct grist_reader *r = NULL;
	struct grist_chunk_decoder *dec = NULL;
	const struct grist_file_geom *g;
	void *map = NULL;
	int ret;

	memset(rep, 0, sizeof(*rep));
	/* Opening checks the postscript and footer the way every reader sees them. */
	ret = grist_reader_open(&path, 1, NULL, &r);
	if (ret)
		return ret;
	g = grist_reader_file_geom(r, 0);
	rep->file_size = g->size;
	ret = grist_chunk_decoder_create(&dec);
	if (ret)
		goto out;
	/*
	 * A local file is mapped, as the loader's io=auto maps it: through the one helper, so
	 * a file that cannot be mapped (FUSE with direct I/O refuses a shared mapping; a
	 * ulimit -v smaller than the file) is read instead. Nothing here asks for a mapping,
	 * so a refused one is never an error. A URL is read the same way: in windows (ranged
	 * GETs pinned to the ETag taken at open), never all at once, since objects can be
	 * larger than memory.
	 */
	if (!g->remote) {
		bool told = false;

		ret = grist_io_map_file(g->fd, g->size, path, false, &told, &map);
		if (ret)
			goto out;
	}
	if (map) {
		madvise(map, g->size, MADV_SEQUENTIAL);
		ret = walk_guarded(path, map, g, dec, rep);
	} else {
		struct view v = { .file = g, .size = g->size };

		ret = walk(path, &v, g, dec, rep);
		grist_buf_free(&v.win);
	}
	if (!ret && rep->num_records != g->num_records)
		ret = grist_fail_at(-EBADMSG, path, g->chunk_offsets[g->num_chunks],
				    "the footer says %llu records, the chunks hold %llu",
				    (unsigned long long)g->num_records, (unsigned long long)rep->num_records);
out:
	if (map)
		munmap(map, g->size);
	grist_chunk_decoder_destroy(dec);
	grist_reader_close(r);
	if (!ret && caller)
		grist_sized_out(caller, size, rep, sizeof(*rep));
	return ret;
}
