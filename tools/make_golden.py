#!/usr/bin/env python3
"""Write the golden ArrayRecord files in tests/data/golden/ with the official library.

The files pin down what grist must read exactly: every codec, the group sizes
1, 16 and 65536, records from 0 bytes to more than 1 MiB, an empty file,
padding on, and a multi-file dataset. Every file's contents come from a seeded
generator, so a rerun with the same array-record version gives the same
records (the bytes may differ only if the codec libraries changed).

MANIFEST.json records, per file, the options given, the writer_options the
official reader reports, num_records and digests of the records (see
record_digest()); tests/interop/test_golden.py checks grist against it.

Usage: tools/make_golden.py [--out DIR]   (default: tests/data/golden)
"""
import argparse
import hashlib
import importlib
import json
import os
import random
import struct
import subprocess
import sys

PIP_PACKAGE = "array-record"
# Records per file up to which the manifest lists every record's sha256.
LIST_ALL_LIMIT = 512
# Sampled records per file above that limit.
SAMPLES = 24


def record_sha256(rec):
    return hashlib.sha256(rec).hexdigest()


def record_digest(records):
    """sha256 over every record as (u64 little-endian length, bytes), in order.

    The length prefix makes the digest sensitive to record boundaries, not
    only to the concatenated bytes.
    """
    h = hashlib.sha256()
    for rec in records:
        h.update(struct.pack("<Q", len(rec)))
        h.update(rec)
    return h.hexdigest()


def import_official(install=True):
    """Import array_record's Python module, pip-installing the package if missing."""
    name = "array_record.python.array_record_module"
    try:
        return importlib.import_module(name)
    except ImportError:
        if not install:
            raise
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", PIP_PACKAGE])
    importlib.invalidate_caches()
    return importlib.import_module(name)


