/*
 * dio_align FILE: can O_DIRECT put a chunk's values straight into a batch row?
 *
 * Issue 22 asks for uncompressed payloads read "straight into the batch slot", the chunk
 * header going to a side buffer. Whether the kernel allows that is a property of the file
 * system and the device, so this measures it rather than assuming it:
 *
 * 1. What statx(STATX_DIOALIGN) says: stx_dio_mem_align, stx_dio_offset_align.
 * 2. What O_DIRECT preadv() accepts, probed on FILE itself: the smallest offset from a
 *    page at which a buffer may start, and the smallest length a segment of a two-segment
 *    read may have (the head that a side buffer would take).
 * 3. For FILE's simple chunks of one uncompressed record (group_size 1, as the cold bench
 *    writes them): where each record's values start in the file, modulo that granularity,
 *    and whether a 64 KiB block header falls inside them.
 *
 * With segments that must start at a multiple of G bytes of memory and be a multiple of G
 * bytes long, file byte o of an aligned read can only land at an address equal to o modulo
 * G. A record's values can land in place in a row at address R only if they start at a
 * file offset equal to R modulo G and no block header (24 bytes, which would shift what
 * follows it by 24) lies inside them. The last lines count how many records of FILE meet
 * that for rows at multiples of G (fixed-size rows of a power-of-two size).
 *
 * Not a timing: it prints facts about this machine and FILE (docs/tuning.md, "Zero copy").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define GRIST_INTERNAL /* chunk extents, values, where data bytes lie: see grist/internal/chunks.h */
#include "grist/error.h"
#include "grist/internal/chunks.h"

#define PROBE 4096u

static unsigned varint_len(uint64_t v)
{
	unsigned n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Does an O_DIRECT preadv of @n segments at file offset 0 succeed? */
static int accepted(int fd, struct iovec *v, int n)
{
	return preadv(fd, v, n, 0) >= 0;
}

int main(int argc, char **argv)
{
	struct grist_chunk_walker *w;
	struct statx st;
	uint8_t *a, *b;
	unsigned mem_g = 0, len_g = 0, g, grain;
	uint64_t k, ones = 0, at_grain = 0, no_header = 0, in_place = 0;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: dio_align FILE (an ArrayRecord file on the file system to probe)\n");
		return 2;
	}
	if (statx(AT_FDCWD, argv[1], 0, STATX_DIOALIGN, &st)) {
		perror(argv[1]);
		return 1;
	}
	if (st.stx_mask & STATX_DIOALIGN)
		printf("statx: stx_dio_mem_align %u, stx_dio_offset_align %u\n", st.stx_dio_mem_align,
		       st.stx_dio_offset_align);
	else
		printf("statx: STATX_DIOALIGN not reported here\n");
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign((void **)&a, 4096, 2 * PROBE) || posix_memalign((void **)&b, 4096, 2 * PROBE)) {
		perror(argv[1]);
		return 1;
	}
	/* the smallest buffer offset from a page that a one-segment read takes */
	for (g = 1; g < PROBE && !mem_g; g *= 2)
		if (accepted(fd, &(struct iovec){ a + g, PROBE }, 1))
			mem_g = g;
	/* the smallest head segment (into its own aligned buffer) a two-segment read takes */
	for (g = 1; g < PROBE && !len_g; g *= 2) {
		struct iovec v[2] = { { b, g }, { a, PROBE - g } };

		if (accepted(fd, v, 2))
			len_g = g;
	}
	printf("O_DIRECT preadv on this file: a segment may start %u bytes into a page (not less); "
	       "a 2-segment read takes a first segment of %u bytes (not less)\n", mem_g ? mem_g : PROBE,
	       len_g ? len_g : PROBE);
	grain = mem_g > len_g ? mem_g : len_g;
	if (!grain)
		grain = PROBE;
	printf("so file byte o of a read can land only at an address equal to o modulo %u\n", grain);
	fflush(stdout);
	close(fd);
	free(a);
	free(b);

	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || grist_chunk_walker_open(argv[1], &w)) {
		fprintf(stderr, "dio_align: %s\n", grist_last_error());
		return 1;
	}
	for (k = 0; k < grist_chunk_walker_file(w)->num_chunks; k++) {
		struct grist_chunk_view c;
		uint64_t n, prefix, first, last;

		if (grist_chunk_walker_read(w, k, &c)) {
			fprintf(stderr, "dio_align: %s\n", grist_last_error());
			grist_chunk_walker_close(w);
			return 1;
		}
		if (!c.simple || c.extent.num_records != 1 || strcmp(c.codec, "uncompressed"))
			continue;
		n = c.values_len;
		/* compression byte, the sizes section's length, the one size: then the values */
		prefix = 1 + varint_len(varint_len(n)) + varint_len(n);
		first = grist_chunk_data_byte_offset(c.extent.begin, prefix);
		last = n ? grist_chunk_data_byte_offset(c.extent.begin, prefix + n - 1) : first;
		/* the arithmetic checked against the file: the values' first 16 bytes are where it says,
		   a block header among them included (a chunk's data is followed by at least the footer's
		   40-byte chunk header, so the read is whole) */
		{
			uint8_t head[16 + 24];
			uint64_t m = n < 16 ? n : 16, j;
			ssize_t got = m ? pread(fd, head, sizeof(head), (off_t)first) : 0;

			for (j = 0; j < m; j++) {
				uint64_t at = grist_chunk_data_byte_offset(c.extent.begin, prefix + j) - first;

				if (got < 0 || at >= (uint64_t)got || head[at] != c.values[j])
					break;
			}
			if (j < m) {
				fprintf(stderr, "dio_align: chunk %llu: values not at byte %llu as computed\n",
					(unsigned long long)k, (unsigned long long)first);
				return 1;
			}
		}
		ones++;
		at_grain += first % grain == 0;
		no_header += last - first == n - (n > 0);
		in_place += first % grain == 0 && last - first == n - (n > 0);
	}
	printf("%s: %llu simple chunks of one uncompressed record; values starting at a multiple of %u: %llu; "
	       "values with no block header inside: %llu; both (could land in place in a row at a multiple of "
	       "%u): %llu\n", argv[1], (unsigned long long)ones, grain, (unsigned long long)at_grain,
	       (unsigned long long)no_header, grain, (unsigned long long)in_place);
	grist_chunk_walker_close(w);
	close(fd);
	return 0;
}
