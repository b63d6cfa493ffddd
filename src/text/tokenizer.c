/* The tokenizer API (grist/text.h): open a ranks file or a SentencePiece model, encode on contexts, batches on threads. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/cpus.h"
#include "common/error.h"
#include "common/thread.h"
#include "text/text_internal.h"
#include <xxhash.h>

#define SPECIAL_MAX 65536
#define BATCH_THREADS_MAX 64

struct special {
	char *text;
	size_t len;
	int32_t id;
};

/*
 * The special tokens as a trie, for one left-to-right scan of a text: root[b] is the node of
 * first byte b (-1: no special token begins with b), children are a sibling list. A scan
 * point whose byte begins none costs one table look-up; one that does costs at most the
 * longest token's length, whatever the number of tokens (tekken has 1000).
 */
struct special_node {
	int32_t child, sibling; /* node indexes, -1: none */
	int32_t special;        /* the token that ends here, -1: none */
	uint8_t byte;
};

struct grist_tokenizer {
	enum grist_tokenizer_kind kind;
	struct grist_vocab vocab;
	struct grist_split *split;
	struct special *special;
	size_t n_special;
	int32_t special_root[256];
	struct special_node *special_nodes;
	size_t n_special_nodes, special_nodes_cap;
	struct grist_spm *spm;
	struct grist_spm_native *spm_native; /* SentencePiece BPE encoded natively; NULL: by the library */
	uint64_t vocab_size;
	uint64_t id;
	uint32_t offset;             /* tekken: an ordinary token's id is its rank + offset */
	int32_t bos_id, eos_id, pad_id, unk_id;
	char *tekken_pattern;
};

struct grist_tokenizer_ctx {
	const struct grist_tokenizer *t;
	struct grist_split_state *st;
	struct grist_bpe_scratch bpe;
	struct grist_spm_scratch spm;
	struct grist_ids ids;
	char *text;
	size_t text_cap;
};

void grist_tokenizer_options_init(struct grist_tokenizer_options *o)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
}

