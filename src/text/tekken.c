/* Mistral's tekken JSON: its config, its vocabulary (base64 bytes by rank) and its special tokens, read as mistral-common reads them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "text/text_internal.h"
#include <xxhash.h>

#define TEKKEN_FILE_MAX (1ull << 31)
#define JSON_DEPTH_MAX 64

struct jp {
	const char *p, *end, *path;
	const char *start;
};

static int jfail(struct jp *j, const char *what)
{
	return grist_fail(-EBADMSG, "%s: byte %zu: not a tekken JSON file: %s", j->path, (size_t)(j->p - j->start), what);
}

static void ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
		j->p++;
}

static int expect(struct jp *j, char c)
{
	ws(j);
	if (j->p >= j->end || *j->p != c) {
		char what[32];

		snprintf(what, sizeof(what), "expected '%c'", c);
		return jfail(j, what);
	}
	j->p++;
	return 0;
}

static void put_utf8(char *o, size_t *n, uint32_t cp)
{
	if (cp < 0x80) {
		o[(*n)++] = (char)cp;
	} else if (cp < 0x800) {
		o[(*n)++] = (char)(0xc0 | cp >> 6);
		o[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		o[(*n)++] = (char)(0xe0 | cp >> 12);
		o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		o[(*n)++] = (char)(0xf0 | cp >> 18);
		o[(*n)++] = (char)(0x80 | (cp >> 12 & 0x3f));
		o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[(*n)++] = (char)(0x80 | (cp & 0x3f));
	}
}

static int hex4(struct jp *j, uint32_t *v)
{
	*v = 0;
	for (int k = 0; k < 4; k++, j->p++) {
		char c = j->p < j->end ? *j->p : 0;

		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (uint32_t)(c - '0');
		else if ((c | 32) >= 'a' && (c | 32) <= 'f')
			*v |= (uint32_t)((c | 32) - 'a' + 10);
		else
			return jfail(j, "a bad \\u escape");
	}
	return 0;
}

/* A JSON string, unescaped into a malloc'd NUL-terminated buffer (@out may be NULL: skipped). */
static int jstring(struct jp *j, char **out, size_t *len)
{
	char *o = NULL;
	size_t n = 0;
	const char *q;

	if (expect(j, '"'))
		return -EBADMSG;
	for (q = j->p; q < j->end && *q != '"'; q++)
		if (*q == '\\')
			q++;
	if (q >= j->end)
		return jfail(j, "a string runs past the end");
	if (out && !(o = malloc((size_t)(q - j->p) + 1)))
		return grist_fail(-ENOMEM, "%s: no memory", j->path);
	while (*j->p != '"') {
		char c = *j->p++;

		if (c != '\\') {
			if (o)
				o[n++] = c;
			continue;
		}
		c = *j->p++;
		if (c == 'u') {
			uint32_t cp, lo;

			if (hex4(j, &cp))
				goto bad;
			if (cp >= 0xd800 && cp < 0xdc00 && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
				j->p += 2;
				if (hex4(j, &lo))
					goto bad;
				if (lo < 0xdc00 || lo > 0xdfff) {
					jfail(j, "a lone surrogate");
					goto bad;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xd800 && cp <= 0xdfff) {
				jfail(j, "a lone surrogate");
				goto bad;
			}
			/* a \\u escape is at most 6 bytes of input and gives at most 4 of UTF-8 */
			if (o)
				put_utf8(o, &n, cp);
			continue;
		}
		if (o) {
			static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
			const char *f = strchr(from, c);

			if (!f || !c) {
				jfail(j, "a bad escape");
				goto bad;
			}
			o[n++] = to[f - from];
		}
	}
	j->p++;
	if (o) {
		o[n] = '\0';
		*out = o;
		*len = n;
	}
	return 0;
bad:
	free(o);
	return -EBADMSG;
}

static int jint(struct jp *j, int64_t *v)
{
	bool neg = false;
	int64_t x = 0;
	int digits = 0;

	ws(j);
	if (j->p < j->end && *j->p == '-') {
		neg = true;
		j->p++;
	}
	for (; j->p < j->end && *j->p >= '0' && *j->p <= '9' && digits < 18; j->p++, digits++)
		x = x * 10 + (*j->p - '0');
	if (!digits || (j->p < j->end && ((*j->p >= '0' && *j->p <= '9') || *j->p == '.' || (*j->p | 32) == 'e')))
		return jfail(j, "expected an integer");
	*v = neg ? -x : x;
	return 0;
}

static int jskip(struct jp *j, int depth)
{
	ws(j);
	if (depth > JSON_DEPTH_MAX)
		return jfail(j, "nested too deeply");
	if (j->p >= j->end)
		return jfail(j, "a value runs past the end");
	if (*j->p == '"')
		return jstring(j, NULL, NULL);
	if (*j->p == '{' || *j->p == '[') {
		char close = *j->p == '{' ? '}' : ']';
		bool obj = close == '}';

		j->p++;
		ws(j);
		if (j->p < j->end && *j->p == close) {
			j->p++;
			return 0;
		}
		for (;;) {
			if (obj && (jstring(j, NULL, NULL) || expect(j, ':')))
				return -EBADMSG;
			if (jskip(j, depth + 1))
				return -EBADMSG;
			ws(j);
			if (j->p < j->end && *j->p == ',') {
				j->p++;
				continue;
			}
			return expect(j, close);
		}
	}
	/* a number, true, false or null */
	while (j->p < j->end && strchr("-+.0123456789eEtruefalsn", *j->p))
		j->p++;
	return 0;
}

/*
 * Iterate an object (@open '{': for each member, the key then @on_member, which must consume
 * the value) or an array ('[': @on_element per value). The one loop of both.
 */
typedef int (*member_fn)(struct jp *j, const char *key, void *arg);
typedef int (*element_fn)(struct jp *j, size_t i, void *arg);
static int jseq(struct jp *j, char open, member_fn on_member, element_fn on_element, void *arg)
{
	char close = open == '{' ? '}' : ']';

	if (expect(j, open))
		return -EBADMSG;
	ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return 0;
	}
	for (size_t i = 0;; i++) {
		int ret;

		if (open == '{') {
			char *key;
			size_t kl;

			ret = jstring(j, &key, &kl);
			if (ret)
				return ret;
			ret = expect(j, ':');
			if (!ret)
				ret = on_member(j, key, arg);
			free(key);
		} else {
			ret = on_element(j, i, arg);
		}
		if (ret)
			return ret;
		ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		return expect(j, close);
	}
}

