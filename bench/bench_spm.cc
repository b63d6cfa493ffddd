// SentencePiece, one thread: Debian's libsentencepiece called directly against the same library
// through grist's C API (grist_tokenizer_encode), on the same model and texts, alternating which
// goes first each round. What grist's shim costs, with nothing else different.
//   bench_spm MODEL CORPUS [ROUNDS [debian|grist]]
// CORPUS: texts separated by NUL bytes (bench/py/text_pipeline.py --direct writes one). With
// "debian" or "grist", only that side runs: for counting its instructions with perf stat, which
// a busy machine does not skew as it skews time.
// Prints one JSON object: the seconds of each round for "debian" and "grist", and the MB.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sentencepiece_processor.h>
#include <string>
#include <vector>

extern "C" {
#include "grist/error.h"
#include "grist/text.h"
}

namespace sentencepiece {
namespace logging {
void SetMinLogLevel(int v); // exported by the library, declared only in its uninstalled common.h
}
}

static double now(void)
{
	struct timespec ts;

	// the thread's CPU time: on a shared machine, time spent preempted is not the encoder's
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bench_spm MODEL CORPUS [ROUNDS]\n");
		return 2;
	}
	int rounds = argc > 3 ? atoi(argv[3]) : 7;
	const char *only = argc > 4 ? argv[4] : "";
	FILE *f = fopen(argv[2], "rb");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	std::string all;
	char chunk[65536];
	size_t got;
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
		all.append(chunk, got);
	fclose(f);
	std::vector<std::string> texts;
	for (size_t at = 0; at < all.size();) {
		size_t end = all.find('\0', at);
		if (end == std::string::npos)
			end = all.size();
		texts.emplace_back(all, at, end - at);
		at = end + 1;
	}

	sentencepiece::logging::SetMinLogLevel(3);
	sentencepiece::SentencePieceProcessor sp;
	if (!sp.Load(argv[1]).ok()) {
		fprintf(stderr, "%s: the library cannot load it\n", argv[1]);
		return 1;
	}
	struct grist_tokenizer *t;
	struct grist_tokenizer_ctx *c;
	if (grist_tokenizer_open(argv[1], NULL, &t) || grist_tokenizer_ctx_create(t, &c)) {
		fprintf(stderr, "%s\n", grist_last_error());
		return 1;
	}
	// the same ids, or the comparison means nothing; but a Unigram model, which grist encodes
	// with PyPI's tie rule and Debian's 0.1.97 with its own (src/text/spm_unigram.c): a few
	// texts may split a tie otherwise (9 of the 79 topics of the corpus, the same number of ids but
	// for a handful)
	size_t differ = 0, n_debian = 0, n_grist = 0;
	for (const auto &s : texts) {
		std::vector<int> a;
		const int32_t *ids;
		size_t n;
		if (!sp.Encode(s, &a).ok() || grist_tokenizer_encode(c, s.data(), s.size(), 0, &ids, &n)) {
			fprintf(stderr, "an encode failed\n");
			return 1;
		}
		differ += a.size() != n || memcmp(a.data(), ids, n * sizeof(int32_t));
		n_debian += a.size();
		n_grist += n;
	}
	if (differ > texts.size() / 4 || (n_debian > n_grist ? n_debian - n_grist : n_grist - n_debian) > n_debian / 1000) {
		fprintf(stderr, "the ids differ in %zu of %zu texts (%zu ids against %zu)\n", differ, texts.size(), n_grist,
			n_debian);
		return 1;
	}
	std::vector<double> debian, grist;
	size_t bytes = 0, sink = 0;
	for (const auto &s : texts)
		bytes += s.size();
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < 2; k++) {
			bool direct = (r + k) % 2 == 0;
			if ((direct && !strcmp(only, "grist")) || (!direct && !strcmp(only, "debian"))) {
				(direct ? debian : grist).push_back(0);
				continue;
			}
			double t0 = now();
			for (const auto &s : texts) {
				if (direct) {
					std::vector<int> ids;
					sp.Encode(s, &ids).IgnoreError();
					sink += ids.size();
				} else {
					const int32_t *ids;
					size_t n;
					grist_tokenizer_encode(c, s.data(), s.size(), 0, &ids, &n);
					sink += n;
				}
			}
			(direct ? debian : grist).push_back(now() - t0);
		}
	}
	printf("{\"mb\": %.6f, \"tokens\": %zu, \"debian\": [", (double)bytes / 1e6, sink / (2 * (size_t)rounds));
	for (int r = 0; r < rounds; r++)
		printf("%s%.6f", r ? ", " : "", debian[r]);
	printf("], \"grist\": [");
	for (int r = 0; r < rounds; r++)
		printf("%s%.6f", r ? ", " : "", grist[r]);
	printf("]}\n");
	grist_tokenizer_ctx_destroy(c);
	grist_tokenizer_close(t);
	return 0;
}
