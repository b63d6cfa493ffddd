#!/usr/bin/env python3
"""Sequence packing: grist load --pack against the same load unpacked and against Grain's packer.

    bench/py/pack_bench.py /tmp/tokens.array_record --make 30000

--make writes N records of int32 tokens (lengths log-normal around --median tokens,
1 to 4 L, every 100th record empty) with the official writer. Then, on a warm page
cache:

  1. the record stream in grist's order (`grist load --print-indices`, same seed) is
     read into memory and Grain's packer runs over it, in Python:
     FirstFitPackIterDataset(length_struct={'tokens': L}, num_packing_bins=BINS,
     shuffle_bins=False) on each record cut to L tokens (or ConcatThenSplitIterDataset
     with --mode concat-split). Its tokens/s is input tokens over the time to iterate
     every packed row; its packing efficiency is real tokens over rows x L. This runs in
     a child process, so Grain's threads are gone before grist is timed.
  2. `grist load FILE --seed S --batch-size B --epochs E` runs with and without
     `--pack first-fit:L:BINS --token-bytes 4`, alternating which goes first, --runs
     times each; tokens/s is E x input tokens over the median wall time of the process,
     and tokens per cpu-second the same over its median user + system time (the steadier
     figure on a shared machine).
  3. one packed grist run of one epoch with --stats gives grist's packing efficiency,
     which must equal Grain's (the rows are the same).

Prints one JSON object with every figure and the ratios.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

import benchutil


def make_file(path, n, median, length, options, seed):
    import numpy as np
    from array_record.python import array_record_module as ar
    rng = np.random.default_rng(seed)
    lens = np.clip(rng.lognormal(np.log(median), 1.0, n).astype(np.int64), 1, 4 * length)
    w = ar.ArrayRecordWriter(path, options)
    for i in range(n):
        k = 0 if i % 100 == 37 else int(lens[i])
        w.write(rng.integers(0, 50000, k, dtype="<i4").tobytes())
    w.close()


def grist_cmd(args, extra):
    return [args.grist, "load", args.file, "--seed", str(args.seed), "--batch-size", str(args.batch)] + extra


def stream_records(args):
    """Records in the order grist delivers them (one epoch), as int32 arrays."""
    import numpy as np
    import grain
    out = subprocess.run(grist_cmd(args, ["--print-indices"]), check=True, capture_output=True).stdout.split()
    src = grain.sources.ArrayRecordDataSource([args.file])
    order = [int(x) for x in out]
    return [np.frombuffer(src[i], dtype="<i4") for i in order]


def grain_pack(args, records):
    import grain
    import grain.experimental as ge
    cut = args.length if args.mode == "first-fit" else None
    elems = [{"tokens": r[:cut]} for r in records]
    ds = grain.MapDataset.source(elems).to_iter_dataset()
    if args.mode == "first-fit":
        ds = ge.FirstFitPackIterDataset(ds, length_struct={"tokens": args.length}, num_packing_bins=args.bins,
                                        shuffle_bins=False)
    else:
        ds = ge.ConcatThenSplitIterDataset(ds, length_struct={"tokens": args.length})
    rows = real = 0
    t0 = time.perf_counter()
    for e in ds:
        rows += 1
        real += int((e["tokens_segment_ids"] != 0).sum())
    return time.perf_counter() - t0, rows, real


def timed(cmd):
    """(wall seconds, cpu seconds) of one run; cpu is the child's own user + system time."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit("%s: exit %d" % (" ".join(cmd), p.returncode))
    return wall, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--make", type=int, metavar="N", help="first write N token records to FILE")
    ap.add_argument("--median", type=int, default=256, help="median record length in tokens (256)")
    ap.add_argument("--options", default="group_size:16,uncompressed", help="writer options of a made file")
    ap.add_argument("--mode", choices=["first-fit", "concat-split"], default="first-fit")
    ap.add_argument("--length", type=int, default=1024, help="L, tokens per row (1024)")
    ap.add_argument("--bins", type=int, default=64, help="first-fit bins (64)")
    ap.add_argument("--batch", type=int, default=64, help="rows (and unpacked: records) per batch (64)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--epochs", type=int, default=10, help="epochs of each timed grist run (10)")
    ap.add_argument("--runs", type=int, default=5, help="timed grist runs each way; medians are used (5)")
    ap.add_argument("--grist", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "release",
                                                  "tools", "grist"))
    ap.add_argument("--no-grain", action="store_true", help="skip Grain (grist's figures only)")
    ap.add_argument("--grain-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--engine-args", default="", help="extra grist load arguments for both runs, e.g. "
                                                       "'--threads 2 --io mmap'")
    args = ap.parse_args()
    benchutil.quiet_absl()
    if args.make and not args.grain_child:
        make_file(args.file, args.make, args.median, args.length, args.options, args.seed)
    with open(args.file, "rb") as f:
        while f.read(1 << 24):
            pass

    if args.grain_child:
        # Grain and array_record leave threads behind: they run in this child process, so
        # the grist timings below share the machine with nothing of theirs.
        records = stream_records(args)
        sec, rows, real = grain_pack(args, records) if not args.no_grain else (0.0, 0, 0)
        print(json.dumps({"records": len(records), "tokens": sum(len(r) for r in records), "seconds": sec,
                          "rows": rows, "real": real}))
        return
    child = subprocess.run(["python3", os.path.abspath(__file__), "--grain-child"] + sys.argv[1:], check=True,
                           capture_output=True, text=True).stdout.splitlines()[-1]
    g = json.loads(child)
    tokens, nrecords = g["tokens"], g["records"]
    g_sec, g_rows, g_real = g["seconds"], g["rows"], g["real"]

    pack = ["--pack", "%s:%d:%d" % (args.mode, args.length, args.bins) if args.mode == "first-fit"
            else "concat-split:%d" % args.length, "--token-bytes", "4"]
    extra = args.engine_args.split() + ["--epochs", str(args.epochs)]
    plain_t, pack_t = [], []
    for i in range(args.runs):
        order = [(plain_t, []), (pack_t, pack)] if i % 2 == 0 else [(pack_t, pack), (plain_t, [])]
        for sink, opts in order:
            sink.append(timed(grist_cmd(args, opts + extra)))
    err = subprocess.run(grist_cmd(args, pack + args.engine_args.split() + ["--stats"]), check=True,
                         capture_output=True, text=True).stderr
    stats = dict(line.split(": ", 1) for line in err.splitlines() if ": " in line)
    eff = float(stats["packing efficiency"])
    plain_s, pack_s = statistics.median(w for w, _ in plain_t), statistics.median(w for w, _ in pack_t)
    plain_c, pack_c = statistics.median(c for _, c in plain_t), statistics.median(c for _, c in pack_t)
    plain_tps = args.epochs * tokens / plain_s
    pack_tps = args.epochs * tokens / pack_s
    out = {
        "mode": args.mode, "length": args.length, "bins": args.bins, "batch": args.batch,
        "records": nrecords, "tokens_per_epoch": tokens, "epochs": args.epochs,
        "grist_unpacked_s": round(plain_s, 4), "grist_packed_s": round(pack_s, 4),
        "grist_unpacked_tokens_per_s": round(plain_tps), "grist_packed_tokens_per_s": round(pack_tps),
        "packed_over_unpacked": round(pack_tps / plain_tps, 3),
        "grist_unpacked_cpu_s": round(plain_c, 4), "grist_packed_cpu_s": round(pack_c, 4),
        "packed_over_unpacked_per_cpu_s": round(plain_c / pack_c, 3),
        "grist_efficiency": eff,
        "runs_unpacked_s": [round(w, 3) for w, _ in plain_t], "runs_packed_s": [round(w, 3) for w, _ in pack_t],
    }
    if not args.no_grain:
        grain_tps = tokens / g_sec
        grain_eff = g_real / (g_rows * args.length)
        out.update({
            "grain_packer_s": round(g_sec, 3), "grain_packer_tokens_per_s": round(grain_tps),
            "grist_packed_over_grain_packer": round(pack_tps / grain_tps, 1),
            "grain_efficiency": round(grain_eff, 6),
            "efficiency_equal": abs(eff - grain_eff) < 1e-6 and int(stats["packed tokens"].split()[0]) == g_real,
        })
    print(json.dumps(out))


if __name__ == "__main__":
    random.seed(0)
    main()
