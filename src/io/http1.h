/*
 * An HTTP/1.1 response head, parsed (http1.c): what the scheduler's own receive path
 * (sched_direct.c) needs to read a body straight into its buffers. Memory only, no sockets.
 */
#ifndef GRIST_IO_HTTP1_H
#define GRIST_IO_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest head read: S3's are under 2 KiB; a presigned Location runs to a few. */
#define GRIST_HTTP1_HEAD_MAX 32768

struct grist_http1_head {
	int status;      /* 100..999 */
	int64_t length;  /* Content-Length, or -1 when none */
	bool chunked;    /* Transfer-Encoding other than identity */
	bool close;      /* the server closes after this answer (Connection: close, HTTP/1.0) */
};

/*
 * grist_http1_head_end() - where the head in @p[0..@n) ends: the offset just past its
 * empty line ("\r\n\r\n"), or 0 while it is incomplete. @from: bytes already searched.
 */
size_t grist_http1_head_end(const char *p, size_t n, size_t from);

/* Called with each field line of a head, its CRLF included (remote.c's header rules). */
typedef void grist_http1_line_fn(void *ud, const char *line, size_t len);

/*
 * grist_http1_head_parse() - parse the head @p[0..@n) (status line through the empty
 * line), calling @fn for the status line and every field line. Return: 0, or -EPROTO with
 * @why (@cap bytes) saying what is wrong: a bad status line, a field line without a colon,
 * a Content-Length that is not a number or disagrees with another.
 */
int grist_http1_head_parse(const char *p, size_t n, struct grist_http1_head *h, grist_http1_line_fn *fn, void *ud,
			   char *why, size_t cap);

#endif