size_t grist_utf8_check(const uint8_t *p, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = p[i];
		size_t n, k;
		uint32_t cp, min;

		if (c < 0x80) {
			i++;
			/* most text is ASCII: skip it 8 bytes at a time */
			while (i + 8 <= len) {
				uint64_t w;

				memcpy(&w, p + i, 8);
				if (w & 0x8080808080808080ull)
					break;
				i += 8;
			}
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
			min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
			min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
			min = 0x10000;
		} else {
			return i;
		}
		if (len - i <= n)
			return i;
		for (k = 1; k <= n; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return i;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += n + 1;
	}
	return len;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/* A new trie node for @byte, its index; -1 without memory. */
static int32_t special_node_new(struct grist_tokenizer *t, uint8_t byte)
{
	struct special_node *n;

	if (t->n_special_nodes >= INT32_MAX)
		return -1;
	if (grist_array_reserve((void **)&t->special_nodes, &t->special_nodes_cap, t->n_special_nodes + 1, sizeof(*n)))
		return -1;
	n = &t->special_nodes[t->n_special_nodes];
	*n = (struct special_node){ .child = -1, .sibling = -1, .special = -1, .byte = byte };
	return (int32_t)t->n_special_nodes++;
}

/* Special token @i into the trie (the texts are distinct: add_specials refuses repeats). */
static int special_insert(struct grist_tokenizer *t, size_t i)
{
	const uint8_t *p = (const uint8_t *)t->special[i].text;
	int32_t *link = &t->special_root[p[0]], at = -1;

	for (size_t k = 0; k < t->special[i].len; k++) {
		int32_t n = k ? t->special_nodes[at].child : *link;

		while (n >= 0 && t->special_nodes[n].byte != p[k])
			n = t->special_nodes[n].sibling;
		if (n < 0) {
			if ((n = special_node_new(t, p[k])) < 0)
				return -1;
			if (k) {
				t->special_nodes[n].sibling = t->special_nodes[at].child;
				t->special_nodes[at].child = n;
			} else {
				*link = n;
			}
		}
		at = n;
	}
	t->special_nodes[at].special = (int32_t)i;
	return 0;
}

/* A special token's place in the caller's list, sorted by id or by text to find repeats. */
struct special_ref {
	const char *text;
	int32_t id;
	size_t i;
};

static int cmp_special_id(const void *a, const void *b)
{
	const struct special_ref *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_special_text(const void *a, const void *b)
{
	const struct special_ref *x = a, *y = b;
	int c = strcmp(x->text, y->text);

	return c ? c : x->i < y->i ? -1 : x->i > y->i;
}

/*
 * The first special token (in the caller's order) whose id or text an earlier one has: its
 * index into *later and the earliest such one into *earlier; 0 when none (n sorted twice, not
 * n^2 pairs: up to SPECIAL_MAX of them). -ENOMEM.
 */
static int find_repeat(const struct grist_special_token *sp, size_t n, size_t *later, size_t *earlier)
{
	struct special_ref *r = malloc((n ? n : 1) * sizeof(*r));
	size_t i, run = 0;
	int pass;

	if (!r)
		return -ENOMEM;
	*later = *earlier = n; /* none */
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < n; i++)
			r[i] = (struct special_ref){ sp[i].text, sp[i].id, i };
		qsort(r, n, sizeof(*r), pass ? cmp_special_text : cmp_special_id);
		for (i = 1; i < n; i++) {
			int same = pass ? !strcmp(r[i].text, r[i - 1].text) : r[i].id == r[i - 1].id;

			if (!same)
				run = i; /* the first (earliest) of a run of equal keys */
			else if (r[i].i < *later || (r[i].i == *later && r[run].i < *earlier))
				*later = r[i].i, *earlier = r[run].i;
		}
		run = 0;
	}
	free(r);
	return 0;
}

static int add_specials(struct grist_tokenizer *t, const struct grist_tokenizer_options *o)
{
	size_t i, later, earlier;

	if (o->n_special > SPECIAL_MAX)
		return grist_fail(-EINVAL, "%zu special tokens (at most %d)", o->n_special, SPECIAL_MAX);
	if (o->n_special && !o->special)
		return grist_fail(-EINVAL, "n_special is %zu but special is NULL", o->n_special);
	t->special = calloc(o->n_special ? o->n_special : 1, sizeof(*t->special));
	if (!t->special)
		return grist_fail(-ENOMEM, "no memory for the special tokens");
	for (i = 0; i < o->n_special; i++) {
		const char *text = o->special[i].text;
		size_t len = text ? strlen(text) : 0;

		if (!len || grist_utf8_check((const uint8_t *)text, len) != len)
			return grist_fail(-EINVAL, "special token %zu: its text must be non-empty UTF-8", i);
	}
	if (find_repeat(o->special, o->n_special, &later, &earlier))
		return grist_fail(-ENOMEM, "no memory for the special tokens");
	if (later < o->n_special)
		return grist_fail(-EINVAL, "special token '%s' (id %d) repeats '%s' (id %d)", o->special[later].text,
				  o->special[later].id, o->special[earlier].text, o->special[earlier].id);
	for (i = 0; i < o->n_special; i++) {
		const struct grist_special_token *s = &o->special[i];
		size_t len = strlen(s->text);

		if (s->id < 0 || ((uint32_t)s->id >= t->offset && (uint32_t)s->id - t->offset < t->vocab.n_ids &&
				  t->vocab.tok[s->id - t->offset]))
			return grist_fail(-EINVAL, "special token '%s': id %d is %s", s->text, s->id,
					  s->id < 0 ? "negative" : "also a rank of the ranks file");
		t->special[i].text = strdup(s->text);
		if (!t->special[i].text)
			return grist_fail(-ENOMEM, "no memory for the special tokens");
		t->special[i].len = len;
		t->special[i].id = s->id;
		t->n_special = i + 1;
		if ((uint64_t)s->id + 1 > t->vocab_size)
			t->vocab_size = (uint64_t)s->id + 1;
		if (special_insert(t, i))
			return grist_fail(-ENOMEM, "no memory for the special tokens");
	}
	return 0;
}

