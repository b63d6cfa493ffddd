/*
 * The direct path's lookups (src/io/sched_addrs.c) alone: a lookup runs on a thread of its
 * own and says so on the eventfd it was given; asking while one is under way starts no
 * second; taking its answer never waits; a failed lookup keeps the list; a scheduler that
 * lets go of a lookup that hangs is not held (the thread frees what it holds when the
 * lookup ends, after the eventfd is closed); a numeric host is answered at once, with no
 * thread; the list grows old after the age given; an endpoint's host and port are read
 * from "host[:port]" and "[v6][:port]". The resolver is this file's, through
 * grist_direct_set_resolver(): it hangs until told to answer.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/sched_internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned calls, running;
static bool answer;          /* the hung lookups may answer */
static unsigned answer_n;    /* with this many addresses (127.0.0.N:PORT) */
static bool on_other_thread; /* every call ran on a thread that is not the test's */
static pthread_t test_thread;

static unsigned hang_lookup(const char *host, const char *port, struct sockaddr_storage *addr, socklen_t *len,
			    unsigned max)
{
	unsigned n, i;

	(void)host;
	pthread_mutex_lock(&lock);
	calls++;
	running++;
	if (pthread_equal(pthread_self(), test_thread))
		on_other_thread = false;
	pthread_cond_broadcast(&cond);
	while (!answer)
		pthread_cond_wait(&cond, &lock);
	n = answer_n < max ? answer_n : max;
	pthread_mutex_unlock(&lock);
	for (i = 0; i < n; i++) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&addr[i];

		memset(sin, 0, sizeof(*sin));
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)atoi(port));
		sin->sin_addr.s_addr = htonl(0x7f000001u + i);
		len[i] = sizeof(*sin);
	}
	pthread_mutex_lock(&lock);
	running--;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	return n;
}

static void plan(unsigned n)
{
	pthread_mutex_lock(&lock);
	calls = 0;
	answer = false;
	answer_n = n;
	on_other_thread = true;
	pthread_mutex_unlock(&lock);
	test_thread = pthread_self();
	grist_direct_set_resolver(hang_lookup, 0);
}

/* Wait until @c lookups began and @r are under way. */
static void wait_for(unsigned c, unsigned r)
{
	pthread_mutex_lock(&lock);
	while (calls < c || running != r)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

static void let_answer(void)
{
	pthread_mutex_lock(&lock);
	answer = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void init_addrs(struct grist_direct_addrs *a, const char *host)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->host, sizeof(a->host), "%s", host);
	snprintf(a->port, sizeof(a->port), "9000");
}

