/* Where each decode worker runs: see placement.h. */
#include <stdlib.h>

#include "grist_config.h"
#if GRIST_HAVE_NUMA
#include <numa.h>
#endif

#include "exec/placement.h"

/* The node of @cpu among @nodes, or -1. */
static int node_of(int cpu, const cpu_set_t *nodes, int nnodes)
{
	for (int n = 0; n < nnodes; n++)
		if (CPU_ISSET(cpu, &nodes[n]))
			return n;
	return -1;
}

bool grist_place_workers(const cpu_set_t *allowed, const cpu_set_t *nodes, int nnodes, unsigned nworkers,
			 cpu_set_t *out)
{
	int order[CPU_SETSIZE], next[CPU_SETSIZE], n = 0, cpu, node, used = 0, taken;
	bool several = false;
	unsigned i;

	if (!CPU_COUNT(allowed))
		return false;
	if (nnodes > CPU_SETSIZE)
		nnodes = CPU_SETSIZE; /* no machine: but next[] is sized so */
	/* nodes holding allowed CPUs: more than one, and every allowed CPU on one of them */
	for (node = 0; node < nnodes; node++) {
		cpu_set_t mine;

		CPU_AND(&mine, allowed, &nodes[node]);
		used += CPU_COUNT(&mine) > 0;
	}
	several = used > 1;
	for (cpu = 0; cpu < CPU_SETSIZE && several; cpu++)
		if (CPU_ISSET(cpu, allowed) && node_of(cpu, nodes, nnodes) < 0)
			several = false;
	if (!several) {
		for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
			if (CPU_ISSET(cpu, allowed))
				order[n++] = cpu;
		for (i = 0; i < nworkers; i++) {
			CPU_ZERO(&out[i]);
			CPU_SET(order[i % (unsigned)n], &out[i]);
		}
		return true;
	}
	/* one allowed CPU from each node in turn, while a node has any left: next[node] is where it resumes */
	for (node = 0; node < nnodes; node++)
		next[node] = 0;
	do {
		taken = 0;
		for (node = 0; node < nnodes; node++) {
			for (cpu = next[node]; cpu < CPU_SETSIZE; cpu++)
				if (CPU_ISSET(cpu, allowed) && CPU_ISSET(cpu, &nodes[node]))
					break;
			if (cpu < CPU_SETSIZE) {
				order[n++] = node;
				next[node] = cpu + 1;
				taken++;
			}
		}
	} while (taken);
	for (i = 0; i < nworkers; i++)
		CPU_AND(&out[i], allowed, &nodes[order[i % (unsigned)n]]);
	return true;
}

bool grist_place_workers_here(unsigned nworkers, cpu_set_t *out)
{
	cpu_set_t allowed, *nodes = NULL;
	int nnodes = 0;
	bool ok;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return false;
#if GRIST_HAVE_NUMA
	/* numa(3): numa_available() first; without it the other calls are undefined */
	if (numa_available() >= 0 && numa_max_node() > 0) {
		struct bitmask *cpus = numa_allocate_cpumask();
		int max = numa_max_node() + 1;

		nodes = cpus ? calloc((size_t)max, sizeof(*nodes)) : NULL;
		if (nodes) {
			for (nnodes = 0; nnodes < max; nnodes++) {
				unsigned bits = (unsigned)numa_bitmask_nbytes(cpus) * 8, cpu;

				CPU_ZERO(&nodes[nnodes]);
				if (numa_node_to_cpus(nnodes, cpus))
					continue; /* no such node: holds no CPU */
				for (cpu = 0; cpu < CPU_SETSIZE && cpu < bits; cpu++)
					if (numa_bitmask_isbitset(cpus, cpu))
						CPU_SET(cpu, &nodes[nnodes]);
			}
		}
		if (cpus)
			numa_free_cpumask(cpus);
	}
#endif
	ok = grist_place_workers(&allowed, nodes, nodes ? nnodes : 0, nworkers, out);
	free(nodes);
	return ok;
}