/* A tekken JSON: its vocabulary, pattern (unless one is given) and special tokens; ids offset. */
static int open_tekken(struct grist_tokenizer *t, const char *path, const struct grist_tokenizer_options *o)
{
	struct grist_tokenizer_options so;
	struct grist_tekken tk;
	int ret;

	if (o->n_special)
		return grist_fail(-EINVAL, "%s: a tekken file brings its own special tokens", path);
	ret = grist_tekken_load(path, &tk);
	if (ret)
		return ret;
	t->vocab = tk.vocab; /* moved: tekken_free leaves it */
	t->offset = tk.offset;
	t->vocab_size = (uint64_t)t->vocab.n_ids + t->offset;
	ret = grist_split_compile(o->pattern ? o->pattern : tk.pattern, &t->split);
	if (!ret) {
		grist_tokenizer_options_init(&so);
		so.special = tk.special;
		so.n_special = tk.n_special;
		ret = add_specials(t, &so);
	}
	if (!ret) {
		t->tekken_pattern = tk.pattern;
		tk.pattern = NULL;
		for (size_t i = 0; i < t->n_special; i++) {
			const char *s = t->special[i].text;
			int32_t id = t->special[i].id;

			if (!strcmp(s, "<s>"))
				t->bos_id = id;
			else if (!strcmp(s, "</s>"))
				t->eos_id = id;
			else if (!strcmp(s, "<pad>"))
				t->pad_id = id;
			else if (!strcmp(s, "<unk>"))
				t->unk_id = id;
		}
	}
	grist_tekken_free(&tk);
	return ret;
}

int grist_tokenizer_open(const char *path, const struct grist_tokenizer_options *opts, struct grist_tokenizer **out)
{
	struct grist_tokenizer_options o;
	struct grist_tokenizer *t;
	int ret;

	grist_tokenizer_options_init(&o);
	if (opts) {
		ret = grist_sized_in(&o, sizeof(o), opts, "grist_tokenizer_options");
		if (ret)
			return ret;
	}
	if (!path || !out)
		return grist_fail(-EINVAL, "grist_tokenizer_open: path and out must not be NULL");
	t = calloc(1, sizeof(*t));
	if (!t)
		return grist_fail(-ENOMEM, "no memory for a tokenizer");
	memset(t->special_root, 0xff, sizeof(t->special_root)); /* -1: no special token begins with the byte */
	if (ends_with(path, ".model")) {
		struct grist_tokenizer_info info = { .size = sizeof(info) };

		t->kind = GRIST_TOKENIZER_SENTENCEPIECE;
		if (o.pattern || o.n_special) {
			ret = grist_fail(-EINVAL, "%s: a SentencePiece model takes no pattern or special tokens", path);
			goto fail;
		}
		{
			uint8_t *file;
			size_t len;

			// read once: the bytes checked, loaded and hashed are the same
			ret = grist_text_read_file(path, INT_MAX, &file, &len);
			if (ret)
				goto fail;
			t->id = XXH3_64bits(file, len);
			ret = grist_spm_open(path, file, len, &t->spm);
			// the library stays for decode, other models and the odd text the native BPE leaves it
			if (!ret && !o.sentencepiece_library)
				ret = grist_spm_native_open(path, file, len, &t->spm_native);
			free(file);
			if (ret > 0)
				ret = 0;
			if (ret)
				goto fail;
		}
		grist_spm_info(t->spm, &info);
		t->vocab_size = info.vocab_size;
		*out = t;
		return 0;
	}
	t->kind = GRIST_TOKENIZER_TIKTOKEN;
	t->bos_id = t->eos_id = t->pad_id = t->unk_id = -1;
	if (ends_with(path, ".json")) {
		ret = open_tekken(t, path, &o);
		if (ret)
			goto fail;
	} else {
		ret = grist_split_compile(o.pattern ? o.pattern : "gpt2", &t->split);
		if (!ret)
			ret = grist_vocab_load(&t->vocab, path);
		if (ret)
			goto fail;
		t->vocab_size = t->vocab.n_ids;
		ret = add_specials(t, &o);
		if (ret)
			goto fail;
	}
	{
		uint64_t h = 0;
		const char *pat = o.pattern ? o.pattern : t->tekken_pattern ? t->tekken_pattern : "gpt2";

		h = XXH3_64bits_withSeed(&t->vocab.file_hash, sizeof(t->vocab.file_hash), h);
		h = XXH3_64bits_withSeed(pat, strlen(pat) + 1, h);
		for (size_t i = 0; i < t->n_special; i++) {
			h = XXH3_64bits_withSeed(t->special[i].text, t->special[i].len + 1, h);
			h = XXH3_64bits_withSeed(&t->special[i].id, sizeof(t->special[i].id), h);
		}
		t->id = h;
	}
	*out = t;
	return 0;
fail:
	grist_tokenizer_close(t);
	return ret;
}

