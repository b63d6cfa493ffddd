/*
 * SentencePiece models that are corrupt, cut short or lie about lengths: grist checks a model's
 * bytes before Debian's libsentencepiece sees them (src/text/spm_model.c), so each such file is
 * refused with -EBADMSG and a message naming it, or loads and encodes without a crash. The
 * models are real ones, trained here by the library's own trainer (spm_train.cc): a Unigram
 * model with the NFKC charsmap and a BPE model with byte fallback and split digits.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "grist/text.h"
#include "text/text_internal.h"

int t_spm_train(const char *args);

static char *dir;
static uint8_t *model[2];
static size_t model_len[2];
static const char *const names[2] = { "unigram", "bpe" };

static const char *const texts[] = {
	"Hello world, it's 12345 and 2026-11-28.",
	"\xef\xac\x81nd the \xe2\x91\xa0 \xef\xbc\xa1\xef\xbc\xa2 \xe3\x8e\x8f caf\xc3\xa9 cafe\xcc\x81", /* fi ligature, circled 1, full width, NFKC */
	"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9 \xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\x82",
	"  leading\tand trailing  \n\n spaces \xe3\x80\x80 ",
	"\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb emoji \x01\x02\x7f controls",
	"",
};

/* A corpus of real-looking lines, NFKC-affected characters and scripts included. */
static void write_corpus(const char *path)
{
	static const char *const words[] = { "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "data",
					     "loader", "record", "token", "caf\xc3\xa9", "\xef\xac\x81le", "12",
					     "2048", "\xe6\x97\xa5\xe6\x9c\xac", "\xd8\xa7\xd9\x84\xd8\xb9",
					     "\xef\xbc\xa1\xef\xbc\xa2", "\xe2\x91\xa0", "it's", "don't", "===",
					     "->", "(x)", "\xe0\xa4\xb9\xe0\xa4\xbf" };
	FILE *f = fopen(path, "w");
	uint64_t s = 1;
	int i, k;

	assert_non_null(f);
	for (i = 0; i < 2000; i++) {
		for (k = 0; k < 12; k++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			if (s >> 60 & 1) { /* a made-up word of 1-4 syllables, for a vocabulary to learn */
				static const char *const syl[] = { "ka", "to", "ri", "ne", "mu", "sha", "el", "on", "ist", "qu" };
				unsigned m = 1 + (unsigned)(s >> 40) % 4;

				fputs(k ? " " : "", f);
				while (m--)
					fputs(syl[(s >> (8 + 4 * m)) % 10], f);
			} else {
				fprintf(f, "%s%s", k ? " " : "", words[(s >> 33) % (sizeof(words) / sizeof(words[0]))]);
			}
		}
		fputc('\n', f);
	}
	fclose(f);
}

static int setup(void **state)
{
	char args[1024];
	int i;

	(void)state;
	dir = t_mkdtemp();
	write_corpus(t_path(dir, "corpus.txt"));
	snprintf(args, sizeof(args), "--input=%s --model_prefix=%s --model_type=unigram --vocab_size=300 "
		 "--normalization_rule_name=nmt_nfkc --character_coverage=1.0 --num_threads=1 --minloglevel=2 --hard_vocab_limit=false",
		 t_path(dir, "corpus.txt"), t_path(dir, "unigram"));
	if (t_spm_train(args))
		return -1;
	snprintf(args, sizeof(args), "--input=%s --model_prefix=%s --model_type=bpe --vocab_size=400 "
		 "--byte_fallback=true --split_digits=true --character_coverage=0.99 --num_threads=1 --minloglevel=2 --hard_vocab_limit=false",
		 t_path(dir, "corpus.txt"), t_path(dir, "bpe"));
	if (t_spm_train(args))
		return -1;
	for (i = 0; i < 2; i++) {
		char name[32];

		snprintf(name, sizeof(name), "%s.model", names[i]);
		model[i] = t_read_file(t_path(dir, name), &model_len[i]);
		if (!model[i])
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(model[0]);
	free(model[1]);
	t_rmtree(dir);
	return 0;
}

/* Open @data as a .model file: 0 after encoding and decoding every text, or the open's error. */
static int try_model(const uint8_t *data, size_t len)
{
	const char *path = t_path(dir, "try.model");
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	int ret;
	size_t i;

	assert_int_equal(t_write_file(path, data, len), 0);
	ret = grist_tokenizer_open(path, NULL, &t);
	if (ret) {
		assert_int_equal(ret, -EBADMSG);
		assert_non_null(strstr(grist_last_error(), path));
		return ret;
	}
	assert_int_equal(grist_tokenizer_ctx_create(t, &c), 0);
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		const int32_t *ids;
		const char *back;
		size_t n, back_len;
		int32_t copy[256];

		/* an encode or decode may fail on what the model lacks, but never crash */
		if (grist_tokenizer_encode(c, texts[i], strlen(texts[i]), 0, &ids, &n) == 0 && n <= 256) {
			memcpy(copy, ids, n * sizeof(*ids));
			(void)grist_tokenizer_decode(c, copy, n, &back, &back_len);
		}
	}
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
	return 0;
}

