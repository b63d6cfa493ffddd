#!/usr/bin/env python3
"""Make the inputs of the convert benchmarks: N records of SIZE bytes of words
(a 5000-word vocabulary, seeded), which zstd:3 shrinks to about 46%, as text
lines or as TFRecord (framed with the pip package tfrecord's CRC helper),
optionally GZIP-compressed (level 6, as TensorFlow's GZIP option).

    bench/py/make_text.py /tmp/lines150k.txt --records 150000 --size 1024
    bench/py/make_text.py /tmp/text150k.tfrecord.gz --tfrecord --gzip
"""
import argparse
import gzip
import random
import struct


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--records", type=int, default=150000)
    ap.add_argument("--size", type=int, default=1024, help="bytes per line, newline excluded (1024)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--tfrecord", action="store_true", help="TFRecord framing instead of lines")
    ap.add_argument("--gzip", action="store_true", help="compress the output with GZIP")
    args = ap.parse_args()
    if args.tfrecord:
        from tfrecord.writer import TFRecordWriter
        masked_crc = TFRecordWriter.masked_crc
    rng = random.Random(args.seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randrange(2, 10))) for _ in range(5000)]
    opener = (lambda p: gzip.open(p, "wb", compresslevel=6)) if args.gzip else (lambda p: open(p, "wb"))
    with opener(args.out) as f:
        for _ in range(args.records):
            line, n = [], 0
            while n < args.size:
                w = rng.choice(words)
                line.append(w)
                n += len(w) + 1
            rec = " ".join(line)[:args.size].encode()
            if args.tfrecord:
                length = struct.pack("<Q", len(rec))
                f.write(length + masked_crc(length) + rec + masked_crc(rec))
            else:
                f.write(rec + b"\n")


if __name__ == "__main__":
    main()
