/* Starting grist's own threads. */
#ifndef GRIST_COMMON_THREAD_H
#define GRIST_COMMON_THREAD_H

#include <pthread.h>

/*
 * grist_thread_start() - pthread_create() with every asynchronous signal blocked in the new
 * thread. Returns 0 or a negative errno.
 *
 * A process-directed signal (SIGINT, SIGTERM, a timer's SIGALRM) goes to any thread that does
 * not block it. Left to chance it lands on a decode worker, and the program's handler runs
 * there: the CLI's sigwait() thread, Python's main thread waiting in a loader call, or a
 * trainer's handler that calls grist_writer_remove_temporaries() and expects to interrupt the
 * thread that makes temporaries (temp_registry.h) all assume the program's own threads take
 * them. So no thread of grist's takes one.
 *
 * Faults stay deliverable: SIGBUS from a mapped file that shrank is an error through
 * map_guard.c's handler, and SIGSEGV, SIGILL, SIGFPE, SIGTRAP and SIGSYS reach the
 * sanitizers' and a debugger's handlers (a blocked fault kills the process with no report).
 */
int grist_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);

#endif
