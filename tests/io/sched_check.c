/*
 * sched-check merge|fork URL: the GET scheduler (src/io/sched.c) from outside, for
 * tests/interop/test_remote.py.
 *
 * merge: two threads' neighbouring reads of one object leave as one GET. Run
 * (test_two_threads_share_one_get) with the endpoint
 * behind a recording proxy that delays each request: two http io objects (as two engine
 * workers have), one GET slot (inflight:1). The main thread's first read, far from the
 * others, takes the slot (the oldest piece goes first); while its GET waits in the proxy,
 * the main thread reads [A, A+LEN) and a second thread [B, B+LEN) close by. When the slot frees, the scheduler sends both as one GET, and each
 * thread reaps only its own read. Prints "main OFF HEX" and "other OFF HEX" for the test
 * to check against the local file (and the proxy's GETs); exits 1 on any failure.
 *
 * fork: an io object reads, the process forks, and the child reads through the same io
 * object (as a reader kept from before a fork does): the parent's scheduler has no thread
 * in the child, so the child must take its own, not wait forever. Prints the child's bytes
 * as "child OFF HEX"; exits 1 if the child fails or is not done within 30 s.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "io/io.h"
#include "io/remote.h"

#define LEN 1000
#define A 10000
#define B 11500
#define FIRST 1200000 /* more than coalesce_bytes (1 MiB) past B: a GET of its own */

static struct grist_remote_object *obj;
static struct grist_remote_options opt;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

struct side {
	const char *name;
	struct grist_io *io;
	uint32_t slot;
	struct grist_io_req req;
	uint8_t buf[LEN];
	int ret;
};

static int make(struct side *s)
{
	struct grist_io_config cfg = { .remote_options = &opt };
	int ret = grist_io_create(GRIST_IO_HTTP, &cfg, &s->io);

	return ret ? ret : grist_io_add_remote(s->io, obj, &s->slot);
}

/* Submit a read of LEN bytes at @off and reap it: it must be this side's own request. */
static int submit(struct side *s, uint64_t off)
{
	struct grist_io_req *r = &s->req;

	memset(r, 0, sizeof(*r));
	r->file = s->slot;
	r->offset = off;
	r->len = LEN;
	r->buf = s->buf;
	r->user_data = off;
	return grist_io_submit(s->io, &r, 1) == 1 ? 0 : -1;
}

static int reap(struct side *s)
{
	struct grist_io_req *done[4];
	int n = grist_io_reap(s->io, done, 4, 1);

	if (n != 1 || done[0] != &s->req || done[0]->result != LEN) {
		fprintf(stderr, "%s: reaped %d, result %d: %s\n", s->name, n, n == 1 ? done[0]->result : 0,
			grist_last_error());
		return -1;
	}
	/* one line at a time: the two threads print as they reap */
	pthread_mutex_lock(&out_lock);
	printf("%s %llu ", s->name, (unsigned long long)s->req.offset);
	for (int i = 0; i < LEN; i++)
		printf("%02x", s->buf[i]);
	printf("\n");
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
	return 0;
}

static void *other_main(void *arg)
{
	struct side *s = arg;

	s->ret = submit(s, B);
	if (!s->ret)
		s->ret = reap(s);
	return NULL;
}

/* Read at @off through @s, in this process; then fork and read at @off2 in the child. */
static int fork_check(struct side *s)
{
	int status;
	pid_t pid;

	if (submit(s, A) || reap(s))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid) {
		s->name = "child";
		alarm(30); /* a child waiting on the parent's scheduler dies here, and the test fails */
		_exit(submit(s, B) || reap(s) ? 1 : 0);
	}
	if (waitpid(pid, &status, 0) != pid)
		return 1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	static struct side m = { .name = "main" }, o = { .name = "other" };
	uint8_t first[LEN];
	struct grist_io_req r0 = { 0 }, *p = &r0, *done[4];
	pthread_t t;
	int ret;

	if (argc != 3 || (strcmp(argv[1], "merge") && strcmp(argv[1], "fork"))) {
		fprintf(stderr, "usage: sched-check merge|fork URL\n");
		return 2;
	}
	grist_remote_options_init(&opt);
	if (!strcmp(argv[1], "fork")) {
		if (grist_remote_open(argv[2], &obj) || make(&m)) {
			fprintf(stderr, "sched-check: %s\n", grist_last_error());
			return 1;
		}
		ret = fork_check(&m);
		grist_io_destroy(m.io);
		grist_remote_unref(obj);
		return ret;
	}
	opt.max_inflight = 1;
	opt.min_inflight = 1;
	if (grist_remote_open(argv[2], &obj) || make(&m) || make(&o)) {
		fprintf(stderr, "sched-check: %s\n", grist_last_error());
		return 1;
	}
	/* the slot's GET: the two reads below wait behind it */
	r0.file = m.slot;
	r0.offset = FIRST;
	r0.len = LEN;
	r0.buf = first;
	if (grist_io_submit(m.io, &p, 1) != 1 || submit(&m, A) || pthread_create(&t, NULL, other_main, &o)) {
		fprintf(stderr, "sched-check: %s\n", grist_last_error());
		return 1;
	}
	ret = grist_io_reap(m.io, done, 1, 1) == 1 && done[0] == &r0 && r0.result == LEN ? 0 : -1;
	if (!ret)
		ret = reap(&m);
	pthread_join(t, NULL);
	grist_io_destroy(m.io);
	grist_io_destroy(o.io);
	grist_remote_unref(obj);
	return ret || o.ret ? 1 : 0;
}
