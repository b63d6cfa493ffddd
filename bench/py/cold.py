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
    """Run argv to completion: (wall seconds, CPU seconds and context switches from wait4(), stdout, stderr)."""
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
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_nvcsw + ru.ru_nivcsw, o, e


def measure(kind, argv, nbytes, env=None):
    """
    One run: seconds, GB/s and CPU seconds per GB of its reading, not of its start-up.
    fio spends about 0.3 s and 0.15 s of CPU starting (as much as a whole pass here), so
    its own JSON report gives the run time and the job's CPU share. grist's --stats give
    'seconds' from before grist_loader_create() to the last batch and the 'start-up'
    (create: opening, footers, and pinning and registering the read buffers, up to
    0.1-0.3 s for 128 MiB of them on this VM) with its CPU; the reading phase is the
    difference, as fio's run time is. Both are kept: 'startup' and 'startup_cpu'.
    """
    wall, cpu, ctx, out, err = run_timed(argv, env)
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
        secs -= startup
        cpu -= startup_cpu
    return {"wall": secs, "process_wall": wall, "gbps": nbytes / secs / 1e9, "cpu_per_gb": cpu / (nbytes / 1e9),
            "ctx_per_gb": ctx / (nbytes / 1e9),
            "startup": startup, "startup_cpu": startup_cpu}


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


