/*
 * delay_proxy - a TCP proxy on 127.0.0.1 that holds every request for a fixed delay.
 *
 *   delay_proxy LISTEN_PORT UPSTREAM_PORT DELAY_MS
 *
 * The remote benchmarks need a real round trip in front of a real server (rclone serve s3,
 * nginx) without netem, and the asyncio proxy of tests/interop/remote_servers.py costs about
 * as much CPU per byte as the S3 server itself (bench/README.md): on two shared cores it
 * was part of what it measured. This one is one thread on epoll. Bytes from a client are
 * held DELAY_MS from their arrival, then written upstream: an HTTP/1.1 client sends its
 * next request only after the last answer, so each request waits the delay once, as
 * behind a link with that much latency. Answers go back with splice() through a pipe,
 * never through user memory. Either side closing closes both.
 *
 * It stays up until killed; it prints nothing unless it cannot start (exit status 1).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 65536
#define HELD_MAX 64        /* arrivals held per connection (one per request in practice) */
#define PIPE_BYTES (1 << 20)

struct held {
	size_t end;   /* offset in buf where this arrival ends */
	uint64_t due; /* when it may go upstream */
};

struct conn {
	int cfd, ufd;
	int pipe[2];
	size_t in_pipe;       /* answer bytes spliced from upstream, not yet to the client */
	unsigned char *buf;   /* client bytes not yet upstream */
	size_t head, len, cap;
	struct held held[HELD_MAX];
	unsigned nheld;
	struct conn *next_live; /* the list the timer scan walks */
	struct conn *prev_live;
};

static struct conn *by_fd[MAX_FD];
static struct conn *live;
static int ep;
static uint64_t delay_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void watch(int fd, uint32_t events, int op)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	epoll_ctl(ep, op, fd, &ev);
}

static void close_conn(struct conn *c)
{
	if (c->prev_live)
		c->prev_live->next_live = c->next_live;
	else
		live = c->next_live;
	if (c->next_live)
		c->next_live->prev_live = c->prev_live;
	by_fd[c->cfd] = by_fd[c->ufd] = NULL;
	close(c->cfd);
	close(c->ufd);
	close(c->pipe[0]);
	close(c->pipe[1]);
	free(c->buf);
	free(c);
}

/* Interest: read the client while there is room to hold; read upstream while the pipe drains; write what waits. */
static void rearm(struct conn *c)
{
	uint64_t t = now_ns();
	uint32_t ce = 0, ue = 0;

	if (c->nheld < HELD_MAX)
		ce |= EPOLLIN;
	if (c->in_pipe)
		ce |= EPOLLOUT;
	else
		ue |= EPOLLIN;
	if (c->nheld && c->held[0].due <= t && c->head < c->len)
		ue |= EPOLLOUT;
	watch(c->cfd, ce, EPOLL_CTL_MOD);
	watch(c->ufd, ue, EPOLL_CTL_MOD);
}

/* Write the client bytes whose delay is over. Returns -1 when the connection died. */
static int flush_due(struct conn *c)
{
	uint64_t t = now_ns();

	while (c->nheld && c->held[0].due <= t) {
		size_t end = c->held[0].end;

		while (c->head < end) {
			ssize_t n = write(c->ufd, c->buf + c->head, end - c->head);

			if (n < 0)
				return errno == EAGAIN ? 0 : -1;
			c->head += (size_t)n;
		}
		memmove(c->held, c->held + 1, (c->nheld - 1) * sizeof(c->held[0]));
		c->nheld--;
	}
	if (!c->nheld && c->head == c->len)
		c->head = c->len = 0; /* all sent: the buffer starts over */
	return 0;
}

static int from_client(struct conn *c)
{
	ssize_t n;

	if (c->cap - c->len < 65536) {
		size_t cap = c->cap ? c->cap * 2 : 131072;
		unsigned char *b = realloc(c->buf, cap);

		if (!b)
			return -1;
		c->buf = b;
		c->cap = cap;
	}
	n = read(c->cfd, c->buf + c->len, c->cap - c->len);
	if (n <= 0)
		return n < 0 && errno == EAGAIN ? 0 : -1;
	c->len += (size_t)n;
	c->held[c->nheld++] = (struct held){ c->len, now_ns() + delay_ns };
	return flush_due(c);
}