/* The [start, end) of the last length-delimited field @num of protobuf message @p (0, 0: none). */
static void find_field(const uint8_t *p, size_t n, unsigned num, size_t *start, size_t *end)
{
	size_t i = 0;

	*start = *end = 0;
	while (i < n) {
		uint64_t key = 0, v = 0;
		unsigned shift = 0;

		do
			key |= (uint64_t)(p[i] & 0x7f) << shift, shift += 7;
		while (p[i++] & 0x80);
		if ((key & 7) == 5 || (key & 7) == 1) {
			i += (key & 7) == 5 ? 4 : 8;
			continue;
		}
		shift = 0;
		do
			v |= (uint64_t)(p[i] & 0x7f) << shift, shift += 7;
		while (p[i++] & 0x80);
		if ((key & 7) == 0)
			continue;
		if (key >> 3 == num) {
			*start = i;
			*end = i + v;
		}
		i += v;
	}
}

/* Both real models load, encode and decode; the NFKC one normalizes. */
static void test_real_models(void **state)
{
	const char *path = t_path(dir, "u.model");
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	const int32_t *a, *b;
	size_t na, nb;

	(void)state;
	assert_int_equal(try_model(model[0], model_len[0]), 0);
	assert_int_equal(try_model(model[1], model_len[1]), 0);
	assert_int_equal(t_write_file(path, model[0], model_len[0]), 0);
	assert_int_equal(grist_tokenizer_open(path, NULL, &t), 0);
	assert_int_equal(grist_tokenizer_ctx_create(t, &c), 0);
	/* NFKC: the full-width "ＡＢ" encodes as "AB" does */
	assert_int_equal(grist_tokenizer_encode(c, "\xef\xbc\xa1\xef\xbc\xa2", 6, 0, &a, &na), 0);
	{
		int32_t first[64];

		assert_true(na < 64);
		memcpy(first, a, na * sizeof(*a));
		assert_int_equal(grist_tokenizer_encode(c, "AB", 2, 0, &b, &nb), 0);
		assert_int_equal(na, nb);
		assert_memory_equal(first, b, na * sizeof(*a));
	}
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
}

/* Cut short anywhere, empty, or a length that claims more than the file holds: refused. */
static void test_truncated(void **state)
{
	uint8_t *m;
	size_t i, cut;

	(void)state;
	for (i = 0; i < 2; i++) {
		for (cut = 0; cut < model_len[i]; cut += 1 + cut / 7)
			assert_int_equal(try_model(model[i], cut), -EBADMSG);
		assert_int_equal(try_model(model[i], model_len[i] - 1), -EBADMSG);
	}
	assert_int_equal(try_model(model[0], 0), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "the file is empty"));
	/* the first piece's length (bytes 1..) rewritten as 2^32 - 1 */
	m = malloc(model_len[0] + 8);
	assert_non_null(m);
	m[0] = model[0][0];
	memcpy(m + 1, "\xff\xff\xff\xff\x0f", 5);
	memcpy(m + 6, model[0] + 2, model_len[0] - 2);
	assert_int_equal(try_model(m, model_len[0] + 4), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "a length of 4294967295 bytes runs past the end"));
	free(m);
}

