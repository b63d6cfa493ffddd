/*
 * The native SentencePiece encoders (src/text/spm_bpe.c, src/text/spm_unigram.c) against
 * Debian's libsentencepiece itself: BPE and Unigram models trained here by the library's own
 * trainer (spm_train.cc) with the settings the native path implements, each text encoded both
 * ways, the ids compared one by one. Unigram is compared with 0.1.97's tie rule (Debian's
 * library; tests/python/test_text.py holds the default, PyPI's rule, to PyPI's wheel), and the
 * default rule is checked to differ from it only between paths of equal score.
 * Texts: mixed scripts, NFKC-affected characters, runs of whitespace, user-defined pieces,
 * characters no piece covers (byte fallback, or runs of <unk>), and every 101st code point
 * alone and in 4 contexts.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "grist/text.h"
#include "text/text_internal.h"

int t_spm_train(const char *args);

static char *dir;

/* The models: a name and the trainer's flags past --input, --model_prefix (BPE unless they say). */
static const char *const models[][2] = {
	/* as MaxText's users train them: byte fallback, split digits, the NFKC charsmap */
	{ "fallback", "--byte_fallback=true --split_digits=true --character_coverage=0.99 --vocab_size=400" },
	/* no byte fallback (runs of unknowns are one <unk>), user-defined pieces, spaces kept, suffix whitespace */
	{ "plain", "--character_coverage=0.98 --vocab_size=350 --user_defined_symbols=<sep>,kato,\xe2\x96\x81qu "
		   "--remove_extra_whitespaces=false --treat_whitespace_as_suffix=true" },
	/* no byte fallback, words apart: a run of unknowns that crosses words is one <unk> */
	{ "unk", "--character_coverage=0.98 --vocab_size=350 --user_defined_symbols=<sep>,kato" },
	/* no charsmap, no dummy prefix */
	{ "identity", "--byte_fallback=true --normalization_rule_name=identity --add_dummy_prefix=false "
		      "--vocab_size=500 --character_coverage=0.995" },
	/* Unigram: the NFKC charsmap, unknowns as <unk> (runs of them one) */
	{ "uni", "--model_type=unigram --character_coverage=0.98 --vocab_size=400" },
	/* Unigram with byte fallback, split digits and user-defined pieces (their bonus score) */
	{ "uni_fallback", "--model_type=unigram --byte_fallback=true --split_digits=true --vocab_size=450 "
			  "--character_coverage=0.98 --user_defined_symbols=<sep>,kato,\xe2\x96\x81qu" },
	/* Unigram, identity normalizer, spaces kept, whitespace as suffix, no dummy prefix */
	{ "uni_identity", "--model_type=unigram --normalization_rule_name=identity --add_dummy_prefix=false "
			  "--remove_extra_whitespaces=false --treat_whitespace_as_suffix=true --vocab_size=500 "
			  "--character_coverage=0.995" },
};
#define N_MODELS (sizeof(models) / sizeof(models[0]))

static void write_corpus(const char *path)
{
	static const char *const words[] = { "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "data",
					     "caf\xc3\xa9", "\xef\xac\x81le", "12", "2048", "\xe6\x97\xa5\xe6\x9c\xac",
					     "\xd8\xa7\xd9\x84\xd8\xb9", "\xef\xbc\xa1\xef\xbc\xa2", "\xe2\x91\xa0", "it's",
					     "===", "->", "(x)", "\xe0\xa4\xb9\xe0\xa4\xbf", "<sep>", "  " };
	static const char *const syl[] = { "ka", "to", "ri", "ne", "mu", "sha", "el", "on", "ist", "qu" };
	FILE *f = fopen(path, "w");
	uint64_t s = 7;

	assert_non_null(f);
	for (int i = 0; i < 2000; i++) {
		for (int k = 0; k < 12; k++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			fputs(k ? " " : "", f);
			if (s >> 60 & 1)
				for (unsigned m = 1 + (unsigned)(s >> 40) % 4; m--;)
					fputs(syl[(s >> (8 + 4 * m)) % 10], f);
			else
				fputs(words[(s >> 33) % (sizeof(words) / sizeof(words[0]))], f);
		}
		fputc('\n', f);
	}
	fclose(f);
}

