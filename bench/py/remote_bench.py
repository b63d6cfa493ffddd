#!/usr/bin/env python3
"""Remote reads: grist on s3:// through a latency proxy, against Grain through a FUSE mount.

Starts `rclone serve s3` over a folder of ArrayRecord files (1 KiB records, zstd:3, group
sizes 1 and 64), an asyncio proxy in front of it that delays every request by --delay ms
(tests/interop/remote_servers.py, the one the remote tests use), and, for the baseline,
`rclone mount` of the same server through the same proxy with rclone's defaults. Then, each
for --seconds, alternating, --rounds times (medians reported):

  grist-record   grist load s3://... shuffled records, batches of 256
  grain-fuse     grain.sources.ArrayRecordDataSource(mount/...).__getitems__(256), shuffled
  grist-window   grist load s3://... --granularity chunk (chunk-window shuffling)
  grist-local    grist load on the local files, the same settings as grist-window

and a sweep of proxy delay (--sweep-delays) against GETs in flight (--sweep-inflight) for
grist-record. Figures are whole-process: records delivered / wall time of the process,
opening included. rclone serves with --etag-hash '' (no ETag): with its default MD5 it hashes
the whole object on every GET, which would be the limit of every figure here.

    bench/py/remote_bench.py --grist build/release/tools/grist --delay 20 --seconds 10
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
import remote_servers as rs  # noqa: E402


def write_file(grist, path, n, group):
    lines = b"".join(os.urandom(512).hex().encode() + b"\n" for _ in range(n))  # 1 KiB records
    subprocess.run([grist, "write", "--options", "group_size:%d,zstd:3" % group, path], input=lines, check=True)


def run_grist(grist, args, seconds, env):
    """Records/s of `grist load ARGS` stopped after about @seconds (whole process)."""
    t0 = time.monotonic()
    p = subprocess.Popen([grist, "load"] + [str(a) for a in args] + ["--print-indices"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    n = 0
    deadline = t0 + seconds
    for line in p.stdout:
        n += 1
        if time.monotonic() >= deadline:
            break
    wall = time.monotonic() - t0
    p.kill()
    p.wait()
    return n / wall


GRAIN = r"""
import random, sys, time
t0 = time.monotonic()
import grain
src = grain.sources.ArrayRecordDataSource([sys.argv[1]])
n = len(src); seconds = float(sys.argv[2])
idx = list(range(n)); random.Random(1).shuffle(idx)
got = 0
for k in range(0, n, 256):
    got += len(src.__getitems__(idx[k:k + 256]))
    if time.monotonic() - t0 >= seconds:
        break
print(got / (time.monotonic() - t0))
"""


def run_grain(path, seconds):
    out = subprocess.run([sys.executable, "-c", GRAIN, path, str(seconds)], capture_output=True, text=True,
                         timeout=seconds + 120)
    if out.returncode:
        raise RuntimeError(out.stderr[-500:])
    return float(out.stdout.split()[-1])


class Mount:
    """rclone mount of the S3 server behind the proxy, rclone's defaults otherwise."""

    def __init__(self, endpoint, bucket, where):
        env = dict(os.environ, RCLONE_CONFIG_GB_TYPE="s3", RCLONE_CONFIG_GB_PROVIDER="Other",
                   RCLONE_CONFIG_GB_ENDPOINT=endpoint, RCLONE_CONFIG_GB_ACCESS_KEY_ID=rs.ACCESS_KEY,
                   RCLONE_CONFIG_GB_SECRET_ACCESS_KEY=rs.SECRET_KEY)
        self.where = where
        self.proc = subprocess.Popen([rs.rclone_binary(), "mount", "gb:" + bucket, where, "--read-only"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.ismount(where):
                return
            if self.proc.poll() is not None:
                raise RuntimeError("rclone mount exited (is fuse3 installed?)")
            time.sleep(0.05)
        raise RuntimeError("rclone mount did not come up")

    def stop(self):
        subprocess.run(["fusermount3", "-u", self.where], capture_output=True)
        self.proc.terminate()
        self.proc.wait(timeout=20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grist", default=os.path.join(ROOT, "build", "release", "tools", "grist"))
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--delay", type=float, default=20, help="proxy delay per request, ms (20)")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sweep-delays", default="0,5,20,50")
    ap.add_argument("--sweep-inflight", default="8,32,128")
    ap.add_argument("--no-grain", action="store_true")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="grist-remote-bench-")
    data = os.path.join(tmp, "root", "b")
    os.makedirs(data)
    results = {"delay_ms": a.delay, "records": a.records, "seconds": a.seconds, "rounds": a.rounds}
    server = proxy = mount = None
    try:
        for g in (1, 64):
            write_file(a.grist, os.path.join(data, "g%d.ar" % g), a.records, g)
        server = rs.Rclone(os.path.join(tmp, "root"), extra=["--etag-hash", ""])
        proxy = rs.FaultProxy(server.port, delay=a.delay / 1000.0)
        env = dict(os.environ, AWS_ACCESS_KEY_ID=rs.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=rs.SECRET_KEY,
                   AWS_ENDPOINT_URL=proxy.endpoint)
        env.pop("AWS_SESSION_TOKEN", None)
        if not a.no_grain:
            os.makedirs(os.path.join(tmp, "mnt"))
            mount = Mount(proxy.endpoint, "b", os.path.join(tmp, "mnt"))
        for g in (1, 64):
            url, local = "s3://b/g%d.ar" % g, os.path.join(data, "g%d.ar" % g)
            rec = ["--batch-size", 256, "--seed", 1, "--epochs", 0]
            win = rec + ["--granularity", "chunk"]
            runs = {"grist-record": [], "grain-fuse": [], "grist-window": [], "grist-local-window": []}
            for _ in range(a.rounds):
                runs["grist-record"].append(run_grist(a.grist, [url] + rec, a.seconds, env))
                if mount:
                    runs["grain-fuse"].append(run_grain(os.path.join(mount.where, "g%d.ar" % g), a.seconds))
                runs["grist-window"].append(run_grist(a.grist, [url] + win, a.seconds, env))
                runs["grist-local-window"].append(run_grist(a.grist, [local] + win, a.seconds, env))
            med = {k: statistics.median(v) for k, v in runs.items() if v}
            results["group_size_%d" % g] = {"runs": runs, "median_records_per_s": med}
            print("group_size %d, %g ms: %s" % (g, a.delay, json.dumps({k: round(v) for k, v in med.items()})))
            if "grain-fuse" in med:
                print("  grist / grain through FUSE: %.1fx" % (med["grist-record"] / med["grain-fuse"]))
            print("  grist chunk windows remote / local: %.2fx" % (med["grist-window"] / med["grist-local-window"]))
        proxy.stop()
        proxy = None
        sweep = {}
        for d in [float(x) for x in a.sweep_delays.split(",") if x]:
            p = rs.FaultProxy(server.port, delay=d / 1000.0)
            env["AWS_ENDPOINT_URL"] = p.endpoint
            for inf in [int(x) for x in a.sweep_inflight.split(",") if x]:
                r = run_grist(a.grist, ["s3://b/g1.ar", "--batch-size", 256, "--seed", 1, "--epochs", 0,
                                        "--remote", "inflight:%d" % inf], a.seconds / 2, env)
                sweep["%g,%d" % (d, inf)] = r
                print("sweep delay %g ms, inflight %d: %.0f records/s" % (d, inf, r), flush=True)
            p.stop()
        results["sweep_records_per_s"] = sweep
        if a.json:
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1)
    finally:
        if mount:
            mount.stop()
        if proxy:
            proxy.stop()
        if server:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
