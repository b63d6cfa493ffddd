#!/usr/bin/env python3
"""Opening a dataset of many URL shards: `grist info` over --shards small files on rclone
serve s3 behind bench/delay_proxy (--delay ms per request), whole-process wall time.

Each shard costs its opening GETs (the last 64 KiB: size, ETag, postscript and a small
footer; a footer above those bytes one more), so opened one after another N shards cost
about N x 2 x delay; opened together, a few round trips. With several --grist binaries
the runs alternate, --rounds times each, and the medians are printed (and JSON last).

    bench/py/remote_open_bench.py --grist build/release/tools/grist --shards 200 --delay 20
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "interop"))
import remote_servers as rs  # noqa: E402
from benchutil import alternate, scratch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grist", action="append", required=True, help="a grist CLI (repeat to compare)")
    ap.add_argument("--shards", type=int, default=200)
    ap.add_argument("--records", type=int, default=2000, help="records per shard (1 per chunk: a footer of "
                    "about 10 bytes per record, above 64 KiB from ~6,000 records)")
    ap.add_argument("--delay", type=float, default=20.0, help="ms per request")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with scratch("grist-open-bench-") as (tmp, servers):
        data = os.path.join(tmp, "bkt")
        os.makedirs(data)
        lines = b"".join(b"%08d\n" % i for i in range(a.records))
        first = os.path.join(data, "s00000.ar")
        subprocess.run([a.grist[0], "write", "--options", "group_size:1,uncompressed", first], input=lines,
                       check=True)
        for i in range(1, a.shards):
            shutil.copyfile(first, os.path.join(data, "s%05d.ar" % i))
        servers.append(rs.Rclone(tmp, extra=["--etag-hash", ""]))
        servers.append(rs.DelayProxy(servers[0].port, a.delay / 1000.0))
        urls = ["s3://bkt/s%05d.ar" % i for i in range(a.shards)]
        with rs.remote_env(servers[1].endpoint):
            times = alternate({g: [g, "info"] + urls for g in a.grist}, a.rounds)
        out = {g: {"median_s": statistics.median(t), "runs_s": t} for g, t in times.items()}
        for g, r in out.items():
            print("%-50s %.3f s (median of %d: %s)" % (g, r["median_s"], len(r["runs_s"]),
                                                       ", ".join("%.3f" % t for t in r["runs_s"])))
        print(json.dumps({"shards": a.shards, "records": a.records, "delay_ms": a.delay, "results": out}))


if __name__ == "__main__":
    main()
