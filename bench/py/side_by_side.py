#!/usr/bin/env python3
"""grist beside Grain's and the official reader's batch paths, on one warm file.

Each round runs, one after another and in an order that rotates from round to
round (so drift on a shared machine does not favour one side):

    grist load FILE --batch-size B --epochs E --stats        (records/s from --stats)
    bench/py/grain_getitems.py FILE --batch B --epochs E      (ArrayRecordDataSource.__getitems__)
    bench/py/official_read.py FILE --batch B --epochs E       (ArrayRecordReader.read(indices))

every one reading every record E times in shuffled batches of B. The file is read
before every run so all of them see a warm page cache. Printed: each side's median
records/s over the rounds, and grist's ratio to each peer as the median of the
per-round ratios (each ratio pairs runs made a minute apart at most). Also each
side's records per CPU-second (user + system time: of the whole grist process; of
the Python peers' timed reading, their start-up and imports left out), a figure
that other load on the machine moves much less than wall-clock rates. The last line is
the whole result as JSON.

    bench/py/side_by_side.py /tmp/data.array_record --grist build/release/tools/grist --rounds 5
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd):
    """Run @cmd; returns (its stdout, its stderr, the CPU seconds it used)."""
    before = cpu_seconds()
    p = subprocess.run(cmd, capture_output=True, text=True)
    used = cpu_seconds() - before
    if p.returncode != 0:
        raise SystemExit("%s failed (exit %d):\n%s" % (" ".join(cmd), p.returncode, p.stderr))
    return p.stdout, p.stderr, used


def grist_side(args):
    out, err, cpu = run([args.grist, "load", args.file, "--batch-size", str(args.batch), "--epochs",
                         str(args.epochs), "--stats"] + args.grist_arg)
    rate = re.search(r"^records/s: ([0-9.]+)$", err, re.M)
    records = re.search(r"^records: ([0-9]+)", err, re.M)
    mode = re.search(r"^engine: (.*)$", err, re.M)
    if not rate or not records:
        raise SystemExit("grist load --stats printed no records/s:\n" + err)
    return float(rate.group(1)), int(records.group(1)), cpu, mode.group(1) if mode else ""


def python_side(script, args):
    out, _, cpu = run([sys.executable, os.path.join(HERE, script), args.file, "--batch", str(args.batch),
                       "--epochs", str(args.epochs), "--runs", "1", "--cold"])
    result = json.loads(out.strip().splitlines()[-1])
    # the reading alone: Python's start-up and imports are not the peer's work
    return result["records_per_s"], result["records"], result.get("cpu_seconds", cpu), ""


def warm(path):
    """Read the file through the page cache before every run: on a shared machine
    something may drop the cache at any time, and every side is measured warm."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", help="an ArrayRecord file")
    ap.add_argument("--grist", default="grist", help="the grist binary (default: grist on PATH)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds; medians are reported (5)")
    ap.add_argument("--batch", type=int, default=256, help="records per batch (256)")
    ap.add_argument("--epochs", type=int, default=2, help="passes over the file per run (2)")
    ap.add_argument("--grist-arg", action="append", default=[],
                    help="one more argument for grist load (repeatable), e.g. --grist-arg=--io=buffered")
    args = ap.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")

    sides = [("grist", lambda: grist_side(args)),
             ("grain __getitems__", lambda: python_side("grain_getitems.py", args)),
             ("official read(indices)", lambda: python_side("official_read.py", args))]
    rates = {name: [] for name, _ in sides}
    per_cpu = {name: [] for name, _ in sides}
    note = ""
    counts = {}
    for r in range(args.rounds):
        for k in range(len(sides)):
            name, fn = sides[(r + k) % len(sides)]
            warm(args.file)
            rate, records, cpu, mode = fn()
            if counts.setdefault("records", records) != records:
                raise SystemExit("%s read %d records, %s %d: not the same work" %
                                 (name, records, counts["first"], counts["records"]))
            counts.setdefault("first", name)
            rates[name].append(rate)
            per_cpu[name].append(records / cpu if cpu > 0 else 0.0)
            note = mode or note
        print("round %d: %s; grist: %s" % (r + 1, ", ".join("%s %.0f/s" % (n, rates[n][-1]) for n, _ in sides),
                                           note), file=sys.stderr)

    result = {"file": args.file, "batch": args.batch, "epochs": args.epochs, "rounds": args.rounds,
              "records": counts["records"], "grist_engine": note, "sides": {}}
    print("%s: batches of %d, %d epochs, %d rounds; grist: %s" % (args.file, args.batch, args.epochs,
                                                                 args.rounds, note))
    print("%-24s %14s %18s %14s" % ("", "records/s", "records/cpu-s", "grist ratio"))
    for name, _ in sides:
        ratio = statistics.median(g / p for g, p in zip(rates["grist"], rates[name]) if p > 0)
        side = {"records_per_s": statistics.median(rates[name]),
                "records_per_cpu_s": statistics.median(per_cpu[name]),
                "grist_ratio": ratio, "all_records_per_s": rates[name]}
        result["sides"][name] = side
        print("%-24s %14.0f %18.0f %13.2fx" % (name, side["records_per_s"], side["records_per_cpu_s"], ratio))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