void grist_tokenizer_close(struct grist_tokenizer *t)
{
	size_t i;

	if (!t)
		return;
	grist_vocab_free(&t->vocab);
	grist_split_free(t->split);
	for (i = 0; i < t->n_special; i++)
		free(t->special[i].text);
	free(t->special);
	free(t->special_nodes);
	free(t->tekken_pattern);
	if (t->spm)
		grist_spm_close(t->spm);
	grist_spm_native_close(t->spm_native);
	free(t);
}

void grist_tokenizer_get_info(const struct grist_tokenizer *t, struct grist_tokenizer_info *info)
{
	struct grist_tokenizer_info in = { .size = sizeof(in), .kind = t->kind, .vocab_size = t->vocab_size,
					   .bos_id = t->bos_id, .eos_id = t->eos_id, .pad_id = t->pad_id,
					   .unk_id = t->unk_id, .id = t->id };

	if (t->spm)
		grist_spm_info(t->spm, &in);
	in.size = info->size;
	grist_sized_out(info, info->size, &in, sizeof(in));
}

int grist_tokenizer_ctx_create(const struct grist_tokenizer *t, struct grist_tokenizer_ctx **out)
{
	struct grist_tokenizer_ctx *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return grist_fail(-ENOMEM, "no memory for a tokenizer context");
	c->t = t;
	if (t->split) {
		ret = grist_split_state_create(t->split, &c->st);
		if (ret) {
			free(c);
			return ret;
		}
	}
	*out = c;
	return 0;
}

void grist_tokenizer_ctx_destroy(struct grist_tokenizer_ctx *c)
{
	if (!c)
		return;
	grist_split_state_free(c->st);
	grist_bpe_scratch_free(&c->bpe);
	grist_spm_scratch_free(&c->spm);
	free(c->ids.v);
	free(c->text);
	free(c);
}

size_t grist_tokenizer_ctx_retained(const struct grist_tokenizer_ctx *c)
{
	return c->ids.cap * sizeof(*c->ids.v) + c->bpe.cap * 4 * sizeof(uint32_t) +
	       c->bpe.heap_cap * sizeof(*c->bpe.heap) + c->text_cap + grist_spm_scratch_bytes(&c->spm);
}

