/*
 * The HTTP/1.1 response head of the direct receive path (src/io/http1.c): where a head
 * ends, the fields it reads (status, Content-Length, Transfer-Encoding, Connection), every
 * line handed on, and the heads it refuses with a message saying why.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "io/http1.h"

struct lines {
	unsigned n;
	char last[128];
};

static void on_line(void *ud, const char *line, size_t len)
{
	struct lines *l = ud;

	l->n++;
	snprintf(l->last, sizeof(l->last), "%.*s", (int)len, line);
}

static int parse(const char *head, struct grist_http1_head *h, struct lines *l, char *why)
{
	memset(l, 0, sizeof(*l));
	return grist_http1_head_parse(head, strlen(head), h, on_line, l, why, 200);
}

static void head_end(void **state)
{
	const char *a = "HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody";

	(void)state;
	assert_int_equal(grist_http1_head_end(a, strlen(a), 0), strlen(a) - 4);
	/* found again when searched in pieces, the empty line split across them */
	for (size_t cut = 1; cut < strlen(a); cut++) {
		size_t e = grist_http1_head_end(a, cut, 0);

		if (cut < strlen(a) - 4)
			assert_int_equal(e, 0);
		/* from: bytes searched already without finding the end */
		if (!e)
			assert_int_equal(grist_http1_head_end(a, strlen(a), cut), strlen(a) - 4);
	}
	assert_int_equal(grist_http1_head_end("\r\n\r", 3, 0), 0);
	assert_int_equal(grist_http1_head_end("", 0, 0), 0);
	assert_int_equal(grist_http1_head_end("x\n\n", 3, 0), 0); /* bare LF is not the end here */
}

static void fields(void **state)
{
	struct grist_http1_head h;
	struct lines l;
	char why[200];

	(void)state;
	assert_int_equal(parse("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\n"
			       "content-length:  10 \r\nETag: \"x\"\r\n\r\n", &h, &l, why), 0);
	assert_int_equal(h.status, 206);
	assert_int_equal(h.length, 10);
	assert_false(h.chunked);
	assert_false(h.close);
	assert_int_equal(l.n, 5); /* the status line, three fields, the empty line */
	assert_string_equal(l.last, "\r\n");
	/* no length; chunked; close among other tokens; a status line without a reason */
	assert_int_equal(parse("HTTP/1.1 503\r\nTransfer-Encoding: chunked\r\nConnection: x, Close\r\n\r\n",
			       &h, &l, why), 0);
	assert_int_equal(h.status, 503);
	assert_int_equal(h.length, -1);
	assert_true(h.chunked && h.close);
	/* HTTP/1.0 closes unless it says keep-alive */
	assert_int_equal(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", &h, &l, why), 0);
	assert_true(h.close);
	assert_int_equal(parse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", &h, &l,
			       why), 0);
	assert_false(h.close);
	/* the same length twice is one length */
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 7\r\n\r\n", &h, &l, why), 0);
	assert_int_equal(h.length, 7);
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n", &h, &l, why), 0);
	assert_false(h.chunked);
}

static void refused(void **state)
{
	static const char *const bad[] = {
		"HTTP/2 200 OK\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/1.1 099 OK\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
		"HTTP/1.1 200 OK\r\n: no name\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 8\r\n\r\n",
	};
	struct grist_http1_head h;
	struct lines l;
	char why[200];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		if (parse(bad[i], &h, &l, why) != -EPROTO)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_true(why[0] != '\0');
	}
	/* the message quotes a bad status line printably */
	assert_int_equal(parse("HTTP/9\x01 200\r\n\r\n", &h, &l, why), -EPROTO);
	assert_non_null(strstr(why, "malformed status line"));
	assert_null(strchr(why, '\x01'));
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 8\r\n\r\n", &h, &l, why),
			 -EPROTO);
	assert_non_null(strstr(why, "after another of a different value"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(head_end),
		cmocka_unit_test(fields),
		cmocka_unit_test(refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