def bench_case(a, path, batch, where, tmp, results):
    size = os.path.getsize(path)
    load_args = ["load", path, "--batch-size", str(batch), "--seed", str(a.seed), "--queue-depth",
                 str(a.queue_depth), "--threads", str(a.threads), "--io", "direct", "--epochs", str(a.epochs), "--stats"]
    record = int(re.search(r"-s(\d+)-", os.path.basename(path)).group(1))
    if batch * record > (64 << 20):
        # 256 records of 1 MiB: a batch above the default bound of 64 MiB
        load_args += ["--max-batch-bytes", str(batch * record)]
    grist_cmd = [a.grist] + load_args + a.grist_arg
    iolog = os.path.join(tmp, "grist.iolog")
    drop_caches()
    run_timed(grist_cmd + ["--iolog", iolog], environ(a.env))
    gbytes, nreq = iolog_bytes(iolog)
    bs = -(-gbytes // nreq // 4096) * 4096
    fio_common = ["fio", "--name=cold", "--readonly", "--ioengine=io_uring", "--direct=1",
                  "--iodepth=%d" % a.queue_depth, "--output-format=json"]
    # name -> (kind, argv, bytes); grist's ratio is taken over each of the others
    cmds = {"grist": ("grist", grist_cmd, gbytes)}
    env = {"grist": environ(a.env)}
    if a.vs_grist or a.vs_arg or a.vs_env:
        cmds["b"] = ("grist", [os.path.abspath(a.vs_grist or a.grist)] + load_args + a.vs_arg, gbytes)
        env["b"] = environ(a.vs_env)
    if not a.no_fio:
        cmds["shape"] = ("fio", fio_common + ["--filename=" + path, "--rw=randread", "--bs=%d" % bs,
                                              "--blockalign=4k", "--size=%d" % size, "--io_size=%d" % (size * a.epochs),
                                              "--norandommap", "--randrepeat=0"], size * a.epochs)
        cmds["replay"] = ("fio", fio_common + ["--read_iolog=" + iolog], gbytes)
    names = list(cmds)
    others = names[1:]
    # the second grist against each fio too, from the same pairs (an option's cost against fio's)
    b_others = [n for n in others if n != "b"] if "b" in cmds else []
    print("\n== %s, %s, batch %d: grist reads %d requests, %d bytes (mean %.0f); fio shape bs=%dk blockalign=4k"
          % (where, os.path.basename(path), batch, nreq, gbytes, gbytes / nreq, bs // 1024), flush=True)
    for n in names:
        if cmds[n][0] == "grist":
            print("   %s: %s%s" % (n, "".join(e + " " for e in (a.env if n == "grist" else a.vs_env)),
                                   " ".join(cmds[n][1])))
    print("   %4s  %s %s %s load" % ("pair", " ".join("%-22s" % (n + " s GB/s cpu/GB") for n in names),
                                   " ".join("%7s" % ("/" + n) for n in others),
                                   " ".join("%7s" % ("cpu/" + n) for n in others)))
    pairs = []
    for i in range(a.pairs):
        order = names[i % len(names):] + names[:i % len(names)]
        got = {}
        for name in order:
            kind, argv, nbytes = cmds[name]
            drop_caches()
            settle(a.settle)
            got[name] = measure(kind, argv, nbytes, env.get(name))
        r = {"order": order, **got, "load": os.getloadavg()[0]}
        for n in others:
            r["ratio_" + n] = got["grist"]["gbps"] / got[n]["gbps"]
            r["cpu_ratio_" + n] = got["grist"]["cpu_per_gb"] / got[n]["cpu_per_gb"]
        for n in b_others:
            r["b_ratio_" + n] = got["b"]["gbps"] / got[n]["gbps"]
            r["b_cpu_ratio_" + n] = got["b"]["cpu_per_gb"] / got[n]["cpu_per_gb"]
        pairs.append(r)
        print("   %4d  %s %s %s %.1f" % (
            i + 1, " ".join("%5.3f %5.2f %6.3f    " % (got[n]["wall"], got[n]["gbps"], got[n]["cpu_per_gb"])
                            for n in names),
            " ".join("%7.3f" % r["ratio_" + n] for n in others),
            " ".join("%7.3f" % r["cpu_ratio_" + n] for n in others), r["load"]), flush=True)
    summary = {"where": where, "file": os.path.basename(path), "batch": batch, "requests": nreq,
               "bytes": gbytes, "shape_bs": bs, "pairs": pairs, "commands": {n: cmds[n][1] for n in names}}
    summary["grist_startup"] = statistics.median(p["grist"]["startup"] for p in pairs)
    summary["grist_startup_cpu"] = statistics.median(p["grist"]["startup_cpu"] for p in pairs)
    print("   grist start-up (not in the rates): median %.3f s, %.3f s of CPU" % (summary["grist_startup"],
                                                                                 summary["grist_startup_cpu"]))
    for n in names:
        summary[n + "_gbps"] = statistics.median(p[n]["gbps"] for p in pairs)
        summary[n + "_cpu_per_gb"] = statistics.median(p[n]["cpu_per_gb"] for p in pairs)
        summary[n + "_ctx_per_gb"] = statistics.median(p[n]["ctx_per_gb"] for p in pairs)
    for n in others:
        for k in ("ratio_", "cpu_ratio_"):
            summary["median_" + k + n] = statistics.median(p[k + n] for p in pairs)
        print("   median of %d pairs, grist / %s: bytes/s %.3f (%.3f-%.3f), CPU per GB %.3f (%.3f s against %.3f s),"
              " context switches per GB %.0f against %.0f"
              % (len(pairs), n, summary["median_ratio_" + n], min(p["ratio_" + n] for p in pairs),
                 max(p["ratio_" + n] for p in pairs), summary["median_cpu_ratio_" + n],
                 summary["grist_cpu_per_gb"], summary[n + "_cpu_per_gb"], summary["grist_ctx_per_gb"],
                 summary[n + "_ctx_per_gb"]), flush=True)
    for n in b_others:
        for k in ("b_ratio_", "b_cpu_ratio_"):
            summary["median_" + k + n] = statistics.median(p[k + n] for p in pairs)
        print("   median of %d pairs, b / %s: bytes/s %.3f (%.3f-%.3f), CPU per GB %.3f (%.3f s against %.3f s)"
              % (len(pairs), n, summary["median_b_ratio_" + n], min(p["b_ratio_" + n] for p in pairs),
                 max(p["b_ratio_" + n] for p in pairs), summary["median_b_cpu_ratio_" + n],
                 summary["b_cpu_per_gb"], summary[n + "_cpu_per_gb"]), flush=True)
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
    print("\nsummary (median of per-pair ratios, grist bytes/s over the other's; CPU s per GB read):")
    for s in results:
        others = [k[len("median_ratio_"):] for k in s if k.startswith("median_ratio_")]
        print("  %-4s %-45s batch %3d: grist %.2f GB/s %.3f s/GB | %s" % (
            s["where"], s["file"], s["batch"], s["grist_gbps"], s["grist_cpu_per_gb"],
            " | ".join("/%s %.3f (cpu %.2f; %.2f GB/s %.3f s/GB)" % (n, s["median_ratio_" + n],
                                                                     s["median_cpu_ratio_" + n], s[n + "_gbps"],
                                                                     s[n + "_cpu_per_gb"]) for n in others)))
        b_others = [k[len("median_b_ratio_"):] for k in s if k.startswith("median_b_ratio_")]
        if b_others:
            print("  %-4s %-45s           b %.2f GB/s %.3f s/GB | %s" % (
                "", "", s["b_gbps"], s["b_cpu_per_gb"],
                " | ".join("b/%s %.3f (cpu %.2f)" % (n, s["median_b_ratio_" + n], s["median_b_cpu_ratio_" + n])
                           for n in b_others)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
