/*
 * grist/text.h - tokenizers: raw UTF-8 text to token ids, with the ids the Python libraries give.
 *
 * Two kinds of tokenizer file are read:
 *   - tiktoken format ("ranks file"): one "<base64 token bytes> <rank>" per line, the rank being
 *     the token's id. Byte-level BPE: the text is cut into pieces by a split pattern (a regular
 *     expression, run by PCRE2 in UTF + UCP mode), and each piece is merged pair by pair, the
 *     pair of lowest rank first (leftmost on ties), exactly as tiktoken's encode_ordinary();
 *     special tokens (text -> id) are recognised only when the caller allows them.
 *   - SentencePiece models (a file whose name ends in ".model"): encoded by the SentencePiece
 *     library itself (Debian's libsentencepiece), so every model type and normalizer it knows.
 *   - Mistral's tekken JSON (a name ending in ".json"): the same BPE over its vocabulary (the
 *     first default_vocab_size - default_num_special_tokens ranks) with its own pattern; its
 *     special tokens are ids 0..n-1 and every other id is rank + n, as mistral-common gives them.
 *
 *   grist_tokenizer_open()  -> one read-only tokenizer, shared by every thread
 *   grist_tokenizer_ctx_create() -> per-thread scratch: encode/decode take a context, so the hot
 *                                   path takes no lock and, once warm, allocates nothing
 *   grist_tokenizer_encode_batch() -> many texts on grist's own threads, ids in input order
 *
 * Input text must be valid UTF-8 (no surrogates, no overlong forms): anything else is -EILSEQ
 * with the byte offset of the first bad byte, never silently replaced. The empty text has no ids.
 *
 * Errors follow grist/error.h, plus -EILSEQ for invalid UTF-8 in a text to encode.
 * Thread-safety: a tokenizer is immutable after open and may be used by any number of threads
 * at once through their own contexts; a context belongs to one thread at a time.
 */
#ifndef GRIST_TEXT_H
#define GRIST_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grist/error.h"
#include "grist/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

struct grist_tokenizer;
struct grist_tokenizer_ctx;

/** What kind of file a tokenizer was opened from. */
enum grist_tokenizer_kind {
	GRIST_TOKENIZER_TIKTOKEN = 1,      /* a ranks file: byte-level BPE with a split pattern */
	GRIST_TOKENIZER_SENTENCEPIECE = 2, /* a SentencePiece .model */
};

/** One special token of a ranks file: its text and its id (distinct from every rank). */
struct grist_special_token {
	const char *text; /* UTF-8, not empty */
	int32_t id;       /* >= 0 */
};

/** Options of grist_tokenizer_open(): grist_tokenizer_options_init(), then set what you need. A sized struct. */
struct grist_tokenizer_options {
	size_t size;          /* sizeof(struct grist_tokenizer_options), set by _init() */
	/*
	 * Ranks files: the split pattern, a name ("gpt2", "cl100k", "o200k", "llama3", "tekken":
	 * the patterns of tiktoken's r50k/cl100k/o200k encodings, Meta's Llama 3 and Mistral's
	 * tekken) or the exact regex string as tiktoken takes it (possessive quantifiers, lookahead
	 * and \p{..} classes included). NULL: "gpt2" (tekken: its own). A pattern PCRE2 cannot compile is -EINVAL at
	 * open. Must be NULL for a SentencePiece model.
	 */
	const char *pattern;
	/* Ranks files: n_special special tokens (copied at open). Must be 0 for SentencePiece. */
	const struct grist_special_token *special;
	size_t n_special;
	/*
	 * SentencePiece: nonzero encodes every text through libsentencepiece. 0 (the default)
	 * encodes a BPE model natively in C, id for id as the library (docs/text.md says which
	 * models; any other model, and decode, go through the library either way).
	 */
	int sentencepiece_library;
};

/** grist_tokenizer_options_init() - the defaults: pattern "gpt2", no special tokens. */
GRIST_API void grist_tokenizer_options_init(struct grist_tokenizer_options *o);

/**
 * grist_tokenizer_open() - load a tokenizer file.
 * @path: a SentencePiece model when the name ends in ".model", a tekken JSON when ".json",
 *        else a tiktoken ranks file.
 * @o: options, or NULL for the defaults.
 * @out: the tokenizer, to close with grist_tokenizer_close().
 *
 * Return: 0; -EINVAL for bad options (an unknown pattern name, a regex PCRE2 refuses, a
 * special token whose id is also a rank or repeats another's); -EBADMSG for a corrupt file
 * (the message names the file, the line and what is wrong: a line cut short, bad base64,
 * a repeated rank or token, a model SentencePiece cannot parse); -ENOENT and other
 * system errors; -ENOTSUP when this build lacks SentencePiece.
 */