void grist_tokenizer_ctx_trim(struct grist_tokenizer_ctx *c, size_t keep)
{
	if (c->ids.cap * sizeof(*c->ids.v) > keep) {
		free(c->ids.v);
		c->ids = (struct grist_ids){ 0 };
	}
	if (c->bpe.cap * 4 * sizeof(uint32_t) + c->bpe.heap_cap * sizeof(*c->bpe.heap) > keep) {
		uint64_t work = c->bpe.work;

		grist_bpe_scratch_free(&c->bpe);
		c->bpe.work = work;
	}
	if (grist_spm_scratch_bytes(&c->spm) > keep) { /* the word cache (fixed size) stays */
		struct grist_bpe_cache_entry *cache = c->spm.cache;

		c->spm.cache = NULL;
		grist_spm_scratch_free(&c->spm);
		c->spm.cache = cache;
	}
	if (c->text_cap > keep) {
		free(c->text);
		c->text = NULL;
		c->text_cap = 0;
	}
}

/* encode_ordinary() of text[at, end): split, then merge each piece. */
static int encode_ordinary(struct grist_tokenizer_ctx *c, const uint8_t *text, size_t at, size_t end)
{
	size_t s, e, first = c->ids.n;
	int ret;

	while ((ret = grist_split_next(c->st, text, end, at, &s, &e)) == 1) {
		ret = grist_bpe_encode_piece(&c->t->vocab, &c->bpe, text + s, e - s, GRIST_BPE_SCAN_MAX, &c->ids);
		if (ret)
			return ret;
		at = e;
	}
	for (; c->t->offset && first < c->ids.n; first++)
		c->ids.v[first] += (int32_t)c->t->offset;
	return ret;
}

/*
 * The next special token at or after @at, or -1 (*@start: where it begins). Leftmost, and the
 * longest there: tiktoken matches an alternation of its specials, leftmost too, but which of
 * two that begin at one place wins follows its hash map's order; the longest is the stable
 * choice, and the same wherever no special token is a prefix of another.
 */
static long next_special(const struct grist_tokenizer *t, const uint8_t *text, size_t len, size_t at, size_t *start)
{
	for (size_t i = at; i < len; i++) {
		int32_t n = t->special_root[text[i]];
		long best = -1;

		for (size_t k = i; n >= 0;) {
			const struct special_node *nd = &t->special_nodes[n];

			if (nd->special >= 0)
				best = nd->special;
			if (++k == len)
				break;
			for (n = nd->child; n >= 0 && t->special_nodes[n].byte != text[k];)
				n = t->special_nodes[n].sibling;
		}
		if (best >= 0) {
			*start = i;
			return best;
		}
	}
	return -1;
}

int grist_tokenizer_encode(struct grist_tokenizer_ctx *c, const void *text, size_t len, unsigned flags,
			   const int32_t **ids, size_t *n)
{
	const struct grist_tokenizer *t = c->t;
	const uint8_t *p = text;
	size_t bad, at = 0;
	int ret;

	if (flags & ~GRIST_ENCODE_ALLOW_SPECIAL)
		return grist_fail(-EINVAL, "grist_tokenizer_encode: unknown flags 0x%x", flags);
	c->ids.n = 0;
	c->bpe.work = 0;
	bad = grist_utf8_check(p, len);
	if (bad != len)
		return grist_fail(-EILSEQ, "byte %zu: invalid UTF-8 (0x%02x)", bad, p[bad]);
	if (t->spm_native && (ret = grist_spm_native_encode(t->spm_native, &c->spm, p, len, &c->ids)) <= 0) {
		/* done natively (or failed) */
	} else if (t->spm) {
		c->ids.n = 0; /* a text the native path left to the library */
		ret = grist_spm_encode(t->spm, text, len, &c->ids);
	} else if ((flags & GRIST_ENCODE_ALLOW_SPECIAL) && t->n_special) {
		/* tiktoken's encode(): ordinary text up to the next special token, the token, and on */
		ret = 0;
		while (!ret && at < len) {
			size_t start;
			long s = next_special(t, p, len, at, &start);

			if (s < 0) {
				ret = encode_ordinary(c, p, at, len);
				break;
			}
			ret = encode_ordinary(c, p, at, start);
			if (!ret && !(ret = grist_ids_reserve(&c->ids, 1)))
				c->ids.v[c->ids.n++] = t->special[s].id;
			at = start + t->special[s].len;
		}
	} else {
		ret = encode_ordinary(c, p, 0, len);
	}
	if (ret)
		return ret;
	*ids = c->ids.v;
	*n = c->ids.n;
	return 0;
}

