#!/usr/bin/env python3
"""Tokenizers alone, one thread: grist.text.Tokenizer against tiktoken and sentencepiece.

On the same corpus (Python's documentation text, pydoc_data.topics, one text per topic,
--copies times over), each round times, one after the other and alternating which goes first:
  - grist's tiktoken-format BPE and tiktoken.Encoding.encode_ordinary (the same ranks, --pattern);
  - grist's SentencePiece (a BPE model natively, src/text/spm_bpe.c; others through Debian's
    libsentencepiece) and sentencepiece's encode (the same .model);
then prints each one's median MB/s over --rounds, the ratios, and grist's encode_batch on
--threads threads. The ids of every text are checked equal first.

    bench/py/text_pipeline.py --ranks gpt2.tiktoken --model tokenizer.model.v1 --rounds 7

With --direct build/release/bench/bench_spm, the SentencePiece rounds add grist through Debian's
library (Tokenizer(sentencepiece_library=True)), Debian's library called directly from C++ and
grist's C call (bench/bench_spm.cc): what the shim costs, what the library's build costs against
PyPI's wheel, and what the native encoder gains.

    bench/py/text_pipeline.py --model tokenizer.model.v1 --direct build/release/bench/bench_spm --rounds 9

With --pipeline, MaxText's text pipeline instead, over an ArrayRecord file of tf.train.Examples
with a 'text' feature (the corpus, written once): parse, tokenize, BOS/EOS, trim to --length,
first-fit pack, batch --batch-size, shift. grist: Loader(text=TextSpec(...), pack="first-fit",
outputs="maxtext") on --threads threads. Grain: MaxText's steps (ArrayRecordDataSource,
shuffle, parse with example_pb2, the Python tokenizer, FirstFitPackIterDataset, batch_and_pad,
ShiftData) with 0, 1 and 2 mp_prefetch workers (--no-grain: none). Prints real tokens per
second, medians. Each round also times grist's tokenizer alone on one thread over the same
texts, which gives the tokenizer's bound (its one-thread MB/s x --threads): the pipeline's
MB/s against it, and the share of the pipeline's CPU time (all its threads, process_time)
that one-thread tokenization accounts for.

    bench/py/text_pipeline.py --pipeline --model tokenizer.model.v1 --threads 2 --rounds 3

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


def write_examples(path, texts):
    import numpy as np

    import grist
    ts = [t.encode() for t in texts]
    lens = np.array([0] + [len(t) for t in ts], dtype=np.uint64).cumsum().astype(np.uint64)
    recs = grist._grist.encode_examples([("text", "bytes", b"".join(ts), np.arange(len(ts) + 1, dtype=np.int64),
                                          lens)], len(ts))
    with grist.Writer(path, "group_size:1") as w:  # what Grain asks of its files
        for r in recs:
            w.write(r)


def shift_left(x, pad_id):
    import numpy as np
    return np.pad(x, [(0, 0), (0, 1)], constant_values=x.dtype.type(pad_id))[:, 1:]


def grain_maxtext(path, encode, bos, eos, pad_id, length, batch_size, workers):
    """MaxText's grain pipeline (grain_data_processing.py), its steps written with Grain's own pieces."""
    import functools

    import grain
    import grain.experimental as ge
    import numpy as np
    from tfrecord import example_pb2

    def parse(rec):
        ex = example_pb2.Example()
        ex.ParseFromString(rec)
        return ex.features.feature["text"].bytes_list.value[0].decode()

    def tokenize(text):
        ids = np.asarray([bos] + encode(text) + [eos], dtype=np.int32)[:length]
        return {"inputs": ids, "targets": ids}

    def shift(x):
        x["targets"] = shift_left(x["targets"], pad_id)
        x["targets_segmentation"] = shift_left(x["targets_segmentation"], 0)
        x["targets_segmentation"] = np.where(x["targets"] != pad_id, x["targets_segmentation"], 0)
        return x

    def rekey(e):
        return {k.replace("_segment_ids", "_segmentation").replace("_positions", "_position"): v for k, v in e.items()}

    ds = grain.MapDataset.source(grain.sources.ArrayRecordDataSource([path])).shuffle(seed=0).map(parse).map(tokenize)
    ds = ds.to_iter_dataset(grain.ReadOptions(num_threads=16, prefetch_buffer_size=500))
    ds = ge.FirstFitPackIterDataset(ds, length_struct={"inputs": length, "targets": length},
                                    num_packing_bins=batch_size, shuffle_bins=False).map(rekey)
    ds = ds.batch(batch_size, batch_fn=functools.partial(ge.batch_and_pad, batch_size=batch_size, pad_value=pad_id))
    ds = ds.map(shift)
    if workers:
        import sys

        from absl import flags
        if not flags.FLAGS.is_parsed():
            flags.FLAGS(sys.argv[:1], known_only=True)  # Grain's workers read absl flags
        ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers, per_worker_buffer_size=1))
    return ds


def test_patterns():
    """The oracle's patterns, written out in tests/python/test_text.py (not grist's own table)."""
    spec = importlib.util.spec_from_file_location(
        "tt", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python", "test_text.py"))
    tt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tt)
    return tt.PATTERNS


def pipeline(args, texts, kind):
    import tempfile

    import grist
    from grist.text import TextSpec, Tokenizer
    path = os.path.join(tempfile.mkdtemp(prefix="text_pipeline"), "examples.ar")
    write_examples(path, texts)
    if kind == "sentencepiece":
        import sentencepiece
        tok = Tokenizer(args.model)
        encode = sentencepiece.SentencePieceProcessor(model_file=args.model).encode
        spec = TextSpec(tok, max_length=args.length)
        title = "SentencePiece %s" % os.path.basename(args.model)
    else:
        import tiktoken
        tok = Tokenizer(args.ranks, pattern=args.pattern)
        enc = tiktoken.Encoding("b", pat_str=test_patterns()[args.pattern], mergeable_ranks=load_ranks(args.ranks),
                                special_tokens={})
        spec = TextSpec(tok, bos_id=tok.vocab_size, eos_id=tok.vocab_size + 1, max_length=args.length)

        def encode(t):  # MaxText's tiktoken wrapper: special-token text is plain text
            return enc.encode(t, disallowed_special=())
        title = "tiktoken format %s, %s pattern" % (os.path.basename(args.ranks), args.pattern)

    cpu = {}

    def run_grist():
        n = 0
        c0 = time.process_time()
        with grist.Loader(path, args.batch_size, seed=0, epochs=1, text=spec, pack="first-fit",
                          pack_length=args.length, outputs="maxtext", threads=args.threads) as loader:
            for b in loader:
                n += int((b["inputs_segmentation"] > 0).sum())
        cpu.setdefault("grist", []).append(time.process_time() - c0)
        return n

    def run_tokenizer():  # the bound: grist's tokenizer alone, one thread, the same texts
        c0 = time.process_time()
        n = sum(len(tok.encode(t)) for t in texts)
        cpu.setdefault("tokenizer", []).append(time.process_time() - c0)
        return n

    def run_grain(workers):
        def go():
            n = 0
            c0 = time.process_time()
            for b in grain_maxtext(path, encode, spec.bos_id, spec.eos_id, spec.pad_id, args.length,
                                   args.batch_size, workers):
                n += int((b["inputs_segmentation"] > 0).sum())
            if not workers:  # all of its work is in this process (its read threads too)
                cpu.setdefault("grain", []).append(time.process_time() - c0)
            return n
        return go

    runs = {"grist (%d threads)" % args.threads: run_grist, "grist tokenizer alone (1 thread)": run_tokenizer}
    for w in (() if args.no_grain else [int(x) for x in args.grain_workers.split(",") if x != ""]):
        runs["grain, %d mp_prefetch workers" % w] = run_grain(w)
    times = {n: [] for n in runs}
    tokens = {}
    names = list(runs)
    for r in range(args.rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            tokens[n] = runs[n]()
            times[n].append(time.perf_counter() - t0)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print("MaxText pipeline, %s, L=%d, batch %d, %d texts (%.2f MB), medians of %d rotated rounds:" % (
        title, args.length, args.batch_size, len(texts), mb, args.rounds))
    best = None
    for n in names:
        med = statistics.median(times[n])
        what = "ids" if n == names[1] else "tokens"  # the tokenizer alone: all ids; the batches: real tokens
        print("  %-34s %10.0f %s/s %7.2f MB/s   runs: %s" % (n, tokens[n] / med, what, mb / med,
                                                            " ".join("%.2f" % x for x in times[n])))
        if n.startswith("grain") and (best is None or med < best):
            best = med
    pipe, alone = statistics.median(times[names[0]]), statistics.median(times[names[1]])
    tok_cpu, pipe_cpu = statistics.median(cpu["tokenizer"]), statistics.median(cpu["grist"])
    print("  grist against the tokenizer's bound (one thread x %d, wall): %.2fx; CPU: tokenization %.2fs of the "
          "pipeline's %.2fs (%.0f%%)" % (args.threads, alone / (pipe * args.threads), tok_cpu, pipe_cpu,
                                        100 * tok_cpu / pipe_cpu))
    if best is not None:
        print("  grist / best grain = %.2fx (wall)" % (best / pipe))
        # on a machine without a free core the wall ratio hides the threads; CPU time per text does not
        print("  CPU time: grist %.2fs, grain with 0 workers %.2fs: %.2fx" % (
            pipe_cpu, statistics.median(cpu["grain"]), statistics.median(cpu["grain"]) / pipe_cpu))


def direct(args, texts, mb, tok, sp):
    from grist.text import Tokenizer
    """What the shim costs and what the library's build costs, one thread, the same texts.

    Each round times, in an order that rotates: PyPI's sentencepiece.encode; grist's
    Tokenizer.encode (Python); and one run of bench_spm (bench/bench_spm.cc), which times
    Debian's libsentencepiece called directly from C++ and grist_tokenizer_encode() from C, in
    turn, in one process (its start-up and model load are not timed). All four count the
    thread's CPU time (time.thread_time, CLOCK_THREAD_CPUTIME_ID), not wall time: on a shared,
    busy machine the time spent preempted is no one's encoder.
    """
    import json
    import subprocess
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".txt") as f:
        f.write(b"\0".join(t.encode() for t in texts))
        f.flush()
        lib = Tokenizer(args.model, sentencepiece_library=True)
        times = {"PyPI sentencepiece.encode": [], "grist Tokenizer.encode": [], "grist, library (Python)": [],
                 "Debian library, direct (C++)": [], "grist_tokenizer_encode (C)": []}

        def pypi():
            t0 = time.thread_time()
            for t in texts:
                sp.encode(t)
            times["PyPI sentencepiece.encode"].append(time.thread_time() - t0)

        def ours():
            t0 = time.thread_time()
            for t in texts:
                tok.encode(t)
            times["grist Tokenizer.encode"].append(time.thread_time() - t0)

        def library():
            t0 = time.thread_time()
            for t in texts:
                lib.encode(t)
            times["grist, library (Python)"].append(time.thread_time() - t0)

        def cxx():
            r = json.loads(subprocess.run([args.direct, args.model, f.name, "1"], check=True, capture_output=True,
                                          text=True).stdout)
            times["Debian library, direct (C++)"] += r["debian"]
            times["grist_tokenizer_encode (C)"] += r["grist"]

        runs = [pypi, ours, library, cxx]
        for r in range(args.rounds):
            for fn in runs[r % 4:] + runs[:r % 4]:
                fn()
    med = {n: statistics.median(v) for n, v in times.items()}
    print("SentencePiece (%s), one thread (%.2f MB, medians of %d rotated rounds):" % (
        os.path.basename(args.model), mb, args.rounds))
    for n, v in times.items():
        print("  %-30s %7.2f MB/s   %.2fx PyPI   runs: %s" % (n, mb / med[n], med["PyPI sentencepiece.encode"] / med[n],
                                                          " ".join("%.3f" % x for x in v)))
    print("  the native encoder: grist_tokenizer_encode / Debian's library direct = %.3fx the time" % (
        med["grist_tokenizer_encode (C)"] / med["Debian library, direct (C++)"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", help="a tiktoken ranks file (gpt2.tiktoken)")
    ap.add_argument("--pattern", default="cl100k", help="split pattern name (default cl100k)")
    ap.add_argument("--model", help="a SentencePiece .model")
    ap.add_argument("--copies", type=int, default=4, help="the corpus this many times (default 4)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2, help="encode_batch's and the loader's threads (default 2)")
    ap.add_argument("--pipeline", action="store_true", help="MaxText's pipeline against Grain (needs --model)")
    ap.add_argument("--length", type=int, default=2048, help="--pipeline: max_length and pack_length")
    ap.add_argument("--batch-size", type=int, default=8, help="--pipeline: rows per batch")
    ap.add_argument("--no-grain", action="store_true", help="--pipeline: grist and its tokenizer's bound only")
    ap.add_argument("--grain-workers", default="0,1,2",
                    help="--pipeline: the mp_prefetch worker counts Grain runs with (default 0,1,2)")
    ap.add_argument("--direct", metavar="BENCH_SPM",
                    help="the bench_spm program (build/release/bench/bench_spm): also time Debian's library "
                         "called directly and grist's C call, rotated with the Python ones")
    args = ap.parse_args()
    from grist.text import Tokenizer
    texts = corpus(args.copies)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    if args.pipeline:
        if not args.model and not args.ranks:
            ap.error("--pipeline needs --ranks or --model")
        if args.ranks:
            pipeline(args, texts, "tiktoken")
        if args.model:
            pipeline(args, texts, "sentencepiece")
        return
    if args.ranks:
        import tiktoken
        enc = tiktoken.Encoding("b", pat_str=test_patterns()[args.pattern], mergeable_ranks=load_ranks(args.ranks),
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
        if args.direct:
            direct(args, texts, mb, tok, sp)
        else:
            report("SentencePiece (%s), one thread" % os.path.basename(args.model),
                   pairs({"grist": tok.encode, "sentencepiece.encode": sp.encode}, texts, args.rounds), mb)
        t0 = time.perf_counter()
        tok.encode_batch(texts, threads=args.threads)
        print("  grist encode_batch, %d threads: %.2f MB/s" % (args.threads, mb / (time.perf_counter() - t0)))


if __name__ == "__main__":
    main()
