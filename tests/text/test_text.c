/* Tests for the text stage: ranks files, BPE merges (scan and heap agree, long runs stay linear), specials, errors. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "grist/features.h"
#include "grist/text.h"
#include "text/text_internal.h"

static void b64(const uint8_t *p, size_t n, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i, o = 0;

	for (i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);

		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? a[v & 63] : '=';
	}
	out[o] = '\0';
}

/* A ranks file: every byte (rank = byte), then @extra tokens from rank 256 on. */
static const char *write_ranks(const char *dir, const char *name, const char *const *extra, size_t n_extra)
{
	static char text[1 << 20];
	size_t o = 0, i;
	char e[64];
	uint8_t b;

	for (i = 0; i < 256; i++) {
		b = (uint8_t)i;
		b64(&b, 1, e);
		o += (size_t)sprintf(text + o, "%s %zu\n", e, i);
	}
	for (i = 0; i < n_extra; i++) {
		b64((const uint8_t *)extra[i], strlen(extra[i]), e);
		o += (size_t)sprintf(text + o, "%s %zu\n", e, 256 + i);
	}
	assert_int_equal(t_write_file(t_path(dir, name), text, o), 0);
	return t_path(dir, name);
}

static const char *const merges[] = { "aa", "aaaa", "ab", "ba", "abab", " a", "he", "ll", "hell", "hello", " hello",
				      "aaaaaaaa" };

static void open_tok(const char *path, const char *pattern, struct grist_tokenizer **t)
{
	struct grist_tokenizer_options o;
	int ret;

	grist_tokenizer_options_init(&o);
	o.pattern = pattern;
	ret = grist_tokenizer_open(path, &o, t);
	if (ret)
		fail_msg("open: %s", grist_last_error());
}

