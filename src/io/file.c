/* Opening data files: O_DIRECT or buffered, and the alignment direct reads need. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/error.h"
#include "common/open.h"
#include "io/io_config.h"
/* Only the callers' interface: opening files is below the io core, which uses it to register them. */
#define GRIST_INTERNAL
#include "grist/internal/io.h"

/* ext4 can report a memory alignment of 4; buffers are aligned to at least this. */
#define MIN_MEM_ALIGN 512
#define FALLBACK_ALIGN 4096

static bool is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

/* The logical block size of the device under @st, from sysfs; 0 when unknown. */
static uint32_t sysfs_block_size(dev_t dev)
{
	char p[96];
	unsigned v = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/queue/logical_block_size", major(dev),
		 minor(dev));
	f = fopen(p, "re");
	if (!f) {
		/* A partition keeps its queue/ in the parent device's folder. */
		snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/../queue/logical_block_size",
			 major(dev), minor(dev));
		f = fopen(p, "re");
	}
	if (!f)
		return 0;
	if (fscanf(f, "%u", &v) != 1)
		v = 0;
	fclose(f);
	return is_pow2(v) ? v : 0;
}

int grist_io_dio_alignment(int fd, uint32_t *offset_align, uint32_t *mem_align)
{
	uint32_t off = 0, mem = 0;
	struct stat st;
#if GRIST_HAVE_STATX_DIOALIGN
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
	    (sx.stx_mask & STATX_DIOALIGN)) {
		/* The kernel answered: 0 means this file cannot do direct I/O at all. */
		if (!sx.stx_dio_offset_align)
			return grist_fail(-ENOTSUP, "filesystem does not support O_DIRECT");
		off = sx.stx_dio_offset_align;
		mem = sx.stx_dio_mem_align;
	}
#endif
	if (!off) {
		if (fstat(fd, &st))
			return grist_fail(-errno, "fstat: %s", strerror(errno));
		if (S_ISBLK(st.st_mode)) {
			int bs = 0;

			if (ioctl(fd, BLKSSZGET, &bs) == 0 && bs > 0 && is_pow2((uint64_t)bs))
				off = (uint32_t)bs;
		} else {
			off = sysfs_block_size(st.st_dev);
		}
		if (!off)
			off = FALLBACK_ALIGN;
		mem = off;
	}
	if (!is_pow2(off) || (mem && !is_pow2(mem)))
		return grist_fail(-ENOTSUP, "odd O_DIRECT alignment (offset %u, memory %u)", off, mem);
	if (mem < MIN_MEM_ALIGN)
		mem = MIN_MEM_ALIGN;
	*offset_align = off;
	*mem_align = mem;
	return 0;
}

int grist_io_align_extent(uint64_t offset, uint64_t len, uint32_t align,
			  uint64_t *aligned_off, uint64_t *aligned_len)
{
	uint64_t end, mask;

	if (!is_pow2(align))
		return grist_fail(-EINVAL, "alignment %u is not a power of two", align);
	mask = (uint64_t)align - 1;
	if (len > UINT64_MAX - offset || offset + len > UINT64_MAX - mask)
		return grist_fail(-EINVAL, "extent at %llu of %llu bytes overflows",
				  (unsigned long long)offset, (unsigned long long)len);
	end = (offset + len + mask) & ~mask;
	*aligned_off = offset & ~mask;
	*aligned_len = end - *aligned_off;
	return 0;
}

static uint64_t ram_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

#define MAP_SMALL_RAM_SHARE 8		  /* the dataset is at most 1/8 of RAM */
#define MAP_SMALL_CHUNK_BYTES (16u << 10) /* and its chunks average at most 16 KiB */

bool grist_io_map_small(uint64_t bytes, uint64_t chunks)
{
	uint64_t ram = ram_bytes();

	return chunks && ram && bytes <= ram / MAP_SMALL_RAM_SHARE && bytes / chunks <= MAP_SMALL_CHUNK_BYTES;
}

int grist_io_map_file(int fd, uint64_t size, const char *path, bool required, bool *told, void **map)
{
	int err = EFBIG;
	void *m;

	*map = NULL;
	if (!size)
		return 0;
	if (size <= SIZE_MAX) {
		m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED) {
			*map = m;
			return 0;
		}
		err = errno;
	}
	if (required)
		return grist_fail(-err, "%s: cannot map the file for io=mmap: %s (io=auto reads a file it cannot map)",
				  path, strerror(err));
	if (!*told)
		grist_log(GRIST_LOG_INFO, "%s: cannot map the file (%s): reading it, and any other file here "
			  "that cannot be mapped, instead", path, strerror(err));
	*told = true;
	return 0;
}

