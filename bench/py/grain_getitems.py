#!/usr/bin/env python3
"""Baseline: Grain's batch read path, ArrayRecordDataSource.__getitems__.

Reads every record of FILES --epochs times, each epoch in its own shuffled order
(seed + epoch), in batches of --batch indices through one
grain.sources.ArrayRecordDataSource(FILES).__getitems__(batch): the C++ reader's
parallel batch read, with no Python per record. This is Grain's fastest way to
random records, the path MapDataset.source(...).batch() takes underneath.
Import, opening and the shuffles are not timed. Prints one JSON line
{"name", "records_per_s", "records", "seconds"} of the median of --runs runs.

    bench/py/grain_getitems.py /tmp/data.array_record --epochs 2
"""
import argparse
import random

import benchutil


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchutil.add_common_args(ap)
    ap.add_argument("--epochs", type=int, default=1, help="passes over all records per run (1)")
    args = ap.parse_args()
    if args.epochs < 1:
        raise SystemExit("--epochs must be at least 1")
    benchutil.quiet_absl()
    import grain
    benchutil.prepare(args)

    source = grain.sources.ArrayRecordDataSource(list(args.files))
    n = len(source)
    if n == 0:
        raise SystemExit("no records in %s" % " ".join(args.files))
    batches = []
    for epoch in range(args.epochs):
        order = list(range(n))
        random.Random(args.seed + epoch).shuffle(order)
        batches += [order[i:i + args.batch] for i in range(0, n, args.batch)]
    source.__getitems__(batches[0])  # open the readers before the clock starts

    def one_run():
        got = 0
        for b in batches:
            got += len(source.__getitems__(b))
        return got

    if args.seconds:
        state = {"next": 0}

        def one_batch():
            b = batches[state["next"]]
            state["next"] = (state["next"] + 1) % len(batches)
            return len(source.__getitems__(b))

        records, seconds = benchutil.timed_run(one_batch, args.seconds)
    else:
        records, seconds = benchutil.median_run(one_run, args.runs)
    benchutil.emit("grain_getitems", records, seconds)


if __name__ == "__main__":
    main()