static void test_encode_decode(void **state)
{
	char *dir = t_mkdtemp();
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	struct grist_tokenizer_info info = { .size = sizeof(info) };
	const int32_t *ids;
	const char *text;
	size_t n, len;

	(void)state;
	open_tok(write_ranks(dir, "r.tiktoken", merges, sizeof(merges) / sizeof(merges[0])), "gpt2", &t);
	grist_tokenizer_get_info(t, &info);
	assert_int_equal(info.kind, GRIST_TOKENIZER_TIKTOKEN);
	assert_int_equal(info.vocab_size, 256 + sizeof(merges) / sizeof(merges[0]));
	assert_int_equal(info.bos_id, -1);
	assert_int_equal(grist_tokenizer_ctx_create(t, &c), 0);
	/* " hello" is one piece and one token; "aaaaa" merges "aa" (256) first, leftmost: aaaa + a */
	assert_int_equal(grist_tokenizer_encode(c, "hello hello aaaaa", 17, 0, &ids, &n), 0);
	assert_int_equal(n, 5);
	assert_int_equal(ids[0], 256 + 9);
	assert_int_equal(ids[1], 256 + 10);
	/* the piece " aaaaa": "aa" (256) beats " a" (261) at every step, so " " + "aaaa" + "a" */
	assert_int_equal(ids[2], ' ');
	assert_int_equal(ids[3], 256 + 1);
	assert_int_equal(ids[4], 'a');
	assert_int_equal(grist_tokenizer_decode(c, ids, n, &text, &len), 0);
	assert_int_equal(len, 17);
	assert_memory_equal(text, "hello hello aaaaa", 17);
	/* NUL is an ordinary character; the empty text has no ids */
	assert_int_equal(grist_tokenizer_encode(c, "a\0b", 3, 0, &ids, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(ids[1], 0);
	assert_int_equal(grist_tokenizer_encode(c, "", 0, 0, &ids, &n), 0);
	assert_int_equal(n, 0);
	/* an id the vocabulary lacks */
	{
		int32_t bad[2] = { 5, 99999 };

		assert_int_equal(grist_tokenizer_decode(c, bad, 2, &text, &len), -EINVAL);
		assert_non_null(strstr(grist_last_error(), "id 1 of 2"));
	}
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
	t_rmtree(dir);
}

static void test_invalid_utf8(void **state)
{
	static const struct {
		const char *s;
		size_t len, at;
	} bad[] = {
		{ "ab\xff", 3, 2 },          /* never a UTF-8 byte */
		{ "a\xc3", 2, 1 },           /* cut short */
		{ "\xc0\xaf", 2, 0 },        /* overlong */
		{ "x\xed\xa0\x80", 4, 1 },   /* a surrogate */
		{ "\xf4\x90\x80\x80", 4, 0 }, /* past U+10FFFF */
		{ "ok\xe2\x82", 4, 2 },
	};
	char *dir = t_mkdtemp();
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	const int32_t *ids;
	size_t n, i;
	char want[64];

	(void)state;
	open_tok(write_ranks(dir, "r.tiktoken", merges, 2), NULL, &t);
	assert_int_equal(grist_tokenizer_ctx_create(t, &c), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(grist_tokenizer_encode(c, bad[i].s, bad[i].len, 0, &ids, &n), -EILSEQ);
		snprintf(want, sizeof(want), "byte %zu: invalid UTF-8", bad[i].at);
		assert_non_null(strstr(grist_last_error(), want));
	}
	assert_int_equal(grist_tokenizer_encode(c, "\xe2\x82\xac\xf0\x9f\x98\x80", 7, 0, &ids, &n), 0);
	assert_int_equal(grist_tokenizer_encode(c, "a", 1, 8, &ids, &n), -EINVAL);
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
	t_rmtree(dir);
}

/* Each bad file gets -EBADMSG and a message naming the line and what is wrong. */
static void test_bad_ranks_files(void **state)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "YQ== 0\nYg==\n", "line 2: expected '<base64 token> <rank>', the line is cut short" },
		{ "YQ== 0\nYg== \n", "line 2: the rank is missing" },
		{ "YQ== 0\nYg== 0\n", "line 2: rank 0 appears twice" },
		{ "YQ== 0\n\nY!== 1\n", "line 3: token 'Y!==' is not valid base64" },
		{ "YQ== 0\nYQ 1\n", "line 2: token 'YQ' is not valid base64" },
		{ "YQ== 0\nYQ== 1\n", "line 2: the token of rank 1 repeats rank 0's" },
		{ "YQ== x1\n", "line 1: rank 'x1' is not an integer" },
		{ "YQ== 99999999999\n", "line 1: rank '99999999999' is not an integer" },
		/* the rank -> bytes table has one entry per id: a rank far past the file's size would make it huge */
		{ "YQ== 0\nYg== 2147483647\n", "line 2: rank 2147483647 is past any id a ranks file of 23 bytes" },
		{ "", "no tokens" },
	};
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "bad.tiktoken");
	struct grist_tokenizer *t = NULL;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(t_write_file(path, bad[i].text, strlen(bad[i].text)), 0);
		assert_int_equal(grist_tokenizer_open(path, NULL, &t), -EBADMSG);
		if (!strstr(grist_last_error(), bad[i].want) || !strstr(grist_last_error(), "bad.tiktoken"))
			fail_msg("case %zu: '%s' lacks '%s'", i, grist_last_error(), bad[i].want);
	}
	assert_int_equal(grist_tokenizer_open(t_path(dir, "missing.tiktoken"), NULL, &t), -ENOENT);
	/* CRLF lines and blank lines are read as Python's splitlines() reads them */
	assert_int_equal(t_write_file(path, "YQ== 0\r\n\r\nYg== 1\r\n", 18), 0);
	assert_int_equal(grist_tokenizer_open(path, NULL, &t), 0);
	grist_tokenizer_close(t);
	t_rmtree(dir);
}

static void test_bad_options(void **state)
{
	char *dir = t_mkdtemp();
	const char *path = write_ranks(dir, "r.tiktoken", merges, 2);
	struct grist_special_token sp[2] = { { "<|end|>", 300 }, { "<|x|>", 300 } };
	struct grist_tokenizer_options o;
	struct grist_tokenizer *t;

	(void)state;
	grist_tokenizer_options_init(&o);
	o.pattern = "gpt3";
	assert_int_equal(grist_tokenizer_open(path, &o, &t), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "no such pattern name"));
	o.pattern = "(unclosed";
	assert_int_equal(grist_tokenizer_open(path, &o, &t), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "PCRE2 cannot compile"));
	o.pattern = NULL;
	o.special = sp;
	o.n_special = 2;
	assert_int_equal(grist_tokenizer_open(path, &o, &t), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "repeats"));
	sp[1].id = 3;
	assert_int_equal(grist_tokenizer_open(path, &o, &t), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "also a rank"));
	t_rmtree(dir);
}

