/*
 * How the CLI ends on a signal when it writes (`write` and `convert`): a thread of its own
 * takes the signal with sigwait() and, outside any handler, leaves nothing behind
 * (grist_writer_abort_all(): temporaries unlinked, uploads aborted), then dies of it.
 *
 * Why a thread: a handler runs on whichever thread the signal interrupts, which may hold
 * a lock (an allocator arena, curl's or OpenSSL's) that aborting an upload needs, so a
 * handler that waited for that work could stall until its timeout and leave the upload
 * behind. Here no thread is interrupted: every thread blocks the signals from the start
 * (the threads made later inherit the mask; the library's own block every signal), and
 * the thread that takes them runs ordinary code.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "grist/error.h"
#include "grist/format.h"
#include "cli.h"

/* The signals that end a process by default and that a user, a supervisor or the kernel sends. */
static const int cleanup_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ };
#define NSIGNALS (sizeof(cleanup_signals) / sizeof(cleanup_signals[0]))

/* The most the uploads' aborts may take before the process dies of the signal regardless. */
#define ABORT_MS 10000

static sigset_t taken_set;  /* the cleanup signals not inherited as ignored: what the thread waits for */
static pthread_t taker;
static bool started;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool taken;          /* under lock: the thread took a signal and ends the process */
static bool ending;         /* under lock: the command returned; its writers are committed or aborted */
static volatile sig_atomic_t forwarded;

/*
 * SIGPIPE and SIGXFSZ also come from the kernel to the thread whose write failed, and a
 * signal pending on one thread cannot be taken by sigwait() on another: on the CLI's
 * own thread they stay unblocked, and this handler passes them on (tgkill, no lock, no
 * allocation) and returns; the write fails with EPIPE or EFBIG, as with the signal ignored.
 */
static void forward(int sig)
{
	forwarded = 1;
	pthread_kill(taker, sig);
}

static bool synchronous(int sig)
{
	return sig == SIGPIPE || sig == SIGXFSZ;
}

static void *take_signals(void *arg)
{
	sigset_t async, one;
	bool cleanup;
	size_t i;
	int sig;

	(void)arg;
	while (sigwait(&taken_set, &sig))
		;
	pthread_mutex_lock(&lock);
	taken = true;
	cleanup = !ending;
	pthread_mutex_unlock(&lock);
	/*
	 * A second signal ends the process at once, with no more cleanup (as a second Ctrl-C does
	 * elsewhere): each back to its default action, and the asynchronous ones unblocked on
	 * this thread, the only one that could take them. SIGPIPE and SIGXFSZ stay blocked here
	 * (a message to a closed stderr must not end the cleanup); on the command's thread they
	 * now kill.
	 */
	sigemptyset(&async);
	for (i = 0; i < NSIGNALS; i++) {
		if (!sigismember(&taken_set, cleanup_signals[i]))
			continue;
		signal(cleanup_signals[i], SIG_DFL);
		if (!synchronous(cleanup_signals[i]))
			sigaddset(&async, cleanup_signals[i]);
	}
	pthread_sigmask(SIG_UNBLOCK, &async, NULL);
	/* once the command returned there is nothing of its to clean, and exit() may be tearing the library down */
	if (cleanup && grist_writer_abort_all(ABORT_MS))
		fprintf(stderr, "%s: %s\n", cli_command_name, grist_last_error());
	sigemptyset(&one);
	sigaddset(&one, sig);
	pthread_sigmask(SIG_UNBLOCK, &one, NULL);
	raise(sig);
	for (;;)
		pause();
	return NULL;
}

void cli_cleanup_on_signals(void)
{
	struct sigaction sa;
	sigset_t old, sync;
	size_t i;

	if (started)
		return;
	sigemptyset(&taken_set);
	sigemptyset(&sync);
	for (i = 0; i < NSIGNALS; i++) {
		struct sigaction was;

		/* A signal the parent set to be ignored stays ignored (nohup, shells' background jobs). */
		if (sigaction(cleanup_signals[i], NULL, &was) == 0 && was.sa_handler == SIG_IGN)
			continue;
		sigaddset(&taken_set, cleanup_signals[i]);
		if (synchronous(cleanup_signals[i]))
			sigaddset(&sync, cleanup_signals[i]);
	}
	/* blocked before the thread is made, so it starts with all of them blocked */
	pthread_sigmask(SIG_BLOCK, &taken_set, &old);
	if (pthread_create(&taker, NULL, take_signals, NULL)) {
		/* no thread: the signals keep their default action (die, leaving what they leave) */
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return;
	}
	pthread_detach(taker);
	started = true;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sa.sa_flags = SA_RESTART;
	sigfillset(&sa.sa_mask);
	for (i = 0; i < NSIGNALS; i++)
		if (sigismember(&sync, cleanup_signals[i]))
			sigaction(cleanup_signals[i], &sa, NULL);
	pthread_sigmask(SIG_UNBLOCK, &sync, NULL);
}

void cli_signals_settle(void)
{
	bool wait;

	if (!started)
		return;
	pthread_mutex_lock(&lock);
	ending = true;
	wait = taken || forwarded;
	pthread_mutex_unlock(&lock);
	/* the signal thread ends the process: exiting now would end it with an exit status instead */
	while (wait)
		pause();
}
