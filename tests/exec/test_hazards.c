/*
 * What the process around a loader can do to it, through the C API alone (issue 25,
 * points 6 and 9): a file that shrinks or is emptied under io=mmap is an error naming the
 * file, not a SIGBUS death; a loader used in a child after fork() fails at once with
 * -ENOTRECOVERABLE instead of waiting forever for engine threads that stayed behind.
 * The Python and CLI sides have their own tests (tests/python/test_mmap_shrink.py,
 * test_api.py, tests/interop/test_reliability.py); these run without either.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grist/error.h"
#include "grist/format.h"
#include "grist/loader.h"
#include "helpers.h"

#define RECORDS 4000
#define RECORD_BYTES 1000

static char *dir;
static char path[4096];

/* 4 MB of uncompressed one-record chunks: every record is a separate decode from the map. */
static int setup(void **state)
{
	struct grist_writer *w;
	char rec[RECORD_BYTES];

	(void)state;
	dir = t_mkdtemp();
	snprintf(path, sizeof(path), "%s/shrink.ar", dir);
	if (grist_writer_open(path, "group_size:1,uncompressed", &w))
		return -1;
	for (int i = 0; i < RECORDS; i++) {
		memset(rec, 'a' + i % 26, sizeof(rec));
		snprintf(rec, sizeof(rec), "%05d", i);
		if (grist_writer_write(w, rec, sizeof(rec)))
			return -1;
	}
	return grist_writer_close(w);
}

static int teardown(void **state)
{
	(void)state;
	t_rmtree(dir);
	return 0;
}

/* A copy of the fixture, which each test may damage. */
static void fresh_copy(char *out, size_t cap, const char *name)
{
	char *o = NULL;

	snprintf(out, cap, "%s/%s", dir, name);
	assert_int_equal(t_run(&o, "cp '%s' '%s'", path, out), 0);
	free(o);
}

static struct grist_loader *mapped_loader(const char *p)
{
	struct t_one_file o;

	t_one_file_init(&o, p);
	o.c.batch_size = 1;
	o.c.epochs = 1;
	o.c.no_shuffle = true;
	o.c.engine = GRIST_ENGINE_URING;
	o.c.read_mode = GRIST_READ_MMAP;
	o.c.threads = 1;
	o.c.prefetch = 1;
	return t_one_file_open(&o);
}

/*
 * Take one batch (the file is mapped), cut the file to @keep bytes, then drain: the loader
 * must stop with -EIO and a message naming the file and the SIGBUS, and the process lives.
 */
static void shrink_under_loader(const char *name, off_t keep)
{
	struct grist_loader_stats st;
	struct grist_batch *b;
	struct grist_loader *l;
	char p[4096];
	int ret, n = 0;

	fresh_copy(p, sizeof(p), name);
	l = mapped_loader(p);
	assert_int_equal(grist_loader_next(l, &b), 0);
	grist_loader_release(l, b);
	grist_loader_stats(l, &st);
	assert_string_equal(st.read_mode, "mmap");
	assert_int_equal(truncate(p, keep), 0);
	while ((ret = grist_loader_next(l, &b)) == 0 && b) {
		grist_loader_release(l, b);
		n++;
	}
	assert_int_equal(ret, -EIO);
	assert_true(n < RECORDS - 1); /* the loader noticed: it did not deliver the lost records */
	assert_non_null(strstr(grist_last_error(), p));
	assert_non_null(strstr(grist_last_error(), "SIGBUS"));
	assert_non_null(strstr(grist_last_error(), "byte "));
	grist_loader_destroy(l);
}

/*
 * One test for both cuts: cmocka sets a SIGBUS handler of its own before each test (one
 * that does not chain), which grist leaves alone when it finds it in its place: grist's
 * handler is the one of the test whose guard installed it first.
 */
static void test_file_shrinks_or_empties_under_mapped_loader(void **state)
{
	(void)state;
	shrink_under_loader("shrunk.ar", 262144);
	shrink_under_loader("emptied.ar", 0);
}

/*
 * Whoever saved SIGBUS's disposition before grist's first guard and restores it later
 * (faulthandler.disable(), a harness around each test) puts the default action back and
 * takes grist's handler with it. The next loader's threads find the default and re-arm:
 * the fault is an error again, not a death.
 */
static void test_guard_rearms_after_the_default_is_restored(void **state)
{
	(void)state;
	signal(SIGBUS, SIG_DFL);
	shrink_under_loader("restored.ar", 262144);
}

/*
 * A vanished name is not a vanished file: the mapping keeps the inode, so unlinking the
 * file under the loader changes nothing and every record still arrives.
 */
static void test_file_unlinked_under_mapped_loader(void **state)
{
	struct grist_batch *b;
	struct grist_loader *l;
	char p[4096];
	int ret, n = 1;

	(void)state;
	fresh_copy(p, sizeof(p), "unlinked.ar");
	l = mapped_loader(p);
	assert_int_equal(grist_loader_next(l, &b), 0);
	grist_loader_release(l, b);
	assert_int_equal(unlink(p), 0);
	while ((ret = grist_loader_next(l, &b)) == 0 && b) {
		assert_int_equal(b->num_records, 1);
		grist_loader_release(l, b);
		n++;
	}
	assert_int_equal(ret, 0); /* the end of the stream */
	assert_int_equal(n, RECORDS);
	grist_loader_destroy(l);
}

/*
 * fork() copies the loader but not its engine threads: in the child, next() fails at once
 * naming both processes; destroy in the child must neither hang nor touch the parent's
 * threads, and the parent's loader goes on undisturbed.
 */
static void test_loader_after_fork_fails_fast(void **state)
{
	struct grist_batch *b;
	struct grist_loader *l;
	int status, n = 1, ret;
	pid_t pid;

	(void)state;
	l = mapped_loader(path);
	assert_int_equal(grist_loader_next(l, &b), 0);
	grist_loader_release(l, b);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(30); /* a hang is a death by SIGALRM, which the parent reports */
		ret = grist_loader_next(l, &b);
		if (ret != -ENOTRECOVERABLE)
			_exit(10);
		if (!strstr(grist_last_error(), "fork()"))
			_exit(11);
		grist_loader_destroy(l);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	while ((ret = grist_loader_next(l, &b)) == 0 && b) {
		grist_loader_release(l, b);
		n++;
	}
	assert_int_equal(ret, 0); /* the end of the stream */
	assert_int_equal(n, RECORDS);
	grist_loader_destroy(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_shrinks_or_empties_under_mapped_loader),
		cmocka_unit_test(test_guard_rearms_after_the_default_is_restored),
		cmocka_unit_test(test_file_unlinked_under_mapped_loader),
		cmocka_unit_test(test_loader_after_fork_fails_fast),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
