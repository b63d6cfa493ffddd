/* The read planner: chunk extents coalesced into regions, regions cut into io requests (see read_plan.h). */
#include "plan/read_plan.h"

void grist_read_align(uint64_t align, uint64_t *off, uint64_t *end)
{
	*off &= ~(align - 1);
	*end = (*end + align - 1) & ~(align - 1);
}

bool grist_read_coalesce_max(uint64_t r_off, uint64_t *r_len, uint64_t off, uint64_t end, uint64_t max)
{
	if (off < r_off || off > r_off + *r_len || end - r_off > max)
		return false;
	if (end > r_off + *r_len)
		*r_len = end - r_off;
	return true;
}

bool grist_read_coalesce(uint64_t r_off, uint64_t *r_len, uint64_t off, uint64_t end)
{
	return grist_read_coalesce_max(r_off, r_len, off, end, GRIST_READ_REGION_MAX);
}
