/* How many CPUs this process may run on: see cpus.h. */
#include <sched.h>
#include <sys/sysinfo.h>

#include "common/cpus.h"

unsigned grist_cpus_allowed(void)
{
	cpu_set_t allowed;
	int n;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		n = get_nprocs();
	else
		n = CPU_COUNT(&allowed);
	return n > 0 ? (unsigned)n : 1;
}
