#!/usr/bin/env python3
"""Rows/s of grist's Parquet -> TFDS conversion beside pyarrow.parquet.read_table alone on the same files.

    bench/py/parquet_bench.py [--rows 100000] [--images] [--rounds 3] [--data DIR]

Makes DATA/table[-images].parquet once (row groups of 10000; columns: id int64, score
float32, flag bool, text string, emb fixed_size_list<float32>[16], ids list<int64> of 0..7
values, label int64 as class_label:10, and with --images a 28x28x1 PNG per row declared as
an image), then alternates, --rounds times, the order reversed every other round:
  read_table    pyarrow.parquet.read_table(file) (the read alone, whole table in memory)
  from_parquet  grist's from_parquet(file, tmp/ds/1.0.0, features=..., options group_size:1,zstd:3)
and prints the median rows/s of each and their ratio.
"""
import argparse
import io
import os
import shutil
import statistics
import tempfile
import time

import numpy as np


def make(path, rows, images):
    import pyarrow as pa
    import pyarrow.parquet as pq
    if os.path.exists(path):
        return
    rng = np.random.default_rng(0)
    cols = {
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "score": pa.array(rng.normal(size=rows).astype(np.float32)),
        "flag": pa.array(rng.integers(0, 2, rows).astype(bool)),
        "text": pa.array(["row %d of the table" % i for i in range(rows)]),
        "emb": pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=rows * 16).astype(np.float32)), 16),
        "ids": pa.array([list(range(i % 8)) for i in range(rows)], pa.list_(pa.int64())),
        "label": pa.array(rng.integers(0, 10, rows)),
    }
    if images:
        from PIL import Image
        pngs = []
        for _ in range(rows):
            b = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (28, 28), dtype=np.uint8)).save(b, format="PNG")
            pngs.append(b.getvalue())
        cols["image"] = pa.array(pngs, pa.binary())
    pq.write_table(pa.table(cols), path, row_group_size=10000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--images", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "grist-parquet-bench"))
    a = ap.parse_args()
    import pyarrow.parquet as pq

    from grist._parquet import from_parquet

    os.makedirs(a.data, exist_ok=True)
    path = os.path.join(a.data, "table%s-%d.parquet" % ("-images" if a.images else "", a.rows))
    make(path, a.rows, a.images)
    features = {"label": "class_label:10"}
    if a.images:
        features["image"] = "image:png"

    def read_table():
        return pq.read_table(path).num_rows

    def convert():
        out = tempfile.mkdtemp(dir=a.data)
        try:
            return from_parquet(path, os.path.join(out, "ds", "1.0.0"), features=features)["rows"]
        finally:
            shutil.rmtree(out)

    variants = {"read_table": read_table, "from_parquet": convert}
    rates = {k: [] for k in variants}
    names = list(variants)
    for r in range(a.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            t = time.perf_counter()
            n = variants[name]()
            rates[name].append(n / (time.perf_counter() - t))
    med = {k: statistics.median(v) for k, v in rates.items()}
    for k in names:
        print("%-13s %12.0f rows/s (median of %d)" % (k, med[k], a.rounds))
    print("from_parquet / read_table = %.4f" % (med["from_parquet"] / med["read_table"]))


if __name__ == "__main__":
    main()
