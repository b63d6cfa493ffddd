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
#include "io/remote.h"
#include "io/remote_read.h"
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
static int check_padding(const char *path, const uint8_t *map, uint64_t chunk_begin, uint64_t data_end,
			 uint64_t chunk_end)
{
	uint64_t pos = data_end, stop;
	int ret;

	while (pos < chunk_end) {
		if (pos % GRIST_BLOCK_SIZE == 0) {
			ret = grist_block_header_check(map + pos, pos, chunk_begin, chunk_end, path);
			if (ret)
				return ret;
			pos += GRIST_BLOCK_HEADER_SIZE;
			continue;
		}
		stop = pos + grist_block_remaining(pos);
		if (stop > chunk_end)
			stop = chunk_end;
		for (; pos < stop; pos++)
			if (map[pos])
				return grist_fail_at(-EBADMSG, path, pos,
						     "padding of the chunk at byte %llu is not zero",
						     (unsigned long long)chunk_begin);
	}
	return 0;
}

static int walk(const char *path, const uint8_t *map, const struct grist_file_geom *g,
		struct grist_chunk_decoder *dec, struct grist_verify_report *rep)
{
	uint64_t pos = 0, footer_offset = g->chunk_offsets[g->num_chunks], ps_offset = g->size - GRIST_BLOCK_SIZE;
	struct found_chunk *found = NULL;
	struct grist_decoded_chunk c;
	uint64_t nfound = 0, cap = 0;
	bool saw_footer = false, saw_ps = false;
	int ret = 0;

	while (pos < g->size) {
		ret = grist_chunk_decode(dec, map, 0, g->size, pos, g->size, path, &c);
		if (ret)
			goto out;
		ret = check_padding(path, map, pos, c.data_end, c.chunk_end);
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
	int ret;

	grist_map_guard_push_one(&guard, map, g->size, path);
	if (sigsetjmp(guard.env, 0))
		return grist_map_guard_fail(&guard);
	ret = walk(path, map, g, dec, rep);
	grist_map_guard_pop(&guard);
	return ret;
}

GRIST_API int grist_file_verify_sized(const char *path, struct grist_verify_report *caller, size_t size)
{
	struct grist_verify_report local, *rep = &local;
	struct grist_reader *r = NULL;
	struct grist_chunk_decoder *dec = NULL;
	const struct grist_file_geom *g;
	void *map = MAP_FAILED;
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
	if (g->remote) {
		/*
		 * A URL: the walk checks every byte in order, so fetch them all (coalesced ranged
		 * GETs, pinned to the ETag taken at open) into memory the size of the object.
		 */
		map = mmap(NULL, g->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (map == MAP_FAILED) {
			ret = grist_fail(-ENOMEM, "%s: cannot allocate %llu bytes to verify it", path,
					 (unsigned long long)g->size);
			goto out;
		}
		ret = grist_remote_read(g->remote, map, 0, g->size);
		if (ret)
			goto out;
	} else {
		map = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, g->fd, 0);
	}
	if (map == MAP_FAILED) {
		ret = grist_fail(-errno, "%s: cannot map the file: %s", path, strerror(errno));
		goto out;
	}
	madvise(map, g->size, MADV_SEQUENTIAL);
	ret = walk_guarded(path, map, g, dec, rep);
	if (!ret && rep->num_records != g->num_records)
		ret = grist_fail_at(-EBADMSG, path, g->chunk_offsets[g->num_chunks],
				    "the footer says %llu records, the chunks hold %llu",
				    (unsigned long long)g->num_records, (unsigned long long)rep->num_records);
out:
	if (map != MAP_FAILED)
		munmap(map, g->size);
	grist_chunk_decoder_destroy(dec);
	grist_reader_close(r);
	if (!ret && caller)
		grist_sized_out(caller, size, rep, sizeof(*rep));
	return ret;
}