/* 65,536 special tokens (the most there may be) open at once: repeats are found by sorting, not pairwise. */
static void test_many_specials(void **state)
{
	enum { N = 65536 };
	char *dir = t_mkdtemp();
	const char *path = write_ranks(dir, "r.tiktoken", merges, 2);
	struct grist_special_token *sp = calloc(N + 1, sizeof(*sp));
	char *texts = malloc((size_t)(N + 1) * 16);
	struct grist_tokenizer_options o;
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	const int32_t *ids;
	size_t n, i;

	(void)state;
	assert_non_null(sp);
	assert_non_null(texts);
	for (i = 0; i <= N; i++) {
		snprintf(texts + 16 * i, 16, "<S_%zu>", i);
		sp[i] = (struct grist_special_token){ texts + 16 * i, (int32_t)(1000 + i) };
	}
	grist_tokenizer_options_init(&o);
	o.special = sp;
	o.n_special = N;
	assert_int_equal(grist_tokenizer_open(path, &o, &t), 0);
	assert_int_equal(grist_tokenizer_ctx_create(t, &c), 0);
	assert_int_equal(grist_tokenizer_encode(c, "<S_65535><S_7>", 14, GRIST_ENCODE_ALLOW_SPECIAL, &ids, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 1000 + 65535);
	assert_int_equal(ids[1], 1007);
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
	/* the first repeat in the list's order, named with the earliest token it repeats */
	sp[N - 1].text = sp[3].text;
	sp[N - 2].id = sp[5].id;
	assert_int_equal(grist_tokenizer_open(path, &o, &t), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "special token '<S_65534>' (id 1005) repeats '<S_5>' (id 1005)"));
	o.n_special = N + 1;
	assert_int_equal(grist_tokenizer_open(path, &o, &t), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "at most 65536"));
	free(texts);
	free(sp);
	t_rmtree(dir);
}

/* One outlier text grows a context's buffers; they are freed after it, not kept for the map's life. */
static void test_ctx_trim(void **state)
{
	enum { PAIRS = 600000 };
	char *dir = t_mkdtemp();
	char *big = malloc(2 * PAIRS);
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	struct grist_text_map_options o;
	struct grist_text_map *m;
	struct grist_map_input in = { .data = (const uint8_t *)big, .len = 2 * PAIRS };
	const int32_t *ids;
	uint8_t out[64];
	size_t n, len, i;

	(void)state;
	assert_non_null(big);
	for (i = 0; i < PAIRS; i++)
		memcpy(big + 2 * i, "b ", 2); /* 1.2M ids: 4.8 MB of them */
	open_tok(write_ranks(dir, "r.tiktoken", merges, 12), NULL, &t);
	assert_int_equal(grist_tokenizer_ctx_create(t, &c), 0);
	assert_int_equal(grist_tokenizer_encode(c, big, 2 * PAIRS, 0, &ids, &n), 0);
	assert_int_equal(n, 2 * PAIRS);
	assert_true(grist_tokenizer_ctx_retained(c) >= 4 * n);
	grist_tokenizer_ctx_trim(c, 1 << 20);
	assert_true(grist_tokenizer_ctx_retained(c) <= 3u << 20);
	assert_int_equal(grist_tokenizer_encode(c, "b b", 3, 0, &ids, &n), 0); /* it grows again */
	assert_int_equal(n, 3);
	grist_tokenizer_ctx_trim(c, 1 << 20); /* small buffers stay */
	assert_true(grist_tokenizer_ctx_retained(c) > 0);
	grist_tokenizer_ctx_destroy(c);
	/* the text map does it after each record: the outlier's 4.8 MB are not kept */
	grist_text_map_options_init(&o);
	o.tokenizer = t;
	o.max_length = 4;
	assert_int_equal(grist_text_map_create(&o, &m), 0);
	assert_int_equal(grist_text_map(m, &in, out, sizeof(out), &len), 1);
	assert_int_equal(len, 16);
	assert_true(grist_text_map_retained(m) <= 3u << 20);
	grist_text_map_destroy(m);
	grist_tokenizer_close(t);
	free(big);
	t_rmtree(dir);
}

static void test_special_tokens(void **state)
{
	char *dir = t_mkdtemp();
	struct grist_special_token sp[2] = { { "<|end|>", 1000 }, { "<|end|>x", 1001 } };
	struct grist_tokenizer_options o;
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	const int32_t *ids;
	const char *text;
	size_t n, len;
	static const char s[] = "ab<|end|>ab<|end|>x<|end|";

	(void)state;
	grist_tokenizer_options_init(&o);
	o.special = sp;
	o.n_special = 2;
	assert_int_equal(grist_tokenizer_open(write_ranks(dir, "r.tiktoken", merges, 4), &o, &t), 0);
	assert_int_equal(grist_tokenizer_ctx_create(t, &c), 0);
	/* without the flag, the text is plain text: no special id anywhere */
	assert_int_equal(grist_tokenizer_encode(c, s, strlen(s), 0, &ids, &n), 0);
	for (size_t i = 0; i < n; i++)
		assert_true(ids[i] < 1000);
	/* with it: ab <|end|> ab <|end|>x (the longest at a place) then plain "<|end|" */
	assert_int_equal(grist_tokenizer_encode(c, s, strlen(s), GRIST_ENCODE_ALLOW_SPECIAL, &ids, &n), 0);
	assert_true(n >= 5);
	assert_int_equal(ids[0], 258);
	assert_int_equal(ids[1], 1000);
	assert_int_equal(ids[2], 258);
	assert_int_equal(ids[3], 1001);
	assert_int_equal(grist_tokenizer_decode(c, ids, n, &text, &len), 0);
	assert_int_equal(len, strlen(s));
	assert_memory_equal(text, s, len);
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
	t_rmtree(dir);
}

