#!/usr/bin/env python3
"""grist.ArrayRecordDataSource beside grain.sources.ArrayRecordDataSource, side by side.

Both sources open the same FILE(s). Per round, each side reads (alternating which goes
first): __getitems__ of --batches batches of 256 shuffled indices, and [i] for --singles
shuffled indices. Prints one JSON line per measure with both sides' records/s (medians
over --runs rounds) and the median of the rounds' ratios grist / grain (each round's two
sides ran back to back, so a drift in the machine's speed cancels in its ratio).

    bench/py/grist_source.py FILE --runs 5

With --grist-only, Grain is not imported and only grist's __getitems__ rounds run (the
same batches for the same --seed): a fixed amount of work for whole-process timings, e.g.
of two builds of the grist package side by side.
"""
import argparse
import json
import random
import statistics
import time

import benchutil


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchutil.add_common_args(ap)
    ap.add_argument("--batches", type=int, default=40, help="__getitems__ calls per round (40)")
    ap.add_argument("--singles", type=int, default=2000, help="[i] calls per round (2000)")
    ap.add_argument("--grist-only", action="store_true",
                    help="only grist's __getitems__ rounds, no Grain (for whole-process timings)")
    args = ap.parse_args()
    benchutil.quiet_absl()
    import grist
    benchutil.prepare(args)

    sides = {"grist": grist.ArrayRecordDataSource(list(args.files))}
    n = len(sides["grist"])
    rng = random.Random(args.seed)
    if args.grist_only:
        batches = [rng.sample(range(n), args.batch) for _ in range(args.runs * args.batches)]
        t0, total = time.perf_counter(), 0
        for b in batches:
            total += len(sides["grist"].__getitems__(b))
        print(json.dumps({"measure": "grist __getitems__(%d shuffled indices)" % args.batch,
                          "records_per_s": round(total / (time.perf_counter() - t0), 1), "runs": args.runs}))
        return
    import grain
    sides["grain"] = grain.sources.ArrayRecordDataSource(list(args.files))

    def getitems(src, batches):
        t0 = time.perf_counter()
        for b in batches:
            src.__getitems__(b)
        return sum(map(len, batches)) / (time.perf_counter() - t0)

    def singles(src, idx):
        t0 = time.perf_counter()
        for i in idx:
            src[i]
        return len(idx) / (time.perf_counter() - t0)

    rates = {(m, s): [] for m in ("getitems", "getitem") for s in sides}
    for k in range(args.runs):
        batches = [rng.sample(range(n), args.batch) for _ in range(args.batches)]
        idx = [rng.randrange(n) for _ in range(args.singles)]
        order = ["grist", "grain"] if k % 2 == 0 else ["grain", "grist"]
        for side in order:
            rates[("getitems", side)].append(getitems(sides[side], batches))
        for side in order:
            rates[("getitem", side)].append(singles(sides[side], idx))
    for m, what in (("getitems", "__getitems__(%d shuffled indices)" % args.batch), ("getitem", "[i], shuffled i")):
        g, r = statistics.median(rates[(m, "grist")]), statistics.median(rates[(m, "grain")])
        ratios = [a / b for a, b in zip(rates[(m, "grist")], rates[(m, "grain")])]
        print(json.dumps({"measure": what, "grist_records_per_s": round(g, 1), "grain_records_per_s": round(r, 1),
                          "ratio": round(statistics.median(ratios), 2), "ratio_min": round(min(ratios), 2),
                          "ratio_max": round(max(ratios), 2), "runs": args.runs}))


if __name__ == "__main__":
    main()
