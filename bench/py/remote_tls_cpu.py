#!/usr/bin/env python3
"""The CPU a GET's body costs grist over https, against plain http on the direct path and on
libcurl's: does decrypting straight into the read buffers (CURLOPT_CONNECT_ONLY +
curl_easy_recv()) have enough to save?

Starts `rclone serve s3` twice over one folder, plain and with --cert/--key (a CA made by
tests/interop/remote_servers.py's TlsCerts), writes --records 1 KiB records (zstd:3, group
size 64: incompressible hex, so the body bytes are about the file's), then runs, alternating,
--rounds times:

  http-direct   grist load s3://... from the plain server, --remote direct:1 (the default):
                bodies received by recvmsg() straight into the read buffers
  http-curl     the same with --remote direct:0: libcurl receives, grist copies
  https-curl    the same from the TLS server (https always goes by libcurl): OpenSSL
                decrypts into libcurl's buffer, grist copies

Each run is a chunk-window shuffle over the whole file (--granularity chunk --epochs 1), so
every byte of it comes once as a GET body. For each it prints the medians of the wall time
and of grist's CPU time (user + system, all threads, from wait4) per record and per MiB of
GET body, and the ratios to http-direct. --perf DIR also records one run of each with
`perf record -g` into DIR (never run it in a shared checkout) and prints the top symbols,
so the share of the copy and of the decryption shows.

    bench/py/remote_tls_cpu.py --records 100000 --rounds 5
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
import remote_servers as rs  # noqa: E402
from benchutil import scratch  # noqa: E402


def write_file(grist, path, n):
    lines = b"".join(os.urandom(512).hex().encode() + b"\n" for _ in range(n))  # 1 KiB records
    subprocess.run([grist, "write", "--options", "group_size:64,zstd:3", path], input=lines, check=True)


def one_run(argv, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise RuntimeError("%s: %s" % (" ".join(argv), p.stderr[-1000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    body = 0
    for line in p.stderr.splitlines():  # --stats: "remote: N GETs, B bytes, ..."
        if line.strip().startswith("remote:") and "bytes" in line:
            words = line.replace(",", " ").split()
            body = int(words[words.index("bytes") - 1])
    return wall, cpu, body


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grist", default=os.environ.get("GRIST_CLI", os.path.join(ROOT, "build", "release", "tools", "grist")))
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--perf", help="a folder for one perf record -g of each variant")
    args = ap.parse_args()
    with scratch("grist-tls-cpu-") as (tmp, servers):
        os.makedirs(os.path.join(tmp, "root", "bkt"))
        path = os.path.join(tmp, "root", "bkt", "d.ar")
        write_file(args.grist, path, args.records)
        certs = rs.TlsCerts(tmp)
        tls = certs.server("server", ["IP:127.0.0.1"])
        plain = rs.Rclone(os.path.join(tmp, "root"))
        servers.append(plain)
        secure = rs.Rclone(os.path.join(tmp, "root"), tls=tls)
        servers.append(secure)
        base = {k: v for k, v in os.environ.items() if k not in rs.REMOTE_ENV}
        base.update(AWS_ACCESS_KEY_ID=rs.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=rs.SECRET_KEY, AWS_REGION="us-east-1")
        load = [args.grist, "load", "s3://bkt/d.ar", "--granularity", "chunk", "--epochs", "1", "--seed", "1",
                "--batch-size", "256", "--threads", str(args.threads), "--stats", "--remote"]
        variants = {
            "http-direct": (load + ["direct:1"], dict(base, AWS_ENDPOINT_URL=plain.endpoint)),
            "http-curl": (load + ["direct:0"], dict(base, AWS_ENDPOINT_URL=plain.endpoint)),
            "https-curl": (load + ["direct:1"], dict(base, AWS_ENDPOINT_URL=secure.endpoint,
                                                    AWS_CA_BUNDLE=certs.ca)),
        }
        names = list(variants)
        got = {n: [] for n in names}
        for r in range(args.rounds):
            for n in names[r % 3:] + names[:r % 3]:
                got[n].append(one_run(*variants[n]))
        print("%d records of 1 KiB, %d thread(s), %d rounds, medians (the machine may be shared)"
              % (args.records, args.threads, args.rounds))
        print("%-12s %8s %12s %12s %10s" % ("", "wall s", "CPU us/rec", "CPU ms/MiB", "vs direct"))
        ref = None
        for n in names:
            wall = statistics.median(w for w, _, _ in got[n])
            cpu = statistics.median(c for _, c, _ in got[n])
            body = statistics.median(b for _, _, b in got[n]) or os.path.getsize(path)
            ref = ref or cpu
            print("%-12s %8.2f %12.2f %12.2f %9.2fx" % (n, wall, cpu / args.records * 1e6, cpu / (body / 2**20) * 1e3,
                                                       cpu / ref))
        if args.perf:
            os.makedirs(args.perf, exist_ok=True)
            for n in names:
                data = os.path.join(args.perf, n + ".data")
                argv, env = variants[n]
                subprocess.run(["perf", "record", "-q", "-g", "-o", data] + argv, env=env, check=True,
                               capture_output=True)
                for sort, limit in (("dso", "1"), ("dso,symbol", "1.5")):
                    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", sort, "--stdio",
                                          "-q", "--percent-limit", limit, "-g", "none"],
                                         capture_output=True, text=True).stdout
                    print("== %s: by %s, %s%% of grist's samples or more\n%s" % (n, sort, limit, rep.rstrip()))


if __name__ == "__main__":
    main()
