#!/usr/bin/env python3
"""Host mode beside device mode: `grist load` runs alternating, medians and ratios.

Each round runs every variant once, the order reversed every other round (so drift on
a shared machine does not favour one side):

    GRIST load FILE... --batch-size B --epochs E --threads T --stats [ARGS] [--device opencl]

A variant is LABEL=GRIST (a host run) or LABEL=GRIST@device; the first one is the
baseline the ratios are taken against. For each variant it prints the median
records/s (from --stats: delivered records over the time from create to the last
batch, start-up included), its ratio to the baseline, and the same after the first
batch (records / (seconds - first batch), which leaves out start-up such as creating
the OpenCL context; binaries that do not print the first batch get a dash), plus the
median CPU seconds of the whole process. Every run's stderr goes to --log as JSON
lines. Run it on the machine with the device:

    bench/py/device_vs_host.py --threads 16 --rounds 5 --args=--granularity,chunk FILE \\
        host=build/release/tools/grist after=build/release/tools/grist@device before=/tmp/old/grist@device
"""
import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import time


def number(pattern, text):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def run_one(grist, device, files, a):
    cmd = [grist, "load"] + files + ["--batch-size", str(a.batch_size), "--epochs", str(a.epochs),
                                     "--threads", str(a.threads), "--stats"] + a.args
    if device:
        cmd += ["--device", "opencl"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.exit("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    err = p.stderr
    return dict(cmd=" ".join(cmd), wall=wall,
                cpu=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                rps=number(r"records/s: (\d+)", err), seconds=number(r"seconds: ([\d.]+)", err),
                records=number(r"records: (\d+)", err), first=number(r"first batch: ([\d.]+)", err),
                stderr=err)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="+", help="FILE... then LABEL=GRIST[@device] variants")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--args", default="", help="more load arguments, comma-separated")
    ap.add_argument("--log", default="device_vs_host.jsonl")
    a = ap.parse_args()
    a.args = [x for x in a.args.split(",") if x]
    files = [x for x in a.file if "=" not in x]
    variants = []
    for v in (x for x in a.file if "=" in x):
        label, grist = v.split("=", 1)
        device = grist.endswith("@device")
        variants.append((label, grist[:-len("@device")] if device else grist, device))
    if not files or not variants:
        sys.exit("need FILE... and at least one LABEL=GRIST[@device]")
    runs = {label: [] for label, _, _ in variants}
    with open(a.log, "a") as log:
        for r in range(a.rounds):
            for label, grist, device in (variants if r % 2 == 0 else variants[::-1]):
                res = run_one(grist, device, files, a)
                res.update(label=label, round=r)
                runs[label].append(res)
                log.write(json.dumps(res) + "\n")
                print("round %d %-8s %10.0f records/s" % (r, label, res["rps"]), flush=True)
    base = steady_base = None
    out = {}
    for label, _, _ in variants:
        rs = runs[label]
        rps = statistics.median(x["rps"] for x in rs)
        # a run too short for the 1 ms resolution of --stats has no figure after the first batch
        steady = [x["records"] / (x["seconds"] - x["first"]) for x in rs
                  if x["first"] is not None and x["seconds"] > x["first"]]
        steady = statistics.median(steady) if steady else None
        cpu = statistics.median(x["cpu"] for x in rs)
        if base is None:
            base, steady_base = rps, steady
        line = "%-8s %10.0f records/s  ratio %.3f" % (label, rps, rps / base)
        if steady and steady_base:
            line += "  | after the first batch %10.0f  ratio %.3f" % (steady, steady / steady_base)
        else:
            line += "  | after the first batch -"
        print(line + "  | cpu %.1f s" % cpu)
        out[label] = dict(records_per_s=rps, ratio=rps / base, after_first=steady,
                          ratio_after_first=steady / steady_base if steady and steady_base else None, cpu_s=cpu)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