/*
 * Many special tokens (tekken has 1000), overlapping ones among them: the special ids an
 * encode emits are those of a brute-force scan, leftmost and the longest there, on random
 * texts made of their pieces; the text decodes back whole.
 */
static void test_special_scan(void **state)
{
	enum { N = 1004 };
	char *dir = t_mkdtemp(), names[N][16];
	struct grist_special_token sp[N];
	struct grist_tokenizer_options o;
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	static const char *const pieces[] = { "<SPECIAL_", "1", "2", "0", ">", "a", "b", "<", "x", "y", "ab<", "x>" };
	uint8_t rnd[4096];
	char text[1200];

	(void)state;
	for (int i = 0; i < 1000; i++)
		snprintf(names[i], sizeof(names[i]), "<SPECIAL_%d>", i);
	/* prefixes of one another at one place, and overlaps across places */
	strcpy(names[1000], "<SPECIAL_1");
	strcpy(names[1001], "ab<SPECIAL_");
	strcpy(names[1002], "x>");
	strcpy(names[1003], "0>x");
	for (int i = 0; i < N; i++)
		sp[i] = (struct grist_special_token){ names[i], 1000 + i };
	grist_tokenizer_options_init(&o);
	o.special = sp;
	o.n_special = N;
	assert_int_equal(grist_tokenizer_open(write_ranks(dir, "r.tiktoken", merges, 4), &o, &t), 0);
	assert_int_equal(grist_tokenizer_ctx_create(t, &c), 0);
	for (int round = 0; round < 40; round++) {
		size_t len = 0, n, k = 0, out_len;
		const int32_t *ids;
		const char *back;

		t_fill(rnd, sizeof(rnd), 100 + (uint64_t)round);
		for (int i = 0; len < 1000; i++) {
			const char *pc = pieces[rnd[i] % (sizeof(pieces) / sizeof(pieces[0]))];

			memcpy(text + len, pc, strlen(pc));
			len += strlen(pc);
		}
		assert_int_equal(grist_tokenizer_encode(c, text, len, GRIST_ENCODE_ALLOW_SPECIAL, &ids, &n), 0);
		/* brute force: at each place the longest match, else move on one byte */
		for (size_t at = 0; at < len;) {
			int best = -1;

			for (int i = 0; i < N; i++) {
				size_t l = strlen(names[i]);

				if (l <= len - at && !memcmp(text + at, names[i], l) &&
				    (best < 0 || l > strlen(names[best])))
					best = i;
			}
			if (best < 0) {
				at++;
				continue;
			}
			while (k < n && ids[k] < 1000)
				k++;
			assert_true(k < n);
			assert_int_equal(ids[k], 1000 + best);
			k++;
			at += strlen(names[best]);
		}
		while (k < n)
			assert_true(ids[k++] < 1000);
		assert_int_equal(grist_tokenizer_decode(c, ids, n, &back, &out_len), 0);
		assert_int_equal(out_len, len);
		assert_memory_equal(back, text, len);
	}
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
	t_rmtree(dir);
}

