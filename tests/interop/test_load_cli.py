#!/usr/bin/env python3
"""grist load --mix / --layout and grist order --mix, end to end on files grist writes.

Everything is checked against figures computed here, in Python:
  - the dataset of every element of a mixed run follows Grain's smooth weighted
    interleave (MapDataset.mix): the weights are scaled so that the smallest is 100 and
    truncated to integers p_d; dataset 0 holds m - floor(m * (S - p_0) / S) of the first
    m elements (S = sum p_d), and the rest is split the same way among datasets 1.. with
    S - p_0. Each dataset is shuffled and repeated on its own, so its k-th element is
    its record at position k of its own stream (epoch k // n, a permutation of its n
    records per epoch), and a run of E epochs ends just before the first element that
    would start epoch E of some dataset;
  - the bytes: each batch's --digest is the XXH64 of the records that --print-indices
    names, looked up in the records written here (with pad bytes and pad rows for the
    padded layout), so every record is the right record of the right dataset;
  - engines, threads, I/O modes and resumed runs give the same batches;
  - bad rows for fixed and padded layouts fail with exit 1, bad options with exit 2.
"""
import math
import os
import random
import re
import shutil
import tempfile

import gristcli as g

TMP = tempfile.mkdtemp(prefix="grist-load-cli-")
XXH = None
RNG = random.Random(20240611)

# name -> (writer options, records); a dataset is one or more of these files in order
FILES = {}


def path(name):
    return os.path.join(TMP, name)


def make_file(name, options, records):
    g.write_records(path(name), options, records)
    FILES[name] = records


def ragged_records(tag, n):
    """@n distinct records of 0..~300 bytes: a tag, the index, random bytes (every 13th empty)."""
    out = []
    for i in range(n):
        if i % 13 == 7:
            out.append(b"")
            continue
        out.append(b"%s%d:" % (tag, i) + RNG.randbytes(RNG.choice([0, 1, 9, 40, 120, 250])))
    return out


def setup():
    global XXH
    XXH = g.XXH64()
    make_file("a1.ar", "group_size:1,zstd:3", ragged_records(b"a1.", 41))
    make_file("a2.ar", "group_size:4,snappy", ragged_records(b"a2.", 22))
    make_file("b.ar", "group_size:3,uncompressed", ragged_records(b"b.", 29))
    make_file("c.ar", "group_size:2,brotli", ragged_records(b"c.", 17))
    # large chunks: windows of many batches, handed out as views of one unit
    make_file("w.ar", "group_size:16,zstd:3", ragged_records(b"w.", 203))
    # 16-byte rows for the fixed layout
    make_file("f.ar", "group_size:5,zstd:1", [b"f%03d" % i + RNG.randbytes(12) for i in range(37)])
    make_file("h.ar", "group_size:1", [b"h%03d" % i + RNG.randbytes(12) for i in range(20)])
    # one row too long (record 5) and one too short (record 9) for fixed:16
    bad = [b"x%03d" % i + RNG.randbytes(12) for i in range(12)]
    bad[5] += b"!"
    make_file("long.ar", "group_size:1", bad[:9])
    make_file("short.ar", "group_size:2", bad[:5] + [b"x005" + RNG.randbytes(12)] + bad[6:9] + [b"x009"])


# The datasets the tests mix: groups of files (a '+' separates them on the command line).
A = ["a1.ar", "a2.ar"]
B = ["b.ar"]
C = ["c.ar"]


def dataset_records(files):
    return [r for f in files for r in FILES[f]]


def file_args(datasets):
    """FILE arguments for @datasets: groups separated by '+'."""
    args = []
    for k, files in enumerate(datasets):
        if k:
            args.append("+")
        args += [path(f) for f in files]
    return args


# ---------------------------------------------------------------- expected interleave

def scaled_weights(weights):
    lo = min(weights)
    return [int(math.floor(w / lo * 100.0)) for w in weights]


