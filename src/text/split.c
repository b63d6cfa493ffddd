/* The split pattern: tiktoken's regexes, by name or as written, compiled by PCRE2 (UTF + UCP, JIT). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "text/text_internal.h"

struct grist_split {
	pcre2_code *code;
	bool jit;
};

struct grist_split_state {
	const struct grist_split *s;
	pcre2_match_data *md;
	pcre2_match_context *mc;
	pcre2_jit_stack *stack;
};

/* The patterns in use, as their publishers write them (tiktoken_ext/openai_public.py, Meta's Llama 3, Mistral's tekken JSON). */
static const struct {
	const char *name, *regex;
} known[] = {
	{ "gpt2", "'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s" },
	{ "cl100k", "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+"
		    "|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s" },
	{ "o200k", "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
		   "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
		   "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
		   "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
		   "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
	{ "llama3", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
		    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
	{ "tekken", "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
		    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
		    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
};

/*
 * tiktoken's regexes run on Rust's regex crates, where \s is Unicode's White_Space property.
 * PCRE2's \s in UCP mode leaves out U+0085 and U+180E differs by version, so \s and \S are
 * spelled as the property itself (valid inside a class too). Everything else is copied.
 */
static char *translate(const char *re)
{
	size_t n = strlen(re), o = 0, i;
	char *out = malloc(n * 8 + 1);

	if (!out)
		return NULL;
	for (i = 0; i < n; i++) {
		if (re[i] == '\\' && i + 1 < n) {
			if (re[i + 1] == 's' || re[i + 1] == 'S') {
				o += (size_t)sprintf(out + o, "\\%c{White_Space}", re[i + 1] == 's' ? 'p' : 'P');
			} else {
				out[o++] = re[i];
				out[o++] = re[i + 1];
			}
			i++;
			continue;
		}
		out[o++] = re[i];
	}
	out[o] = '\0';
	return out;
}

int grist_split_compile(const char *pattern, struct grist_split **out)
{
	const char *re = pattern;
	struct grist_split *s;
	char *text;
	int err;
	PCRE2_SIZE at;
	size_t i;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(pattern, known[i].name))
			re = known[i].regex;
	/* a bare word that is no known name is a typo, not a regex meant to split text into words */
	if (re == pattern && strspn(pattern, "abcdefghijklmnopqrstuvwxyz0123456789_-") == strlen(pattern))
		return grist_fail(-EINVAL, "pattern '%s': no such pattern name (gpt2, cl100k, o200k, llama3, tekken)"
				  " and not a regex", pattern);
	s = calloc(1, sizeof(*s));
	text = translate(re);
	if (!s || !text) {
		free(s);
		free(text);
		return grist_fail(-ENOMEM, "no memory for the split pattern");
	}
	/* DOLLAR_ENDONLY: Rust's $ is the end of the text only, never before a final newline. */
	s->code = pcre2_compile((PCRE2_SPTR)text, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY,
				&err, &at, NULL);
	free(text);
	if (!s->code) {
		PCRE2_UCHAR msg[256];

		pcre2_get_error_message(err, msg, sizeof(msg));
		free(s);
		return grist_fail(-EINVAL, "pattern '%.200s': PCRE2 cannot compile it near character %zu: %s", pattern,
				  (size_t)at, (const char *)msg);
	}
	s->jit = pcre2_jit_compile(s->code, PCRE2_JIT_COMPLETE) == 0;
	*out = s;
	return 0;
}

void grist_split_free(struct grist_split *s)
{
	if (!s)
		return;
	pcre2_code_free(s->code);
	free(s);
}

int grist_split_state_create(const struct grist_split *s, struct grist_split_state **out)
{
	struct grist_split_state *st = calloc(1, sizeof(*st));

	if (!st)
		return grist_fail(-ENOMEM, "no memory for a tokenizer context");
	st->s = s;
	st->md = pcre2_match_data_create_from_pattern(s->code, NULL);
	st->mc = pcre2_match_context_create(NULL);
	/* The JIT's own stack, per thread: a lookahead after a long run backtracks through it. */
	st->stack = s->jit ? pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL) : NULL;
	if (!st->md || !st->mc || (s->jit && !st->stack)) {
		grist_split_state_free(st);
		return grist_fail(-ENOMEM, "no memory for a tokenizer context");
	}
	if (st->stack)
		pcre2_jit_stack_assign(st->mc, NULL, st->stack);
	*out = st;
	return 0;
}

void grist_split_state_free(struct grist_split_state *st)
{
	if (!st)
		return;
	pcre2_match_data_free(st->md);
	pcre2_match_context_free(st->mc);
	pcre2_jit_stack_free(st->stack);
	free(st);
}

int grist_split_next(struct grist_split_state *st, const uint8_t *text, size_t len, size_t at, size_t *start,
		     size_t *end)
{
	while (at < len) {
		/* the JIT's own entry skips pcre2_match's per-call checks: the same code, the same match */
		int rc = st->s->jit ? pcre2_jit_match(st->s->code, (PCRE2_SPTR)text, len, at, 0, st->md, st->mc)
				    : pcre2_match(st->s->code, (PCRE2_SPTR)text, len, at, PCRE2_NO_UTF_CHECK, st->md, st->mc);
		PCRE2_SIZE *ov;

		if (rc == PCRE2_ERROR_NOMATCH)
			return 0;
		if (rc < 0) {
			PCRE2_UCHAR msg[256];

			pcre2_get_error_message(rc, msg, sizeof(msg));
			return grist_fail(rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_JIT_STACKLIMIT ? -ENOMEM : -EIO,
					  "byte %zu: the split pattern failed: %s", at, (const char *)msg);
		}
		ov = pcre2_get_ovector_pointer(st->md);
		if (ov[1] > ov[0]) {
			*start = ov[0];
			*end = ov[1];
			return 1;
		}
		/* an empty match yields no piece: step over one character, as find_iter does */
		at = ov[0] + 1;
		while (at < len && (text[at] & 0xc0) == 0x80)
			at++;
	}
	return 0;
}