GRIST_API int grist_tokenizer_open(const char *path, const struct grist_tokenizer_options *o,
				   struct grist_tokenizer **out);

/** grist_tokenizer_close() - free a tokenizer; every context made from it must be destroyed first. NULL is a no-op. */
GRIST_API void grist_tokenizer_close(struct grist_tokenizer *t);

/** What grist_tokenizer_get_info() tells. A sized struct: set .size = sizeof before the call. */
struct grist_tokenizer_info {
	size_t size;
	enum grist_tokenizer_kind kind;
	uint64_t vocab_size;  /* ranks file: 1 + the largest id, special tokens included;
				 SentencePiece: the number of pieces */
	int32_t bos_id, eos_id, pad_id, unk_id; /* SentencePiece's, or tekken's <s>, </s>, <pad>,
						   <unk>; -1 where there is none (always for a
						   ranks file) */
	uint64_t id;          /* a hash of the file's bytes, the pattern and the special tokens:
				 what makes the ids (checkpoints of a text loader keep it) */
};

/** grist_tokenizer_get_info() - what the tokenizer is; writes what fits of @info (sized). */
GRIST_API void grist_tokenizer_get_info(const struct grist_tokenizer *t, struct grist_tokenizer_info *info);

/**
 * grist_tokenizer_ctx_create() - per-thread scratch for @t: the regex match state and the
 * output buffers. Return: 0 or -ENOMEM.
 */
GRIST_API int grist_tokenizer_ctx_create(const struct grist_tokenizer *t, struct grist_tokenizer_ctx **out);

/** grist_tokenizer_ctx_destroy() - free a context. NULL is a no-op. */
GRIST_API void grist_tokenizer_ctx_destroy(struct grist_tokenizer_ctx *c);

