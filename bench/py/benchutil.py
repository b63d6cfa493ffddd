"""Helpers the Python baselines share: making a test file, warming the page
cache, timing runs and printing the one-line JSON result the lead's bench parses."""
import contextlib
import json
import os
import random
import shutil
import statistics
import tempfile
import time


def add_common_args(ap):
    ap.add_argument("files", nargs="+", help="ArrayRecord file(s) to read")
    ap.add_argument("--batch", type=int, default=256, help="records per batch (256)")
    ap.add_argument("--seed", type=int, default=42, help="seed of the index shuffle (42)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs; the median is printed (3)")
    ap.add_argument("--make", type=int, metavar="N",
                    help="first write N records with the official writer to the (single) file")
    ap.add_argument("--record-size", type=int, default=1024, help="bytes per made record (1024)")
    ap.add_argument("--options", default="group_size:1,uncompressed",
                    help="writer options of a made file (group_size:1,uncompressed)")
    ap.add_argument("--seconds", type=float,
                    help="one time-limited run of this many seconds instead of median runs "
                         "(how `grist-bench --compare` calls it)")
    ap.add_argument("--cold", action="store_true",
                    help="do not read the files first (the caller dropped the page cache)")


def prepare(args):
    """Write the file if --make was given, then read every file once so the
    timed runs see a warm page cache."""
    if args.make is not None:
        if len(args.files) != 1:
            raise SystemExit("--make writes one file; give exactly one")
        from array_record.python import array_record_module as ar
        rng = random.Random(args.seed)
        w = ar.ArrayRecordWriter(args.files[0], args.options)
        for _ in range(args.make):
            w.write(rng.randbytes(args.record_size))
        w.close()
    if getattr(args, "cold", False):
        return
    for path in args.files:
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass


# CPU seconds (every thread of this process) of the run emit() reports, when known.
_cpu_seconds = None


def alternate(commands, rounds):
    """Each command ({name: argv}) run as a whole process @rounds times, the order rotated
    every round (A B C, B C A, ...) so a noisy machine weighs on all alike: {name: [seconds]}."""
    import subprocess

    names = list(commands)
    times = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            subprocess.run(commands[n], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[n].append(time.perf_counter() - t0)
    return times


@contextlib.contextmanager
def scratch(prefix):
    """A fresh temporary folder and an empty list for the servers a bench starts there:
    yields (folder, servers); on leaving, however it is left, each server is stopped, the
    last started first, and the folder removed."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    servers = []
    try:
        yield tmp, servers
    finally:
        for server in reversed(servers):
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def report_alternating(times, names, width, baseline, part):
    """Print the median and every run of each name in @times (from alternate()), then
    @baseline's time over grist's, whole pipeline and with the 'none' run taken off both
    (@part alone). Returns {name: median seconds}."""
    med = {n: statistics.median(t) for n, t in times.items()}
    for n in names:
        print(f"  {n:{width}s} {med[n]:7.2f} s   (runs: {', '.join('%.2f' % t for t in times[n])})")
    print(f"  {baseline} / grist: {med[baseline] / med['grist']:.2f}x whole pipeline; {part} alone (minus 'none'): "
          f"{(med[baseline] - med['none']) / max(1e-9, med['grist'] - med['none']):.2f}x")
    return med


def median_run(fn, runs):
    """Call fn() @runs times; returns (records of the median run, its seconds)."""
    global _cpu_seconds
    results = []
    for _ in range(runs):
        c0 = time.process_time()
        t0 = time.perf_counter()
        n = fn()
        results.append((time.perf_counter() - t0, n, time.process_time() - c0))
    results.sort()
    seconds, n, _cpu_seconds = results[len(results) // 2]
    return n, seconds


def timed_run(step, seconds):
    """Call step() (returns records read) until @seconds have passed; returns
    (records, seconds actually taken). Setup before the call is not timed."""
    records = 0
    t0 = time.perf_counter()
    elapsed = 0.0
    while elapsed < seconds:
        records += step()
        elapsed = time.perf_counter() - t0
    return records, elapsed


def shuffled_batches(n, batch, seed, epochs, limit=None):
    """Batches of @batch indices of 0..@n-1, epoch e shuffled with seed + e (at most @limit
    indices per epoch)."""
    batches = []
    for epoch in range(epochs):
        order = list(range(n))
        random.Random(seed + epoch).shuffle(order)
        if limit:
            order = order[:limit]
        batches += [order[i:i + batch] for i in range(0, len(order), batch)]
    return batches


def read_batches(read, batches, args):
    """Time read(batch) (returns the records it got) over @batches: the median of
    args.runs whole passes, or with args.seconds one time-limited run that wraps
    around. Returns (records, seconds)."""
    if args.seconds:
        state = {"next": 0}

        def one_batch():
            b = batches[state["next"]]
            state["next"] = (state["next"] + 1) % len(batches)
            return len(read(b))

        return timed_run(one_batch, args.seconds)
    return median_run(lambda: sum(len(read(b)) for b in batches), args.runs)


def emit(name, records, seconds):
    out = {"name": name, "records_per_s": round(records / seconds, 1) if seconds else 0.0,
           "records": records, "seconds": round(seconds, 6)}
    if _cpu_seconds is not None:
        out["cpu_seconds"] = round(_cpu_seconds, 6)
    print(json.dumps(out))


def quiet_absl():
    # array_record and grain log through absl; keep stdout to the JSON line.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import absl.logging
        absl.logging.set_verbosity(absl.logging.ERROR)
    except ImportError:
        pass