static int jobject(struct jp *j, member_fn fn, void *arg)
{
	return jseq(j, '{', fn, NULL, arg);
}

static int jarray(struct jp *j, element_fn fn, void *arg)
{
	return jseq(j, '[', NULL, fn, arg);
}

struct tekken {
	char *pattern;
	int64_t vocab_size, num_special;
	/* vocab: "<base64> <rank>\n" lines of the first vocab_size - num_special entries */
	char *ranks;
	size_t ranks_len, ranks_cap, n_vocab;
	/* the entry being read */
	char *tok;
	size_t tok_len;
	int64_t rank;
	struct grist_special_token *special;
	size_t n_special;
};

static int config_member(struct jp *j, const char *key, void *arg)
{
	struct tekken *t = arg;
	size_t n;

	if (!strcmp(key, "pattern")) {
		free(t->pattern);
		t->pattern = NULL;
		return jstring(j, &t->pattern, &n);
	}
	if (!strcmp(key, "default_vocab_size"))
		return jint(j, &t->vocab_size);
	if (!strcmp(key, "default_num_special_tokens"))
		return jint(j, &t->num_special);
	return jskip(j, 1);
}

static int entry_member(struct jp *j, const char *key, void *arg)
{
	struct tekken *t = arg;

	if (!strcmp(key, "rank"))
		return jint(j, &t->rank);
	if (!strcmp(key, "token_bytes") || !strcmp(key, "token_str")) {
		bool bytes = !strcmp(key, "token_bytes");

		/* token_bytes for the vocabulary, token_str for the special tokens */
		if (bytes != (t->special == NULL))
			return jskip(j, 1);
		free(t->tok);
		t->tok = NULL;
		return jstring(j, &t->tok, &t->tok_len);
	}
	return jskip(j, 1);
}