/** Flags of grist_tokenizer_encode(). */
#define GRIST_ENCODE_ALLOW_SPECIAL 1u /* ranks files: text that spells a special token is that
					 token (tiktoken's allowed_special="all"); without it,
					 such text is plain text, as encode_ordinary() does */

/**
 * grist_tokenizer_encode() - the token ids of one text.
 * @c: a context of the tokenizer, used by this thread only during the call.
 * @text, @len: UTF-8 bytes (need not be NUL-terminated; NUL is an ordinary character).
 * @flags: 0 or GRIST_ENCODE_ALLOW_SPECIAL.
 * @ids, @n: set to the ids, in the context's buffer: valid until the next call on @c.
 *
 * Return: 0; -EILSEQ when @text is not valid UTF-8 (the message gives the byte offset);
 * -EINVAL for unknown flags; -ENOMEM.
 */
GRIST_API int grist_tokenizer_encode(struct grist_tokenizer_ctx *c, const void *text, size_t len, unsigned flags,
				     const int32_t **ids, size_t *n);

/**
 * grist_tokenizer_decode() - the bytes that @ids stand for (ranks file: their token bytes
 * joined, which need not be valid UTF-8 for an arbitrary id list; SentencePiece: its Decode()).
 * @text, @len: set to the bytes, in the context's buffer (NUL-terminated, valid until the next
 * call on @c).
 * Return: 0; -EINVAL for an id the vocabulary lacks (the message gives its place); -ENOMEM.
 */
GRIST_API int grist_tokenizer_decode(struct grist_tokenizer_ctx *c, const int32_t *ids, size_t n,
				     const char **text, size_t *len);

/** The ids of a batch: all of them in one array, text i's at ids[offsets[i]] .. ids[offsets[i + 1]]. */
struct grist_token_batch {
	int32_t *ids;
	uint64_t *offsets; /* n + 1 entries */
	size_t n;
};

/**
 * grist_tokenizer_encode_batch() - encode @n texts on up to @threads threads of grist's own
 * (0: one per allowed CPU, at most 64), each with its own context; the ids are in input order
 * and equal grist_tokenizer_encode()'s one text at a time.
 * @texts, @lens: the texts. @flags: as grist_tokenizer_encode().
 * @out: filled on success; free it with grist_token_batch_free().
 * Return: 0, or the error of the first text (in input order) that failed, its message
 * prefixed with "text <i>".
 */
GRIST_API int grist_tokenizer_encode_batch(const struct grist_tokenizer *t, const void *const *texts,
					   const size_t *lens, size_t n, unsigned flags, unsigned threads,
					   struct grist_token_batch *out);

/** grist_token_batch_free() - free what grist_tokenizer_encode_batch() filled; zeroes @b. */
GRIST_API void grist_token_batch_free(struct grist_token_batch *b);

/*
 * The text stage of a loader: a grist_map_fn (grist/loader.h) that turns each record into
 * little-endian int32 tokens, for the ragged layout and the packers (pack_token_bytes 4):
 *   the text (a bytes feature's first value in a tf.train.Example, or the whole record)
 *   -> ids -> [BOS] + ids + [EOS] -> the first max_length of them (MaxText's TokenizeAndTrim:
 *   a text longer than max_length loses its EOS).
 * Errors stop the loader (which names the dataset and record): invalid UTF-8 (-EILSEQ), a record
 * that is not an Example with the feature (-EBADMSG), more tokens than map_out_max (-EMSGSIZE).
 */
struct grist_text_map;

/** Options of grist_text_map_create(): grist_text_map_options_init(), then set what you need. A sized struct. */
struct grist_text_map_options {
	size_t size;
	const struct grist_tokenizer *tokenizer; /* required; must outlive the map */
	const char *feature;  /* a bytes feature of a tf.train.Example, or NULL: the record is the text */
	bool add_bos, add_eos;
	int32_t bos_id, eos_id; /* the ids added (default -1: none; add_* then needs one) */
	size_t max_length;    /* 0: no trim */
	unsigned flags;       /* grist_tokenizer_encode()'s */
	/* GRIST_ON_ERROR_SKIP: a record that is not UTF-8, lacks the feature or has more tokens than
	 * the map's out_cap is dropped and counted (grist_text_map_skipped()), not an error */
	int on_error; /* enum grist_on_error (grist/features.h): not included here, as spm.cc is C++ */
	/*
	 * Grain's BOS replacement on one of MaxText's features only (ConcatThenSplitIterDataset's
	 * bos_features; grist.Loader's pack_bos_features): GRIST_TEXT_BOS_INPUTS or
	 * GRIST_TEXT_BOS_TARGETS, the id bos_features_id. The records stay as they are: the stage
	 * puts the id in each segment's first cell of that feature where it makes MaxText's arrays
	 * from the packed rows (grist.text). Both features at once is the loader's pack_bos (the
	 * packer replaces in the one stream both come from). Part of the map's id, so a checkpoint
	 * taken with another setting is refused; 0 (the default) leaves the id as it was before
	 * these fields were added.
	 */
	unsigned bos_features;
	int32_t bos_features_id;
};

/** grist_text_map_options.bos_features */
#define GRIST_TEXT_BOS_INPUTS 1u
#define GRIST_TEXT_BOS_TARGETS 2u

GRIST_API void grist_text_map_options_init(struct grist_text_map_options *o);
/** grist_text_map_create() - Return: 0, -EINVAL (no tokenizer, add_bos/add_eos without an id, bad bos_features), -ENOMEM. */
GRIST_API int grist_text_map_create(const struct grist_text_map_options *o, struct grist_text_map **out);
/** grist_text_map_destroy() - free the map and its contexts; after the loader that used it. NULL is fine. */
GRIST_API void grist_text_map_destroy(struct grist_text_map *m);
/** grist_text_map_id() - the map_id a loader config should carry: changes with anything that changes the tokens. */
GRIST_API uint64_t grist_text_map_id(const struct grist_text_map *m);
/**
 * grist_text_map_skipped() - how many records the map dropped with GRIST_ON_ERROR_SKIP, and the first
 * of them (at most 16 kept, as grist_features_skipped()). @out: @cap entries or NULL; @n: how many written.
 * Thread-safety: any thread, while the loader runs.
 */
struct grist_feature_skip; /* grist/features.h */
GRIST_API uint64_t grist_text_map_skipped(struct grist_text_map *m, struct grist_feature_skip *out, size_t cap,
					  size_t *n);
/** grist_text_map() - the grist_map_fn; @ctx is the grist_text_map. Thread-safe, no lock (but to count a skip). */
GRIST_API int grist_text_map(void *ctx, const struct grist_map_input *in, uint8_t *out, size_t out_cap,
			     size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif
