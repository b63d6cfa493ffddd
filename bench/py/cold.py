#!/usr/bin/env python3
"""Cold reads: grist against fio, alternating, on the real disk and on a tmpfs-backed loop device.

For every record size and batch size, `grist load FILE --io direct` (one epoch) runs in
pairs against two fio jobs that read the same bytes with O_DIRECT, io_uring and the same
queue depth:

  shape   fio --rw=randread --bs=<grist's mean request, rounded up to 4 KiB>
          --blockalign=4k over the whole file (the issue's "68k" form);
  replay  fio --read_iolog=<grist's own requests>, written by `grist load --iolog` in an
          untimed run beforehand: the very extents grist reads, in its order.

The three runs of a pair go in a rotating order and the page cache is dropped before
each; on a VM that hands freed memory back to its host, each also waits until it has
(--settle, see settle()), so no run inherits the memory the one before it freed. Rates
are bytes read over the reading time, without process start-up (see measure()); every pair is printed, and the summary is the median of the per-pair ratios,
grist's bytes/s over fio's. CPU per GB is user + system time per 10^9 bytes read; work
the kernel does in its own threads (a loop device's worker copying from tmpfs) counts
for neither side. Context switches per GB (voluntary and involuntary: grist's whole
process from wait4(), start-up included; fio's job, from its report) show the
per-request cost of waiting and waking.

The loop device: an ext4 image in /dev/shm on /dev/loopN, mounted under a temporary
folder, set up and torn down here. It reads at memory speed, so it shows the engine's
own cost; the real disk of a VM is cached by its host and swings from run to run.

Needs root (drop_caches, losetup, mount). Example:

  bench/py/cold.py --grist build/release/tools/grist --pairs 6 \
      --records 64k,1m --batch-sizes 1,16,256 --targets loop,disk
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# record size -> record count for a file of about 768 MiB
RECORDS = {"64k": (65536, 12288), "1m": (1048576, 768)}


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


PAGE_REPORTING = "/sys/module/page_reporting"


def settle(seconds):
    """
    Wait @seconds, and then while the VM still hands freed memory back to its host. With
    free page reporting (virtio-balloon), a guest gives the host every free 2 MiB block
    about 2 s after it is freed, and touching such a block again costs a host fault per
    page: 512 MiB of batch slots (256 records of 1 MiB) then take 0.7-1.2 s of system
    CPU to fault in instead of 0.1 s. A run started sooner than that after a grist run
    gets that run's memory back still backed, so whichever contender comes right after a
    grist run wins its first touch, and the rotating order makes that the same one in
    most pairs. Waiting puts every run where a freshly started job is. The counter of
    reported memory is this VM kernel's; elsewhere only the wait applies.
    """
    if seconds <= 0:
        return
    time.sleep(seconds)
    counter = os.path.join(PAGE_REPORTING, "parameters", "reported_kib")
    if not os.path.exists(counter):
        return
    # it reports in passes 2 s apart, a few hundred MiB each (512 MiB freed: 3 passes, 6 s),
    # so it is done once a pass has gone by without a report
    deadline = time.monotonic() + 20
    with open(counter) as f:
        last = f.read()
    still = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - still < 2.5:
        time.sleep(0.5)
        with open(counter) as f:
            now = f.read()
        if now != last:
            last, still = now, time.monotonic()


def run_timed(argv, env=None):
    """
    Run argv to completion, as /usr/bin/time would: (the process's wait4() figures, stdout,
    stderr). The figures are wall seconds from fork to reaping, user and system seconds,
    minor and major page faults, voluntary and involuntary context switches and the peak
    resident set (KiB), the waited-for children included (fio's job processes).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        o, e = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s%s" % (p.returncode, " ".join(argv), o, e))
    usage = {"wall": wall, "user": ru.ru_utime, "sys": ru.ru_stime, "minflt": ru.ru_minflt,
             "majflt": ru.ru_majflt, "nvcsw": ru.ru_nvcsw, "nivcsw": ru.ru_nivcsw, "maxrss_kib": ru.ru_maxrss}
    return usage, o, e


def measure(kind, argv, nbytes, env=None):
    """
    One run, two ways. The reading phase (the figures without a prefix): seconds, GB/s and
    CPU seconds per GB of its reading, not of its start-up. fio spends about 0.3 s and 0.15 s
    of CPU starting (as much as a whole pass here), so its own JSON report gives the run
    time and the job's CPU share. grist's --stats give 'seconds' from before
    grist_loader_create() to the last batch and the 'start-up' (create: opening, footers, and
    pinning and registering the read buffers, up to 0.1-0.3 s for 128 MiB of them on this VM)
    with its CPU; the reading phase is the difference, as fio's run time is. Both are kept:
    'startup' and 'startup_cpu'.

    The whole process ('proc_' figures: what a user pays, issue 37): wall from fork to
    reaping, and from wait4() its user and system CPU, page faults, context switches and
    peak RSS, start-up, teardown and the dynamic loader included, for fio as for grist.
    """
    ru, out, err = run_timed(argv, env)
    cpu = ru["user"] + ru["sys"]
    ctx = ru["nvcsw"] + ru["nivcsw"]
    first = None
    if kind == "fio":
        j = json.loads(out[out.index("{"):])["jobs"][0]
        secs = j["read"]["runtime"] / 1e3
        cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * j["job_runtime"] / 1e3
        nbytes = j["read"]["io_bytes"]
        ctx = j["ctx"]
        startup = startup_cpu = 0.0
    else:
        secs = float([ln.split()[1] for ln in err.splitlines() if ln.startswith("seconds:")][0])
        m = re.search(r"^start-up: ([0-9.]+) s \(([0-9.]+) s of CPU\)", err, re.M)
        startup, startup_cpu = float(m.group(1)), float(m.group(2))
        m = re.search(r"^first batch: ([0-9.]+) s", err, re.M)
        first = float(m.group(1)) if m else None
        secs -= startup
        cpu -= startup_cpu
    gb = nbytes / 1e9
    return {"wall": secs, "gbps": nbytes / secs / 1e9, "cpu_per_gb": cpu / gb, "ctx_per_gb": ctx / gb,
            "startup": startup, "startup_cpu": startup_cpu, "first_batch": first,
            "proc_wall": ru["wall"], "proc_gbps": gb / ru["wall"], "proc_cpu_per_gb": (ru["user"] + ru["sys"]) / gb,
            "proc_user": ru["user"], "proc_sys": ru["sys"], "proc_minflt": ru["minflt"], "proc_majflt": ru["majflt"],
            "proc_ctx_per_gb": (ru["nvcsw"] + ru["nivcsw"]) / gb, "proc_nvcsw": ru["nvcsw"],
            "proc_nivcsw": ru["nivcsw"], "proc_maxrss_kib": ru["maxrss_kib"], "bytes": nbytes}


# what `--perf` counts: software events and syscall tracepoints (a VM often has no cycle counter)
PERF_EVENTS = ["task-clock", "page-faults", "context-switches", "cpu-migrations", "raw_syscalls:sys_enter",
               "syscalls:sys_enter_io_uring_enter", "syscalls:sys_enter_futex", "syscalls:sys_enter_mlock",
               "syscalls:sys_enter_mmap", "syscalls:sys_enter_munmap"]


def perf_available():
    """Whether `perf stat` runs here with the software events and the syscall tracepoints."""
    if not shutil.which("perf"):
        return "perf is not installed (Debian: apt-get install linux-perf)"
    r = subprocess.run(["perf", "stat", "-x,", "-e", ",".join(PERF_EVENTS), "true"], capture_output=True, text=True)
    if r.returncode != 0:
        return "perf stat fails here: %s" % (r.stderr.strip().splitlines() or ["?"])[-1]
    return None


def perf_stat(argv, env, tmp):
    """One run under `perf stat -e PERF_EVENTS`: {event: count} (task-clock in ms; missing: None)."""
    path = os.path.join(tmp, "perf.csv")
    run_timed(["perf", "stat", "-x,", "-o", path, "-e", ",".join(PERF_EVENTS), "--"] + argv, env)
    got = {}
    with open(path) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) >= 3 and parts[2] in PERF_EVENTS:
                try:
                    got[parts[2]] = float(parts[0])
                except ValueError:
                    got[parts[2]] = None  # <not supported> or <not counted>
    return got


