/* How many CPUs this process may run on. */
#ifndef GRIST_COMMON_CPUS_H
#define GRIST_COMMON_CPUS_H

/*
 * grist_cpus_allowed() - the CPUs in the calling thread's affinity mask, at least 1.
 *
 * Not the online CPUs (get_nprocs()): a trainer started under `taskset`, in a container
 * limited by a cpuset, or by a scheduler that gives each job its cores would otherwise get
 * one decode thread per CPU of the machine, all crowded onto the few it may use. What
 * nproc(1) and Python's os.process_cpu_count() report. Falls back to the online CPUs when
 * the mask cannot be read (more CPUs than a cpu_set_t holds).
 */
unsigned grist_cpus_allowed(void);

#endif