#define RESIDENT_RUNS 256
#define RESIDENT_RUN_PAGES 16

int grist_io_resident_share(int fd, uint64_t size, double *share)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), pages, runs, run_pages, stride, r, cached = 0, seen = 0, i;
	unsigned char vec[RESIDENT_RUN_PAGES * 64];
	uint8_t *m;
	int ret = 0;

	*share = 1.0;
	if (!size)
		return 0;
	if (size > SIZE_MAX)
		return grist_fail(-EFBIG, "cannot map %llu bytes", (unsigned long long)size);
	pages = (size + page - 1) / page;
	if (pages <= RESIDENT_RUNS * RESIDENT_RUN_PAGES) {
		/* a small file: every page, sizeof(vec) pages per call */
		run_pages = stride = sizeof(vec);
		runs = (pages + run_pages - 1) / run_pages;
	} else {
		/* a large one: evenly spread runs, the last ending fewer than runs - 1 pages before the end */
		run_pages = RESIDENT_RUN_PAGES;
		runs = RESIDENT_RUNS;
		stride = (pages - run_pages) / (runs - 1);
	}
	m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return grist_fail(-errno, "mmap for the page-cache probe: %s", strerror(errno));
	for (r = 0; r < runs; r++) {
		uint64_t first = r * stride, n = pages - first < run_pages ? pages - first : run_pages;

		if (mincore(m + first * page, (size_t)(n * page), vec)) {
			ret = grist_fail(-errno, "mincore: %s", strerror(errno));
			break;
		}
		for (i = 0; i < n; i++)
			cached += vec[i] & 1;
		seen += n;
	}
	munmap(m, (size_t)size);
	if (!ret)
		*share = seen ? (double)cached / (double)seen : 1.0;
	return ret;
}

int grist_io_open_file(const char *path, enum grist_io_mode mode, struct grist_io_open_info *info)
{
	uint64_t ram;
	struct stat st;
	int fd, dfd, ret;

	if (!path || !info || mode > GRIST_IO_MODE_BUFFERED)
		return grist_fail(-EINVAL, "grist_io_open_file: bad argument");
	memset(info, 0, sizeof(*info));
	info->fd = -1;
	fd = grist_open_regular(path, 0, &st);
	if (fd < 0)
		return fd;
	info->size = (uint64_t)st.st_size;
	info->offset_align = 1;
	info->mem_align = 1;
	if (mode == GRIST_IO_MODE_BUFFERED)
		goto buffered;
	if (mode == GRIST_IO_MODE_AUTO) {
		double share;

		/* A probe that fails only costs the choice: the file is read as if not cached. */
		if (info->size && !grist_io_resident_share(fd, info->size, &share) &&
		    share >= GRIST_IO_RESIDENT_SHARE) {
			info->resident = true;
			snprintf(info->note, sizeof(info->note), "mmap: %.0f%% of the file's sampled pages are cached",
				 share * 100);
			goto buffered;
		}
		ram = ram_bytes();
		/* Only a file that cannot stay cached is worth bypassing the page cache for. */
		if (!ram || info->size <= ram / 2) {
			snprintf(info->note, sizeof(info->note),
				 "buffered: file (%llu bytes) fits in half of RAM (%llu bytes)",
				 (unsigned long long)info->size, (unsigned long long)ram);
			goto buffered;
		}
	}
	dfd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (dfd < 0) {
		ret = -errno;
		if (ret != -EINVAL) {
			grist_fail_at(ret, path, 0, "open(O_DIRECT): %s", strerror(-ret));
			goto fail;
		}
		ret = grist_fail_at(-ENOTSUP, path, 0, "filesystem refuses O_DIRECT");
		goto no_direct;
	}
	ret = grist_io_dio_alignment(dfd, &info->offset_align, &info->mem_align);
	if (ret) {
		close(dfd);
		grist_fail_prefix(ret, "%s", path);
		goto no_direct;
	}
	close(fd);
	info->fd = dfd;
	info->direct = true;
	if (mode == GRIST_IO_MODE_AUTO)
		snprintf(info->note, sizeof(info->note),
			 "direct: file (%llu bytes) is over half of RAM", (unsigned long long)info->size);
	return 0;
no_direct:
	info->offset_align = 1;
	info->mem_align = 1;
	if (mode == GRIST_IO_MODE_DIRECT)
		goto fail;
	snprintf(info->note, sizeof(info->note), "buffered: %s", grist_last_error());
buffered:
	info->fd = fd;
	return 0;
fail:
	close(fd);
	return ret;
}
