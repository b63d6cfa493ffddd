/*
 * The direct path's (sched_direct.c) endpoint: its host and port, and the addresses of
 * its name: getaddrinfo()'s list, kept whole (the first GRIST_DIRECT_ADDRS_MAX), so a
 * connect that fails goes on to the next address as libcurl's does; looked up again when
 * the list is RESOLVE_NS old (curl's DNS cache timeout) or every address failed. A test's
 * resolver stands in for getaddrinfo() (grist_direct_set_resolver()), as this host's
 * /etc/hosts gives no name two addresses.
 *
 * Lookups run on a thread of their own, one at a time per scheduler, started for the
 * lookup and gone after it (libcurl's threaded resolver does the same), never on the
 * scheduler's thread: getaddrinfo() may wait on a DNS server for seconds, or for good,
 * and the scheduler's thread holds its lock, which every client takes, and runs every
 * timer. Not getaddrinfo_a(): glibc's alone (-lanl), it answers by a signal or by a thread
 * of glibc's own, and gai_cancel() cannot stop a lookup that began, so a scheduler ending
 * would still leave memory to a lookup it cannot wait for; and a test's resolver would not
 * run through it.
 *
 * The lookup's state is its own allocation, held by the scheduler and by the thread: the
 * last to let go frees it. A scheduler that ends while a lookup hangs lets go and does
 * not wait; the thread, detached, finishes when getaddrinfo() returns (glibc's resolver
 * gives up after resolv.conf's timeout x attempts per server) and frees it then.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/thread.h"
#include "io/sched_internal.h"

#define RESOLVE_NS (60ull * 1000000000ull) /* the name is asked again after this: curl's DNS cache timeout */

static grist_direct_resolver resolver; /* grist_direct_set_resolver(): a test's, or NULL */
static uint64_t resolve_ns = RESOLVE_NS; /* and how often it is asked */

/* A lookup under way: the scheduler's and its thread's (see the top of the file). */
struct grist_direct_lookup {
	pthread_mutex_t lock;
	int refs;                 /* the scheduler's, the thread's */
	bool done;                /* the thread answered: n, addr, len are its answer */
	int wake;                 /* a dup of the scheduler's eventfd, written when done (or -1) */
	grist_direct_resolver ask;
	char host[256], port[16];
	struct sockaddr_storage addr[GRIST_DIRECT_ADDRS_MAX];
	socklen_t len[GRIST_DIRECT_ADDRS_MAX];
	unsigned n;
};

void grist_direct_set_resolver(grist_direct_resolver r, unsigned every_ms)
{
	__atomic_store_n(&resolver, r, __ATOMIC_RELEASE);
	__atomic_store_n(&resolve_ns, every_ms ? every_ms * 1000000ull : RESOLVE_NS, __ATOMIC_RELEASE);
}

bool grist_direct_addrs_init(struct grist_direct_addrs *a, const char *hp)
{
	const char *colon;
	size_t hn;

	if (*hp == '[') { /* [v6]:port */
		const char *close = strchr(hp, ']');

		if (!close)
			return false;
		hn = (size_t)(close - hp - 1);
		colon = close[1] == ':' ? close + 1 : NULL;
		hp++;
	} else {
		colon = strchr(hp, ':');
		hn = colon ? (size_t)(colon - hp) : strlen(hp);
	}
	if (!hn || hn >= sizeof(a->host) || strchr(hp, '/'))
		return false;
	memcpy(a->host, hp, hn);
	a->host[hn] = '\0';
	return snprintf(a->port, sizeof(a->port), "%s", colon ? colon + 1 : "80") < (int)sizeof(a->port);
}

/* getaddrinfo()'s addresses of @host @port, in its order: how many (0: none, or it failed). */
static unsigned lookup(const char *host, const char *port, struct sockaddr_storage *addr, socklen_t *len,
		       unsigned max)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai = NULL, *a;
	unsigned n = 0;

	if (getaddrinfo(host, port, &hints, &ai) || !ai)
		return 0;
	for (a = ai; a && n < max; a = a->ai_next) {
		if (a->ai_addrlen > sizeof(*addr))
			continue;
		memcpy(&addr[n], a->ai_addr, a->ai_addrlen);
		len[n++] = a->ai_addrlen;
	}
	freeaddrinfo(ai);
	return n;
}

