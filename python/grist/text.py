"""grist.text: tokenizers in C with the ids of tiktoken and SentencePiece.

``Tokenizer(path)`` opens a tiktoken ranks file (``<base64 token> <rank>`` per line) or a
SentencePiece ``.model``. Encoding runs in libgrist (grist/text.h) with the GIL released: one
read-only vocabulary shared by every thread, per-thread scratch, no lock on the hot path.
"""

import os as _os

import numpy as _np

from . import _grist

__all__ = ["Tokenizer", "PATTERNS"]

#: The split patterns known by name (grist/text.h): tiktoken's r50k ("gpt2"), cl100k and
#: o200k, Meta's Llama 3 and Mistral's tekken. Any other regex string is taken as written.
PATTERNS = ("gpt2", "cl100k", "o200k", "llama3", "tekken")


class Tokenizer:
    """A tokenizer file, ready to encode on any number of threads.

    Args:
      path: a SentencePiece model when the name ends in ``.model`` (encoded by the
        SentencePiece library itself: BPE and Unigram, its normalizers, byte fallback, dummy
        prefix), else a tiktoken ranks file (byte-level BPE, merged by rank as tiktoken does).
      pattern: ranks files only: how the text is split before the merges, a name from
        ``PATTERNS`` or the exact regex string as tiktoken takes it (run by PCRE2).
        Default ``None``: ``"gpt2"``. Must be ``None`` for a ``.model``.
      special_tokens: ranks files only: a dict ``{text: id}`` of special tokens, ids that are
        not ranks of the file. Default ``None``: none. Text that spells one is plain text
        unless ``encode(..., allowed_special=True)``.

    Raises ``FileNotFoundError`` for a missing file, ``grist.Error`` (errno EBADMSG) for a
    corrupt one (the message names the line), ``ValueError`` for a bad pattern or special token.
    Pickles as its path and keywords (the file is read again where it is unpickled).
    """

    def __init__(self, path, *, pattern=None, special_tokens=None):
        self._path = _os.fspath(path)
        self._pattern = pattern
        self._special = dict(special_tokens) if special_tokens else None
        self._t = _grist.Tokenizer(self._path, pattern=pattern, special_tokens=self._special)
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
            extra = ", pattern=%r" % (self._pattern or "gpt2")
            if self._special:
                extra += ", special_tokens=<%d>" % len(self._special)
        return "grist.text.Tokenizer(%r, kind=%r, vocab_size=%d%s)" % (self._path, self.kind, self.vocab_size, extra)

    def __reduce__(self):
        return (_rebuild, (self._path, self._pattern, self._special))


def _rebuild(path, pattern, special_tokens):
    return Tokenizer(path, pattern=pattern, special_tokens=special_tokens)