def make_file(grist_bench, folder, key):
    size, n = RECORDS[key]
    path = os.path.join(folder, "bench-n%d-s%d-g1-uncompressed.array_record" % (n, size))
    if not os.path.exists(path):
        # One record per batch: grist-bench reads what it wrote, and 256 records of 1 MiB
        # are over its default batch bound (it then fails after writing the file).
        subprocess.run([grist_bench, "--dir", folder, "--records", str(n), "--record-size", str(size),
                        "--compression", "uncompressed", "--batches", "1", "--batch-size", "1"],
                       check=True, stdout=subprocess.DEVNULL)
    return path


class LoopDevice:
    """ext4 on a /dev/shm image through losetup, mounted in a temporary folder."""

    def __init__(self, size_bytes):
        self.img = "/dev/shm/grist-cold-%d.img" % os.getpid()
        self.dev = None
        self.mnt = None
        self.size = size_bytes

    def __enter__(self):
        with open(self.img, "wb") as f:
            f.truncate(self.size)
        # no lazy initialisation: a kernel thread would otherwise write the inode tables
        # during the first minutes, beside the runs being timed
        subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", self.img],
                       check=True)
        self.dev = subprocess.run(["losetup", "-f", "--show", self.img], check=True,
                                  capture_output=True, text=True).stdout.strip()
        self.mnt = tempfile.mkdtemp(prefix="grist-cold-mnt-")
        subprocess.run(["mount", self.dev, self.mnt], check=True)
        return self

    def __exit__(self, *exc):
        if self.mnt:
            # just after the last run the file system can still be busy for a moment
            for _ in range(20):
                if subprocess.run(["umount", self.mnt], stderr=subprocess.DEVNULL).returncode == 0:
                    break
                time.sleep(0.5)
            else:
                subprocess.run(["umount", "--lazy", self.mnt])
            os.rmdir(self.mnt)
        if self.dev:
            subprocess.run(["losetup", "-d", self.dev])
        if os.path.exists(self.img):
            os.unlink(self.img)


def iolog_bytes(path):
    total = n = 0
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4 and parts[1] == "read":
                total += int(parts[3])
                n += 1
    return total, n


def environ(assignments):
    """The environment with K=V @assignments added (experiment knobs of a patched build)."""
    env = dict(os.environ)
    for kv in assignments:
        k, v = kv.split("=", 1)
        env[k] = v
    return env


def contenders(a, path, gbytes, size, iolog, bs, load_args):
    """
    name -> (kind, argv, bytes, env). One grist per --verify mode ('grist' alone when there is
    one mode, else 'grist.all', 'grist.headers'), the second build or arguments ('b', with
    the first mode), and the fio jobs of --fio.
    """
    modes = a.verify.split(",")
    cmds = {}
    for v in modes:
        name = "grist" if len(modes) == 1 else "grist." + v
        cmds[name] = ("grist", [a.grist] + load_args + ["--verify", v] + a.grist_arg, gbytes, environ(a.env))
    if a.vs_grist or a.vs_arg or a.vs_env:
        cmds["b"] = ("grist", [os.path.abspath(a.vs_grist or a.grist)] + load_args + ["--verify", modes[0]]
                     + a.vs_arg, gbytes, environ(a.vs_env))
    fio_common = ["fio", "--name=cold", "--readonly", "--ioengine=io_uring", "--direct=1",
                  "--iodepth=%d" % a.queue_depth, "--output-format=json"]
    fios = [] if a.no_fio else a.fio.split(",")
    if "shape" in fios:
        cmds["shape"] = ("fio", fio_common + ["--filename=" + path, "--rw=randread", "--bs=%d" % bs,
                                              "--blockalign=4k", "--size=%d" % size, "--io_size=%d" % (size * a.epochs),
                                              "--norandommap", "--randrepeat=0"], size * a.epochs, None)
    if "replay" in fios:
        cmds["replay"] = ("fio", fio_common + ["--read_iolog=" + iolog], gbytes, None)
    return cmds


