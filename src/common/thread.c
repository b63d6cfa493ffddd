/* grist's threads take no asynchronous signal; see thread.h for why. */
#include <signal.h>

#include "common/thread.h"

int grist_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	static const int faults[] = { SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGTRAP, SIGSYS };
	sigset_t block, old;
	unsigned i;
	int ret;

	sigfillset(&block);
	for (i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		sigdelset(&block, faults[i]);
	/* the new thread inherits the mask it is created under; the caller's is put back */
	pthread_sigmask(SIG_BLOCK, &block, &old);
	ret = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -ret;
}
