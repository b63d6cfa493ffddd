#!/usr/bin/env python3
"""Write the golden TFRecord files in tests/data/tfrecord/ with a real TFRecord writer.

The writer is the pip package `tfrecord` (tfrecord.writer.TFRecordWriter),
which frames each serialized tf.train.Example with the length, the masked
CRC-32C of the length, the data and the masked CRC-32C of the data, as
TensorFlow does. The GZIP copies are the plain files compressed with Python's
gzip module: TensorFlow's "GZIP" compression is exactly one gzip stream over
the framed file.

MANIFEST.json lists per file the record count and record_digest() of the
serialized Examples, in order (make_golden.record_digest: the one definition
of the digest), so tests/interop/test_convert.py can check what
`grist convert` writes without TensorFlow.

Usage: tools/make_tfrecord_golden.py [--out DIR]   (default: tests/data/tfrecord)
"""
import argparse
import gzip
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import record_digest  # noqa: E402


def examples(seed, n, big):
    """@n datums for TFRecordWriter.write(): text, an int label, a float
    vector; every 7th is an empty Example (a 0-byte record); with @big, one
    is large enough to cross a 64 KiB block of the ArrayRecord output."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 7 == 3:
            out.append({})
            continue
        size = 70000 if big and i == n // 2 else rng.randrange(1, 600)
        out.append({
            "text": (bytes(rng.choice(b"abcdefgh \n") for _ in range(size)), "byte"),
            "label": (i, "int"),
            "vec": ([rng.random() for _ in range(rng.randrange(0, 8))], "float"),
        })
    return out


def write(path, datums, writer_cls):
    w = writer_cls(path)
    for d in datums:
        w.write(d)
    w.close()
    return [writer_cls.serialize_tf_example(d) for d in datums]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "tfrecord"))
    args = ap.parse_args()
    from tfrecord.writer import TFRecordWriter
    os.makedirs(args.out, exist_ok=True)
    manifest = {}
    files = [("small.tfrecord", 1, 60, True), ("part-0.tfrecord", 2, 25, False),
             ("part-1.tfrecord", 3, 17, False), ("empty.tfrecord", 4, 0, False)]
    for name, seed, n, big in files:
        path = os.path.join(args.out, name)
        records = write(path, examples(seed, n, big), TFRecordWriter)
        entry = {"num_records": len(records), "digest": record_digest(records)}
        manifest[name] = entry
        # mtime=0: the same bytes on every run.
        with open(path, "rb") as f, open(path + ".gz", "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                gz.write(f.read())
        manifest[name + ".gz"] = dict(entry)
    with open(os.path.join(args.out, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