/* tiktoken's scan and the heap make the same merges on random pieces of a random vocabulary. */
static void test_scan_and_heap_agree(void **state)
{
	char *dir = t_mkdtemp();
	char *extra[400], buf[400][8];
	struct grist_vocab v;
	struct grist_bpe_scratch s = { 0 };
	struct grist_ids a = { 0 }, b = { 0 };
	uint8_t piece[300], rnd[800];
	size_t i, k, round;

	(void)state;
	t_fill(rnd, sizeof(rnd), 7);
	for (i = 0, k = 0; i < 400; i++) {
		size_t len = 2 + rnd[i] % 5, j;

		for (j = 0; j < len; j++)
			buf[i][j] = (char)('a' + rnd[(k++) % sizeof(rnd)] % 3);
		buf[i][len] = '\0';
		extra[i] = buf[i];
	}
	/* repeats are dropped: a ranks file holds each token once */
	for (i = 0, k = 0; i < 400; i++) {
		size_t j;

		for (j = 0; j < k && strcmp(extra[j], buf[i]); j++)
			;
		if (j == k)
			extra[k++] = buf[i];
	}
	assert_int_equal(grist_vocab_load(&v, write_ranks(dir, "r.tiktoken", (const char *const *)extra, k)), 0);
	for (round = 0; round < 300; round++) {
		size_t len = 1 + round % sizeof(piece);

		t_fill(piece, len, round + 100);
		for (i = 0; i < len; i++)
			piece[i] = (uint8_t)('a' + piece[i] % 3);
		a.n = b.n = 0;
		assert_int_equal(grist_bpe_encode_piece(&v, &s, piece, len, SIZE_MAX, &a), 0);
		assert_int_equal(grist_bpe_encode_piece(&v, &s, piece, len, 0, &b), 0);
		assert_int_equal(a.n, b.n);
		assert_memory_equal(a.v, b.v, a.n * sizeof(int32_t));
	}
	free(a.v);
	free(b.v);
	grist_bpe_scratch_free(&s);
	grist_vocab_free(&v);
	t_rmtree(dir);
}

/* 100k repeats of one character: the work grows as n log n, not n^2 (tiktoken issue #195). */
static void test_long_runs_linear(void **state)
{
	char *dir = t_mkdtemp();
	struct grist_vocab v;
	struct grist_bpe_scratch s = { 0 };
	struct grist_ids out = { 0 };
	uint64_t work[2];
	size_t sizes[2] = { 25000, 100000 }, i;
	uint8_t *p = malloc(100000);

	(void)state;
	memset(p, 'a', 100000);
	assert_int_equal(grist_vocab_load(&v, write_ranks(dir, "r.tiktoken", merges, 12)), 0);
	for (i = 0; i < 2; i++) {
		s.work = 0;
		out.n = 0;
		assert_int_equal(grist_bpe_encode_piece(&v, &s, p, sizes[i], GRIST_BPE_SCAN_MAX, &out), 0);
		assert_int_equal(out.n, sizes[i] / 8); /* all "aaaaaaaa" */
		work[i] = s.work;
	}
	/* 4x the input: ~4.5x the work for n log n; n^2 would be 16x */
	assert_true(work[1] < 6 * work[0]);
	assert_true(work[1] < 100 * sizes[1]);
	free(p);
	free(out.v);
	grist_bpe_scratch_free(&s);
	grist_vocab_free(&v);
	t_rmtree(dir);
}

/* A batch on 4 threads equals one text at a time; a bad text is named by its index. */
static void test_batch_threads(void **state)
{
	enum { N = 200 };
	char *dir = t_mkdtemp();
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	struct grist_token_batch b;
	static char store[N][64];
	const void *texts[N];
	size_t lens[N], i;

	(void)state;
	open_tok(write_ranks(dir, "r.tiktoken", merges, 12), "cl100k", &t);
	for (i = 0; i < N; i++) {
		lens[i] = (size_t)snprintf(store[i], sizeof(store[i]), "hello %zu aaaa%.*s  ab's", i, (int)(i % 20),
					   "aaaaaaaaaaaaaaaaaaaa");
		texts[i] = store[i];
	}
	assert_int_equal(grist_tokenizer_encode_batch(t, texts, lens, N, 0, 4, &b), 0);
	assert_int_equal(b.n, N);
	assert_int_equal(grist_tokenizer_ctx_create(t, &c), 0);
	for (i = 0; i < N; i++) {
		const int32_t *ids;
		size_t n;

		assert_int_equal(grist_tokenizer_encode(c, texts[i], lens[i], 0, &ids, &n), 0);
		assert_int_equal(b.offsets[i + 1] - b.offsets[i], n);
		assert_memory_equal(b.ids + b.offsets[i], ids, n * sizeof(int32_t));
	}
	grist_token_batch_free(&b);
	store[150][3] = (char)0xff;
	store[170][3] = (char)0xff;
	assert_int_equal(grist_tokenizer_encode_batch(t, texts, lens, N, 0, 3, &b), -EILSEQ);
	assert_non_null(strstr(grist_last_error(), "text 150: byte 3: invalid UTF-8"));
	assert_null(b.ids);
	assert_int_equal(grist_tokenizer_encode_batch(t, texts, lens, 0, 0, 3, &b), 0);
	assert_int_equal(b.offsets[0], 0);
	grist_token_batch_free(&b);
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
	t_rmtree(dir);
}