def ratio_pairs(cmds):
    """(numerator, denominator) of every ratio reported: each grist over each fio, and the first grist over b."""
    gs = [n for n in cmds if cmds[n][0] == "grist" and n != "b"]
    fios = [n for n in cmds if cmds[n][0] == "fio"]
    pairs = [(g, f) for g in gs for f in fios]
    if "b" in cmds:
        pairs.append((gs[0], "b"))
        pairs += [("b", f) for f in fios]
    return pairs


def rkey(kind, num, den):
    """A pair's key for one ratio: kind 'ratio' (bytes/s, reading phase), 'cpu_ratio', 'pratio' (bytes/s, whole
    process) or 'pcpu_ratio'; a lone 'grist' keeps the old names ('ratio_replay')."""
    return "%s_%s" % (kind, den) if num == "grist" else "%s_%s_%s" % (kind, num, den)


RATIOS = (("ratio", "gbps", False), ("cpu_ratio", "cpu_per_gb", True), ("pratio", "proc_gbps", False),
          ("pcpu_ratio", "proc_cpu_per_gb", True))


def bench_case(a, path, batch, where, tmp, results):
    size = os.path.getsize(path)
    load_args = ["load", path, "--batch-size", str(batch), "--seed", str(a.seed), "--queue-depth",
                 str(a.queue_depth), "--threads", str(a.threads), "--io", "direct", "--epochs", str(a.epochs), "--stats"]
    record = int(re.search(r"-s(\d+)-", os.path.basename(path)).group(1))
    if batch * record > (64 << 20):
        # 256 records of 1 MiB: a batch above the default bound of 64 MiB
        load_args += ["--max-batch-bytes", str(batch * record)]
    iolog = os.path.join(tmp, "grist.iolog")
    drop_caches()
    run_timed([a.grist] + load_args + a.grist_arg + ["--iolog", iolog], environ(a.env))
    gbytes, nreq = iolog_bytes(iolog)
    bs = -(-gbytes // nreq // 4096) * 4096
    cmds = contenders(a, path, gbytes, size, iolog, bs, load_args)
    names = list(cmds)
    rps = ratio_pairs(cmds)
    print("\n== %s, %s, batch %d: grist reads %d requests, %d bytes (mean %.0f); fio shape bs=%dk blockalign=4k"
          % (where, os.path.basename(path), batch, nreq, gbytes, gbytes / nreq, bs // 1024), flush=True)
    for n in names:
        print("   %s: %s%s" % (n, "".join(kv + " " for kv in (a.env if n.startswith("grist") else
                                                             a.vs_env if n == "b" else [])), " ".join(cmds[n][1])))
    print("   per run: reading phase s, GB/s, CPU s/GB | whole process s, GB/s, CPU s/GB; then bytes/s ratios,"
          " reading phase / whole process")
    pairs = []
    for i in range(a.pairs):
        order = names[i % len(names):] + names[:i % len(names)]
        got = {}
        for name in order:
            kind, argv, nbytes, env = cmds[name]
            drop_caches()
            settle(a.settle)
            got[name] = measure(kind, argv, nbytes, env)
        r = {"order": order, **got, "load": os.getloadavg()[0]}
        for num, den in rps:
            for kind, key, _ in RATIOS:
                r[rkey(kind, num, den)] = got[num][key] / got[den][key]
        pairs.append(r)
        print("   %d  %s  %s  load %.1f" % (
            i + 1, "  ".join("%s %.3f %.2f %.3f | %.3f %.2f %.3f" % (
                n, got[n]["wall"], got[n]["gbps"], got[n]["cpu_per_gb"], got[n]["proc_wall"], got[n]["proc_gbps"],
                got[n]["proc_cpu_per_gb"]) for n in names),
            "  ".join("%s/%s %.2f/%.2f" % (num, den, r[rkey("ratio", num, den)], r[rkey("pratio", num, den)])
                      for num, den in rps), r["load"]), flush=True)
    summary = {"where": where, "file": os.path.basename(path), "batch": batch, "requests": nreq,
               "bytes": gbytes, "shape_bs": bs, "pairs": pairs, "commands": {n: cmds[n][1] for n in names},
               "ratios": rps}
    for n in names:
        for key in ("gbps", "cpu_per_gb", "ctx_per_gb", "proc_wall", "proc_gbps", "proc_cpu_per_gb", "proc_user",
                    "proc_sys", "proc_minflt", "proc_ctx_per_gb", "proc_maxrss_kib", "startup", "startup_cpu"):
            summary["%s_%s" % (n, key)] = statistics.median(p[n][key] for p in pairs)
        if cmds[n][0] == "grist":
            summary[n + "_first_batch"] = statistics.median(p[n]["first_batch"] or 0.0 for p in pairs)
    print("   medians per contender (whole process: wall s, user s, sys s, minor faults, peak RSS MiB, switches/GB;"
          " CPU s per GB reading phase / whole process):")
    for n in names:
        s = lambda k: summary["%s_%s" % (n, k)]
        print("     %-13s %.3f s, %.3f u, %.3f s, %d flt, %.0f MiB, %.0f ctx/GB; CPU/GB %.3f / %.3f%s" % (
            n, s("proc_wall"), s("proc_user"), s("proc_sys"), s("proc_minflt"), s("proc_maxrss_kib") / 1024,
            s("proc_ctx_per_gb"), s("cpu_per_gb"), s("proc_cpu_per_gb"),
            "; start-up %.3f s (%.3f CPU), first batch %.3f s" % (s("startup"), s("startup_cpu"), s("first_batch"))
            if cmds[n][0] == "grist" else ""))
    for num, den in rps:
        for kind, _, _ in RATIOS:
            k = rkey(kind, num, den)
            summary["median_" + k] = statistics.median(p[k] for p in pairs)
            summary["range_" + k] = (min(p[k] for p in pairs), max(p[k] for p in pairs))
        m = lambda kind: (summary["median_" + rkey(kind, num, den)],) + summary["range_" + rkey(kind, num, den)]
        print("   median of %d pairs, %s / %s: bytes/s phase %.3f (%.2f-%.2f), whole process %.3f (%.2f-%.2f);"
              " CPU per GB phase %.2f, whole process %.2f" % ((len(pairs), num, den) + m("ratio") + m("pratio")
                                                              + m("cpu_ratio")[:1] + m("pcpu_ratio")[:1]), flush=True)
    if a.perf:
        # after the pairs, so perf's own cost is in none of the timed runs
        summary["perf"] = {}
        print("   perf stat, one run each (per request: syscalls, io_uring_enter, futex; per GB: task-clock s,"
              " page faults, context switches, mlock, mmap):")
        for n in names:
            kind, argv, nbytes, env = cmds[n]
            drop_caches()
            settle(a.settle)
            c = perf_stat(argv, env, tmp)
            summary["perf"][n] = c
            gb = nbytes / 1e9
            per = lambda ev, d: "-" if c.get(ev) is None else "%.2f" % (c[ev] / d)
            print("     %-13s %s %s %s | %s s %s %s %s %s" % (
                n, per("raw_syscalls:sys_enter", nreq), per("syscalls:sys_enter_io_uring_enter", nreq),
                per("syscalls:sys_enter_futex", nreq), per("task-clock", gb * 1e3), per("page-faults", gb),
                per("context-switches", gb), per("syscalls:sys_enter_mlock", 1), per("syscalls:sys_enter_mmap", 1)),
                flush=True)
    results.append(summary)


def grist_bench_path(a):
    """--grist-bench, or grist-bench beside --grist's build: build/release/tools/grist -> build/release/bench/grist-bench."""
    return a.grist_bench or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.grist))), "bench",
                                         "grist-bench")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grist", default="build/release/tools/grist")
    ap.add_argument("--grist-bench", help="writes the data files (default: bench/grist-bench beside tools/)")
    ap.add_argument("--dir", default="/var/tmp/grist-cold", help="data files for the real disk (default %(default)s)")
    ap.add_argument("--records", default="64k,1m", help="record sizes: 64k (12288 records), 1m (768)")
    ap.add_argument("--batch-sizes", default="1,16,256")
    ap.add_argument("--targets", default="loop,disk", help="loop and/or disk")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--queue-depth", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs per grist run (fio reads as many bytes; the replay, grist's requests of them all):"
                         " more than 1 spreads grist's first touch of its batch slots over more bytes")
    ap.add_argument("--grist-arg", action="append", default=[], help="extra argument for grist load (repeatable)")
    ap.add_argument("--vs-grist", help="also pair with this grist build (an A/B of two builds)")
    ap.add_argument("--vs-arg", action="append", default=[],
                    help="extra argument for that second grist (repeatable; alone: the same build)")
    ap.add_argument("--env", action="append", default=[], help="K=V in the environment of the grist under test")
    ap.add_argument("--vs-env", action="append", default=[], help="K=V in the environment of the second grist")
    ap.add_argument("--no-fio", action="store_true", help="leave fio out (with --vs-grist)")
    ap.add_argument("--fio", default="shape,replay",
                    help="fio jobs: shape (the issue's --bs=68k --blockalign=4k form), replay (grist's own requests)")
    ap.add_argument("--verify", default="all",
                    help="grist's --verify modes, each its own contender in every pair: all, headers or"
                         " headers,all (issue 37 judges both)")
    ap.add_argument("--perf", action="store_true",
                    help="after each case's pairs, one more run of each contender under `perf stat` (software"
                         " events and syscall tracepoints): syscalls and io_uring_enter calls per request, faults"
                         " and switches per GB")
    ap.add_argument("--json", help="write every pair and summary to this file")
    ap.add_argument("--prepare", action="store_true",
                    help="only write the data files under --dir for --records and print their paths, one a line")
    ap.add_argument("--settle", type=float,
                    default=3.0 if os.path.isdir(PAGE_REPORTING) else 0.0,
                    help="seconds to wait before each run, then while the VM reports freed memory to its host"
                         " (default 3 where the kernel has free page reporting, else 0): every run then finds"
                         " fresh memory in the same state (see settle())")
    a = ap.parse_args()
    if a.prepare:
        os.makedirs(a.dir, exist_ok=True)
        for k in a.records.split(","):
            print(make_file(grist_bench_path(a), a.dir, k))
        return
    if a.perf:
        why = perf_available()
        if why:
            sys.exit("--perf: " + why)
    for v in a.verify.split(","):
        if v not in ("all", "headers"):
            sys.exit("--verify: all, headers or both, not %r" % v)
    if os.geteuid() != 0:
        sys.exit("cold.py needs root: it drops the page cache and sets up a loop device")
    if not shutil.which("fio"):
        sys.exit("fio is not installed")
    a.grist = os.path.abspath(a.grist)
    keys = a.records.split(",")
    batches = [int(b) for b in a.batch_sizes.split(",")]
    os.makedirs(a.dir, exist_ok=True)
    files = [make_file(grist_bench_path(a), a.dir, k) for k in keys]
    results = []
    print("cold.py: %s; load average %.2f %.2f %.2f; settle %.1f s before each run"
          % (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), *os.getloadavg(), a.settle))
    with tempfile.TemporaryDirectory(prefix="grist-cold-") as tmp:
        for target in a.targets.split(","):
            if target == "disk":
                for path in files:
                    for b in batches:
                        bench_case(a, path, b, "disk", tmp, results)
            elif target == "loop":
                need = sum(os.path.getsize(p) for p in files)
                with LoopDevice(need + need // 8 + (256 << 20)) as loop:
                    copies = []
                    for path in files:
                        dst = os.path.join(loop.mnt, os.path.basename(path))
                        shutil.copyfile(path, dst)
                        copies.append(dst)
                    for path in copies:
                        for b in batches:
                            bench_case(a, path, b, "loop", tmp, results)
            else:
                sys.exit("unknown target %r" % target)
    print("\nsummary (medians of per-pair ratios, bytes/s reading phase / whole process; CPU s per GB whole process):")
    for s in results:
        print("  %-4s %-45s batch %3d: %s" % (s["where"], s["file"], s["batch"], " | ".join(
            "%s/%s %.3f / %.3f (CPU %.3f / %.3f s/GB)" % (
                num, den, s["median_" + rkey("ratio", num, den)], s["median_" + rkey("pratio", num, den)],
                s[num + "_proc_cpu_per_gb"], s[den + "_proc_cpu_per_gb"]) for num, den in s["ratios"])))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
