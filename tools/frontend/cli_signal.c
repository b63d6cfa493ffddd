/* The one place the CLI removes writer temporaries when a signal ends it (`write` and `convert` share it). */
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "grist/format.h"
#include "cli.h"

/* The signals that end a process by default and that a user or a supervisor sends. */
static const int cleanup_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ };

/* The set of cleanup_signals: blocked while the handler runs, and by cli_signals_hold(). */
static void cleanup_set(sigset_t *set)
{
	size_t i;

	sigemptyset(set);
	for (i = 0; i < sizeof(cleanup_signals) / sizeof(cleanup_signals[0]); i++)
		sigaddset(set, cleanup_signals[i]);
}

static void on_signal(int sig)
{
	/* Async-signal-safe only: the library's unlink walk, then die of the same signal. */
	grist_writer_remove_temporaries();
	signal(sig, SIG_DFL);
	raise(sig); /* pending until this handler returns, since the signal is blocked in it */
}

void cli_cleanup_on_signals(void)
{
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	/* Block the others during the handler, so two signals do not both run it halfway. */
	cleanup_set(&sa.sa_mask);
	for (i = 0; i < sizeof(cleanup_signals) / sizeof(cleanup_signals[0]); i++) {
		struct sigaction old;

		/* A signal the parent set to be ignored stays ignored (nohup, shells' background jobs). */
		if (sigaction(cleanup_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(cleanup_signals[i], &sa, NULL);
	}
}

void cli_signals_hold(sigset_t *old)
{
	sigset_t set;

	cleanup_set(&set);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

void cli_signals_release(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}