/* Let go of @l: the last reference frees it. */
static void lookup_put(struct grist_direct_lookup *l)
{
	bool last;

	pthread_mutex_lock(&l->lock);
	last = !--l->refs;
	pthread_mutex_unlock(&l->lock);
	if (!last)
		return;
	if (l->wake >= 0)
		close(l->wake);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

static void *lookup_main(void *arg)
{
	struct grist_direct_lookup *l = arg;
	uint64_t one = 1;
	unsigned n = l->ask(l->host, l->port, l->addr, l->len, GRIST_DIRECT_ADDRS_MAX);

	pthread_mutex_lock(&l->lock);
	l->n = n < GRIST_DIRECT_ADDRS_MAX ? n : GRIST_DIRECT_ADDRS_MAX;
	l->done = true;
	pthread_mutex_unlock(&l->lock);
	/* the scheduler's look round takes the answer (to an eventfd nobody reads, once it ended) */
	if (l->wake >= 0)
		(void)!write(l->wake, &one, sizeof(one));
	lookup_put(l);
	return NULL;
}

/* The answer @n, @addr, @len into @a: the list replaced when it found any, else the old one kept. */
static void take(struct grist_direct_addrs *a, const struct sockaddr_storage *addr, const socklen_t *len, unsigned n)
{
	a->resolved_ns = grist_remote_now_ns();
	a->stale = false;
	if (!n)
		return;
	memcpy(a->addr, addr, n * sizeof(addr[0]));
	memcpy(a->len, len, n * sizeof(len[0]));
	a->n = n;
	a->first = 0;
}

int grist_direct_lookup(struct grist_direct_addrs *a, int wake)
{
	grist_direct_resolver r = __atomic_load_n(&resolver, __ATOMIC_ACQUIRE);
	struct grist_direct_lookup *l;
	unsigned char bin[sizeof(struct in6_addr)];
	pthread_t t;
	int ret;

	if (a->lk)
		return 0;
	if (!r && (inet_pton(AF_INET, a->host, bin) == 1 || inet_pton(AF_INET6, a->host, bin) == 1)) {
		/* an address is its own answer, with no server to wait for (as curl takes one) */
		struct sockaddr_storage addr[GRIST_DIRECT_ADDRS_MAX];
		socklen_t len[GRIST_DIRECT_ADDRS_MAX];

		take(a, addr, len, lookup(a->host, a->port, addr, len, GRIST_DIRECT_ADDRS_MAX));
		return 1;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	l->refs = 2;
	l->ask = r ? r : lookup;
	memcpy(l->host, a->host, sizeof(l->host));
	memcpy(l->port, a->port, sizeof(l->port));
	/* without it the answer waits for the look round, every 100 ms while a GET waits for it */
	l->wake = fcntl(wake, F_DUPFD_CLOEXEC, 0);
	ret = grist_thread_start(&t, lookup_main, l);
	if (ret) {
		if (l->wake >= 0)
			close(l->wake);
		pthread_mutex_destroy(&l->lock);
		free(l);
		return ret;
	}
	pthread_detach(t);
	a->lk = l;
	return 0;
}

bool grist_direct_lookup_take(struct grist_direct_addrs *a)
{
	struct grist_direct_lookup *l = a->lk;
	bool done;

	if (!l)
		return false;
	pthread_mutex_lock(&l->lock);
	done = l->done;
	pthread_mutex_unlock(&l->lock);
	if (!done)
		return false;
	/* done: the thread writes no more of the answer */
	take(a, l->addr, l->len, l->n);
	a->lk = NULL;
	lookup_put(l);
	return true;
}

void grist_direct_lookup_drop(struct grist_direct_addrs *a)
{
	if (a->lk)
		lookup_put(a->lk);
	a->lk = NULL;
}

bool grist_direct_resolve_due(const struct grist_direct_addrs *a, uint64_t now)
{
	return a->stale || now - a->resolved_ns >= __atomic_load_n(&resolve_ns, __ATOMIC_ACQUIRE);
}

/* "127.0.0.1:9000" or "[::1]:9000": address @i of the list, for messages. */
const char *grist_direct_addr_name(const struct grist_direct_addrs *a, unsigned i, char *out, size_t cap)
{
	char h[INET6_ADDRSTRLEN + 8], s[16];

	if (getnameinfo((const struct sockaddr *)&a->addr[i], a->len[i], h, sizeof(h), s, sizeof(s),
			NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(out, cap, "address %u", i);
	else
		snprintf(out, cap, a->addr[i].ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, s);
	return out;
}
