/*
 * libFuzzer harness: SentencePiece .model bytes (src/text/spm_model.c, then Debian's
 * libsentencepiece through src/text/spm.cc). Every input is either refused with -EBADMSG (or
 * -ENOMEM, -EFBIG) and a message, or loads, and then encodes and decodes a fixed set of texts
 * without a crash: the texts pass through the normalizer's charsmap, byte fallback, digits and
 * whitespace handling. Differential too: where the native encoder (src/text/spm_bpe.c for BPE,
 * src/text/spm_unigram.c for Unigram, with 0.1.97's tie rule as Debian's library is 0.1.97)
 * takes the model, its ids must be the library's. Seeds: small real models trained by
 * tests/fuzz/make_seeds.py.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grist/error.h"
#include "text/text_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const texts[] = {
	"Hello world, it's 12345.",
	"\xef\xac\x81 \xe2\x91\xa0 \xef\xbc\xa1\xef\xbc\xa2 caf\xc3\xa9 cafe\xcc\x81 \xe3\x8e\x8f", /* NFKC cases */
	"\xe6\x97\xa5\xe6\x9c\xac \xd8\xb9\xd8\xb1 \xe0\xa4\xb9\xe0\xa4\xbf \xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb",
	"  \t\n\n x \xe3\x80\x80 ",
	"\x01\x02\x7f\xc2\x80\xdf\xbf\xef\xbf\xbf\xf4\x8f\xbf\xbf",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct grist_ids ids = { 0 }, nat = { 0 };
	struct grist_spm_scratch s = { 0 };
	struct grist_spm_native *nm = NULL;
	struct grist_spm *m;
	char *buf = NULL;
	size_t cap = 0, len, i;
	int ret = grist_spm_open("fuzz.model", data, size, &m);

	if (ret) {
		if (ret != -EBADMSG && ret != -ENOMEM && ret != -EFBIG)
			abort();
		if (!strstr(grist_last_error(), "fuzz.model"))
			abort();
		return 0;
	}
	ret = grist_spm_native_open("fuzz.model", data, size, &nm);
	if (ret < 0 && ret != -ENOMEM)
		abort(); /* the checks passed: the native reader must read what they read */
	if (nm)
		nm->ties_0197 = true;
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		ids.n = nat.n = 0;
		ret = grist_spm_encode(m, texts[i], strlen(texts[i]), &ids);
		if (ret == 0)
			(void)grist_spm_decode(m, ids.v, ids.n, &buf, &cap, &len);
		if (nm && grist_spm_native_encode(nm, &s, (const uint8_t *)texts[i], strlen(texts[i]), &nat) == 0 &&
		    (ret || nat.n != ids.n || (ids.n && memcmp(nat.v, ids.v, ids.n * sizeof(*ids.v)))))
			abort(); /* native ids that are not the library's */
	}
	grist_spm_native_close(nm);
	grist_spm_scratch_free(&s);
	free(nat.v);
	free(ids.v);
	free(buf);
	grist_spm_close(m);
	return 0;
}
