/*
 * grist's threads take no asynchronous signal, and faults still reach them
 * (src/common/thread.c).
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "common/thread.h"
#include "grist/loader.h"

static void *read_mask(void *arg)
{
	pthread_sigmask(SIG_BLOCK, NULL, (sigset_t *)arg);
	return NULL;
}

static void test_started_thread_mask(void **state)
{
	sigset_t in_thread, before, after;
	pthread_t t;

	(void)state;
	pthread_sigmask(SIG_BLOCK, NULL, &before);
	assert_int_equal(grist_thread_start(&t, read_mask, &in_thread), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	/* the asynchronous ones are blocked ... */
	assert_true(sigismember(&in_thread, SIGINT));
	assert_true(sigismember(&in_thread, SIGTERM));
	assert_true(sigismember(&in_thread, SIGHUP));
	assert_true(sigismember(&in_thread, SIGALRM));
	assert_true(sigismember(&in_thread, SIGUSR1));
	assert_true(sigismember(&in_thread, SIGPIPE));
	/* ... faults are not (map_guard.c turns SIGBUS into an error on this thread) */
	assert_false(sigismember(&in_thread, SIGBUS));
	assert_false(sigismember(&in_thread, SIGSEGV));
	assert_false(sigismember(&in_thread, SIGFPE));
	assert_false(sigismember(&in_thread, SIGILL));
	/* and the caller's own mask is as it was */
	assert_int_equal(sigismember(&after, SIGINT), sigismember(&before, SIGINT));
	assert_int_equal(sigismember(&after, SIGUSR1), sigismember(&before, SIGUSR1));
}

/* SigBlk of /proc/self/task/<tid>/status, as a mask of signal numbers (bit n-1 for signal n) */
static uint64_t task_blocked(const char *tid)
{
	char path[300], line[256];
	uint64_t mask = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
	f = fopen(path, "r");
	if (!f)
		return UINT64_MAX; /* ended meanwhile: counts as blocking */
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "SigBlk:", 7))
			mask = strtoull(line + 7, NULL, 16);
	fclose(f);
	return mask;
}

/*
 * Through the public API: a loader with decode workers, each of which must block SIGINT and
 * SIGTERM and leave SIGBUS open. Every thread but the caller's is grist's here.
 */
static void test_loader_threads_take_no_signal(void **state)
{
	struct t_numbered f;
	struct t_one_file o;
	struct grist_loader *l;
	struct grist_batch *b;
	char self[32];
	struct dirent *e;
	unsigned others = 0;
	DIR *d;

	(void)state;
	t_numbered_make(&f, "t.array_record", "group_size:4", 2000);
	t_one_file_init(&o, f.path);
	o.c.batch_size = 8;
	o.c.epochs = 1;
	o.c.threads = 4;
	l = t_one_file_open(&o);
	assert_int_equal(grist_loader_next(l, &b), 0);

	snprintf(self, sizeof(self), "%d", (int)gettid());
	d = opendir("/proc/self/task");
	assert_non_null(d);
	while ((e = readdir(d))) {
		uint64_t m;

		if (e->d_name[0] == '.' || !strcmp(e->d_name, self))
			continue;
		m = task_blocked(e->d_name);
		others++;
		assert_true(m & (1ull << (SIGINT - 1)));
		assert_true(m & (1ull << (SIGTERM - 1)));
		if (m != UINT64_MAX)
			assert_false(m & (1ull << (SIGBUS - 1)));
	}
	closedir(d);
	assert_true(others >= 4);
	grist_loader_release(l, b);
	grist_loader_destroy(l);
	t_numbered_drop(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_started_thread_mask),
		cmocka_unit_test(test_loader_threads_take_no_signal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