static const struct special *special_of(const struct grist_tokenizer *t, int32_t id)
{
	size_t i;

	for (i = 0; i < t->n_special; i++)
		if (t->special[i].id == id)
			return &t->special[i];
	return NULL;
}

int grist_tokenizer_decode(struct grist_tokenizer_ctx *c, const int32_t *ids, size_t n, const char **text,
			   size_t *len)
{
	const struct grist_tokenizer *t = c->t;
	size_t i, o = 0;
	int ret;

	if (t->spm) {
		ret = grist_spm_decode(t->spm, ids, n, &c->text, &c->text_cap, len);
		if (!ret)
			*text = c->text;
		return ret;
	}
	for (i = 0; i < n; i++) {
		const struct special *sp = NULL;
		const uint8_t *b = NULL;
		size_t bl = 0;

		if (ids[i] >= (int32_t)t->offset)
			b = grist_vocab_bytes(&t->vocab, (uint32_t)ids[i] - t->offset, &bl);
		if (!bl && ids[i] >= 0 && (sp = special_of(t, ids[i]))) {
			b = (const uint8_t *)sp->text;
			bl = sp->len;
		}
		if (!bl)
			return grist_fail(-EINVAL, "id %zu of %zu: %d is no token of this vocabulary", i, n, ids[i]);
		if (grist_array_reserve((void **)&c->text, &c->text_cap, o + bl + 1, 1))
			return -ENOMEM;
		memcpy(c->text + o, b, bl);
		o += bl;
	}
	if (grist_array_reserve((void **)&c->text, &c->text_cap, o + 1, 1))
		return -ENOMEM;
	c->text[o] = '\0';
	*text = c->text;
	*len = o;
	return 0;
}

/* encode_batch: workers take texts in order from one counter; each result goes to its own slot. */
struct batch_job {
	const struct grist_tokenizer *t;
	const void *const *texts;
	const size_t *lens;
	size_t n;
	unsigned flags;
	int32_t **res;
	size_t *res_n;
	atomic_size_t next;
	atomic_size_t fail_at; /* the lowest failed index so far (n: none) */
	pthread_mutex_t fail_lock;
	int fail_code;
	char fail_msg[512];
	bool fail_setup; /* a worker could not make its context: fail_at 0 names no text */
};

static void record_failure(struct batch_job *j, size_t i, int code)
{
	pthread_mutex_lock(&j->fail_lock);
	if (i < atomic_load(&j->fail_at)) {
		atomic_store(&j->fail_at, i);
		j->fail_code = code;
		snprintf(j->fail_msg, sizeof(j->fail_msg), "%s", grist_last_error());
	}
	pthread_mutex_unlock(&j->fail_lock);
}

static void *batch_worker(void *arg)
{
	struct batch_job *j = arg;
	struct grist_tokenizer_ctx *c;
	size_t i;
	int ret = grist_tokenizer_ctx_create(j->t, &c);

	if (ret) {
		/* no text is at fault: stop every worker, and say so (fail_setup) */
		pthread_mutex_lock(&j->fail_lock);
		if (atomic_load(&j->fail_at) > 0) {
			atomic_store(&j->fail_at, 0);
			j->fail_code = ret;
			j->fail_setup = true;
			snprintf(j->fail_msg, sizeof(j->fail_msg), "%s", grist_last_error());
		}
		pthread_mutex_unlock(&j->fail_lock);
		return NULL;
	}
	/* texts past a failure are not wanted: the call reports the first failing one only */
	while ((i = atomic_fetch_add(&j->next, 1)) < j->n && i < atomic_load(&j->fail_at)) {
		const int32_t *ids;
		size_t n;

		ret = grist_tokenizer_encode(c, j->texts[i], j->lens[i], j->flags, &ids, &n);
		if (!ret) {
			j->res[i] = malloc((n ? n : 1) * sizeof(int32_t));
			if (!j->res[i])
				ret = grist_fail(-ENOMEM, "no memory for the ids");
		}
		if (ret) {
			record_failure(j, i, ret);
			continue;
		}
		memcpy(j->res[i], ids, n * sizeof(int32_t));
		j->res_n[i] = n;
	}
	grist_tokenizer_ctx_destroy(c);
	return NULL;
}

