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
    batches = benchutil.shuffled_batches(n, args.batch, args.seed, args.epochs)
    source.__getitems__(batches[0])  # open the readers before the clock starts
    records, seconds = benchutil.read_batches(source.__getitems__, batches, args)
    benchutil.emit("grain_getitems", records, seconds)


if __name__ == "__main__":
    main()