def prefix_counts(p, m):
    """How many of the first @m mixed elements each dataset holds (scaled weights @p)."""
    counts, total, rest = [], sum(p), m
    for d in range(len(p) - 1):
        c = rest - rest * (total - p[d]) // total
        counts.append(c)
        rest -= c
        total -= p[d]
    return counts + [rest]


def mix_order(weights, sizes, epochs, limit=None):
    """(dataset, position in that dataset's own stream) of each mixed element, in order:
    the element m goes to the dataset whose prefix count grows from m to m + 1. With
    @epochs > 0 the stream ends before a dataset would pass epochs * size records."""
    p = scaled_weights(weights)
    prev, out = [0] * len(p), []
    while limit is None or len(out) < limit:
        cur = prefix_counts(p, len(out) + 1)
        grew = [d for d in range(len(p)) if cur[d] != prev[d]]
        assert len(grew) == 1 and cur[grew[0]] == prev[grew[0]] + 1, (len(out), prev, cur)
        d = grew[0]
        if epochs and cur[d] > epochs * sizes[d]:
            break
        out.append((d, prev[d]))
        prev = cur
    return out


# ---------------------------------------------------------------- running and checking

def parse_load(out):
    """Batches of `load --digest --print-indices` output: [(digest, [(dataset, index)...])...].
    A digest is 16 hex digits; an index line is INDEX, or D:INDEX when mixing."""
    batches = []
    for ln in out.decode().splitlines():
        if re.fullmatch(r"[0-9a-f]{16}", ln):
            batches.append((ln, []))
        else:
            d, _, i = ln.rpartition(":")
            assert batches, "an index before the first digest: %r" % ln
            batches[-1][1].append((int(d) if d else 0, int(i)))
    return batches


def load(datasets, opts, weights=None):
    args = ["load"] + file_args(datasets) + ["--digest", "--print-indices"] + [str(o) for o in opts]
    if weights is not None:
        args += ["--mix", ",".join(str(w) for w in weights)]
    return parse_load(g.run_ok(args))


def rows_of(batch, data, layout=None, batch_size=None, pad=0):
    """The bytes of one batch as the library lays them out."""
    recs = [data[d][i] for d, i in batch]
    if layout is None or layout[0] == "fixed":
        return b"".join(recs)
    n = layout[1]
    filler = bytes([pad]) * n
    return b"".join(r + filler[len(r):] for r in recs) + filler * (batch_size - len(recs))


def check_batches(batches, datasets, batch_size, layout=None, pad=0):
    """Batch sizes, and every digest against the bytes of the records the batch names."""
    data = [dataset_records(files) for files in datasets]
    assert batches, "no batches"
    for k, (digest, items) in enumerate(batches):
        last = k == len(batches) - 1
        assert len(items) == batch_size or (last and 0 < len(items) < batch_size), \
            "batch %d has %d records (batch size %d)" % (k, len(items), batch_size)
        want = XXH.hex(rows_of(items, data, layout, batch_size, pad))
        assert digest == want, "batch %d: digest %s, the records it names give %s" % (k, digest, want)