/* A file that is not a SentencePiece model: a clear error, no crash. */
static void test_bad_sentencepiece(void **state)
{
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "x.model");
	struct grist_tokenizer *t;
	uint8_t junk[4096];
	struct grist_tokenizer_options o;

	/* the library never prints: sentencepiece's own logging must stay off stderr */
	const char *err_path = t_path(dir, "stderr.txt");
	int saved = dup(2), fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	size_t err_len;
	uint8_t *err;

	(void)state;
	assert_true(saved >= 0 && fd >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fd, 2), 2);
	t_fill(junk, sizeof(junk), 3);
	assert_int_equal(t_write_file(path, junk, sizeof(junk)), 0);
	assert_int_equal(grist_tokenizer_open(path, NULL, &t), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "not a SentencePiece model"));
	for (size_t cut = 1; cut < 64; cut *= 2) { /* a protobuf cut short, a field at a time */
		static const uint8_t head[] = { 0x0a, 0x0b, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x15, 0, 0, 0, 0,
						0x18, 0x02, 0x12, 0x04, 0x10, 0x01, 0x18, 0x01 };

		assert_int_equal(t_write_file(path, head, cut < sizeof(head) ? cut : sizeof(head)), 0);
		assert_true(grist_tokenizer_open(path, NULL, &t) < 0);
	}
	assert_int_equal(t_write_file(path, "", 0), 0);
	assert_true(grist_tokenizer_open(path, NULL, &t) < 0);
	assert_int_equal(grist_tokenizer_open(t_path(dir, "none.model"), NULL, &t), -ENOENT);
	fflush(stderr);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	close(fd);
	err = t_read_file(err_path, &err_len);
	assert_int_equal(err_len, 0);
	free(err);
	grist_tokenizer_options_init(&o);
	o.pattern = "gpt2";
	assert_int_equal(grist_tokenizer_open(path, &o, &t), -EINVAL);
	t_rmtree(dir);
}

/* The loader's map: [BOS] + ids + [EOS], cut to max_length; errors name the record. */
static void test_text_map(void **state)
{
	char *dir = t_mkdtemp();
	struct grist_tokenizer *t;
	struct grist_text_map_options o;
	struct grist_text_map *m;
	struct grist_map_input in = { .data = (const uint8_t *)"hello aaaa", .len = 10, .index = 7, .dataset = 1 };
	uint8_t out[64];
	size_t len;
	int32_t v[8];

	(void)state;
	open_tok(write_ranks(dir, "r.tiktoken", merges, 12), NULL, &t);
	grist_text_map_options_init(&o);
	o.tokenizer = t;
	o.add_bos = true;
	assert_int_equal(grist_text_map_create(&o, &m), -EINVAL); /* no BOS id */
	o.bos_id = 1000;
	o.add_eos = true;
	o.eos_id = 1001;
	assert_int_equal(grist_text_map_create(&o, &m), 0);
	assert_int_equal(grist_text_map(m, &in, out, sizeof(out), &len), 1);
	assert_int_equal(len, 5 * 4); /* BOS, "hello", " ", "aaaa", EOS */
	memcpy(v, out, len);
	assert_int_equal(v[0], 1000);
	assert_int_equal(v[1], 256 + 9);
	assert_int_equal(v[4], 1001);
	/* the output room bounds it: EMSGSIZE, naming the record */
	assert_int_equal(grist_text_map(m, &in, out, 8, &len), -EMSGSIZE);
	assert_non_null(strstr(grist_last_error(), "do not fit"));
	in.data = (const uint8_t *)"a\xff";
	in.len = 2;
	assert_int_equal(grist_text_map(m, &in, out, sizeof(out), &len), -EILSEQ);
	assert_non_null(strstr(grist_last_error(), "byte 1: invalid UTF-8"));
	grist_text_map_destroy(m);
	/* trimmed to max_length: the EOS is lost; an Example without the feature is an error */
	o.max_length = 2;
	o.feature = "text";
	assert_int_equal(grist_text_map_create(&o, &m), 0);
	in.data = (const uint8_t *)"";
	in.len = 0;
	assert_int_equal(grist_text_map(m, &in, out, sizeof(out), &len), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "no feature 'text'"));
	grist_text_map_destroy(m);
	/* on_error skip: the same records are dropped (0, the map's filter) and counted with their reason */
	o.on_error = GRIST_ON_ERROR_SKIP;
	assert_int_equal(grist_text_map_create(&o, &m), 0);
	assert_int_equal(grist_text_map(m, &in, out, sizeof(out), &len), 0);
	assert_int_equal(len, 0);
	o.feature = NULL;
	grist_text_map_destroy(m);
	assert_int_equal(grist_text_map_create(&o, &m), 0);
	in.data = (const uint8_t *)"a\xff";
	in.len = 2;
	assert_int_equal(grist_text_map(m, &in, out, sizeof(out), &len), 0);
	in.data = (const uint8_t *)"hello";
	in.len = 5;
	in.index = 9;
	assert_int_equal(grist_text_map(m, &in, out, sizeof(out), &len), 1); /* a good record passes */
	assert_int_equal(grist_text_map(m, &in, out, 4, &len), 0);             /* too many tokens: dropped */
	{
		struct grist_feature_skip sk[4];
		size_t n = 0;

		assert_int_equal(grist_text_map_skipped(m, sk, 4, &n), 2);
		assert_int_equal(n, 2);
		assert_int_equal(sk[0].index, 7);
		assert_int_equal(sk[0].dataset, 1);
		assert_non_null(strstr(sk[0].reason, "byte 1: invalid UTF-8"));
		assert_int_equal(sk[1].index, 9);
		assert_non_null(strstr(sk[1].reason, "do not fit"));
	}
	grist_text_map_destroy(m);
	o.on_error = 7;
	assert_int_equal(grist_text_map_create(&o, &m), -EINVAL);
	grist_tokenizer_close(t);
	t_rmtree(dir);
}

