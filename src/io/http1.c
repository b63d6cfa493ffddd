/*
 * An HTTP/1.1 response head (RFC 9112): the status line, then field lines up to an empty
 * line. Only what a ranged GET's reader acts on is read here (status, Content-Length,
 * Transfer-Encoding, Connection); every line also goes to the caller, so remote.c's one
 * set of header rules (Content-Range, ETag, Retry-After, Location) judges both receive
 * paths alike.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "io/http1.h"

size_t grist_http1_head_end(const char *p, size_t n, size_t from)
{
	size_t i = from > 3 ? from - 3 : 0;

	for (; i + 4 <= n; i++) {
		const char *q = memchr(p + i, '\r', n - i);

		if (!q)
			return 0;
		i = (size_t)(q - p);
		if (i + 4 <= n && !memcmp(q, "\r\n\r\n", 4))
			return i + 4;
	}
	return 0;
}

/* @v[0..@n) without the blanks around it. */
static void trim(const char **v, size_t *n)
{
	while (*n && (**v == ' ' || **v == '\t'))
		(*v)++, (*n)--;
	while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

static bool is(const char *v, size_t n, const char *word)
{
	return n == strlen(word) && !strncasecmp(v, word, n);
}

/* Whether the comma-separated list @v[0..@n) holds @word. */
static bool has_token(const char *v, size_t n, const char *word)
{
	while (n) {
		const char *c = memchr(v, ',', n);
		size_t k = c ? (size_t)(c - v) : n;
		const char *t = v;
		size_t tn = k;

		trim(&t, &tn);
		if (is(t, tn, word))
			return true;
		v += k + (c != NULL);
		n -= k + (c != NULL);
	}
	return false;
}

int grist_http1_head_parse(const char *p, size_t n, struct grist_http1_head *h, grist_http1_line_fn *fn, void *ud,
			   char *why, size_t cap)
{
	const char *end = p + n, *line = p;
	bool http10, keep_alive = false;
	unsigned ln = 0;

	*h = (struct grist_http1_head){ .length = -1 };
	/* "HTTP/1.x 206 Partial Content": three digits after one space */
	if (n < 12 || memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1') || p[8] != ' ' || p[9] < '1' ||
	    p[9] > '9' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9' ||
	    (n > 12 && p[12] != ' ' && p[12] != '\r')) {
		snprintf(why, cap, "a malformed status line: '%.*s'", (int)(n < 40 ? n : 40), p);
		for (size_t i = 0; why[i]; i++)
			if (why[i] < 0x20 || why[i] >= 0x7f)
				why[i] = '?';
		return -EPROTO;
	}
	http10 = p[7] == '0';
	h->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	while (line < end) {
		const char *eol = memchr(line, '\n', (size_t)(end - line)), *colon, *v;
		size_t len = eol ? (size_t)(eol - line) + 1 : (size_t)(end - line), vn;

		ln++;
		fn(ud, line, len);
		if (ln == 1 || len <= 2) { /* the status line; the empty line */
			line += len;
			continue;
		}
		colon = memchr(line, ':', len);
		if (!colon || colon == line) {
			snprintf(why, cap, "field line %u of the answer's head has no name and colon", ln);
			return -EPROTO;
		}
		v = colon + 1;
		vn = len - (size_t)(v - line);
		while (vn && (v[vn - 1] == '\r' || v[vn - 1] == '\n'))
			vn--;
		trim(&v, &vn);
		if (is(line, (size_t)(colon - line), "content-length")) {
			int64_t x = 0;
			size_t i;

			for (i = 0; i < vn && v[i] >= '0' && v[i] <= '9' && x < (INT64_C(1) << 56); i++)
				x = x * 10 + (v[i] - '0');
			if (!vn || i != vn || (h->length >= 0 && h->length != x)) {
				snprintf(why, cap, "a Content-Length the reader cannot take: '%.*s'%s", (int)(vn < 40 ? vn : 40),
					 v, h->length >= 0 && i == vn ? " (after another of a different value)" : "");
				return -EPROTO;
			}
			h->length = x;
		} else if (is(line, (size_t)(colon - line), "transfer-encoding")) {
			if (!is(v, vn, "identity"))
				h->chunked = true;
		} else if (is(line, (size_t)(colon - line), "connection")) {
			if (has_token(v, vn, "close"))
				h->close = true;
			if (has_token(v, vn, "keep-alive"))
				keep_alive = true;
		}
		line += len;
	}
	if (http10 && !keep_alive)
		h->close = true;
	return 0;
}
