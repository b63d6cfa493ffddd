#!/usr/bin/env python3
"""Writes to object storage: `grist convert IN s3://...` against what a user does without it,
`grist convert IN local.ar` followed by `rclone copyto local.ar remote:...` (rclone's own S3
client, its default multipart settings), both to the same `rclone serve s3`.

Makes --mb MB of text lines (random hex, so zstd halves them), starts rclone serve s3 over a
temporary folder (with --delay ms: bench/delay_proxy in front of it, for both sides), then
runs the two, alternating, --rounds times, and prints each pair and the medians (rclone
copies to a new key each round: to one it had written, it would skip the upload); the figure
is the speed of the direct write relative to the two-step one (time of convert + copy / time
of the direct convert; issue 34's target is >= 0.8). Every output is checked byte-identical
to the local convert's.

    bench/py/remote_write_bench.py --grist build/release/tools/grist --mb 200 --rounds 5
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "interop"))
import remote_servers as rs  # noqa: E402


def timed(cmd, env):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grist", required=True)
    ap.add_argument("--mb", type=int, default=200, help="input MB of text lines")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--delay", type=float, default=0.0, help="ms added to every request (bench/delay_proxy)")
    ap.add_argument("--options", default="group_size:64,zstd:1", help="writer options")
    ap.add_argument("--remote", default="", help="grist --remote text for the direct write (e.g. part:32M)")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="grist-write-bench-")
    servers = []
    try:
        lines = os.path.join(tmp, "in.txt")
        r = random.Random(1)
        with open(lines, "w") as f:
            for _ in range(a.mb * 1000000 // 401):
                f.write(r.randbytes(200).hex() + "\n")
        os.makedirs(os.path.join(tmp, "root", "bkt"))
        server = rs.Rclone(os.path.join(tmp, "root"))
        servers.append(server)
        endpoint = server.endpoint
        if a.delay:
            proxy = rs.DelayProxy(server.port, a.delay / 1000.0)
            servers.append(proxy)
            endpoint = proxy.endpoint
        env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID=rs.ACCESS_KEY,
                   AWS_SECRET_ACCESS_KEY=rs.SECRET_KEY, AWS_REGION="us-east-1",
                   RCLONE_CONFIG_T_TYPE="s3", RCLONE_CONFIG_T_PROVIDER="Other", RCLONE_CONFIG_T_ENDPOINT=endpoint,
                   RCLONE_CONFIG_T_ACCESS_KEY_ID=rs.ACCESS_KEY, RCLONE_CONFIG_T_SECRET_ACCESS_KEY=rs.SECRET_KEY,
                   RCLONE_CONFIG_T_FORCE_PATH_STYLE="true")
        env.pop("GRIST_REMOTE_OPTIONS", None)
        local = os.path.join(tmp, "local.ar")
        direct = [a.grist, "convert", "--from", "lines", "--no-progress", "--options", a.options, lines,
                  "s3://bkt/direct.ar"] + (["--remote", a.remote] if a.remote else [])
        # rclone copyto skips an upload whose destination already holds the same bytes (it
        # compares size and MD5, then only sets the modification time): the convert's output is
        # the same every round, so each round copies to a new key, and --no-check-dest besides
        two = ([a.grist, "convert", "--from", "lines", "--no-progress", "--options", a.options, lines, local],
               lambda k: [rs.rclone_binary(), "copyto", "-q", "--no-check-dest", local, "T:bkt/copied-%d.ar" % k])
        pairs = []
        for k in range(a.rounds):
            order = (0, 1) if k % 2 == 0 else (1, 0)
            got = [0.0, 0.0]
            for side in order:
                if side == 0:
                    got[0] = timed(direct, env)
                else:
                    got[1] = timed(two[0], env) + timed(two[1](k), env)
                    copied = os.path.join(tmp, "root", "bkt", "copied-%d.ar" % k)
                    if os.path.getsize(copied) != os.path.getsize(local):
                        raise SystemExit("rclone copyto did not write %s whole" % copied)
                    os.unlink(copied)
                    os.unlink(local)
            pairs.append(got)
            print("round %d: s3 convert %.2f s, convert + rclone copy %.2f s, ratio %.2f" %
                  (k + 1, got[0], got[1], got[1] / got[0]), flush=True)
        timed(two[0], env)
        with open(local, "rb") as x, open(os.path.join(tmp, "root", "bkt", "direct.ar"), "rb") as y:
            if x.read() != y.read():
                raise SystemExit("the uploaded object differs from the local convert")
        size = os.path.getsize(local)
        s3 = statistics.median(p[0] for p in pairs)
        alt = statistics.median(p[1] for p in pairs)
        ratio = statistics.median(p[1] / p[0] for p in pairs)
        print("%d MB in, %.1f MB out, %d rounds, delay %g ms: s3 convert %.2f s (%.0f MB/s out), "
              "convert + rclone copy %.2f s; speed of the direct write %.2fx the two steps (median of pairs)"
              % (a.mb, size / 1e6, a.rounds, a.delay, s3, size / 1e6 / s3, alt, ratio))
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