/*
 * The map's id is the checkpoint's fingerprint of the text stage: one field more must leave the id
 * of every map without it as it was, so checkpoints saved before it was added still load. The ids
 * below were printed by grist_text_map_id() at 73e9023, before bos_features was added.
 */
static void test_text_map_id(void **state)
{
	static const uint64_t golden[] = { 0x03f6df983c3abfb1ull, 0xb1d147cd5525e527ull, 0xcc9feca066ed8ae3ull,
					   0xe9e00e1b6d7e7503ull };
	char *dir = t_mkdtemp();
	struct grist_tokenizer *t;
	struct grist_text_map_options o;
	struct grist_text_map *m;
	uint64_t ids[4], bos[4];

	(void)state;
	open_tok(write_ranks(dir, "r.tiktoken", merges, 12), NULL, &t);
	for (int k = 0; k < 4; k++) {
		grist_text_map_options_init(&o);
		o.tokenizer = t;
		o.add_bos = o.add_eos = k & 1;
		o.bos_id = k & 1 ? 1000 : -1;
		o.eos_id = k & 1 ? 1001 : -1;
		o.feature = k & 2 ? "text" : NULL;
		o.max_length = k & 2 ? 2048 : 0;
		o.on_error = k == 3 ? GRIST_ON_ERROR_SKIP : GRIST_ON_ERROR_FAIL;
		assert_int_equal(grist_text_map_create(&o, &m), 0);
		ids[k] = grist_text_map_id(m);
		assert_int_equal(ids[k], golden[k]);
		grist_text_map_destroy(m);
	}
	/* pack_bos_features: each feature and each id is another stage, so another id */
	for (unsigned f = 1; f <= 2; f++)
		for (int32_t id = 7; id <= 8; id++) {
			o.bos_features = f;
			o.bos_features_id = id;
			assert_int_equal(grist_text_map_create(&o, &m), 0);
			for (int k = 0; k < 4; k++)
				assert_true(grist_text_map_id(m) != ids[k]);
			bos[(f - 1) * 2 + (unsigned)(id - 7)] = grist_text_map_id(m);
			grist_text_map_destroy(m);
		}
	assert_true(bos[0] != bos[1] && bos[0] != bos[2] && bos[0] != bos[3] && bos[1] != bos[2] &&
		    bos[1] != bos[3] && bos[2] != bos[3]);
	/* both is the packer's pack_bos; unknown bits are refused */
	o.bos_features = GRIST_TEXT_BOS_INPUTS | GRIST_TEXT_BOS_TARGETS;
	assert_int_equal(grist_text_map_create(&o, &m), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "pack_bos"));
	o.bos_features = 4;
	assert_int_equal(grist_text_map_create(&o, &m), -EINVAL);
	assert_non_null(strstr(grist_last_error(), "unknown bos_features"));
	grist_tokenizer_close(t);
	t_rmtree(dir);
}

