#!/usr/bin/env python3
"""Tokenizers alone, one thread: grist.text.Tokenizer against tiktoken and sentencepiece.

On the same corpus (Python's documentation text, pydoc_data.topics, one text per topic,
--copies times over), each round times, one after the other and alternating which goes first:
  - grist's tiktoken-format BPE and tiktoken.Encoding.encode_ordinary (the same ranks, --pattern);
  - grist's SentencePiece (Debian's libsentencepiece) and sentencepiece's encode (the same .model);
then prints each one's median MB/s over --rounds, the ratios, and grist's encode_batch on
--threads threads. The ids of every text are checked equal first.

    bench/py/text_pipeline.py --ranks gpt2.tiktoken --model tokenizer.model.v1 --rounds 7

Tokenizer files: see tests/python/test_text.py (openai-whisper's sdist, the mistral-common wheel).
"""
import argparse
import base64
import importlib.util
import os
import statistics
import time


def corpus(copies):
    import pydoc_data.topics
    texts = [pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics)]
    return texts * copies


def load_ranks(path):
    out = {}
    with open(path, "rb") as f:
        for line in f.read().splitlines():
            if line:
                tok, r = line.split()
                out[base64.b64decode(tok)] = int(r)
    return out


def pairs(fns, texts, rounds):
    """{name: fn(text)} timed over all of @texts, the order alternating each round: {name: [s]}."""
    names = list(fns)
    times = {n: [] for n in names}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            for t in texts:
                fns[n](t)
            times[n].append(time.perf_counter() - t0)
    return times


def report(title, times, mb):
    med = {n: statistics.median(v) for n, v in times.items()}
    print("%s (%.2f MB, medians of %d alternating rounds):" % (title, mb, len(next(iter(times.values())))))
    for n, s in med.items():
        print("  %-28s %8.2f MB/s   runs: %s" % (n, mb / s, " ".join("%.3f" % x for x in times[n])))
    a, b = list(med)
    print("  %s / %s = %.2fx" % (a, b, med[b] / med[a]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", help="a tiktoken ranks file (gpt2.tiktoken)")
    ap.add_argument("--pattern", default="cl100k", help="split pattern name (default cl100k)")
    ap.add_argument("--model", help="a SentencePiece .model")
    ap.add_argument("--copies", type=int, default=4, help="the corpus this many times (default 4)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2, help="encode_batch's threads (default 2)")
    args = ap.parse_args()
    from grist.text import Tokenizer
    texts = corpus(args.copies)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    if args.ranks:
        import tiktoken
        # the oracle's patterns, written out in the test file (not grist's own table)
        spec = importlib.util.spec_from_file_location(
            "tt", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python",
                               "test_text.py"))
        tt = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tt)
        enc = tiktoken.Encoding("b", pat_str=tt.PATTERNS[args.pattern], mergeable_ranks=load_ranks(args.ranks),
                                special_tokens={})
        tok = Tokenizer(args.ranks, pattern=args.pattern)
        assert all(tok.encode(t).tolist() == enc.encode_ordinary(t) for t in texts[:100])
        report("tiktoken format, %s pattern, one thread" % args.pattern,
               pairs({"grist": tok.encode, "tiktoken.encode_ordinary": enc.encode_ordinary}, texts, args.rounds), mb)
        t0 = time.perf_counter()
        tok.encode_batch(texts, threads=args.threads)
        print("  grist encode_batch, %d threads: %.2f MB/s" % (args.threads, mb / (time.perf_counter() - t0)))
    if args.model:
        import sentencepiece
        sp = sentencepiece.SentencePieceProcessor(model_file=args.model)
        tok = Tokenizer(args.model)
        assert all(tok.encode(t).tolist() == sp.encode(t) for t in texts[:100])
        report("SentencePiece (%s), one thread" % os.path.basename(args.model),
               pairs({"grist": tok.encode, "sentencepiece.encode": sp.encode}, texts, args.rounds), mb)
        t0 = time.perf_counter()
        tok.encode_batch(texts, threads=args.threads)
        print("  grist encode_batch, %d threads: %.2f MB/s" % (args.threads, mb / (time.perf_counter() - t0)))


if __name__ == "__main__":
    main()