void grist_token_batch_free(struct grist_token_batch *b)
{
	free(b->ids);
	free(b->offsets);
	memset(b, 0, sizeof(*b));
}

int grist_tokenizer_encode_batch(const struct grist_tokenizer *t, const void *const *texts, const size_t *lens,
				 size_t n, unsigned flags, unsigned threads, struct grist_token_batch *out)
{
	struct batch_job j = { .t = t, .texts = texts, .lens = lens, .n = n, .flags = flags };
	pthread_t tid[BATCH_THREADS_MAX];
	unsigned k, started = 0;
	uint64_t total = 0;
	size_t i;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	if (n && (!texts || !lens))
		return grist_fail(-EINVAL, "grist_tokenizer_encode_batch: texts and lens must not be NULL");
	if (!threads)
		threads = grist_cpus_allowed();
	if (threads > BATCH_THREADS_MAX)
		threads = BATCH_THREADS_MAX;
	if (threads > n)
		threads = n ? (unsigned)n : 1;
	j.res = calloc(n ? n : 1, sizeof(*j.res));
	j.res_n = calloc(n ? n : 1, sizeof(*j.res_n));
	out->offsets = malloc((n + 1) * sizeof(*out->offsets));
	if (!j.res || !j.res_n || !out->offsets) {
		ret = grist_fail(-ENOMEM, "no memory for a batch of %zu texts", n);
		goto out;
	}
	atomic_init(&j.next, 0);
	atomic_init(&j.fail_at, n);
	pthread_mutex_init(&j.fail_lock, NULL);
	/* the calling thread is worker 0; the others are started for this call only */
	for (k = 1; k < threads; k++) {
		if (grist_thread_start(&tid[k], batch_worker, &j))
			break;
		started++;
	}
	batch_worker(&j);
	for (k = 1; k <= started; k++)
		pthread_join(tid[k], NULL);
	pthread_mutex_destroy(&j.fail_lock);
	if (atomic_load(&j.fail_at) < n) {
		if (j.fail_setup)
			ret = grist_fail(j.fail_code, "a batch of %zu texts: a worker thread could not make its tokenizer "
					 "context (no text is at fault): %s", n, j.fail_msg);
		else
			ret = grist_fail(j.fail_code, "text %zu: %s", (size_t)atomic_load(&j.fail_at), j.fail_msg);
		goto out;
	}
	for (i = 0; i < n; i++)
		total += j.res_n[i];
	out->ids = malloc((total ? total : 1) * sizeof(int32_t));
	if (!out->ids) {
		ret = grist_fail(-ENOMEM, "no memory for %llu ids", (unsigned long long)total);
		goto out;
	}
	total = 0;
	for (i = 0; i < n; i++) {
		out->offsets[i] = total;
		memcpy(out->ids + total, j.res[i], j.res_n[i] * sizeof(int32_t));
		total += j.res_n[i];
	}
	out->offsets[n] = total;
	out->n = n;
out:
	if (j.res)
		for (i = 0; i < n; i++)
			free(j.res[i]);
	free(j.res);
	free(j.res_n);
	if (ret)
		grist_token_batch_free(out);
	return ret;
}
