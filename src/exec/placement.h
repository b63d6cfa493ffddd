/*
 * Where each decode worker runs: computed once, on the thread that starts the engine, from
 * the process's affinity mask and the machine's NUMA nodes, then applied by each worker to
 * itself.
 */
#ifndef GRIST_EXEC_PLACEMENT_H
#define GRIST_EXEC_PLACEMENT_H

#include <sched.h>
#include <stdbool.h>

/*
 * grist_place_workers() - the CPUs worker i of @nworkers may run on, into @out[i].
 * @allowed: the CPUs the process may use (its affinity mask).
 * @nodes: each NUMA node's CPUs (any CPUs, allowed or not), @nnodes of them; 0 nodes, or
 *         CPUs on no node, mean one node holding every allowed CPU.
 *
 * Several nodes holding allowed CPUs: each worker gets all the allowed CPUs of one node, so
 * it decodes into node-local memory (first touch), and the nodes are dealt out in proportion
 * to their allowed CPUs: the allowed CPUs are put in an order that takes one from each node
 * in turn while a node has any left, and worker i takes the node of the (i mod n)-th. With
 * 6 allowed CPUs on node 0 and 2 on node 1, 8 workers are 6 and 2, where dealing nodes in
 * turn put 4 on each, two per CPU on node 1; 2 workers are 1 and 1, where dealing CPUs in
 * number order put both on node 0. One node: each worker gets one CPU, the (i mod n)-th
 * allowed, so threads do not migrate between cores.
 * Returns false, @out untouched, when @allowed is empty.
 */
bool grist_place_workers(const cpu_set_t *allowed, const cpu_set_t *nodes, int nnodes, unsigned nworkers,
			 cpu_set_t *out);

/*
 * grist_place_workers_here() - the same for this process: its affinity mask and, where
 * libnuma says there are several nodes, their CPUs. Queried once, so the workers never call
 * libnuma (whose node tables are not thread-safe). False when the mask cannot be read.
 */
bool grist_place_workers_here(unsigned nworkers, cpu_set_t *out);

#endif
