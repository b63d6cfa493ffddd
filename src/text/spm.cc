// The SentencePiece shim: grist's C calls over Debian's libsentencepiece (C++ only, no C API).
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sentencepiece_processor.h>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

extern "C" {
#include "common/buf.h"
#include "common/error.h"
#include "text/text_internal.h"
}

// Exported by libsentencepiece (0.1.97, Debian 12) but declared only in its uninstalled
// common.h: the level below which its LOG() lines are dropped.
namespace sentencepiece {
namespace logging {
void SetMinLogLevel(int v);
}
}

// No C++ exception may cross into C frames (std::terminate): each entry point catches them.
static int caught(int code, const char *what)
{
	try {
		throw;
	} catch (const std::bad_alloc &) {
		return grist_fail(-ENOMEM, "SentencePiece: out of memory in %s", what);
	} catch (const std::exception &e) {
		return grist_fail(code, "SentencePiece: %s failed: %s", what, e.what());
	} catch (...) {
		return grist_fail(code, "SentencePiece: %s failed (an exception)", what);
	}
}

// One processor for every thread: SentencePieceProcessor's Encode and Decode are const and
// keep no state between calls, which its own Python binding relies on for its thread pool.
struct grist_spm {
	sentencepiece::SentencePieceProcessor sp;
};

static int spm_open(const char *path, const uint8_t *data, size_t len, struct grist_spm **out)
{
	// The library never prints: sentencepiece's LOG(INFO/WARNING/ERROR) go to std::cerr
	// unless below its minimum level; FATAL (3) still aborts as it must. Once, process-wide.
	static const bool quiet = (sentencepiece::logging::SetMinLogLevel(3), true);
	std::unique_ptr<grist_spm> m(new (std::nothrow) grist_spm); // freed if Load throws

	(void)quiet;
	if (!m)
		return grist_fail(-ENOMEM, "no memory for a SentencePiece model");
	// the library trusts parts of a model it parsed: those are checked first
	int ret = grist_spm_check(path, data, len);
	if (ret)
		return ret;
	auto st = m->sp.LoadFromSerializedProto(absl::string_view((const char *)data, len));
	if (!st.ok())
		return grist_fail(-EBADMSG, "%s: not a SentencePiece model: %s", path, st.ToString().c_str());
	*out = m.release();
	return 0;
}

extern "C" int grist_spm_open(const char *path, const uint8_t *data, size_t len, struct grist_spm **out)
{
	try {
		return spm_open(path, data, len, out);
	} catch (...) {
		return caught(-EBADMSG, "loading a model");
	}
}

extern "C" void grist_spm_close(struct grist_spm *m)
{
	delete m;
}

extern "C" void grist_spm_info(const struct grist_spm *m, struct grist_tokenizer_info *info)
{
	info->kind = GRIST_TOKENIZER_SENTENCEPIECE;
	info->vocab_size = (uint64_t)m->sp.GetPieceSize();
	info->bos_id = m->sp.bos_id();
	info->eos_id = m->sp.eos_id();
	info->pad_id = m->sp.pad_id();
	info->unk_id = m->sp.unk_id();
}

static int spm_encode(const struct grist_spm *m, const char *text, size_t len, struct grist_ids *out)
{
	std::vector<int> ids;
	auto st = m->sp.Encode(absl::string_view(text, len), &ids);

	if (!st.ok())
		return grist_fail(-EBADMSG, "SentencePiece could not encode the text: %s", st.ToString().c_str());
	if (ids.empty()) // no ids: ids.data() and out->v may be NULL, which memcpy must not see
		return 0;
	if (grist_ids_reserve(out, ids.size()))
		return -ENOMEM;
	memcpy(out->v + out->n, ids.data(), ids.size() * sizeof(int32_t));
	out->n += ids.size();
	return 0;
}

extern "C" int grist_spm_encode(const struct grist_spm *m, const char *text, size_t len, struct grist_ids *out)
{
	try {
		return spm_encode(m, text, len, out);
	} catch (...) {
		return caught(-EBADMSG, "encode");
	}
}

static int spm_decode(const struct grist_spm *m, const int32_t *ids, size_t n, char **buf, size_t *cap, size_t *len)
{
	int size = m->sp.GetPieceSize();
	std::vector<int> v(ids, ids + n);
	std::string text;

	for (size_t i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= size)
			return grist_fail(-EINVAL, "id %zu of %zu: %d is no piece of this model (%d pieces)", i, n, ids[i],
					  size);
	auto st = m->sp.Decode(v, &text);
	if (!st.ok())
		return grist_fail(-EINVAL, "SentencePiece could not decode the ids: %s", st.ToString().c_str());
	if (grist_array_reserve((void **)buf, cap, text.size() + 1, 1))
		return -ENOMEM;
	memcpy(*buf, text.data(), text.size());
	(*buf)[text.size()] = '\0';
	*len = text.size();
	return 0;
}

extern "C" int grist_spm_decode(const struct grist_spm *m, const int32_t *ids, size_t n, char **buf, size_t *cap,
				size_t *len)
{
	try {
		return spm_decode(m, ids, n, buf, cap, len);
	} catch (...) {
		return caught(-EINVAL, "decode");
	}
}