/*
 * Seeded random bytes changed, anywhere in the file or only in the normalizer's charsmap (a
 * copy of which is also the denormalizer here): each model is refused cleanly or works.
 * Deterministic: the same cases every run.
 */
static void test_corrupt(void **state)
{
	size_t loaded = 0, refused = 0, i;
	uint64_t s = 42;

	(void)state;
	for (i = 0; i < 2; i++) {
		size_t ns, ne, n = model_len[i], k, round;
		uint8_t *m = malloc(n + 8 + (n - 0)), *denorm;

		assert_non_null(m);
		find_field(model[i], n, 3, &ns, &ne);
		assert_true(ne > ns);
		/* the same normalizer_spec again as field 5: a denormalizer the library uses on decode */
		memcpy(m, model[i], n);
		denorm = m + n;
		denorm[0] = 5 << 3 | 2;
		k = 1;
		{
			size_t len = ne - ns;

			while (len >= 0x80) {
				denorm[k++] = (uint8_t)(len | 0x80);
				len >>= 7;
			}
			denorm[k++] = (uint8_t)len;
		}
		memcpy(denorm + k, model[i] + ns, ne - ns);
		n += k + (ne - ns);
		assert_int_equal(try_model(m, n), 0);
		for (round = 0; round < 300; round++) {
			uint8_t *b = malloc(n);
			size_t lo = round % 2 ? ns : 0, hi = round % 2 ? ne : n, flips = 1 + round % 20, j;

			assert_non_null(b);
			memcpy(b, m, n);
			for (j = 0; j < flips; j++) {
				s = s * 6364136223846793005ull + 1442695040888963407ull;
				b[lo + (s >> 33) % (hi - lo)] = (uint8_t)(s >> 21);
			}
			if (try_model(b, n) == 0)
				loaded++;
			else
				refused++;
			free(b);
		}
		free(m);
	}
	/* both outcomes happen: the cases reach past the checks into the library */
	print_message("corrupt models: %zu loaded and encoded, %zu refused\n", loaded, refused);
	assert_true(loaded > 20 && refused > 20);
}

/*
 * Changes that crash Debian's library when it gets the file unchecked, each refused by name:
 * the charsmap trie's root sent past the array (a segfault on the first encode), the string of
 * its last value without its NUL (strlen runs past the blob), a piece that begins with a NUL (an empty darts-clone key: the library's
 * Load throws).
 */
static void test_crafted(void **state)
{
	size_t n = model_len[0], ns, ne, cs, ce, ps, pe, qs, qe;
	uint8_t *m = malloc(n);

	(void)state;
	assert_non_null(m);
	find_field(model[0], n, 3, &ns, &ne);
	find_field(model[0] + ns, ne - ns, 2, &cs, &ce);
	cs += ns;
	ce += ns;
	assert_true(ce - cs > 1024);
	memcpy(m, model[0], n);
	memcpy(m + cs + 4, "\x00\xfc\xff\xff", 4); /* unit 0: offset 0x3fffff */
	assert_int_equal(try_model(m, n), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "the normalizer's charsmap trie reaches node"));
	memcpy(m, model[0], n);
	m[ce - 1] = 'x';
	assert_int_equal(try_model(m, n), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "past the last NUL-terminated string"));
	memcpy(m, model[0], n);
	find_field(model[0], n, 1, &ps, &pe); /* the last piece: a normal one */
	find_field(model[0] + ps, pe - ps, 1, &qs, &qe);
	m[ps + qs] = 0;
	assert_int_equal(try_model(m, n), -EBADMSG);
	assert_non_null(strstr(grist_last_error(), "contains a NUL byte"));
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_models),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_crafted),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
