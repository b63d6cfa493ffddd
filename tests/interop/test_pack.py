#!/usr/bin/env python3
"""grist load --pack against Grain's own packers, end to end on files grist writes.

The same record stream is built twice: grist's delivery order (`grist load
--print-indices`, same seed, shard, epochs and mix) looked up in the records written
here, fed to grain.experimental.FirstFitPackIterDataset(shuffle_bins=False) or
ConcatThenSplitIterDataset (for first-fit each record cut to L tokens first, which
grist does itself); and `grist load --pack ... --print-packed`. The rows, segment ids and
positions must be equal, for several L and BINS, with empty and over-long records.
--pack-bos against ConcatThenSplitIterDataset(bos_handling=REPLACE_FIRST_TOKEN_WITH_BOS).
Also: resume in the middle of a round gives exactly the rest; engines, threads and
queue depths give the same digests; --stats efficiency equals Grain's; bad token
widths and bad records fail with the right exit status and message.
Exit 77 (skip) when grain is not importable.
"""
import json
import os
import random
import shutil
import tempfile

import gristcli as g

TMP = tempfile.mkdtemp(prefix="grist-pack-")
RNG = random.Random(20261122)
DTYPES = {1: "<u1", 2: "<u2", 4: "<u4"}
FILES = {}  # name -> (token_bytes, records as lists of ints)


def path(name):
    return os.path.join(TMP, name)


def token_records(n, width, max_len):
    """@n records of tokens: every 11th empty, some far longer than any L used here."""
    top = (1 << (8 * width)) - 1
    out = []
    for i in range(n):
        if i % 11 == 3:
            out.append([])
            continue
        ln = RNG.choice([1, 2, 5, 17, 40, 63, 64, 65, 100, max_len, RNG.randrange(1, max_len + 1)])
        out.append([RNG.randrange(0, top + 1) for _ in range(ln)])
    return out


def encode(tokens, width):
    return b"".join(t.to_bytes(width, "little") for t in tokens)


def make_file(name, width, records, options="group_size:8,zstd:1"):
    g.write_records(path(name), options, [encode(r, width) for r in records])
    FILES[name] = (width, records)


def setup():
    make_file("t16.ar", 2, token_records(700, 2, 300))
    make_file("t8.ar", 1, token_records(150, 1, 90), "group_size:1,snappy")
    make_file("t32.ar", 4, token_records(200, 4, 150), "group_size:4")
    make_file("u16.ar", 2, token_records(90, 2, 120))
    # without empty records, for --pack-bos (see test_concat_split_bos_matches_grain)
    make_file("n16.ar", 2, [r for r in token_records(300, 2, 300) if r])
    make_file("n8.ar", 1, [r for r in token_records(100, 1, 90) if r], "group_size:1,snappy")
    make_file("n32.ar", 4, [r for r in token_records(80, 4, 150) if r], "group_size:4")


def grain():
    try:
        import grain as gr  # noqa: F401
        import grain.experimental as ge
        import numpy as np
    except ImportError as e:
        raise g.Skip("grain is not importable: %s" % e)
    return ge, np


def stream(files, opts):
    """The records grist delivers, in order, for @files (one dataset or --mix groups)."""
    out = g.run_ok(["load"] + files + ["--print-indices", "--batch-size", "7"] + opts).decode().split()
    datasets = [f for f in files if f != "+"] if "--mix" in opts else [None]
    recs = []
    for line in out:
        if ":" in line:
            d, i = line.split(":")
            recs.append(FILES[os.path.basename(datasets[int(d)])][1][int(i)])
        else:
            # one dataset of several files: indices count through the files in order
            i = int(line)
            for f in files:
                rs = FILES[os.path.basename(f)][1]
                if i < len(rs):
                    recs.append(rs[i])
                    break
                i -= len(rs)
    return recs


def grain_rows(records, width, mode, length, bins=None, bos=None):
    ge, np = grain()
    import grain as gr
    cut = length if mode == "first-fit" else None  # Grain's first-fit wants the cut as a map before it
    elems = [{"tokens": np.asarray(r[:cut], dtype=DTYPES[width])} for r in records]
    ds = gr.MapDataset.source(elems).to_iter_dataset()
    if mode == "first-fit":
        ds = ge.FirstFitPackIterDataset(ds, length_struct={"tokens": length}, num_packing_bins=bins,
                                        shuffle_bins=False)
    else:
        kw = {} if bos is None else dict(bos_handling=ge.BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS, bos_token_id=bos,
                                         bos_features={"tokens"})
        ds = ge.ConcatThenSplitIterDataset(ds, length_struct={"tokens": length}, **kw)
    return [{"tokens": [int(x) for x in e["tokens"]],
             "segment_ids": [int(x) for x in e["tokens_segment_ids"]],
             "positions": [int(x) for x in e["tokens_positions"]]} for e in ds]


