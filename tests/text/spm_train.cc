// Real SentencePiece models for tests/text/test_spm.c, trained by Debian's own trainer
// (libsentencepiece_train): no model file is committed and no network is needed.
#include <cstdio>
#include <exception>

#include <sentencepiece_trainer.h>

namespace sentencepiece {
namespace logging {
void SetMinLogLevel(int v); // exported by the library, declared only in its uninstalled common.h
}
}

extern "C" int t_spm_train(const char *args);

// Train with the command-line style @args (naming --input and --model_prefix): the model is
// written to "<model_prefix>.model". 0, or -1 with the trainer's message on stderr.
extern "C" int t_spm_train(const char *args)
{
	sentencepiece::logging::SetMinLogLevel(2);
	try {
		auto st = sentencepiece::SentencePieceTrainer::Train(args);
		if (!st.ok()) {
			fprintf(stderr, "training failed: %s\n", st.ToString().c_str());
			return -1;
		}
	} catch (const std::exception &e) {
		fprintf(stderr, "training threw: %s\n", e.what());
		return -1;
	}
	return 0;
}
