/* Async engine, its files: opened once as the read mode asks, mapped when cached (see engine_async_files.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/error.h"
#include "exec/engine_async_files.h"
#include "plan/read_plan.h"
#include "format/dataset.h"

/* AUTO maps a small dataset of small chunks whether cached or not: see grist_io_map_small(). */
static bool map_small_dataset(const struct grist_engine_params *p)
{
	uint64_t bytes = 0, chunks = 0;
	struct grist_file_info info;
	size_t d, f;

	if (p->read_mode != GRIST_READ_AUTO)
		return false;
	for (d = 0; d < p->num_sources; d++)
		for (f = 0; f < p->sources[d].num_files; f++) {
			if (grist_reader_file_info(p->sources[d].reader, f, &info))
				return false;
			bytes += info.file_size;
			chunks += info.num_chunks;
		}
	return grist_io_map_small(bytes, chunks);
}

int grist_async_files_open(const struct grist_engine_params *p, struct async_files *fs)
{
	enum grist_io_mode mode = p->read_mode == GRIST_READ_DIRECT ? GRIST_IO_MODE_DIRECT
				  : p->read_mode == GRIST_READ_AUTO ? GRIST_IO_MODE_AUTO
									: GRIST_IO_MODE_BUFFERED;
	struct grist_io_open_info oi;
	struct grist_file_info info;
	size_t d, f, ranges_cap = 0;
	bool told = false; /* a file that cannot be mapped was logged */
	void *m;
	int ret;

	bool map_all = map_small_dataset(p);

	fs->num_sources = p->num_sources;
	fs->sources = p->sources;
	fs->at = calloc(p->num_sources, sizeof(*fs->at));
	if (!fs->at)
		return grist_fail(-ENOMEM, "async engine: out of memory");
	if (map_all)
		mode = GRIST_IO_MODE_BUFFERED; /* no residency probe: mapped whatever it says */
	for (d = 0; d < p->num_sources; d++) {
		fs->at[d] = calloc(p->sources[d].num_files, sizeof(**fs->at));
		if (!fs->at[d])
			return grist_fail(-ENOMEM, "async engine: out of memory");
		for (f = 0; f < p->sources[d].num_files; f++)
			fs->at[d][f].fd = -1;
		for (f = 0; f < p->sources[d].num_files; f++) {
			ret = grist_reader_file_info(p->sources[d].reader, f, &info);
			if (ret)
				return ret;
			{
				const struct grist_file_geom *g = grist_reader_file_geom(p->sources[d].reader, f);

				if (g->remote) {
					/* a URL: no descriptor, no mapping; the reader already pinned it */
					fs->at[d][f] = (struct async_file){ .fd = -1, .align = 1, .path = info.path,
									     .size = g->size, .remote = g->remote };
					fs->any_remote = true;
					continue;
				}
			}
			ret = grist_io_open_file(info.path, mode, &oi);
			if (ret)
				return grist_fail(ret, "%s: cannot open for reading: %s", info.path, grist_strerror(ret));
			fs->at[d][f] = (struct async_file){
				.fd = oi.fd, .direct = oi.direct, .align = oi.direct ? oi.offset_align : 1, .path = info.path,
				.size = oi.size,
			};
			/* auto maps a file the page cache already holds: no read copies, no syscalls
			   (and reads it where it cannot: grist_io_map_file()) */
			m = NULL;
			if ((p->read_mode == GRIST_READ_MMAP || oi.resident || map_all) &&
			    (ret = grist_io_map_file(oi.fd, oi.size, info.path, p->read_mode == GRIST_READ_MMAP, &told,
						     &m)))
				return ret;
			if (m) {
				if (map_all && !oi.resident)
					madvise(m, oi.size, MADV_WILLNEED); /* advice only: a refusal costs faults */
				fs->at[d][f].map = m;
				fs->any_mapped = true;
				ret = grist_array_reserve((void **)&fs->map_ranges, &ranges_cap, fs->num_map_ranges + 1,
							  sizeof(*fs->map_ranges));
				if (ret)
					return ret;
				fs->map_ranges[fs->num_map_ranges++] =
					(struct grist_map_range){ .base = m, .len = oi.size, .path = info.path };
			}
			if (oi.direct && oi.offset_align < oi.mem_align)
				fs->at[d][f].align = oi.mem_align;
			if (oi.direct)
				fs->any_direct = true;
			else if (!fs->at[d][f].map)
				fs->any_buffered = true;
		}
	}
	fs->buf_align = fs->any_direct || fs->any_buffered ? GRIST_READ_BUF_ALIGN_DIRECT : GRIST_READ_BUF_ALIGN_REMOTE;
	return 0;
}

void grist_async_files_close(struct async_files *fs)
{
	size_t d, f;

	if (!fs->at)
		return;
	for (d = 0; d < fs->num_sources; d++) {
		if (!fs->at[d])
			continue;
		for (f = 0; f < fs->sources[d].num_files; f++) {
			if (fs->at[d][f].map)
				munmap((void *)fs->at[d][f].map, fs->at[d][f].size);
			if (fs->at[d][f].fd >= 0)
				close(fs->at[d][f].fd);
		}
		free(fs->at[d]);
	}
	free(fs->at);
	free(fs->map_ranges);
}