/* A tekken JSON: ids offset by its special tokens, JSON escapes in them, malformed files refused. */
static void test_tekken(void **state)
{
	static char json[1 << 16];
	static const char *const bad[] = {
		"{\"config\": {\"pattern\": \"x\", \"default_vocab_size\": 300, \"default_num_special_tokens\": 2}}",
		"{\"config\": {\"pattern\": \"x\\q\"}}",
		"{\"config\": [1, {\"a\": [[[\"\\ud800\"]]]}]}",
		"{\"vocab\": [{\"rank\": 0, \"token_bytes\": \"AA==\"}]}",
		"{\"config\": {\"pattern\": \"x\", \"default_vocab_size\": 1e3",
		/* token_bytes is written into a ranks text: a newline in it would add a line, a rank of its own */
		"{\"config\": {\"pattern\": \".\", \"default_vocab_size\": 3, \"default_num_special_tokens\": 1}, "
		"\"vocab\": [{\"rank\": 0, \"token_bytes\": \"AA== 5\\nAQ==\"}, {\"rank\": 1, \"token_bytes\": \"Ag==\"}]}",
		"",
	};
	char *dir = t_mkdtemp();
	const char *path = t_path(dir, "t.json");
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	struct grist_tokenizer_info info = { .size = sizeof(info) };
	const int32_t *ids;
	const char *text;
	size_t o = 0, n, len, i;
	char e[8];

	(void)state;
	o += (size_t)sprintf(json + o, "{\"config\": {\"pattern\": \"\\\\p{L}+|\\\\s+|.\", \"default_vocab_size\": 261, "
				       "\"default_num_special_tokens\": 4, \"version\": \"v7\"}, \"vocab\": [");
	for (i = 0; i < 258; i++) {
		uint8_t b[2] = { (uint8_t)i, 'b' };

		b64(i < 256 ? b : (const uint8_t *)"ab", i < 256 ? 1 : 2, e);
		o += (size_t)sprintf(json + o, "%s{\"rank\": %zu, \"token_bytes\": \"%s\", \"token_str\": null}",
				     i ? ", " : "", i, e);
	}
	o += (size_t)sprintf(json + o, "], \"special_tokens\": [{\"rank\": 0, \"token_str\": \"<unk>\"}, "
				       "{\"rank\": 1, \"token_str\": \"<s>\", \"is_control\": true}, "
				       "{\"rank\": 2, \"token_str\": \"\\u00e9\\ud83d\\ude00\"}], \"image\": {\"x\": [1.5, -2, false]}}");
	assert_int_equal(t_write_file(path, json, o), 0);
	if (grist_tokenizer_open(path, NULL, &t))
		fail_msg("open: %s", grist_last_error());
	grist_tokenizer_get_info(t, &info);
	assert_int_equal(info.vocab_size, 261);
	assert_int_equal(info.bos_id, 1);
	assert_int_equal(info.eos_id, -1);
	assert_int_equal(info.unk_id, 0);
	assert_int_equal(grist_tokenizer_ctx_create(t, &c), 0);
	/* "ab" is rank 256: id 260; the special tokens by name, the filler <SPECIAL_3> too */
	assert_int_equal(grist_tokenizer_encode(c, "ab<s>\xc3\xa9\xf0\x9f\x98\x80<SPECIAL_3>", 22,
						GRIST_ENCODE_ALLOW_SPECIAL, &ids, &n), 0);
	assert_int_equal(n, 4);
	assert_int_equal(ids[0], 260);
	assert_int_equal(ids[1], 1);
	assert_int_equal(ids[2], 2);
	assert_int_equal(ids[3], 3);
	assert_int_equal(grist_tokenizer_decode(c, ids, n, &text, &len), 0);
	assert_int_equal(len, 22);
	assert_memory_equal(text, "ab<s>\xc3\xa9\xf0\x9f\x98\x80<SPECIAL_3>", 22);
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(t_write_file(path, bad[i], strlen(bad[i])), 0);
		if (grist_tokenizer_open(path, NULL, &t) != -EBADMSG || !strstr(grist_last_error(), "not a tekken JSON"))
			fail_msg("bad %zu: %s", i, grist_last_error());
	}
	t_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_decode),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_bad_ranks_files),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_special_tokens),
		cmocka_unit_test(test_special_scan),
		cmocka_unit_test(test_scan_and_heap_agree),
		cmocka_unit_test(test_long_runs_linear),
		cmocka_unit_test(test_batch_threads),
		cmocka_unit_test(test_bad_sentencepiece),
		cmocka_unit_test(test_many_specials),
		cmocka_unit_test(test_ctx_trim),
		cmocka_unit_test(test_text_map),
		cmocka_unit_test(test_text_map_id),
		cmocka_unit_test(test_tekken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