def check_stream(items, datasets, weights, epochs, shuffle=True):
    """@items follow the interleave, and each dataset's own stream is epoch after epoch of
    its records: in index order without shuffle, a permutation of them per epoch with."""
    sizes = [len(dataset_records(files)) for files in datasets]
    want = mix_order(weights, sizes, epochs, None if epochs else len(items))
    got_ds, want_ds = [d for d, _ in items], [d for d, _ in want]
    if got_ds != want_ds:
        m = next((m for m, (x, y) in enumerate(zip(got_ds, want_ds)) if x != y), min(len(got_ds), len(want_ds)))
        raise AssertionError("element %d: dataset %s, the interleave says %s (%d elements, want %d)"
                             % (m, got_ds[m:m + 1], want_ds[m:m + 1], len(got_ds), len(want_ds)))
    own = [[] for _ in sizes]
    for d, i in items:
        own[d].append(i)
    for d, seq in enumerate(own):
        n = sizes[d]
        for e in range(0, len(seq), n):
            epoch = seq[e:e + n]
            if shuffle:
                assert len(set(epoch)) == len(epoch) and all(0 <= i < n for i in epoch), \
                    "dataset %d epoch %d is not a permutation of its records" % (d, e // n)
            else:
                assert epoch == list(range(len(epoch))), "dataset %d epoch %d out of order" % (d, e // n)


def flat(batches):
    return [it for _, items in batches for it in items]


# ---------------------------------------------------------------- tests

def test_interleave_matches_grain():
    # The interleave computed here is Grain's own, where Grain is installed.
    try:
        import logging
        logging.disable(logging.WARNING)
        import grain
    except Exception as e:  # grain missing or broken: nothing to compare with
        raise g.Skip("grain is not importable: %s" % e)
    for weights, sizes in (([3, 1], [63, 29]), ([2.5, 1, 0.7], [63, 29, 17]), ([1, 1], [5, 7])):
        parts = [grain.MapDataset.source([(d, i) for i in range(n)]).repeat() for d, n in enumerate(sizes)]
        mixed = grain.MapDataset.mix(parts, weights=weights)
        ours = mix_order(weights, sizes, 0, 700)
        theirs = [mixed[m] for m in range(700)]
        assert [(d, c % sizes[d]) for d, c in ours] == [tuple(x) for x in theirs], weights


def test_proportions_long_run():
    # Unbounded, 3:1, 250 batches: the datasets of every prefix follow the interleave.
    batches = load([A, B], ["--batch-size", 8, "--epochs", 0, "--seed", 3, "--stop-after", 250], [3, 1])
    items = flat(batches)
    assert len(items) == 2000
    check_stream(items, [A, B], [3, 1], 0)
    check_batches(batches, [A, B], 8)
    counts = [0, 0]
    for m, (d, _) in enumerate(items):
        counts[d] += 1
        assert counts[1] == (m + 1) // 4, "prefix %d holds %s" % (m + 1, counts)


def test_finite_epochs_and_index_order():
    # The run ends before A would start its third epoch; without shuffle indices are in order.
    for shuffle in (True, False):
        opts = ["--batch-size", 7, "--epochs", 2, "--seed", 11] + ([] if shuffle else ["--no-shuffle"])
        batches = load([A, B], opts, [3, 1])
        items = flat(batches)
        assert len(items) == len(mix_order([3, 1], [63, 29], 2)) == 168
        check_stream(items, [A, B], [3, 1], 2, shuffle)
        check_batches(batches, [A, B], 7)
    # three datasets, fractional weights (truncation of the scaled weights matters), B ends it
    batches = load([A, B, C], ["--batch-size", 9, "--epochs", 3, "--seed", 2], [2.5, 1, 0.7])
    check_stream(flat(batches), [A, B, C], [2.5, 1, 0.7], 3)
    check_batches(batches, [A, B, C], 9)


def test_one_file_per_dataset_and_single_weight():
    # Without '+' each FILE is a dataset; --mix with one weight is the plain run.
    batches = load([["a1.ar"], ["b.ar"]], ["--batch-size", 5, "--epochs", 1], [1, 1])
    check_stream(flat(batches), [["a1.ar"], ["b.ar"]], [1, 1], 1)
    check_batches(batches, [["a1.ar"], ["b.ar"]], 5)
    plain = g.run_ok(["load", path("a1.ar"), "--print-indices", "--digest", "--seed", 4])
    mixed = g.run_ok(["load", path("a1.ar"), "--mix", "2", "--print-indices", "--digest", "--seed", 4])
    assert plain == mixed and b":" not in plain


def test_order_matches_load():
    # `grist order --mix` prints the plan that `grist load --mix` delivers
    for epochs, extra in ((2, []), (2, ["--granularity", "chunk", "--window", "2"]), (1, ["--shard", "1/3"])):
        opts = ["--seed", "7", "--epochs", str(epochs)] + extra
        got = load([A, B, C], opts, [3, 1, 2])
        out = g.run_ok(["order", "--mix", "3,1,2"] + file_args([A, B, C]) + opts).decode().split()
        assert ["%d:%d" % it for it in flat(got)] == out, opts
        if not extra or extra[0] != "--shard":
            check_stream(flat(got), [A, B, C], [3, 1, 2], epochs)


def test_engines_threads_io_granularity():
    # The batches depend on the configuration only, never on how they are read.
    for gran in ("record", "chunk"):
        base = ["--batch-size", 6, "--epochs", 2, "--seed", 9, "--granularity", gran, "--window", 2]
        want = None
        for engine in ("ref", "uring", "pread"):
            for threads in (1, 2):
                for io in ("buffered", "mmap", "auto"):
                    got = load([A, B], base + ["--engine", engine, "--threads", threads, "--io", io], [3, 1])
                    if want is None:
                        want = got
                        check_stream(flat(got), [A, B], [3, 1], 2)
                        check_batches(got, [A, B], 6)
                    assert got == want, (gran, engine, threads, io)


def test_stats_per_dataset():
    args = ["load"] + file_args([A, B, C]) + ["--mix", "3,1,2", "--epochs", 1, "--print-indices", "--stats"]
    rc, out, err = g.run(args)
    assert rc == 0, err
    counts = [0, 0, 0]
    for ln in out.decode().split():
        counts[int(ln.split(":")[0])] += 1
    shown = [int(n) for _, n in re.findall(r"^dataset (\d+): (\d+) records$", err, re.M)]
    assert shown == counts and sum(counts) > 0, (shown, counts, err)
    rc, _, err = g.run(["load", path("b.ar"), "--stats"])
    assert rc == 0 and "dataset" not in err, err


def test_auto_maps_cached_files():
    # The default --io auto maps a file the page cache holds (all of b.ar once it was read).
    with open(path("b.ar"), "rb") as f:
        f.read()
    rc, _, err = g.run(["load", path("b.ar"), "--stats"])
    assert rc == 0 and re.search(r"^engine: \w+ \(mmap reads, ", err, re.M), err
    rc, _, err = g.run(["load", path("b.ar"), "--stats", "--io", "buffered"])
    assert rc == 0 and re.search(r"^engine: \w+ \(buffered reads, ", err, re.M), err


def test_resume_mixed():
    # A checkpoint of a mixed run resumes with exactly the rest, on other threads or engines.
    for gran in ("record", "chunk"):
        base = ["--batch-size", 8, "--epochs", 3, "--seed", 5, "--granularity", gran, "--window", 3]
        full = load([A, B], base + ["--threads", 2], [3, 1])
        check_stream(flat(full), [A, B], [3, 1], 3)
        state = path("ckpt")
        for k, threads, engine in ((1, 1, "uring"), (9, 2, "ref"), (len(full) - 1, 1, "pread")):
            head = load([A, B], base + ["--threads", 2, "--stop-after", k, "--save-state", state], [3, 1])
            assert head == full[:k], (gran, k)
            tail = load([A, B], base + ["--threads", threads, "--engine", engine, "--resume", state], [3, 1])
            assert tail == full[k:], "%s: resumed after %d batches differs" % (gran, k)
    # the weights are part of the checkpoint: other weights are refused
    load([A, B], ["--batch-size", 8, "--stop-after", 2, "--save-state", state], [3, 1])
    rc, _, err = g.run(["load"] + file_args([A, B]) + ["--mix", "3,2", "--batch-size", 8, "--resume", state])
    assert rc == 1 and "resume" in err, (rc, err)


def test_fixed_layout():
    F, H = ["f.ar"], ["h.ar"]
    for gran in ("record", "chunk"):
        opts = ["--layout", "fixed:16", "--batch-size", 7, "--epochs", 2, "--granularity", gran, "--seed", 8]
        batches = load([F, H], opts, [2, 1])
        check_stream(flat(batches), [F, H], [2, 1], 2)
        check_batches(batches, [F, H], 7, ("fixed", 16))
        assert len(flat(batches)) % 7, "want a short final batch"
        # fixed rows of same-size records are the ragged bytes
        assert batches == load([F, H], opts[2:], [2, 1])


def test_padded_layout():
    for gran, engine in (("record", "ref"), ("record", "uring"), ("chunk", "uring"), ("chunk", "ref")):
        opts = ["--layout", "padded:300", "--pad-value", 171, "--batch-size", 10, "--epochs", 1,
                "--granularity", gran, "--window", 2, "--engine", engine, "--seed", 6]
        batches = load([A, B], opts, [3, 1])
        assert len(flat(batches)) % 10, "want a short final batch"
        check_stream(flat(batches), [A, B], [3, 1], 1)
        check_batches(batches, [A, B], 10, ("padded", 300), 171)
        single = load([A], opts)
        assert len(flat(single)) == 63
        check_batches(single, [A], 10, ("padded", 300), 171)
    # windows of 64 records cut into batches of 10, the last padded
    for engine in ("ref", "uring"):
        opts = ["--layout", "padded:300", "--pad-value", 1, "--batch-size", 10, "--epochs", 2,
                "--granularity", "chunk", "--window", 4, "--engine", engine]
        check_batches(load([["w.ar"]], opts), [["w.ar"]], 10, ("padded", 300), 1)
    # the default pad byte is 0; drop-remainder drops the padded batch
    batches = load([B], ["--layout", "padded:256", "--batch-size", 4])
    check_batches(batches, [B], 4, ("padded", 256), 0)
    assert len(load([B], ["--layout", "padded:256", "--batch-size", 4, "--drop-remainder"])) == len(batches) - 1


def test_rows_that_do_not_fit():
    for name, layout, index, what in (("long.ar", "fixed:16", 5, "exceed"), ("long.ar", "padded:16", 5, "exceed"),
                                      ("short.ar", "fixed:16", 9, "do not fill")):
        rc, _, err = g.run(["load", path(name), "--layout", layout, "--no-shuffle", "--batch-size", 4])
        assert rc == 1, (name, layout, rc, err)
        assert re.search(r"\brecord %d\b" % index, err) and what in err and "16" in err, err
        assert path(name) + ": chunk at byte " in err, err  # where the record lives
    # the same files fit wider rows
    g.run_ok(["load", path("long.ar"), "--layout", "padded:17"])


def test_max_batch_bytes():
    """A ragged batch over --max-batch-bytes stops every engine with the same error, at the same
    batch; at exactly the largest batch's size the run goes through."""
    for gran in ("record", "chunk"):
        opts = ["--batch-size", 8, "--seed", 3, "--granularity", gran, "--window", 3]
        digests = g.run_ok(["load", path("w.ar"), "--digest"] + opts)
        lens = [len(FILES["w.ar"][int(i)]) for i in g.run_ok(["load", path("w.ar"), "--print-indices"] + opts).split()]
        sizes = [sum(lens[k:k + 8]) for k in range(0, len(lens), 8)]
        largest = max(sizes)
        first_over = sizes.index(largest)
        for engine in ("ref", "uring", "pread"):
            common = ["load", path("w.ar"), "--engine", engine, "--digest"] + opts
            rc, out, err = g.run(common + ["--max-batch-bytes", largest])
            assert rc == 0 and out == digests, (engine, gran, err)
            rc, out, err = g.run(common + ["--max-batch-bytes", largest - 1])
            assert rc == 1 and "more than max_batch_bytes (%d)" % (largest - 1) in err, (engine, gran, rc, err)
            assert "batch %d holds %d bytes" % (first_over, largest) in err, (engine, gran, err)



BAD = [
    (["--mix", "3,0"], "--mix: weight 2 is '0'; weights must be > 0"),
    (["--mix", "-1,1"], "--mix: weight 1 is '-1'; weights must be > 0"),
    (["--mix", "3,nan"], "--mix: weight 2 ('nan') is not a decimal number"),
    (["--mix", "inf,1"], "--mix: weight 1 ('inf') is not a decimal number"),
    (["--mix", "3,x1"], "--mix: weight 2 ('x1') is not a decimal number"),
    (["--mix", "3,1e999"], "--mix: weight 2 ('1e999') is not a finite number"),
    (["--mix", "3,,1"], "--mix: weight 2 is empty"),
    (["--mix", "3,1,"], "--mix: weight 3 is empty"),
    (["--mix", ""], "--mix: weight 1 is empty"),
    (["--mix", "3,1,1"], "--mix has 3 weights but 2 datasets are given (one per FILE)"),
    (["--mix", "1,1e-300"], "weights too uneven"),
    (["--layout", "fixed"], "fixed and padded layouts need record_bytes > 0"),
    (["--layout", "fixed:0"], "record_bytes: '0' is not a size in 1..1GiB"),
    (["--layout", "padded:-4"], "record_bytes: '-4' is not a size"),
    (["--layout", "square:4"], "layout: 'square:4' is not one of ragged, fixed, padded"),
    (["--layout", "padded:8", "--pad-value", "256"], "pad_value: '256' is not a whole number in 0..255"),
    (["--pad-value", "3"], "--pad-value needs --layout padded:N"),
    (["--layout", "fixed:8", "--pad-value", "0"], "--pad-value needs --layout padded:N"),
    (["--layout", "padded:1073741824", "--batch-size", "4096"], "is larger than max_batch_bytes"),
    (["--layout", "fixed:1048576", "--batch-size", "65"], "65 rows of 1048576 bytes is larger than max_batch_bytes"),
    (["--layout", "fixed:100", "--batch-size", "10", "--max-batch-bytes", "999"], "larger than max_batch_bytes (999)"),
    (["--max-batch-bytes", "0"], "max_batch_bytes: '0' is not a size"),
    (["--stop-after", "2", "--save-state", "s3://b/state"], "--save-state takes a local file, not a URL"),
    (["--stop-after", "2", "--save-state", "/no-such-folder/state"],
     "--save-state: cannot write a file in '/no-such-folder': No such file or directory"),
]


def test_bad_options():
    files = [path("a1.ar"), path("b.ar")]
    for opts, msg in BAD:
        rc, out, err = g.run(["load"] + files + opts)
        first = err.splitlines()[0] if err else ""
        assert rc == 2 and msg in first and first.startswith("grist load: "), (opts, rc, err)
        assert out == b"", opts
    for args, msg in ((["load", "--mix", "1,1", path("a1.ar"), "+"], "dataset 1 of --mix has no files"),
                      (["load", "--mix", "1,1", "+", path("a1.ar")], "dataset 0 of --mix has no files"),
                      (["load", "--mix", "1,1,1", path("a1.ar"), "+", path("b.ar")],
                       "--mix has 3 weights but 2 datasets are given (groups of FILEs separated by '+')"),
                      (["order", "--mix", "1,1", "--records", "10"], "--mix needs FILEs"),
                      (["order", "--mix", "1,0", path("a1.ar"), path("b.ar")], "weights must be > 0"),
                      (["order", "--mix", "1", path("a1.ar"), path("b.ar")], "--mix has 1 weight but 2")):
        rc, _, err = g.run(args)
        assert rc == 2 and msg in err, (args, rc, err)


def main():
    try:
        setup()
        g.main([test_interleave_matches_grain, test_proportions_long_run, test_finite_epochs_and_index_order,
                test_one_file_per_dataset_and_single_weight, test_order_matches_load,
                test_engines_threads_io_granularity, test_stats_per_dataset, test_auto_maps_cached_files,
                test_resume_mixed,
                test_fixed_layout, test_padded_layout, test_rows_that_do_not_fit, test_max_batch_bytes,
                test_bad_options])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
