#!/usr/bin/env python3
"""Baseline: random reads by index through the official Python reader.

Shuffles all indices of FILE with a fixed seed, then times
ArrayRecordReader(FILE, 'readahead_buffer_size:0').read(batch) over batches of
256 (the same reader object for every batch, as a data loader would keep it).
Prints one JSON line: {"name", "records_per_s", "records", "seconds"} of the
median of 3 runs. Example, the 1M x 1 KiB, group_size:1 case:

    bench/py/official_read.py /tmp/1m.array_record --make 1000000
"""
import argparse

import benchutil


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchutil.add_common_args(ap)
    ap.add_argument("--limit", type=int, help="read at most this many records per run")
    ap.add_argument("--epochs", type=int, default=1,
                    help="passes over the records per run, each in its own order (1)")
    args = ap.parse_args()
    if args.epochs < 1:
        raise SystemExit("--epochs must be at least 1")
    if len(args.files) != 1:
        raise SystemExit("official_read.py reads one file")
    benchutil.quiet_absl()
    from array_record.python import array_record_module as ar
    benchutil.prepare(args)
    path = args.files[0]

    reader = ar.ArrayRecordReader(path, "readahead_buffer_size:0")
    n = reader.num_records()
    if n == 0:
        raise SystemExit("%s: no records (or not a readable ArrayRecord file)" % path)
    batches = benchutil.shuffled_batches(n, args.batch, args.seed, args.epochs, args.limit)
    records, seconds = benchutil.read_batches(reader.read, batches, args)
    reader.close()
    benchutil.emit("official_read", records, seconds)


if __name__ == "__main__":
    main()