static int vocab_entry(struct jp *j, size_t i, void *arg)
{
	struct tekken *t = arg;
	int ret;

	t->rank = -1;
	ret = jobject(j, entry_member, t);
	if (ret)
		return ret;
	if (!t->tok || t->rank != (int64_t)i) {
		free(t->tok);
		t->tok = NULL;
		return jfail(j, "a vocab entry without token_bytes, or whose rank is not its place");
	}
	/*
	 * The token goes into a "<base64> <rank>" line: anything but base64 in it (a space, a
	 * newline from a \n escape) would make other lines with ranks of their own.
	 */
	if (strspn(t->tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != t->tok_len) {
		free(t->tok);
		t->tok = NULL;
		return jfail(j, "a vocab entry's token_bytes is not base64");
	}
	/* mistral-common keeps the first default_vocab_size - default_num_special_tokens */
	if ((int64_t)i < t->vocab_size - t->num_special) {
		size_t need = t->ranks_len + t->tok_len + 24;

		if (need > t->ranks_cap) {
			size_t cap = t->ranks_cap ? t->ranks_cap * 2 : 1 << 20;
			char *r;

			while (cap < need)
				cap *= 2;
			r = realloc(t->ranks, cap);
			if (!r)
				return grist_fail(-ENOMEM, "%s: no memory", j->path);
			t->ranks = r;
			t->ranks_cap = cap;
		}
		t->ranks_len += (size_t)sprintf(t->ranks + t->ranks_len, "%s %zu\n", t->tok, i);
		t->n_vocab++;
	}
	free(t->tok);
	t->tok = NULL;
	return 0;
}

static int special_entry(struct jp *j, size_t i, void *arg)
{
	struct tekken *t = arg;
	struct grist_special_token *s;
	int ret;

	(void)i;
	t->rank = -1;
	ret = jobject(j, entry_member, t);
	if (ret)
		return ret;
	if (!t->tok || t->rank < 0 || t->rank >= t->num_special || t->n_special >= (size_t)t->num_special) {
		free(t->tok);
		t->tok = NULL;
		return jfail(j, "a special token without token_str, or with a rank past default_num_special_tokens");
	}
	s = &t->special[t->n_special++];
	s->text = t->tok;
	s->id = (int32_t)t->rank;
	t->tok = NULL;
	return 0;
}

static int top_member(struct jp *j, const char *key, void *arg)
{
	struct tekken *t = arg;

	if (!strcmp(key, "config"))
		return jobject(j, config_member, t);
	if (!strcmp(key, "vocab")) {
		if (t->vocab_size <= 0 || t->num_special < 0 || t->num_special >= t->vocab_size ||
		    t->num_special > 65536 || t->vocab_size > (1 << 30))
			return jfail(j, "the config (before the vocab) needs default_vocab_size > "
					"default_num_special_tokens >= 0");
		return jarray(j, vocab_entry, t);
	}
	if (!strcmp(key, "special_tokens")) {
		if (t->num_special <= 0)
			return jfail(j, "special_tokens before the config, or no default_num_special_tokens");
		t->special = calloc((size_t)t->num_special, sizeof(*t->special));
		if (!t->special)
			return grist_fail(-ENOMEM, "%s: no memory", j->path);
		return jarray(j, special_entry, t);
	}
	return jskip(j, 1);
}

/* mistral-common's special tokens of a file that lists none (Tekkenizer.DEPRECATED_SPECIAL_TOKENS). */
static const char *const deprecated_special[] = {
	"<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
	"[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
	"[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
};

static void tekken_free(struct tekken *t)
{
	for (size_t i = 0; t->special && i < (size_t)t->num_special; i++)
		free((char *)t->special[i].text);
	free(t->special);
	free(t->pattern);
	free(t->ranks);
	free(t->tok);
}

int grist_tekken_load(const char *path, struct grist_tekken *out)
{
	struct tekken t = { .vocab_size = -1, .num_special = -1 };
	struct jp j = { .path = path };
	uint8_t *file = NULL;
	size_t len = 0, i;
	int ret = grist_text_read_file(path, TEKKEN_FILE_MAX, &file, &len);

	memset(out, 0, sizeof(*out));
	if (ret)
		return ret;
	j.p = j.start = (const char *)file;
	j.end = j.p + len;
	ret = jobject(&j, top_member, &t);
	if (!ret && (!t.pattern || !t.n_vocab))
		ret = grist_fail(-EBADMSG, "%s: not a tekken JSON file: no config.pattern or no vocab", path);
	if (!ret && t.n_vocab != (size_t)(t.vocab_size - t.num_special))
		ret = grist_fail(-EBADMSG, "%s: the vocab has %zu entries, fewer than default_vocab_size - "
				 "default_num_special_tokens = %lld", path, t.n_vocab,
				 (long long)(t.vocab_size - t.num_special));
	if (!ret)
		ret = grist_vocab_parse(&out->vocab, path, (const uint8_t *)t.ranks, t.ranks_len);
	if (!ret)
		out->vocab.file_hash = XXH3_64bits(file, len);
	free(file);
	if (ret) {
		tekken_free(&t);
		return ret;
	}
	/* the special tokens: those listed (or the deprecated defaults), then <SPECIAL_n> fillers */
	if (!t.special) {
		t.special = calloc((size_t)t.num_special + 1, sizeof(*t.special));
		for (i = 0; t.special && i < sizeof(deprecated_special) / sizeof(deprecated_special[0]) &&
			    i < (size_t)t.num_special; i++) {
			t.special[i].text = strdup(deprecated_special[i]);
			t.special[i].id = (int32_t)i;
			t.n_special = i + 1;
		}
	}
	for (i = t.n_special; t.special && i < (size_t)t.num_special; i++) {
		char name[32];

		snprintf(name, sizeof(name), "<SPECIAL_%zu>", i);
		t.special[i].text = strdup(name);
		t.special[i].id = (int32_t)i;
	}
	for (i = 0; t.special && i < (size_t)t.num_special; i++)
		if (!t.special[i].text)
			break;
	if (!t.special || i < (size_t)t.num_special) {
		grist_vocab_free(&out->vocab);
		tekken_free(&t);
		return grist_fail(-ENOMEM, "%s: no memory", path);
	}
	out->pattern = t.pattern;
	out->special = t.special;
	out->n_special = (size_t)t.num_special;
	out->offset = (uint32_t)t.num_special;
	t.pattern = NULL;
	t.special = NULL;
	tekken_free(&t);
	return 0;
}

void grist_tekken_free(struct grist_tekken *t)
{
	for (size_t i = 0; t->special && i < t->n_special; i++)
		free((char *)t->special[i].text);
	free(t->special);
	free(t->pattern);
	memset(t, 0, sizeof(*t));
}
