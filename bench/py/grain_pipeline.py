#!/usr/bin/env python3
"""Baseline: a Grain pipeline over ArrayRecord files, iterated in Python.

    grain.MapDataset.source(grain.sources.ArrayRecordDataSource(FILES))
        .shuffle(seed).batch(256)

iterated for N batches (all by default; the iterator is Grain's own, with its
default read threads and prefetch). Prints one JSON line
{"name", "records_per_s", "records", "seconds"} of the median of 3 runs.

    bench/py/grain_pipeline.py /tmp/1m.array_record --batches 2000
"""
import argparse

import benchutil


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchutil.add_common_args(ap)
    ap.add_argument("--batches", type=int, help="batches per run (default: one epoch)")
    args = ap.parse_args()
    benchutil.quiet_absl()
    import grain
    benchutil.prepare(args)

    source = grain.sources.ArrayRecordDataSource(list(args.files))
    if len(source) == 0:
        raise SystemExit("no records in %s" % " ".join(args.files))
    ds = grain.MapDataset.source(source).shuffle(seed=args.seed).batch(args.batch)
    want = min(args.batches or len(ds), len(ds))

    def one_run():
        got = 0
        it = iter(ds)
        for _ in range(want):
            got += len(next(it))
        return got

    if args.seconds:
        # Epochs end inside a timed run: start the next epoch's iterator, as a training loop would.
        state = {"it": iter(ds)}

        def one_batch():
            try:
                return len(next(state["it"]))
            except StopIteration:
                state["it"] = iter(ds)
                return len(next(state["it"]))

        records, seconds = benchutil.timed_run(one_batch, args.seconds)
    else:
        records, seconds = benchutil.median_run(one_run, args.runs)
    benchutil.emit("grain_pipeline", records, seconds)


if __name__ == "__main__":
    main()