static void lookup_runs_on_its_own_thread(void **state)
{
	struct grist_direct_addrs a;
	struct pollfd pfd;
	uint64_t v;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	(void)state;
	assert_true(efd >= 0);
	plan(3);
	init_addrs(&a, "store.test");
	assert_int_equal(grist_direct_lookup(&a, efd), 0);
	assert_non_null(a.lk);
	wait_for(1, 1);
	/* under way: taking never waits, asking again starts nothing */
	assert_false(grist_direct_lookup_take(&a));
	assert_int_equal(grist_direct_lookup(&a, efd), 0);
	assert_int_equal(a.n, 0);
	assert_int_equal(read(efd, &v, sizeof(v)), -1); /* nothing said yet */
	let_answer();
	pfd = (struct pollfd){ .fd = efd, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	assert_true(grist_direct_lookup_take(&a));
	assert_null(a.lk);
	pthread_mutex_lock(&lock);
	assert_int_equal(calls, 1);
	assert_true(on_other_thread);
	pthread_mutex_unlock(&lock);
	assert_int_equal(a.n, 3);
	assert_int_equal(ntohl(((struct sockaddr_in *)&a.addr[2])->sin_addr.s_addr), 0x7f000003u);
	assert_int_equal(ntohs(((struct sockaddr_in *)&a.addr[0])->sin_port), 9000);
	assert_false(a.stale);
	assert_false(grist_direct_resolve_due(&a, grist_remote_now_ns()));
	close(efd);
}

/* A lookup of @a that answers @n addresses at once: true when its answer was taken (within 10 s). */
static bool answered(struct grist_direct_addrs *a, int efd, unsigned n)
{
	uint64_t t0 = now_ms();

	plan(n);
	let_answer();
	if (grist_direct_lookup(a, efd))
		return false;
	while (!grist_direct_lookup_take(a))
		if (now_ms() - t0 > 10000 || usleep(1000))
			return false;
	return true;
}

static void failed_lookup_keeps_the_list(void **state)
{
	struct grist_direct_addrs a;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	(void)state;
	init_addrs(&a, "store.test");
	assert_true(answered(&a, efd, 2));
	assert_int_equal(a.n, 2);
	a.first = 1;
	a.stale = true; /* every address failed: the next lookup is asked for */
	assert_true(answered(&a, efd, 0));
	assert_null(a.lk);
	assert_int_equal(a.n, 2);
	assert_int_equal(a.first, 1);
	assert_false(a.stale);
	close(efd);
}

static void a_hung_lookup_holds_nobody(void **state)
{
	struct grist_direct_addrs a;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	uint64_t t0;

	(void)state;
	plan(1);
	init_addrs(&a, "store.test");
	assert_int_equal(grist_direct_lookup(&a, efd), 0);
	wait_for(1, 1);
	t0 = now_ms();
	grist_direct_lookup_drop(&a);
	assert_null(a.lk);
	assert_true(now_ms() - t0 < 1000);
	/* the scheduler's end closes its eventfd: the thread's answer goes to its own copy */
	close(efd);
	let_answer();
	wait_for(1, 0);
}

static void numeric_host_needs_no_thread(void **state)
{
	struct grist_direct_addrs a;

	(void)state;
	grist_direct_set_resolver(NULL, 50);
	init_addrs(&a, "127.0.0.1");
	assert_int_equal(grist_direct_lookup(&a, -1), 1);
	assert_null(a.lk);
	assert_int_equal(a.n, 1);
	assert_int_equal(a.addr[0].ss_family, AF_INET);
	init_addrs(&a, "::1");
	assert_int_equal(grist_direct_lookup(&a, -1), 1);
	assert_int_equal(a.n, 1);
	assert_int_equal(a.addr[0].ss_family, AF_INET6);
	/* the list grows old after the age set (50 ms here, 60 s by default) */
	assert_false(grist_direct_resolve_due(&a, grist_remote_now_ns()));
	assert_true(grist_direct_resolve_due(&a, grist_remote_now_ns() + 60 * 1000000ull));
	grist_direct_set_resolver(NULL, 0);
	assert_false(grist_direct_resolve_due(&a, grist_remote_now_ns() + 59ull * 1000000000ull));
	assert_true(grist_direct_resolve_due(&a, grist_remote_now_ns() + 60ull * 1000000000ull));
}

static void endpoint_host_and_port(void **state)
{
	struct grist_direct_addrs a;

	(void)state;
	assert_true(grist_direct_addrs_init(&a, "store.test:9000"));
	assert_string_equal(a.host, "store.test");
	assert_string_equal(a.port, "9000");
	assert_true(grist_direct_addrs_init(&a, "store.test"));
	assert_string_equal(a.port, "80");
	assert_true(grist_direct_addrs_init(&a, "[::1]:9000"));
	assert_string_equal(a.host, "::1");
	assert_string_equal(a.port, "9000");
	assert_true(grist_direct_addrs_init(&a, "[fe80::1]"));
	assert_string_equal(a.host, "fe80::1");
	assert_string_equal(a.port, "80");
	assert_false(grist_direct_addrs_init(&a, "[::1:9000"));
	assert_false(grist_direct_addrs_init(&a, ":9000"));
	assert_false(grist_direct_addrs_init(&a, "store.test/x"));
	assert_false(grist_direct_addrs_init(&a, "store.test:12345678901234567890"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lookup_runs_on_its_own_thread),
		cmocka_unit_test(failed_lookup_keeps_the_list),
		cmocka_unit_test(a_hung_lookup_holds_nobody),
		cmocka_unit_test(numeric_host_needs_no_thread),
		cmocka_unit_test(endpoint_host_and_port),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
