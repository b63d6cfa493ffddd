/*
 * Guards for code that reads files through mmap: a mapped file that shrinks (or whose
 * storage fails) faults with SIGBUS on the next access, which kills the process by
 * default. Code that decodes from a mapping pushes a guard naming the mapped ranges and
 * calls sigsetjmp() on it; the library's SIGBUS handler jumps back there when the fault
 * lies in one of them, and the code returns an error naming the file and byte instead:
 *
 *	struct grist_map_guard g;
 *
 *	grist_map_guard_push(&g, ranges, n);
 *	if (sigsetjmp(g.env, 0))
 *		return grist_map_guard_fail(&g);   (pops the guard)
 *	ret = decode_from(mapping);
 *	grist_map_guard_pop(&g);
 *
 * Whatever the jump skipped is abandoned mid-way: the guarded code must hold no lock and
 * leave nothing that its error path does not clean up (decoders are only destroyed after).
 *
 * The handler is installed the first time a guard is pushed, and chains to the handler
 * it replaced for every other SIGBUS (the CLI's, Python's faulthandler, ASan's), or
 * restores the default action so that such a fault still kills the process as it would
 * have. Each thread checks once, at its first guard, that it is still in place, and
 * installs it again if it finds the default action back (a restored disposition).
 */
#ifndef GRIST_COMMON_MAP_GUARD_H
#define GRIST_COMMON_MAP_GUARD_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

/* One mapped file. */
struct grist_map_range {
	const uint8_t *base;
	size_t len;
	const char *path;
};

struct grist_map_guard {
	sigjmp_buf env;
	const struct grist_map_range *ranges;
	size_t num_ranges;
	struct grist_map_range one;          /* storage for grist_map_guard_push_one() */
	struct grist_map_guard *prev;        /* guards nest per thread */
	volatile uintptr_t fault_addr;       /* set by the handler before it jumps */
	volatile size_t fault_range;
};

/* Arm @g on this thread for @n ranges (which must outlive the guard). */
void grist_map_guard_push(struct grist_map_guard *g, const struct grist_map_range *ranges, size_t n);

/* Arm @g for one mapping. */
void grist_map_guard_push_one(struct grist_map_guard *g, const void *base, size_t len, const char *path);

/* Disarm @g (the innermost guard of this thread). */
void grist_map_guard_pop(struct grist_map_guard *g);

/*
 * After the jump: pop @g and record "<path>: byte <offset>: the file cannot be read
 * through its memory map (SIGBUS): ..." as this thread's error. Returns -EIO.
 */
int grist_map_guard_fail(struct grist_map_guard *g);

#endif
