#!/usr/bin/env python3
"""grist.Loader iterated to numpy in Python: what a Python training loop gets from grist.

    grist.Loader(FILES, batch, seed=seed, epochs=None, ...) -> per batch: batch.data and
    batch.offsets as numpy views (no copy), then release()

Timed like `grist-bench`: from the loader's creation. Prints one JSON line
{"name", "records_per_s", "records", "seconds"}: the median of --runs runs over --batches
batches (default one epoch), or one run of --seconds (how `grist-bench --compare` calls it).
The same settings as `grist load FILE --batch-size 256 --seed 42 --epochs E`:

    bench/py/grist_loader.py FILE --epochs 5
"""
import argparse
import time

import benchutil


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchutil.add_common_args(ap)
    ap.add_argument("--epochs", type=int, help="iterate this many whole epochs per run")
    ap.add_argument("--engine", default="uring")
    ap.add_argument("--io", default="auto")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--prefetch", type=int)
    ap.add_argument("--queue-depth", type=int)
    ap.add_argument("--granularity", default="record")
    ap.add_argument("--no-warm", action="store_true",
                    help="do not read the files first (a whole-process comparison warms them itself)")
    args = ap.parse_args()
    import grist
    if not args.no_warm:
        benchutil.prepare(args)
    if args.cold:
        args.io = "direct"
    opts = dict(seed=args.seed, engine=args.engine, io=args.io, threads=args.threads, prefetch=args.prefetch,
                queue_depth=args.queue_depth, granularity=args.granularity)

    def one_run(epochs=None, seconds=None):
        records = 0
        t0 = time.perf_counter()
        end = t0 + (seconds or 0)
        with grist.Loader(list(args.files), args.batch, epochs=epochs, **opts) as loader:
            for batch in loader:
                data, offsets = batch.data, batch.offsets  # the numpy views a step would take
                records += len(offsets) - 1 if offsets is not None else len(data)
                del data, offsets
                batch.release()
                if seconds and time.perf_counter() >= end:
                    break
        return records, time.perf_counter() - t0

    if args.seconds:
        records, seconds = one_run(seconds=args.seconds)
    else:
        runs = sorted((one_run(epochs=args.epochs or 1) for _ in range(args.runs)), key=lambda r: r[1])
        records, seconds = runs[len(runs) // 2]
    benchutil.emit("grist_loader", records, seconds)


if __name__ == "__main__":
    main()