def grist_rows(files, opts):
    out = g.run_ok(["load"] + files + ["--print-packed"] + opts).decode()
    return [json.loads(line) for line in out.splitlines()]


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return "row %d: grist %s\n grain %s" % (i, x, y)
    return "grist %d rows, grain %d rows" % (len(a), len(b))


def pack_opt(mode, length, bins):
    return "first-fit:%d:%d" % (length, bins) if mode == "first-fit" and bins else \
        "first-fit:%d" % length if mode == "first-fit" else "concat-split:%d" % length


def check_equal(files, width, mode, length, bins, batch, opts, bos=None):
    recs = stream([path(f) if f != "+" else f for f in files], opts)
    want = grain_rows(recs, width, mode, length, bins if bins else batch, bos)
    got = grist_rows([path(f) if f != "+" else f for f in files],
                     ["--pack", pack_opt(mode, length, bins), "--token-bytes", str(width), "--batch-size",
                      str(batch)] + (["--pack-bos", str(bos)] if bos is not None else []) + opts)
    assert got == want, "%s L=%d bins=%s %s: %s" % (mode, length, bins, opts, first_diff(got, want))
    return want


def test_first_fit_matches_grain():
    for length, bins, batch in [(64, 4, 4), (64, 1, 3), (128, 8, 5), (300, 3, 2), (1, 2, 2), (97, None, 6)]:
        check_equal(["t16.ar"], 2, "first-fit", length, bins, batch, ["--seed", "5"])
    check_equal(["t8.ar"], 1, "first-fit", 50, 6, 4, ["--no-shuffle"])
    check_equal(["t32.ar"], 4, "first-fit", 80, 16, 16, ["--seed", "9"])


def test_concat_split_matches_grain():
    for length, batch in [(64, 4), (17, 3), (128, 8), (300, 1), (1, 5)]:
        check_equal(["t16.ar"], 2, "concat-split", length, None, batch, ["--seed", "3"])
    check_equal(["t8.ar"], 1, "concat-split", 33, None, 2, ["--no-shuffle"])
    check_equal(["t32.ar"], 4, "concat-split", 200, None, 4, ["--seed", "1"])


def test_concat_split_bos_matches_grain():
    """--pack-bos: Grain's REPLACE_FIRST_TOKEN_WITH_BOS with bos_features={'tokens'}, BOS ids at both ends of the
    token width. The files here have no empty records: where one follows a sequence that filled its row exactly,
    Grain's write of its BOS raises IndexError (the hand-made cases below)."""
    for width, name, length, bos, batch in [(2, "n16.ar", 64, 65535, 4), (2, "n16.ar", 23, 0, 3),
                                            (1, "n8.ar", 33, 255, 2), (4, "n32.ar", 150, 128000, 2)]:
        want = check_equal([name], width, "concat-split", length, None, batch, ["--seed", "3"], bos=bos)
        assert all(r["tokens"][0] == bos for r in want) and len(want) > 20
    # an empty sequence ending the last row, which has room: BOS in the padding (segment id 0), as Grain writes it
    make_file("e.ar", 2, [[1, 2, 3], [], [4, 5, 6, 7], []], "group_size:1")
    opts = ["--no-shuffle", "--epochs", "1"]
    want = check_equal(["e.ar"], 2, "concat-split", 4, None, 2, opts, bos=9)
    assert [(r["tokens"], r["segment_ids"]) for r in want] == [([9, 2, 3, 9], [1, 1, 1, 3]),
                                                                ([9, 6, 7, 9], [1, 1, 1, 0])], want
    # an empty sequence in a full row: Grain's write of its BOS raises IndexError; grist writes none
    recs = [[1, 2, 3, 4], [], [5, 6]]
    make_file("f.ar", 2, recs, "group_size:1")
    try:
        grain_rows(recs, 2, "concat-split", 4, bos=9)
        raise AssertionError("Grain wrote a BOS past a full row")
    except IndexError:
        pass
    plain = grain_rows(recs, 2, "concat-split", 4)
    got = grist_rows([path("f.ar")], ["--pack", "concat-split:4", "--token-bytes", "2", "--pack-bos", "9"] + opts)
    for r in plain:
        r["tokens"] = [9 if i < 4 and r["segment_ids"][i] and (i == 0 or r["segment_ids"][i - 1] !=
                                                                r["segment_ids"][i]) else t
                       for i, t in enumerate(r["tokens"])]
    assert got == plain, (got, plain)