static int to_client(struct conn *c)
{
	while (c->in_pipe) {
		ssize_t n = splice(c->pipe[0], NULL, c->cfd, NULL, c->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		c->in_pipe -= (size_t)n;
	}
	return 0;
}

static int from_upstream(struct conn *c)
{
	ssize_t n = splice(c->ufd, NULL, c->pipe[1], NULL, PIPE_BYTES, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

	if (n == 0)
		return -1;
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	c->in_pipe += (size_t)n;
	return to_client(c);
}

static void accept_one(int lfd, int upstream_port)
{
	struct sockaddr_in up = { .sin_family = AF_INET, .sin_port = htons((uint16_t)upstream_port) };
	int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), ufd, one = 1;
	struct conn *c;

	if (cfd < 0)
		return;
	ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	c = calloc(1, sizeof(*c));
	up.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (ufd < 0 || !c || cfd >= MAX_FD || ufd >= MAX_FD || pipe2(c->pipe, O_NONBLOCK | O_CLOEXEC)) {
		close(cfd);
		if (ufd >= 0)
			close(ufd);
		free(c);
		return;
	}
	fcntl(c->pipe[1], F_SETPIPE_SZ, PIPE_BYTES);
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a refused connect shows as an error on the first write or read, which closes both */
	if (connect(ufd, (struct sockaddr *)&up, sizeof(up)) && errno != EINPROGRESS) {
		close(cfd);
		close(ufd);
		close(c->pipe[0]);
		close(c->pipe[1]);
		free(c);
		return;
	}
	c->cfd = cfd;
	c->ufd = ufd;
	by_fd[cfd] = by_fd[ufd] = c;
	c->next_live = live;
	if (live)
		live->prev_live = c;
	live = c;
	watch(cfd, EPOLLIN, EPOLL_CTL_ADD);
	watch(ufd, EPOLLIN, EPOLL_CTL_ADD);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int lfd, one = 1, upstream_port;

	if (argc != 4) {
		fprintf(stderr, "usage: delay_proxy LISTEN_PORT UPSTREAM_PORT DELAY_MS\n");
		return 1;
	}
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	upstream_port = atoi(argv[2]);
	delay_ns = (uint64_t)(atof(argv[3]) * 1e6);
	signal(SIGPIPE, SIG_IGN); /* a client that goes away mid-answer closes its connection, not the proxy */
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1024)) {
		perror("delay_proxy: listen");
		return 1;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	watch(lfd, EPOLLIN, EPOLL_CTL_ADD);
	for (;;) {
		struct epoll_event ev[256];
		uint64_t t = now_ns(), next = UINT64_MAX;
		struct conn *c, *nx;
		int n, i, timeout;

		/* the earliest held request decides how long to sleep */
		for (c = live; c; c = c->next_live)
			if (c->nheld && c->held[0].due < next)
				next = c->held[0].due;
		timeout = next == UINT64_MAX ? -1 : next <= t ? 0 : (int)((next - t + 999999) / 1000000);
		n = epoll_wait(ep, ev, 256, timeout);
		for (i = 0; i < n; i++) {
			int fd = ev[i].data.fd, bad = 0;

			if (fd == lfd) {
				accept_one(lfd, upstream_port);
				continue;
			}
			c = by_fd[fd];
			if (!c)
				continue; /* closed earlier in this round */
			if (fd == c->cfd) {
				if (ev[i].events & EPOLLOUT)
					bad = to_client(c);
				if (!bad && ev[i].events & (EPOLLHUP | EPOLLERR))
					bad = -1;
				else if (!bad && ev[i].events & EPOLLIN)
					bad = from_client(c);
			} else {
				if (ev[i].events & EPOLLOUT)
					bad = flush_due(c);
				if (!bad && ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
					bad = from_upstream(c);
			}
			if (bad)
				close_conn(c);
			else
				rearm(c);
		}
		for (c = live; c; c = nx) {
			nx = c->next_live;
			if (c->nheld && c->held[0].due <= now_ns()) {
				if (flush_due(c))
					close_conn(c);
				else
					rearm(c);
			}
		}
	}
}
