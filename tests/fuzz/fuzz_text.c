/*
 * libFuzzer harness: the tiktoken-format tokenizer (src/text/). Input: a mode byte (bits 0-2:
 * the pattern, bit 3: special tokens allowed), then the text. Checked for every input: valid
 * UTF-8 encodes and decodes back to itself, invalid UTF-8 is -EILSEQ and nothing else; and,
 * on the text taken as one piece, tiktoken's scan and the heap make the same merges. The
 * vocabulary (every byte, then merges of short ASCII strings) is written once to /tmp.
 * Seeds: tests/fuzz/make_seeds.py.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grist/text.h"
#include "text/text_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const patterns[] = { "gpt2", "cl100k", "o200k", "llama3", "tekken" };
static const char *const merges[] = { "aa", "ab", "ba", "aaaa", " a", " t", "th", "the", " the", "he", "in", "er",
				      "'s", "12", "123", " \n", "\n\n", "  ", "    ", "\xc3\xa9", "<|", "|>", "e\xcc" };
static struct grist_tokenizer *tok[5];
static struct grist_tokenizer_ctx *ctx[5];
static struct grist_vocab vocab;
static struct grist_bpe_scratch scratch;

static void setup(void)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	struct grist_special_token sp[2] = { { "<|endoftext|>", 900 }, { "<s>", 901 } };
	struct grist_tokenizer_options o;
	char path[64] = "/tmp/fuzz_text.XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
	size_t i, k;

	if (!f)
		abort();
	for (i = 0; i < 256 + sizeof(merges) / sizeof(merges[0]); i++) {
		uint8_t one = (uint8_t)i;
		const uint8_t *p = i < 256 ? &one : (const uint8_t *)merges[i - 256];
		size_t n = i < 256 ? 1 : strlen(merges[i - 256]);

		for (k = 0; k < n; k += 3) {
			uint32_t v = (uint32_t)p[k] << 16 | (k + 1 < n ? (uint32_t)p[k + 1] << 8 : 0) |
				     (k + 2 < n ? p[k + 2] : 0);

			fputc(b64[v >> 18 & 63], f);
			fputc(b64[v >> 12 & 63], f);
			fputc(k + 1 < n ? b64[v >> 6 & 63] : '=', f);
			fputc(k + 2 < n ? b64[v & 63] : '=', f);
		}
		fprintf(f, " %zu\n", i);
	}
	fclose(f);
	grist_tokenizer_options_init(&o);
	o.special = sp;
	o.n_special = 2;
	for (i = 0; i < 5; i++) {
		o.pattern = patterns[i];
		if (grist_tokenizer_open(path, &o, &tok[i]) || grist_tokenizer_ctx_create(tok[i], &ctx[i]))
			abort();
	}
	if (grist_vocab_load(&vocab, path))
		abort();
	unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct grist_ids a = { 0 }, b = { 0 };
	const int32_t *ids;
	const char *text;
	size_t n, len;
	unsigned mode;
	int ret;

	if (!tok[0])
		setup();
	if (!size)
		return 0;
	mode = data[0];
	data++;
	size--;
	ret = grist_tokenizer_encode(ctx[(mode & 7) % 5], data, size, mode & 8 ? GRIST_ENCODE_ALLOW_SPECIAL : 0, &ids, &n);
	if (grist_utf8_check(data, size) != size) {
		if (ret != -EILSEQ)
			abort();
		return 0;
	}
	if (ret || grist_tokenizer_decode(ctx[(mode & 7) % 5], ids, n, &text, &len) || len != size ||
	    memcmp(text, data, size))
		abort();
	/* the two merge loops agree on the whole input as one piece */
	if (grist_bpe_encode_piece(&vocab, &scratch, data, size, SIZE_MAX, &a) ||
	    grist_bpe_encode_piece(&vocab, &scratch, data, size, 0, &b) || a.n != b.n ||
	    (a.n && memcmp(a.v, b.v, a.n * sizeof(int32_t))))
		abort();
	free(a.v);
	free(b.v);
	return 0;
}
