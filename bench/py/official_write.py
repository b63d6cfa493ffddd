#!/usr/bin/env python3
"""Baseline of `grist convert --from lines`: the official ArrayRecordWriter fed
from a Python list.

Reads LINES (one record per line, newline dropped) into a list, then times
ArrayRecordWriter(OUT, OPTIONS).write() over the list and close(). Prints one
JSON line {"name", "records_per_s", "records", "seconds", "mb_per_s"} of the
median of --runs runs. Run as a whole process beside
`grist convert --from lines --options OPTIONS LINES OUT` to compare everything
(start-up and reading included); the JSON line is the write loop alone.

    bench/py/official_write.py /tmp/lines150k.txt /tmp/py.array_record \\
        --options group_size:64,zstd:3,max_parallelism:2
"""
import argparse
import json

import benchutil


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lines", help="text file, one record per line")
    ap.add_argument("out", help="ArrayRecord file to write (overwritten)")
    ap.add_argument("--options", default="group_size:64,zstd:3,max_parallelism:2")
    ap.add_argument("--runs", type=int, default=1, help="timed runs; the median is printed (1)")
    args = ap.parse_args()
    benchutil.quiet_absl()
    from array_record.python import array_record_module as ar

    with open(args.lines, "rb") as f:
        records = f.read().split(b"\n")
    if records and records[-1] == b"":
        records.pop()
    nbytes = sum(map(len, records))

    def write_all():
        w = ar.ArrayRecordWriter(args.out, args.options)
        for r in records:
            w.write(r)
        w.close()
        return len(records)

    n, seconds = benchutil.median_run(write_all, args.runs)
    print(json.dumps({"name": "official_write", "records_per_s": round(n / seconds, 1),
                      "records": n, "seconds": round(seconds, 6),
                      "mb_per_s": round(nbytes / seconds / 1e6, 1)}))


if __name__ == "__main__":
    main()
