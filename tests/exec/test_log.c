/*
 * The library never prints: a run that makes it say something (io_uring refused by a seccomp
 * filter, as in a container, so the loader falls back to the pread pool) writes nothing to
 * stderr, and the message reaches the log callback when one is installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grist/format.h"
#include "grist/loader.h"
#include "helpers.h"

static struct t_numbered fx;

static int setup(void **state)
{
	(void)state;
	t_numbered_make(&fx, "log.ar", "group_size:4", 100);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	t_numbered_drop(&fx);
	return 0;
}

/* io_uring_setup fails with EPERM from now on, in this process: a container's seccomp profile. */
static int refuse_io_uring(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return -errno;
	return 0;
}

struct seen {
	int calls;
	enum grist_log_level level;
	char message[512];
};

static void on_log(void *ctx, enum grist_log_level level, const char *message)
{
	struct seen *s = ctx;

	s->calls++;
	s->level = level;
	snprintf(s->message, sizeof(s->message), "%s", message);
}

/* One loader run to its end; returns the engine's name (static) or NULL. */
static const char *run_loader(void)
{
	struct t_one_file o;
	struct grist_loader_stats st;
	struct grist_loader *l;
	struct grist_batch *b;
	uint64_t n = 0;

	t_one_file_init(&o, fx.path);
	o.c.batch_size = 7;
	o.c.epochs = 1;
	o.c.engine = GRIST_ENGINE_URING;
	if (grist_loader_create(&o.c, &l))
		return NULL;
	while (grist_loader_next(l, &b) == 0 && b) {
		n += b->num_records;
		grist_loader_release(l, b);
	}
	grist_loader_stats(l, &st);
	grist_loader_destroy(l);
	return n == 100 ? st.engine : NULL;
}

/* In a child (the filter cannot be lifted): exit codes say what went wrong. */
static int child(const char *err_path)
{
	struct seen s = { 0 };
	const char *engine;
	int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
		return 10;
	if (refuse_io_uring())
		return 77; /* no seccomp here: nothing to show */
	engine = run_loader(); /* no callback: the fallback is taken silently */
	if (!engine || strcmp(engine, "pread"))
		return 11;
	grist_set_log_callback(on_log, &s);
	engine = run_loader();
	grist_set_log_callback(NULL, NULL);
	if (!engine || strcmp(engine, "pread"))
		return 12;
	if (s.calls != 1 || s.level != GRIST_LOG_WARNING || !strstr(s.message, "io_uring unavailable") ||
	    !strstr(s.message, "pread"))
		return 13;
	return 0;
}

static void test_fallback_prints_nothing_and_logs(void **state)
{
	const char *err_path = t_path(fx.dir, "stderr.txt");
	uint8_t *captured;
	size_t len = 0;
	pid_t pid;
	int st;

	(void)state;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child(err_path));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(st), 0);
	captured = t_read_file(err_path, &len);
	assert_non_null(captured);
	if (len)
		fprintf(stderr, "the library printed: %.*s\n", (int)len, (const char *)captured);
	assert_int_equal(len, 0);
	free(captured);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fallback_prints_nothing_and_logs),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
