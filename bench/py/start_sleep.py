#!/usr/bin/env python3
"""Where a `grist load`'s start goes: up to its first batch, the seconds one of its threads
ran, the seconds one was runnable but none ran (the machine's other load), and the seconds
every thread slept (waiting on the network, or each other: what a faster start can win on
a quiet core). From the scheduler's events (`perf record -e sched:...`, root), so the
machine's other load shows apart instead of inflating the figures; run and asleep add up
to the first batch on a quiet machine.

    bench/py/start_sleep.py --grist build/release/tools/grist --baseline OLD/tools/grist --pairs 5 \\
        -- s3://b/g1.ar --batch-size 256 --seed 1 --epochs 1 --granularity chunk

with the environment of `bench/py/remote_bench.py --serve` (docs/tuning.md, session 38).
Each run is `taskset -c CPU grist load ARGS --stats` (--cpu, default 0); with --baseline the
two builds alternate, the order swapped every pair. Prints each run, then the medians.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

EVENTS = "sched:sched_switch,sched:sched_wakeup,sched:sched_wakeup_new"


def states(data, pid, first_batch):
    """(running, runnable, asleep seconds, asleep spells over 2 ms) of process @pid's threads
    from its first event to @first_batch seconds later."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,time,event,trace"], capture_output=True,
                         text=True, check=True).stdout
    rows, mine = [], set()
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s+(.*)", line)
        if m:
            if int(m.group(1)) == pid:
                mine.add(int(m.group(2)))
            rows.append((float(m.group(3)), m.group(4), m.group(5)))
    state, acc, spells = {}, {"run": 0.0, "rq": 0.0, "asleep": 0.0}, []
    t0 = prev = since = None

    def now_class():
        s = set(state.values())
        return "run" if "run" in s else "rq" if "rq" in s else "asleep"

    def close(t):
        acc[prev] += t - since
        if prev == "asleep" and t - since > 0.002:
            spells.append((since - t0, t - since))

    for t, ev, tr in rows:
        if t0 is not None and t - t0 > first_batch:
            close(t0 + first_batch)
            prev = None
            break
        if ev.endswith("sched_switch"):
            m = re.search(r"prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=.*? next_pid=(\d+)", tr)
            if not m:
                continue
            if int(m.group(1)) in mine:
                state[int(m.group(1))] = "rq" if m.group(2).startswith("R") else "sleep"
            if int(m.group(3)) in mine:
                t0 = t if t0 is None else t0
                state[int(m.group(3))] = "run"
        else:
            m = re.search(r"pid=(\d+)", tr)
            if m and int(m.group(1)) in mine:
                t0 = t if t0 is None else t0
                if state.get(int(m.group(1))) != "run":
                    state[int(m.group(1))] = "rq"
        if t0 is None:
            continue
        c = now_class()
        if c != prev:
            if prev is not None:
                close(t)
            since, prev = t, c
    if prev is not None:  # the events ended before the first batch
        close(rows[-1][0])
    return acc["run"], acc["rq"], acc["asleep"], spells


def one(grist, args, cpu):
    with tempfile.TemporaryDirectory(prefix="grist-start-") as tmp:
        data, pidf = os.path.join(tmp, "perf.data"), os.path.join(tmp, "pid")
        # the shell writes its pid and execs grist in its place: the process whose threads are counted
        r = subprocess.run(["perf", "record", "-q", "-a", "-e", EVENTS, "-o", data, "--", "sh", "-c",
                            'echo $$ > "%s"; exec taskset -c %d "$@"' % (pidf, cpu), "sh", grist, "load"] + args +
                           ["--stats"], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        fb = float(re.search(r"first batch: ([\d.]+) s", r.stderr).group(1))
        body = re.search(r"remote body: ([\d.]+) bytes", r.stderr)
        run, rq, asleep, spells = states(data, int(open(pidf).read()), fb)
    return {"first": fb, "run": run, "runnable": rq, "asleep": asleep,
            "body": float(body.group(1)) if body else float("nan"), "spells": spells}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grist", default="build/release/tools/grist")
    ap.add_argument("--baseline", help="another build, alternating with --grist")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=0)
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then grist load's arguments")
    a = ap.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    builds = [("new", a.grist)] + ([("base", a.baseline)] if a.baseline else [])
    res = {name: [] for name, _ in builds}
    for i in range(a.pairs):
        for name, binary in builds if i % 2 == 0 else builds[::-1]:
            f = one(binary, args, a.cpu)
            res[name].append(f)
            print("%s: first batch %.3f s; running %.3f, runnable %.3f, asleep %.3f s; body %.2f; asleep over 2 ms: %s"
                  % (name, f["first"], f["run"], f["runnable"], f["asleep"], f["body"],
                     ", ".join("%.3f+%.1fms" % (s, d * 1e3) for s, d in f["spells"])), flush=True)
    for name, _ in builds:
        v = res[name]
        print("%s, medians of %d: first batch %.3f s; running %.3f, runnable %.3f, asleep %.3f s; body %.2f" % (
            name, len(v), *(statistics.median(x[q] for x in v) for q in ("first", "run", "runnable", "asleep",
                                                                         "body"))))


if __name__ == "__main__":
    sys.exit(main())
