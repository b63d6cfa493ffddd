"""grist.text: tokenizers in C with the ids of tiktoken and SentencePiece.

``Tokenizer(path)`` opens a tiktoken ranks file (``<base64 token> <rank>`` per line) or a
SentencePiece ``.model``. Encoding runs in libgrist (grist/text.h) with the GIL released: one
read-only vocabulary shared by every thread, per-thread scratch, no lock on the hot path.
"""

import os as _os

import numpy as _np

from . import _grist

__all__ = ["Tokenizer", "TextSpec", "PATTERNS"]

#: The split patterns known by name (grist/text.h): tiktoken's r50k ("gpt2"), cl100k and
#: o200k, Meta's Llama 3 and Mistral's tekken. Any other regex string is taken as written.
PATTERNS = ("gpt2", "cl100k", "o200k", "llama3", "tekken")


class Tokenizer:
    """A tokenizer file, ready to encode on any number of threads.

    Args:
      path: a SentencePiece model when the name ends in ``.model`` (BPE and Unigram, its
        normalizers, byte fallback, dummy prefix, with the SentencePiece library's ids: a BPE
        model encoded natively in C, others by the library itself); Mistral's tekken JSON when it ends in ``.json`` (its pattern, its special
        tokens as ids 0..n-1 and every other id its rank + n, as mistral-common gives them);
        else a tiktoken ranks file (byte-level BPE, merged by rank as tiktoken does).
      pattern: ranks files only: how the text is split before the merges, a name from
        ``PATTERNS`` or the exact regex string as tiktoken takes it (run by PCRE2).
        Default ``None``: ``"gpt2"`` (a tekken file: its own). Must be ``None`` for a ``.model``.
      special_tokens: ranks files only (not tekken, which has its own): a dict ``{text: id}``
        of special tokens, ids that are not ranks of the file. Default ``None``: none. Text that spells one is plain text
        unless ``encode(..., allowed_special=True)``.
      sentencepiece_library: ``.model`` files only. Default ``False``: a BPE model whose every
        encode-time setting grist implements (docs/text.md lists them; Mistral's models and
        byte-fallback BPE among them) is encoded natively in C, id for id as the library;
        other models go through the library. ``True``: every text through the library
        (for comparison). Decode always uses the library.

    Raises ``FileNotFoundError`` for a missing file, ``grist.Error`` (errno EBADMSG) for a
    corrupt one (the message names the line), ``ValueError`` for a bad pattern or special token.
    Pickles as its path and keywords (the file is read again where it is unpickled).
    """

    def __init__(self, path, *, pattern=None, special_tokens=None, sentencepiece_library=False):
        self._path = _os.fspath(path)
        self._pattern = pattern
        self._special = dict(special_tokens) if special_tokens else None
        self._library = bool(sentencepiece_library)
        self._t = _grist.Tokenizer(self._path, pattern=pattern, special_tokens=self._special,
                                   sentencepiece_library=self._library)
        self._info = self._t.info()

    @property
    def kind(self) -> str:
        """``"tiktoken"`` (a ranks file) or ``"sentencepiece"`` (a .model)."""
        return self._info["kind"]

    @property
    def vocab_size(self) -> int:
        """Ranks file: 1 + the largest id, special tokens included; SentencePiece: its pieces."""
        return self._info["vocab_size"]

    @property
    def bos_id(self) -> int:
        """SentencePiece's BOS id; -1 when the model has none (always -1 for a ranks file)."""
        return self._info["bos_id"]

    @property
    def eos_id(self) -> int:
        """SentencePiece's EOS id, or -1."""
        return self._info["eos_id"]

    @property
    def pad_id(self) -> int:
        """SentencePiece's pad id, or -1 (MaxText's wrappers use this as the pad value)."""
        return self._info["pad_id"]

    @property
    def unk_id(self) -> int:
        """SentencePiece's unknown-piece id, or -1."""
        return self._info["unk_id"]

    def encode(self, text, *, allowed_special=False) -> "_np.ndarray":
        """The ids of one text, as an int32 array.

        Args:
          text: a ``str``, or UTF-8 ``bytes`` (any bytes-like object). Invalid UTF-8 raises
            ``grist.Error`` (errno EILSEQ) naming the byte offset; it is never replaced.
          allowed_special: ranks files: text that spells a special token becomes that token
            (tiktoken's ``allowed_special="all"``). Default ``False``: plain text, as
            ``encode_ordinary`` and MaxText encode it.
        """
        return _np.frombuffer(self._t.encode(text, allowed_special=allowed_special), dtype=_np.int32)

    def encode_batch(self, texts, *, threads=None, allowed_special=False) -> "list[_np.ndarray]":
        """The ids of many texts, encoded on grist's own threads with the GIL released.

        Args:
          texts: a sequence of ``str`` or bytes-like objects.
          threads: how many threads (each with its own scratch). Default ``None``: one per
            CPU this process may run on, at most 64.
          allowed_special: as ``encode``.

        Returns one int32 array per text, in order, equal to ``encode`` of each. A bad text
        raises, naming its index.
        """
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ValueError("encode_batch: threads must be a positive int or None, not %r" % (threads,))
        ids, offsets = self._t.encode_batch(texts, threads=threads or 0, allowed_special=allowed_special)
        flat = _np.frombuffer(ids, dtype=_np.int32)
        off = _np.frombuffer(offsets, dtype=_np.uint64)
        return [flat[off[i]:off[i + 1]] for i in range(len(off) - 1)]

    def decode_bytes(self, ids) -> bytes:
        """The bytes ``ids`` stand for (a ranks file's token bytes joined; SentencePiece's Decode)."""
        a = _np.asarray(ids)
        if a.size and not _np.issubdtype(a.dtype, _np.integer):
            raise TypeError("decode: ids must be integers, not %s" % a.dtype)
        if a.size and (a.min() < -(2 ** 31) or a.max() >= 2 ** 31):
            raise ValueError("decode: an id is outside int32")
        return self._t.decode(_np.ascontiguousarray(a, dtype=_np.int32).reshape(-1))

    def decode(self, ids) -> str:
        """The text ``ids`` stand for. Bytes that are not UTF-8 (an id list cut inside a
        character) become U+FFFD, as tiktoken's ``decode`` does; an unknown id raises ``ValueError``."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def __repr__(self):
        extra = ""
        if self.kind == "tiktoken":
            extra = ", pattern=%r" % (self._pattern or ("the file's" if self._path.endswith(".json") else "gpt2"))
            if self._special:
                extra += ", special_tokens=<%d>" % len(self._special)
        return "grist.text.Tokenizer(%r, kind=%r, vocab_size=%d%s)" % (self._path, self.kind, self.vocab_size, extra)

    def __reduce__(self):
        return (_rebuild, (self._path, self._pattern, self._special, self._library))


def _rebuild(path, pattern, special_tokens, sentencepiece_library=False):
    return Tokenizer(path, pattern=pattern, special_tokens=special_tokens, sentencepiece_library=sentencepiece_library)


class TextSpec:
    """How grist.Loader(text=...) turns each record into tokens (MaxText's TokenizeAndTrim or
    TokenizeAndChunk).

    Args:
      tokenizer: a ``Tokenizer``.
      feature: the bytes feature of a tf.train.Example record whose first value is the
        text (MaxText's ``train_data_columns``). Default ``"text"``; ``None``: the whole
        record is the text.
      add_bos, add_eos: put the BOS id before and the EOS id after each text's ids.
        Default ``True`` for both (MaxText's defaults).
      bos_id, eos_id: the ids added. Default ``None``: the tokenizer's (a SentencePiece
        model's); a ranks file has none, so give them (e.g. Llama 3's 128000 and 128001).
      max_length: ``"trim"``: keep each text's first max_length ids, BOS and EOS counted (so a
        long text loses its EOS, as in MaxText). ``"chunk"``: the length of the pieces.
        Default 2048; ``None`` or 0: no cut (``"trim"`` only).
      mode: ``"trim"`` (the default; MaxText's TokenizeAndTrim) or ``"chunk"`` (its
        TokenizeAndChunk): [BOS] + ids + [EOS] cut into pieces of max_length ids (the last
        one shorter; BOS only in the first piece, EOS only in the last, an empty text none),
        each packed as a sequence of its own. ``"chunk"`` needs the Loader's ``pack=``; a
        checkpoint taken between two pieces of one text resumes at the next piece. A text's
        ids must fit the Loader's ``map_out_max`` (default 4 MiB: 1M ids).
      pad_id: the pad value of outputs="maxtext". Default ``None``: the tokenizer's pad id,
        -1 when it has none (as MaxText's wrappers).
      allowed_special: as ``Tokenizer.encode``. Default ``False``.

    Invalid UTF-8, a record that is not an Example with ``feature`` (a bytes_list with a
    value), or more tokens than fit stop the loader with ``grist.Error`` naming the dataset
    and record; ``grist.Loader(on_error="skip")`` drops and counts them instead.
    """

    def __init__(self, tokenizer, *, feature="text", add_bos=True, add_eos=True, bos_id=None, eos_id=None,
                 max_length=2048, mode="trim", pad_id=None, allowed_special=False):
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError("TextSpec: tokenizer must be a grist.text.Tokenizer")
        if mode not in ("trim", "chunk"):
            raise ValueError("TextSpec: mode must be 'trim' or 'chunk', not %r" % (mode,))
        self.tokenizer = tokenizer
        self.feature = feature
        self.add_bos, self.add_eos = bool(add_bos), bool(add_eos)
        self.bos_id = tokenizer.bos_id if bos_id is None else int(bos_id)
        self.eos_id = tokenizer.eos_id if eos_id is None else int(eos_id)
        if self.add_bos and self.bos_id < 0:
            raise ValueError("TextSpec: add_bos=True but the tokenizer has no BOS id: give bos_id=")
        if self.add_eos and self.eos_id < 0:
            raise ValueError("TextSpec: add_eos=True but the tokenizer has no EOS id: give eos_id=")
        self.max_length = int(max_length or 0)
        if self.max_length < 0:
            raise ValueError("TextSpec: max_length must be >= 0")
        if mode == "chunk" and not self.max_length:
            raise ValueError("TextSpec: mode='chunk' needs max_length > 0 (the length of the pieces)")
        self.mode = mode
        self.pad_id = tokenizer.pad_id if pad_id is None else int(pad_id)
        self.allowed_special = bool(allowed_special)
        self._map = self._new_map(False)

    def _new_map(self, skip, bos=(0, 0)):
        # chunk: the map keeps every id; the Loader's packer cuts the pieces (its pack_piece)
        return _grist.TextMap(self.tokenizer._t, feature=self.feature, add_bos=self.add_bos, add_eos=self.add_eos,
                              bos_id=self.bos_id, eos_id=self.eos_id,
                              max_length=self.max_length if self.mode == "trim" else 0,
                              allowed_special=self.allowed_special, skip=skip, bos_features_id=bos[0],
                              bos_features=bos[1])

    def _loader_map(self, skip, bos=None):
        """The map a Loader runs: the spec's own, or a new one whose skip count is that loader's (skip)
        or whose stage replaces BOS in one feature (bos=(id, bits), the Loader's pack_bos_features)."""
        return self._new_map(skip, bos or (0, 0)) if skip or bos else self._map

    def __repr__(self):
        return ("grist.text.TextSpec(%r, feature=%r, add_bos=%r, add_eos=%r, max_length=%d, mode=%r, pad_id=%d)"
                % (self.tokenizer, self.feature, self.add_bos, self.add_eos, self.max_length, self.mode,
                   self.pad_id))

    def __reduce__(self):
        return (_rebuild_spec, (self.tokenizer, self.feature, self.add_bos, self.add_eos, self.bos_id, self.eos_id,
                                self.max_length, self.mode, self.pad_id, self.allowed_special))


def _rebuild_spec(tok, feature, add_bos, add_eos, bos_id, eos_id, max_length, mode, pad_id, allowed_special):
    return TextSpec(tok, feature=feature, add_bos=add_bos, add_eos=add_eos, bos_id=bos_id, eos_id=eos_id,
                    max_length=max_length, mode=mode, pad_id=pad_id, allowed_special=allowed_special)


def _shift_left(x, fill):
    out = _np.empty_like(x)
    out[:, :-1] = x[:, 1:]
    out[:, -1] = fill
    return out


_MAXTEXT_KEYS = ("inputs", "targets", "inputs_segmentation", "targets_segmentation", "inputs_position",
                 "targets_position")


def _batch_arrays(batch, spec, outputs, batch_size, length, packed=None, bos=None):
    """A text loader's grist.Batch -> its dict of int32 (batch_size, length) arrays.

    Packed: Grain's packer keys with k = "inputs"; outputs="maxtext" gives MaxText's six
    arrays: a short final batch filled with pad_id rows (batch_and_pad), then ShiftData:
    targets shifted left with pad_id, targets_segmentation shifted left with 0 and zeroed where
    targets == pad_id; inputs and both positions unshifted. Unpacked: each text padded to
    length with pad_id as PadOrTrimToMaxLength does (its segmentation x != pad_id, its
    positions arange(len), both then padded with pad_id as well). bos=(id, bits): Grain's BOS
    replacement on inputs (bit 1) or targets (bit 2) alone, for a batch packed without it.
    """
    pad = spec.pad_id
    if packed is None:
        packed = batch.segment_ids is not None
    if outputs is not None and packed:
        # packed, MaxText's arrays: made in C in one pass (the consumer thread serves every worker)
        with batch:
            arrays = _np.frombuffer(batch._maxtext(pad, batch_size, *(bos or ())),
                                    dtype=_np.int32).reshape(6, -1, length)
        return dict(zip(_MAXTEXT_KEYS, arrays))
    with batch:
        if batch.segment_ids is not None:
            data = batch.data.view(_np.int32)
            cols = {"inputs": data.copy(), "inputs_segment_ids": batch.segment_ids.copy(),
                    "inputs_positions": batch.positions.copy()}
        else:
            recs = [_np.frombuffer(r, dtype="<i4") for r in batch.records()]
            ids = _np.full((len(recs), length), pad, dtype=_np.int32)
            pos = _np.full((len(recs), length), pad, dtype=_np.int32)
            for i, r in enumerate(recs):
                r = r[:length]
                ids[i, :len(r)] = r
                pos[i, :len(r)] = _np.arange(len(r), dtype=_np.int32)
            seg = _np.full((len(recs), length), pad, dtype=_np.int32)
            for i, r in enumerate(recs):
                seg[i, :min(len(r), length)] = r[:length] != pad
            cols = {"inputs": ids, "inputs_segment_ids": seg, "inputs_positions": pos}
    if outputs is None:
        return cols
    rows = cols["inputs"].shape[0]
    if rows < batch_size:  # batch_and_pad(pad_value=pad_id): whole rows of pad_id
        cols = {k: _np.concatenate([v, _np.full((batch_size - rows, v.shape[1]), pad, dtype=_np.int32)])
                for k, v in cols.items()}
    inputs, seg, pos = cols["inputs"], cols["inputs_segment_ids"], cols["inputs_positions"]
    targets = _shift_left(inputs, pad)
    tseg = _shift_left(seg, 0)
    tseg[targets == pad] = 0
    return {"inputs": inputs, "targets": targets, "inputs_segmentation": seg, "targets_segmentation": tseg,
            "inputs_position": pos, "targets_position": pos.copy()}