static int setup(void **state)
{
	char args[1024];

	(void)state;
	dir = t_mkdtemp();
	write_corpus(t_path(dir, "corpus.txt"));
	for (size_t i = 0; i < N_MODELS; i++) {
		char prefix[512];

		snprintf(prefix, sizeof(prefix), "%s", t_path(dir, models[i][0]));
		snprintf(args, sizeof(args), "--input=%s --model_prefix=%s %s %s --num_threads=1 "
			 "--minloglevel=2 --hard_vocab_limit=false", t_path(dir, "corpus.txt"), prefix,
			 strstr(models[i][1], "--model_type") ? "" : "--model_type=bpe", models[i][1]);
		if (t_spm_train(args))
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	t_rmtree(dir);
	return 0;
}

/* One code point as UTF-8 into @out: its length. */
static size_t utf8(uint32_t c, char *out)
{
	if (c < 0x80)
		return out[0] = (char)c, 1;
	if (c < 0x800)
		return out[0] = (char)(0xc0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3f)), 2;
	if (c < 0x10000)
		return out[0] = (char)(0xe0 | c >> 12), out[1] = (char)(0x80 | (c >> 6 & 0x3f)),
		       out[2] = (char)(0x80 | (c & 0x3f)), 3;
	return out[0] = (char)(0xf0 | c >> 18), out[1] = (char)(0x80 | (c >> 12 & 0x3f)),
	       out[2] = (char)(0x80 | (c >> 6 & 0x3f)), out[3] = (char)(0x80 | (c & 0x3f)), 4;
}

struct pair {
	struct grist_spm *lib;
	struct grist_spm_native *nat;
	struct grist_spm_scratch s;
	struct grist_ids a, b, c;
	char *da, *dc;
	size_t da_cap, dc_cap;
	size_t texts, left; /* texts compared; texts the native path left to the library */
	size_t ties;        /* Unigram: texts where PyPI's rule and 0.1.97's give other (equal-score) paths */
};

/* A Unigram path's score as 0.1.97's rule sums it (an unknown character, maybe as its bytes: min - 10). */
static double path_score(const struct grist_spm_native *m, const int32_t *ids, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++) {
		size_t len;
		const uint8_t *p = grist_vocab_bytes(&m->vocab, (uint32_t)ids[i], &len);

		if (ids[i] == m->unk_id)
			sum += m->min_score - 10.0f;
		else if (m->type[ids[i]] == 6 /* BYTE: <0xNN>, one per byte of an unknown character */)
			sum += (strtol((const char *)p + 3, NULL, 16) & 0xc0) == 0x80 ? 0 : m->min_score - 10.0f;
		else if (m->type[ids[i]] == 4 /* USER_DEFINED */)
			sum += (double)((float)len * m->max_score) - 0.1;
		else
			sum += m->score[ids[i]];
	}
	return sum;
}

/* Unigram: PyPI's rule gives the library's ids, or another path of the same text and score. */
static void same_unigram(struct pair *p, const char *text, size_t len)
{
	size_t la, lc;

	p->c.n = 0;
	p->nat->ties_0197 = false;
	assert_int_equal(grist_spm_native_encode(p->nat, &p->s, (const uint8_t *)text, len, &p->c), 0);
	p->nat->ties_0197 = true;
	if (p->c.n == p->a.n && !memcmp(p->c.v, p->a.v, p->a.n * sizeof(int32_t)))
		return;
	p->ties++;
	assert_int_equal(grist_spm_decode(p->lib, p->a.v, p->a.n, &p->da, &p->da_cap, &la), 0);
	assert_int_equal(grist_spm_decode(p->lib, p->c.v, p->c.n, &p->dc, &p->dc_cap, &lc), 0);
	assert_int_equal(la, lc);
	assert_memory_equal(p->da, p->dc, la);
	assert_true(fabs(path_score(p->nat, p->a.v, p->a.n) - path_score(p->nat, p->c.v, p->c.n)) < 1e-3);
}

/* Encode @text both ways: the ids must be the same. */
static void same(struct pair *p, const char *text, size_t len)
{
	int ret;

	p->a.n = p->b.n = 0;
	assert_int_equal(grist_spm_encode(p->lib, text, len, &p->a), 0);
	ret = grist_spm_native_encode(p->nat, &p->s, (const uint8_t *)text, len, &p->b);
	assert_true(ret == 0 || ret == 1);
	p->texts++;
	if (ret == 1) {
		p->left++;
		return;
	}
	if (p->a.n != p->b.n || memcmp(p->a.v, p->b.v, p->a.n * sizeof(int32_t))) {
		size_t i = 0;

		while (i < p->a.n && i < p->b.n && p->a.v[i] == p->b.v[i])
			i++;
		fail_msg("%zu bytes \"%.60s\": the library gives %zu ids, native %zu; first difference at %zu", len, text,
			 p->a.n, p->b.n, i);
	}
	if (p->nat->model_type == 1)
		same_unigram(p, text, len);
}

static void test_native_equals_library(void **state)
{
	static const char *const frag[] = { "ka", "to", "qu", "kato", " ", "  ", "\t", "\n", "\r\n", "12", "2026",
					    "caf\xc3\xa9", "cafe\xcc\x81", "\xe6\x97\xa5\xe6\x9c\xac", "<sep>", "<se",
					    "\xef\xbc\xa1\xef\xbc\xa2", "\xef\xac\x81", "\xe2\x80\x8d", "\xf0\x9f\x91\xa9",
					    "\x01", "\xe3\x80\x80", "\xc2\xa0", "\xe2\x96\x81", "the", "dog", "'s", "\xe2\x91\xa0",
					    "\xd8\xa7\xd9\x84", "\xea\xb0\x80", "\x00", "==", "->", "\xe0\xa4\xb9\xe0\xa4\xbf" };
	static const char *const ctx[][2] = { { "", "" }, { " ", "" }, { "a", " " }, { "", "1 x" } };
	char *buf = malloc(1 << 16);
	uint64_t s = 12345;

	(void)state;
	assert_non_null(buf);
	for (size_t m = 0; m < N_MODELS; m++) {
		char name[64];
		uint8_t *data;
		size_t len;
		struct pair p = { 0 };

		snprintf(name, sizeof(name), "%s.model", models[m][0]);
		data = t_read_file(t_path(dir, name), &len);
		assert_non_null(data);
		assert_int_equal(grist_spm_open(name, data, len, &p.lib), 0);
		assert_int_equal(grist_spm_native_open(name, data, len, &p.nat), 0); /* 0: natively */
		p.nat->ties_0197 = true; /* Debian's library is 0.1.97 */
		free(data);
		/* random mixes of the fragments, up to 60 of them */
		for (int i = 0; i < 1500; i++) {
			size_t n = 0;

			s = s * 6364136223846793005ull + 1442695040888963407ull;
			for (unsigned k = (unsigned)(s >> 58); k--;) {
				const char *f;

				s = s * 6364136223846793005ull + 1442695040888963407ull;
				f = frag[(s >> 33) % (sizeof(frag) / sizeof(frag[0]))];
				memcpy(buf + n, f, *f ? strlen(f) : 1); /* "\x00": one NUL */
				n += *f ? strlen(f) : 1;
			}
			same(&p, buf, n);
		}
		/* a long run of one character and of spaces: the agenda's worst case */
		memset(buf, 'a', 20000);
		same(&p, buf, 20000);
		memset(buf, ' ', 20000);
		same(&p, buf, 20000);
		/* every 101st code point, alone and in contexts */
		for (uint32_t c = (uint32_t)m; c < 0x110000; c += 101) {
			char cp[5];
			size_t cl;

			if (c >= 0xd800 && c <= 0xdfff)
				continue;
			cl = utf8(c, cp);
			for (size_t k = 0; k < sizeof(ctx) / sizeof(ctx[0]); k++) {
				size_t n = strlen(ctx[k][0]);

				memcpy(buf, ctx[k][0], n);
				memcpy(buf + n, cp, cl);
				memcpy(buf + n + cl, ctx[k][1], strlen(ctx[k][1]));
				same(&p, buf, n + cl + strlen(ctx[k][1]));
			}
		}
		print_message("%s: %zu texts, native ids == the library's (%zu left to the library)\n", models[m][0],
			      p.texts, p.left);
		if (p.nat->model_type == 1)
			print_message("%s: PyPI's tie rule gives another path of equal score in %zu texts\n", models[m][0],
				      p.ties);
		assert_int_equal(p.left, 0);
		assert_true(p.ties < p.texts / 50);
		grist_spm_scratch_free(&p.s);
		free(p.a.v);
		free(p.b.v);
		free(p.c.v);
		free(p.da);
		free(p.dc);
		grist_spm_native_close(p.nat);
		grist_spm_close(p.lib);
	}
	free(buf);
}

/* The public API: the native path by default, the library with sentencepiece_library. */
static void option(const char *model)
{
	struct grist_tokenizer_options o;
	struct grist_tokenizer *t[2];
	struct grist_tokenizer_ctx *c[2];
	const char *text = "  the quick  kato<sep>\xef\xac\x81le 2048 \xf0\x9f\x91\xa9 ";
	const int32_t *ids[2];
	size_t n[2];
	char path[512];

	snprintf(path, sizeof(path), "%s", t_path(dir, model));
	for (int i = 0; i < 2; i++) {
		grist_tokenizer_options_init(&o);
		o.sentencepiece_library = i;
		assert_int_equal(grist_tokenizer_open(path, &o, &t[i]), 0);
		assert_int_equal(grist_tokenizer_ctx_create(t[i], &c[i]), 0);
		assert_int_equal(grist_tokenizer_encode(c[i], text, strlen(text), 0, &ids[i], &n[i]), 0);
	}
	assert_int_equal(n[0], n[1]);
	assert_memory_equal(ids[0], ids[1], n[0] * sizeof(int32_t));
	/* on 2 threads, each with its own scratch and word cache, the same ids as one at a time */
	{
		enum { N = 64 };
		const void *tv[N];
		size_t lens[N];
		char bufs[N][48];
		struct grist_token_batch b;

		for (size_t i = 0; i < N; i++) {
			lens[i] = (size_t)snprintf(bufs[i], sizeof(bufs[i]), "the %zu quick kato  fox %zu\xef\xac\x81", i % 7,
						   i * 37);
			tv[i] = bufs[i];
		}
		assert_int_equal(grist_tokenizer_encode_batch(t[0], tv, lens, N, 0, 2, &b), 0);
		for (size_t i = 0; i < N; i++) {
			assert_int_equal(grist_tokenizer_encode(c[1], tv[i], lens[i], 0, &ids[1], &n[1]), 0);
			assert_int_equal(b.offsets[i + 1] - b.offsets[i], n[1]);
			assert_memory_equal(b.ids + b.offsets[i], ids[1], n[1] * sizeof(int32_t));
		}
		grist_token_batch_free(&b);
	}
	for (int i = 0; i < 2; i++) {
		grist_tokenizer_ctx_destroy(c[i]);
		grist_tokenizer_close(t[i]);
	}
}

/* The same for a BPE and a Unigram model (each one's ids on this text are no tie). */
static void test_option(void **state)
{
	(void)state;
	option("fallback.model");
	option("uni_fallback.model");
}

/* What the native path does not implement is the library's: a CHAR model, whole. */
static void test_not_native(void **state)
{
	char args[1024];
	uint8_t *data;
	size_t len;
	struct grist_spm_native *nat = (struct grist_spm_native *)&len;

	(void)state;
	snprintf(args, sizeof(args), "--input=%s --model_prefix=%s --model_type=char --num_threads=1 "
		 "--minloglevel=2", t_path(dir, "corpus.txt"), t_path(dir, "chr"));
	assert_int_equal(t_spm_train(args), 0);
	data = t_read_file(t_path(dir, "chr.model"), &len);
	assert_non_null(data);
	assert_int_equal(grist_spm_check("chr.model", data, len), 0);
	assert_int_equal(grist_spm_native_open("chr.model", data, len, &nat), 1);
	assert_null(nat);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_native_equals_library),
		cmocka_unit_test(test_option),
		cmocka_unit_test(test_not_native),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
