#!/usr/bin/env python3
"""What the remote bench's servers serve alone: many parallel ranged GETs from curl.

Starts the servers of tests/interop/remote_servers.py over one file of --size MiB: `rclone
serve s3` (SigV4 checked; curl signs with --aws-sigv4), nginx, and the delay proxies in front
of them (the asyncio one, and the C one of tools/delay_proxy when it is built), then runs
`curl --parallel` with --requests GETs of --get bytes each at random aligned offsets, at most
--parallel at once, alternating the targets, --rounds times. For each target it prints the
median GETs/s and MB/s, and the CPU seconds per GiB served of the client (curl), the server
and the proxy, taken from /proc and getrusage, so that the ceiling of the whole setup on
this machine shows, and which process sets it.

    bench/py/remote_serve_bench.py --get 1M --requests 400 --parallel 32
    bench/py/remote_serve_bench.py --get 16K --requests 4000 --parallel 64
"""
import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
import remote_servers as rs  # noqa: E402
from benchutil import scratch  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def size(text):
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text[:-1] if mul > 1 else text) * mul


def proc_cpu(pids):
    """CPU seconds (user + system) used so far by @pids and their live threads."""
    total = 0.0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK
        except OSError:
            pass
    return total


def children_of(pid):
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    except OSError:
        return []
    return [int(x) for x in out.split()]


def run_curl(url, n, get, fsize, parallel, sign, seed):
    rnd = random.Random(seed)
    cfg = tempfile.NamedTemporaryFile("w", suffix=".curl", delete=False)
    for _ in range(n):
        off = rnd.randrange(0, (fsize - get) // 4096 + 1) * 4096
        cfg.write('url = "%s"\nrange = "%d-%d"\noutput = "/dev/null"\n' % (url, off, off + get - 1))
    cfg.close()
    argv = ["curl", "-s", "-w", "%{http_code}\\n", "--parallel", "--parallel-immediate", "--parallel-max", str(parallel), "-K", cfg.name]
    if sign:
        argv[1:1] = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "%s:%s" % (rs.ACCESS_KEY, rs.SECRET_KEY),
                     "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(argv, capture_output=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    os.unlink(cfg.name)
    bad = [c for c in out.stdout.split() if c not in (b"200", b"206")]
    if out.returncode or bad:
        raise RuntimeError("curl: status %d, %d GETs not 200/206 (%s): %s" % (
            out.returncode, len(bad), b" ".join(sorted(set(bad))[:5]).decode(), out.stderr[-300:]))
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=64, help="file size, MiB (64)")
    ap.add_argument("--get", default="1M", help="bytes per GET (1M)")
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay", type=float, default=0, help="proxy delay per request, ms (0)")
    ap.add_argument("--targets", default="rclone,nginx,rclone+pyproxy,nginx+pyproxy,rclone+cproxy,nginx+cproxy")
    a = ap.parse_args()
    get = size(a.get)
    with scratch("grist-serve-bench-") as (tmp, started):
        os.chmod(tmp, 0o755)  # nginx workers run as nobody
        os.makedirs(os.path.join(tmp, "b"))
        path = os.path.join(tmp, "b", "f.bin")
        with open(path, "wb") as f:
            for _ in range(a.size):
                f.write(os.urandom(1 << 20))
        fsize = a.size << 20
        rclone = rs.Rclone(tmp, extra=["--etag-hash", ""])
        started.append(rclone)
        nginx = rs.Nginx(tmp)
        started.append(nginx)
        servers = {"rclone": (rclone.port, [rclone.proc.pid], True),
                   "nginx": (nginx.port, [nginx.proc.pid] + children_of(nginx.proc.pid), False)}
        targets = {}
        for t in a.targets.split(","):
            base, _, proxy = t.partition("+")
            port, pids, sign = servers[base]
            ppids, pself = [], False
            if proxy == "pyproxy":
                p = rs.FaultProxy(port, delay=a.delay / 1000.0)
                started.append(p)
                port, pself = p.port, True
            elif proxy == "cproxy":
                try:
                    p = rs.DelayProxy(port, delay=a.delay / 1000.0)
                except rs.Skip as e:
                    print("%s: skipped (%s)" % (t, e))
                    continue
                started.append(p)
                port, ppids = p.port, [p.proc.pid]
            targets[t] = ("http://127.0.0.1:%d/b/f.bin" % port, pids, ppids, pself, sign)
        res = {t: {"wall": [], "client": [], "server": [], "proxy": []} for t in targets}
        for r in range(a.rounds):
            for t, (url, pids, ppids, pself, sign) in targets.items():
                s0, p0 = proc_cpu(pids), proc_cpu(ppids)
                self0 = resource.getrusage(resource.RUSAGE_SELF)
                wall, client = run_curl(url, a.requests, get, fsize, a.parallel, sign, r)
                self1 = resource.getrusage(resource.RUSAGE_SELF)
                res[t]["wall"].append(wall)
                res[t]["client"].append(client)
                res[t]["server"].append(proc_cpu(pids) - s0)
                pc = proc_cpu(ppids) - p0
                if pself:
                    pc += (self1.ru_utime - self0.ru_utime) + (self1.ru_stime - self0.ru_stime)
                res[t]["proxy"].append(pc)
        gib = a.requests * get / (1 << 30)
        print("%d GETs of %s, %d in parallel, delay %g ms, medians of %d:" % (a.requests, a.get, a.parallel,
                                                                             a.delay, a.rounds))
        print("%-16s %9s %9s %12s %12s %12s" % ("target", "GETs/s", "MB/s", "client s/GiB", "server s/GiB",
                                             "proxy s/GiB"))
        for t, v in res.items():
            w = statistics.median(v["wall"])
            print("%-16s %9.0f %9.1f %12.2f %12.2f %12.2f" % (
                t, a.requests / w, a.requests * get / w / 1e6, statistics.median(v["client"]) / gib,
                statistics.median(v["server"]) / gib, statistics.median(v["proxy"]) / gib))


if __name__ == "__main__":
    main()
