/* Chunk geometry of a component: which records each chunk holds, across files. */
#include <stdlib.h>

#include "common/error.h"
#include "plan/plan_internal.h"

int grist_geometry_init(struct grist_geometry *g, const struct grist_plan_file *files, size_t n,
			size_t component)
{
	uint64_t records = 0, chunks = 0;
	size_t f;

	g->num_files = 0;
	g->chunk_first = g->record_first = g->group_size = NULL;
	if (n && !files)
		return grist_fail(-EINVAL, "dataset %zu: %zu files but no file array", component, n);
	if (n > (SIZE_MAX / sizeof(uint64_t)) - 1)
		return grist_fail(-EINVAL, "dataset %zu: too many files (%zu)", component, n);
	g->chunk_first = malloc((n + 1) * sizeof(uint64_t));
	g->record_first = malloc((n + 1) * sizeof(uint64_t));
	g->group_size = malloc((n ? n : 1) * sizeof(uint64_t));
	if (!g->chunk_first || !g->record_first || !g->group_size) {
		grist_geometry_free(g);
		return grist_fail(-ENOMEM, "dataset %zu: geometry of %zu files", component, n);
	}
	for (f = 0; f < n; f++) {
		uint64_t nr = files[f].num_records, gs = files[f].group_size;

		if (nr && !gs) {
			grist_geometry_free(g);
			return grist_fail(-EINVAL, "dataset %zu, file %zu: %llu records with group_size 0",
					  component, f, (unsigned long long)nr);
		}
		if (nr > GRIST_PERM_MAX_N - records) {
			grist_geometry_free(g);
			return grist_fail(-EINVAL, "dataset %zu: more than 2^63 records", component);
		}
		g->chunk_first[f] = chunks;
		g->record_first[f] = records;
		g->group_size[f] = gs;
		records += nr;
		chunks += nr ? (nr - 1) / gs + 1 : 0;
	}
	g->chunk_first[n] = chunks;
	g->record_first[n] = records;
	g->num_files = n;
	return 0;
}

void grist_geometry_free(struct grist_geometry *g)
{
	free(g->chunk_first);
	free(g->record_first);
	free(g->group_size);
	g->chunk_first = g->record_first = g->group_size = NULL;
	g->num_files = 0;
}

uint64_t grist_geometry_chunk(const struct grist_geometry *g, uint64_t c, uint64_t *count)
{
	uint64_t k, first, end;
	size_t lo;

	if (c >= grist_geometry_chunks(g)) {
		*count = 0;
		return grist_geometry_records(g);
	}
	/* Last file whose first chunk is <= c; files without chunks share it and lose. */
	lo = grist_plan_search(g->chunk_first, g->num_files, c);
	k = c - g->chunk_first[lo];
	first = g->record_first[lo] + k * g->group_size[lo];
	end = g->record_first[lo + 1];
	*count = end - first < g->group_size[lo] ? end - first : g->group_size[lo];
	return first;
}