def package_version():
    from importlib import metadata
    for dist in ("array_record", "array-record"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return "unknown"


# Record generators. Each takes a random.Random and returns a list of bytes.

def gen_small_mixed(rng, n, max_len):
    """n records, sizes 0..max_len, bytes mostly random with a few text ones."""
    out = []
    for i in range(n):
        size = 0 if i % 37 == 0 else rng.randrange(max_len + 1)
        if i % 3 == 0:
            out.append(("rec-%d-" % i).encode() * (size // 8 + 1))
            out[-1] = out[-1][:size]
        else:
            out.append(rng.randbytes(size))
    return out


def gen_text(rng, n):
    """n short sentences: compressible, like tokenized text shards."""
    words = [b"alpha", b"beta", b"gamma", b"delta", b"loader", b"shuffle", b"record",
             b"chunk", b"block", b"epoch", b"batch", b"disk", b"\x00", b"\xff\xfe"]
    return [b" ".join(rng.choice(words) for _ in range(rng.randrange(0, 40))) for _ in range(n)]


def gen_tiny(rng, n):
    """n records of 0..3 bytes with little entropy: many records, small file."""
    out = []
    for i in range(n):
        out.append(bytes([i % 251]) * (i % 4) if rng.random() < 0.9 else rng.randbytes(3))
    return out


def gen_big_uncompressed(rng):
    """Records around block and MiB sizes; grouped in pairs they span many blocks."""
    sizes = [0, 1, 65535, 65536 + 1, 24, 1 << 20 | 17, 40, 0, 3000]
    return [rng.randbytes(s) for s in sizes]


def gen_big_compressed(rng):
    """A > 1 MiB record that compresses well (a repeated random KiB) and an
    incompressible one whose compressed chunk spans several blocks."""
    kib = rng.randbytes(1024)
    return [b"", (kib * 1100)[: (1 << 20) + 123], rng.randbytes(150000), b"tail"]


# The golden set. Each ArrayRecord file is at least 128 KiB, so the list is
# chosen to cover every feature with as few files as possible.
# (name, options, generator(rng) -> records, dataset or None)
GOLDEN = [
    ("empty.array_record", "", lambda r: [], None),
    ("uncompressed_g1.array_record", "group_size:1,uncompressed",
     lambda r: gen_small_mixed(r, 200, 300), None),
    ("zstd_default_g1.array_record", "", lambda r: gen_text(r, 300), None),
    ("zstd1_wl25_g16.array_record", "group_size:16,zstd:1,window_log:25",
     lambda r: gen_small_mixed(r, 150, 500), None),
    ("brotli_g1.array_record", "brotli", lambda r: gen_text(r, 120), None),
    ("brotli_large_window_g16.array_record", "group_size:16,brotli:5,window_log:26",
     lambda r: gen_text(r, 100) + gen_small_mixed(r, 50, 2000), None),
    ("padded_zstd_g16.array_record", "group_size:16,pad_to_block_boundary:true,zstd",
     lambda r: gen_small_mixed(r, 40, 100), None),
    ("zstd_g65536.array_record", "group_size:65536", lambda r: gen_tiny(r, 70000), None),
    ("big_uncompressed_g2.array_record", "group_size:2,uncompressed", gen_big_uncompressed, None),
    ("big_zstd_g1.array_record", "zstd", gen_big_compressed, None),
    # A dataset of three files, the middle one empty: global indices must skip it.
    ("multi-00000-of-00003.array_record", "group_size:16,snappy",
     lambda r: gen_small_mixed(r, 40, 400), "multi"),
    ("multi-00001-of-00003.array_record", "group_size:16,snappy", lambda r: [], "multi"),
    ("multi-00002-of-00003.array_record", "group_size:16,snappy",
     lambda r: gen_small_mixed(r, 24, 3000) + [r.randbytes(70000)], "multi"),
]


def official_write(ar, path, options, records):
    """Write @records with the official writer (module @ar) and close the file."""
    w = ar.ArrayRecordWriter(path, options)
    for rec in records:
        w.write(rec)
    w.close()


def official_read(ar, path, indices=()):
    """(num_records, writer_options, every record, the records at @indices)
    as the official reader reports them."""
    r = ar.ArrayRecordReader(path, "readahead_buffer_size:0")
    try:
        n = r.num_records()
        opts = r.writer_options_string()
        everything = r.read_all() if n else []
        some = r.read(list(indices)) if indices else []
    finally:
        r.close()
    return n, opts, everything, some


def describe(name, options, records, reported, path, rng):
    n, writer_options, back, _ = reported
    if n != len(records) or back != records:
        raise SystemExit("%s: the official reader does not return what was written" % name)
    with open(path, "rb") as f:
        file_sha = hashlib.sha256(f.read()).hexdigest()
    entry = {
        "name": name,
        "options": options,
        "writer_options": writer_options,
        "num_records": n,
        "file_size": os.path.getsize(path),
        "file_sha256": file_sha,
        "records_digest": record_digest(records),
        "total_bytes": sum(len(x) for x in records),
    }
    if n <= LIST_ALL_LIMIT:
        entry["record_sha256"] = [record_sha256(x) for x in records]
    else:
        idx = sorted(set([0, n - 1] + rng.sample(range(n), SAMPLES)))
        entry["samples"] = [{"index": i, "length": len(records[i]),
                             "sha256": record_sha256(records[i])} for i in idx]
    return entry


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "golden"))
    ap.add_argument("--seed", type=int, default=20240601)
    args = ap.parse_args()

    ar = import_official()
    os.makedirs(args.out, exist_ok=True)
    files, datasets = [], {}
    for i, (name, options, gen, dataset) in enumerate(GOLDEN):
        # One generator per file so that adding a file never changes the others.
        rng = random.Random(args.seed * 1000 + i)
        records = gen(rng)
        path = os.path.join(args.out, name)
        official_write(ar, path, options, records)
        files.append(describe(name, options, records, official_read(ar, path), path, rng))
        if dataset:
            datasets.setdefault(dataset, []).append(name)
        print("%-40s %7d records %9d bytes" % (name, len(records), os.path.getsize(path)))

    by_name = {f["name"]: f for f in files}
    manifest = {
        "generator": "tools/make_golden.py --seed %d" % args.seed,
        "array_record_version": package_version(),
        "digest": "records_digest = sha256 over each record as u64 LE length then bytes",
        "files": files,
        "datasets": [{"name": k, "files": v,
                      "num_records": sum(by_name[x]["num_records"] for x in v)}
                     for k, v in sorted(datasets.items())],
    }
    with open(os.path.join(args.out, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=False)
        f.write("\n")


if __name__ == "__main__":
    main()
