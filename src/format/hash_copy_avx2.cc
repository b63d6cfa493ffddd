/*
 * The Riegeli hash of a chunk's pieces and the copy of its values, in one pass: each
 * stretch of a few KiB is hashed, then stored to the row (or gathered into the codec's
 * input) while it is still in L1, so every byte comes from memory once. Built with -mavx2 (the only file that is), and
 * called only where libhighwayhash says the CPU has AVX2 (hash_cat.cc): it instantiates
 * HighwayHashCatT for that target itself, because the library's dispatcher only runs the
 * one-shot functors it was built with.
 *
 * This file must not include anything that defines inline functions outside namespace
 * AVX2 (the C++ standard headers do): the linker could keep this file's AVX2 copy of
 * one and hand it to callers on any CPU.
 */
#include <stddef.h>
#include <stdint.h>

#include <highwayhash/highwayhash.h>

extern "C" {
#include "common/copy.h"
#include "format/hash.h"
}

static_assert(HH_TARGET == HH_TARGET_AVX2, "hash_copy_avx2.cc must be built with -mavx2");

/*
 * Bytes hashed before the same bytes are copied: well inside L1 (32 KiB here) beside the
 * destination's write-combining buffers, and large enough that the per-step overhead
 * (saving and restoring the hash state) is lost in the work.
 */
static const size_t STEP = 8192;

/*
 * @stream: streaming stores (a batch row, read later elsewhere), else ordinary ones (scratch
 * the caller reads next: a codec's input).
 */
extern "C" uint64_t grist_hash_pieces_copy_avx2(const struct grist_hash_piece *pieces, size_t n, uint64_t from,
						void *dst, size_t len, int stream)
{
	highwayhash::HighwayHashCatT<HH_TARGET_AVX2> cat(*reinterpret_cast<const highwayhash::HHKey *>(grist_hash_key));
	highwayhash::HHResult64 out = 0;
	uint8_t *to = static_cast<uint8_t *>(dst);
	uint64_t pos = 0, end = from + len; /* logical position of the piece being hashed; copy range */

	for (size_t k = 0; k < n; k++) {
		const char *p = pieces[k].data;
		size_t left = pieces[k].len;

		while (left) {
			size_t step = left < STEP ? left : STEP;
			uint64_t a = pos > from ? pos : from, b = pos + step < end ? pos + step : end;

			cat.Append(p, step);
			if (a < b) {
				if (stream)
					grist_copy_streaming(to, p + (a - pos), (size_t)(b - a));
				else
					__builtin_memcpy(to, p + (a - pos), (size_t)(b - a));
				to += b - a;
			}
			p += step;
			pos += step;
			left -= step;
		}
	}
	if (stream)
		grist_copy_streaming_done();
	cat.Finalize(&out);
	return out;
}
