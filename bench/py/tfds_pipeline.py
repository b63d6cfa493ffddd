#!/usr/bin/env python3
"""The seed pipeline: Grain's tutorial over a TFDS dataset, beside grist.

    a     grain.MapDataset.source(tfds.data_source(NAME, "train"))
              .seed(42).shuffle().map(normalize).batch(128)
    a-mp  the same, .to_iter_dataset().mp_prefetch(2 workers)
    b     pipeline a with grist.tfds.data_source in place of tfds.data_source
    b-mp  pipeline a-mp with grist.tfds.data_source
    c     grist.Loader(grist.tfds.data_source(NAME, "train"), 128, seed=42,
                       drop_remainder=True, batch_map=normalize)

normalize is the tutorial's {"image": image.astype(float32) / 255, "label": label}.
Each measurement runs in a fresh process: the pipeline is built, one batch is taken (worker
start-up and file opening are not timed), then batches are taken for --seconds (epochs wrap
around) and records/s is what the loop received; records per CPU-second counts the CPU time
of the process and its workers over the same window (the figure a loaded machine disturbs
least). Modes alternate round by round; the median of the rounds is reported per mode, with
each mode's ratio to the best of a and a-mp.

    python3 tools/make_tfds_golden.py --only grist_mnist --mnist-records 60000 --no-expected /tmp/tfds-bench
    python3 bench/py/tfds_pipeline.py --data-dir /tmp/tfds-bench --rounds 3

One mode alone (prints one JSON line): --mode c.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import benchutil


def normalize(r):
    return {"image": r["image"].astype(np.float32) / 255.0, "label": r["label"]}


def build(mode, name, data_dir, batch):
    if mode in ("a", "a-mp", "b", "b-mp"):
        import grain
        if mode.startswith("a"):
            import tensorflow_datasets as tfds
            source = tfds.data_source(name, split="train", data_dir=data_dir)
        else:
            import grist.tfds
            source = grist.tfds.data_source(name, "train", data_dir=data_dir)
        ds = grain.MapDataset.source(source).seed(42).shuffle().map(normalize).batch(batch)
        if mode.endswith("-mp"):
            from absl import flags
            flags.FLAGS(sys.argv[:1], known_only=True)  # Grain's workers read absl flags
            ds = ds.to_iter_dataset().mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
        return lambda: iter(ds)
    if mode == "c":
        import grist
        import grist.tfds
        src = grist.tfds.data_source(name, "train", data_dir=data_dir)
        return lambda: iter(grist.Loader(src, batch, seed=42, drop_remainder=True, batch_map=normalize))
    raise SystemExit(f"unknown mode {mode!r}")


def _tree_cpu():
    """CPU seconds (user + system) of this process and its live descendants (Grain's workers),
    from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo, seen = 0, [os.getpid()], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return total / tick


def measure(mode, name, data_dir, batch, seconds):
    new_iter = build(mode, name, data_dir, batch)
    it = new_iter()
    next(it)  # start-up: workers, files, the first batch
    records = 0
    t0 = time.perf_counter()
    c0 = _tree_cpu()
    while True:
        try:
            b = next(it)
        except StopIteration:
            it = new_iter()
            continue
        records += len(b["label"])
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            break
    cpu = _tree_cpu() - c0
    return {"mode": mode, "records_per_s": round(records / elapsed, 1), "records": records,
            "seconds": round(elapsed, 3), "cpu_seconds": round(cpu, 3),
            "records_per_cpu_s": round(records / cpu, 1) if cpu else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True, help="TFDS data_dir holding the prepared dataset")
    ap.add_argument("--name", default="grist_mnist", help="dataset name (grist_mnist)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=8.0, help="timed seconds per measurement (8)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (3)")
    ap.add_argument("--modes", default="a,a-mp,b,b-mp,c", help="modes to alternate (a,a-mp,b,b-mp,c)")
    ap.add_argument("--mode", help="run this one mode here and print its JSON line")
    args = ap.parse_args()
    benchutil.quiet_absl()
    if args.mode:
        print(json.dumps(measure(args.mode, args.name, args.data_dir, args.batch, args.seconds)), flush=True)
        return
    modes = args.modes.split(",")
    results = {m: [] for m in modes}
    per_cpu = {m: [] for m in modes}
    for r in range(args.rounds):
        for m in modes:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--mode", m, "--data-dir", args.data_dir,
                                "--name", args.name, "--batch", str(args.batch), "--seconds", str(args.seconds)],
                               capture_output=True, text=True)
            if p.returncode:
                raise SystemExit(f"mode {m} failed:\n{p.stderr[-3000:]}")
            line = json.loads(p.stdout.strip().splitlines()[-1])
            results[m].append(line["records_per_s"])
            per_cpu[m].append(line["records_per_cpu_s"] or 0)
            print(f"round {r + 1} {m:5s} {line['records_per_s']:>12,.0f} records/s "
                  f"{line['records_per_cpu_s'] or 0:>12,.0f} records/cpu-s", file=sys.stderr, flush=True)
    med = {m: statistics.median(v) for m, v in results.items()}
    cmed = {m: statistics.median(v) for m, v in per_cpu.items()}
    base = max(med.get("a", 0), med.get("a-mp", 0)) or None
    # Grain's worker processes are not always seen in /proc's child lists: the CPU figure
    # is given for the single-process modes only.
    cbase = cmed.get("a") or None
    print(f"\n{'mode':6s} {'records/s':>10s} {'vs best a':>10s} {'records/cpu-s':>14s} {'vs a':>10s}   runs (records/s)")
    for m in modes:
        ratio = f"{med[m] / base:.1f}x" if base else "-"
        single = not m.endswith("-mp")
        cratio = f"{cmed[m] / cbase:.1f}x" if cbase and single else "-"
        cfig = f"{cmed[m]:,.0f}" if single else "-"
        print(f"{m:6s} {med[m]:>10,.0f} {ratio:>10s} {cfig:>14s} {cratio:>10s}   "
              f"{', '.join(f'{x:,.0f}' for x in results[m])}")
    if "b" in med and "a" in med:
        print(f"b / a: {med['b'] / med['a']:.1f}x" + (f"   b-mp / a-mp: {med['b-mp'] / med['a-mp']:.1f}x"
                                                     if "b-mp" in med and "a-mp" in med else ""))


if __name__ == "__main__":
    main()