def test_composes_upstream():
    """Shard, epochs, chunk granularity and mixing run before the packer."""
    for mode in ("first-fit", "concat-split"):
        check_equal(["t16.ar"], 2, mode, 100, 5, 4, ["--seed", "2", "--shard", "1/3", "--epochs", "2"])
        check_equal(["t16.ar"], 2, mode, 64, 4, 4, ["--granularity", "chunk", "--window", "3"])
        check_equal(["t16.ar", "u16.ar"], 2, mode, 70, 3, 3, ["--seed", "4", "--mix", "2,1", "--epochs", "1"])
        check_equal(["t16.ar", "u16.ar"], 2, mode, 90, 7, 2, ["--seed", "8", "--contiguous-shards",
                                                              "--shard", "0/2"])


def test_drop_remainder_and_stats():
    recs = stream([path("t16.ar")], ["--seed", "6"])
    want = grain_rows(recs, 2, "first-fit", 120, 6)
    assert len(want) % 4, "the test needs a short last batch"
    rc, out, err = g.run([ "load", path("t16.ar"), "--seed", "6", "--pack", "first-fit:120:6", "--token-bytes", "2",
                          "--batch-size", "4", "--drop-remainder", "--print-packed", "--stats"])
    assert rc == 0, err
    got = [json.loads(x) for x in out.decode().splitlines()]
    assert got == want[:len(want) // 4 * 4], first_diff(got, want)
    real = sum(sum(1 for s in r["segment_ids"] if s) for r in got)
    eff = real / (len(got) * 120)
    line = [x for x in err.splitlines() if x.startswith("packing efficiency:")]
    assert line and abs(float(line[0].split()[-1]) - eff) < 1e-6, (line, eff)
    assert "packed tokens: %d of %d" % (real, len(got) * 120) in err, err


def digests(opts):
    return g.run_ok(["load", path("t16.ar"), "--digest"] + opts).decode().split()


def test_resume_mid_round():
    """Every stop point, including ones inside a round of 8 bins delivered 3 rows at a time."""
    for pack in ("first-fit:64:8", "concat-split:40"):
        base = ["--seed", "11", "--pack", pack, "--token-bytes", "2", "--batch-size", "3"]
        full = digests(base)
        assert len(full) > 20
        for stop in (1, 2, 3, 5, 8, 13, len(full) - 1, len(full)):
            st = path("state-%d" % stop)
            head = digests(base + ["--stop-after", str(stop), "--save-state", st])
            tail = digests(base + ["--resume", st, "--engine", "ref"])
            assert head + tail == full, "%s: resume after %d batches differs" % (pack, stop)
        # the rows themselves, too, with --print-packed after a resume in the middle of a round
        rows = grist_rows([path("t16.ar")], base)
        st = path("state-rows")
        g.run_ok(["load", path("t16.ar")] + base + ["--stop-after", "4", "--save-state", st])
        assert grist_rows([path("t16.ar")], base + ["--resume", st]) == rows[12:]


def test_engines_threads_depths_agree():
    for pack in ("first-fit:96:5", "concat-split:96"):
        base = ["--seed", "7", "--pack", pack, "--token-bytes", "2", "--batch-size", "4"]
        want = digests(base + ["--engine", "ref"])
        for extra in (["--engine", "uring", "--threads", "1"], ["--engine", "uring", "--threads", "2",
                      "--queue-depth", "1"], ["--engine", "pread", "--threads", "2"], ["--io", "mmap"],
                      ["--engine", "uring", "--threads", "2", "--prefetch", "1"]):
            assert digests(base + extra) == want, "%s %s differs from ref" % (pack, extra)


def test_digest_covers_ids_and_positions():
    """The digest is XXH64 of tokens, then segment ids, then positions (uint32 LE)."""
    import struct
    xxh = g.XXH64()
    opts = ["--seed", "3", "--pack", "concat-split:50", "--token-bytes", "2", "--batch-size", "2"]
    rows = grist_rows([path("t16.ar")], opts)
    want = []
    for i in range(0, len(rows), 2):
        part = rows[i:i + 2]
        blob = b"".join(struct.pack("<%dH" % 50, *r["tokens"]) for r in part)
        blob += b"".join(struct.pack("<%dI" % 50, *r["segment_ids"]) for r in part)
        blob += b"".join(struct.pack("<%dI" % 50, *r["positions"]) for r in part)
        want.append("%016x" % xxh(blob))
    assert digests(opts) == want


def test_bad_records_and_options():
    # a 2-byte-token file read as 4-byte tokens: an odd number of tokens somewhere is an error naming it
    rc, out, err = g.run(["load", path("t16.ar"), "--no-shuffle", "--pack", "first-fit:64", "--token-bytes", "4"])
    assert rc == 1 and "t16.ar" in err and "record" in err and "4-byte tokens" in err, (rc, err)
    g.write_records(path("odd.ar"), "group_size:1", [b"\x01\x00", b"\x01\x00\x02"])
    rc, out, err = g.run(["load", path("odd.ar"), "--no-shuffle", "--pack", "concat-split:8", "--token-bytes", "2"])
    assert rc == 1 and "odd.ar" in err and "record 1" in err and "3 bytes" in err, (rc, err)
    bad = [
        ["--pack", "first-fit:64", "--token-bytes", "3"],
        ["--pack", "first-fit:64", "--token-bytes", "0"],
        ["--pack", "first-fit:64", "--token-bytes", "8"],
        ["--pack", "first-fit:64"],
        ["--token-bytes", "2"],
        ["--print-packed"],
        ["--pack", "first-fit:0", "--token-bytes", "2"],
        ["--pack", "first-fit:64:0", "--token-bytes", "2"],
        ["--pack", "concat-split:64:2", "--token-bytes", "2"],
        ["--pack", "worst-fit:64", "--token-bytes", "2"],
        ["--pack", "best-fit:64:1:3", "--token-bytes", "2"],
        ["--pack-piece", "8", "--token-bytes", "2"],  # pieces need a pack mode
        ["--pack", "first-fit:64", "--token-bytes", "2", "--pack-bos", "1"],  # BOS is concat-split's
        ["--pack", "concat-split:64", "--token-bytes", "1", "--pack-bos", "256"],  # wider than a token
        ["--pack", "concat-split:64", "--token-bytes", "2", "--pack-bos", "-1"],
        ["--pack", "first-fit:64", "--token-bytes", "2", "--print-indices"],
        ["--pack", "first-fit:64", "--token-bytes", "2", "--layout", "fixed:4"],
        ["--pack", "first-fit:4096:1000000", "--token-bytes", "4"],  # bins larger than max_batch_bytes
    ]
    for opts in bad:
        rc, out, err = g.run(["load", path("t16.ar")] + opts)
        assert rc == 2 and err.strip(), (opts, rc, err)


def test_state_mismatch_is_refused():
    st = path("plain-state")
    g.run_ok(["load", path("t16.ar"), "--seed", "1", "--stop-after", "2", "--save-state", st])
    rc, out, err = g.run(["load", path("t16.ar"), "--seed", "1", "--pack", "first-fit:64", "--token-bytes", "2",
                          "--resume", st])
    assert rc != 0 and "resume" in err, (rc, err)
    pst = path("packed-state")
    g.run_ok(["load", path("t16.ar"), "--seed", "1", "--pack", "first-fit:64", "--token-bytes", "2",
              "--stop-after", "2", "--save-state", pst])
    for other in (["--pack", "first-fit:65", "--token-bytes", "2"], ["--pack", "concat-split:64",
                  "--token-bytes", "2"], ["--pack", "first-fit:64:3", "--token-bytes", "2"], []):
        rc, out, err = g.run(["load", path("t16.ar"), "--seed", "1", "--resume", pst] + other)
        assert rc != 0 and "resume" in err, (other, rc, err)


def main():
    try:
        grain()
        setup()
        g.main([test_first_fit_matches_grain, test_concat_split_matches_grain, test_concat_split_bos_matches_grain,
                test_composes_upstream,
                test_drop_remainder_and_stats, test_resume_mid_round, test_engines_threads_depths_agree,
                test_digest_covers_ids_and_positions, test_bad_records_and_options, test_state_mismatch_is_refused])
    except g.Skip as e:
        print("skip: %s" % e)
        raise SystemExit(g.EXIT_SKIP)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
