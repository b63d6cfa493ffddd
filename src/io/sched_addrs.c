/*
 * The direct path's (sched_direct.c) addresses of its endpoint's name: getaddrinfo()'s
 * list, kept whole (the first GRIST_DIRECT_ADDRS_MAX), so a connect that fails goes on to
 * the next address as libcurl's does; looked up again when the list is RESOLVE_NS old
 * (curl's DNS cache timeout) or every address failed. A test's resolver stands in for
 * getaddrinfo() (grist_direct_set_resolver()), as this host's /etc/hosts gives no name two
 * addresses.
 */
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "io/sched_internal.h"

#define RESOLVE_NS (60ull * 1000000000ull) /* the name is asked again after this: curl's DNS cache timeout */

static grist_direct_resolver resolver; /* grist_direct_set_resolver(): a test's, or NULL */
static uint64_t resolve_ns = RESOLVE_NS; /* and how often it is asked */

void grist_direct_set_resolver(grist_direct_resolver r, unsigned every_ms)
{
	resolver = r;
	resolve_ns = every_ms ? every_ms * 1000000ull : RESOLVE_NS;
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

/*
 * Ask for the endpoint's addresses (again): on the scheduler's thread, before a new
 * connection, never while a connect of the old list is under way (connect_new()). A
 * failed lookup keeps the old list. Blocking, as curl's own resolver without c-ares or
 * threads is; the scheduler asks at most every resolve_ns, or when every address failed.
 */
bool grist_direct_resolve(struct grist_direct_addrs *a)
{
	struct sockaddr_storage addr[GRIST_DIRECT_ADDRS_MAX];
	socklen_t len[GRIST_DIRECT_ADDRS_MAX];
	unsigned n = (resolver ? resolver : lookup)(a->host, a->port, addr, len, GRIST_DIRECT_ADDRS_MAX);

	a->resolved_ns = grist_remote_now_ns();
	a->stale = false;
	if (!n)
		return false;
	if (n > GRIST_DIRECT_ADDRS_MAX)
		n = GRIST_DIRECT_ADDRS_MAX;
	memcpy(a->addr, addr, n * sizeof(addr[0]));
	memcpy(a->len, len, n * sizeof(len[0]));
	a->n = n;
	a->first = 0;
	return true;
}

bool grist_direct_resolve_due(const struct grist_direct_addrs *a, uint64_t now)
{
	return a->stale || now - a->resolved_ns >= resolve_ns;
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
