#!/usr/bin/env python3
"""Many hosts, one bucket: N grist loaders (`grist load --shard I/N`, each its own process, as
each host of a job would be) against one `rclone serve s3` through bench/delay_proxy.

Writes one ArrayRecord file of --records 1 KiB records (zstd:3, --group records a chunk),
starts rclone serve s3 over it (--etag-hash '': with its default MD5 rclone hashes the whole
object on every GET) and the delay proxy in front of it, then for each process count of
--procs (default 1,4), alternating, --rounds times, runs the N shards at once, each for
--epochs epochs of its shard (a shuffled record read, batches of 256), and reports:

  aggregate records/s   all records delivered / wall time of the whole run (start of the
                        first process to the end of the last: start-up included)
  GETs/s                all processes' GETs (their `--stats`) / that wall time
  body/wanted           GET body bytes / chunk bytes the engines asked for (`bytes read`)
  share                 each process's part of the records, and its own records/s

The same N-process run with the proxy at 0 ms (--limit-delay) is the server's own limit on
this machine: what rclone, the proxy and the loaders reach with no round trip to wait for.
The speed-up of N processes is judged against min(N x one process, that limit).

Every figure is whole-process. On a small machine the server, the proxy and the loaders
share the cores: --server-cpus and --grist-cpus (as in remote_bench.py) split them, and
without them the limit measured is that of the shared machine, not of the server alone.

    bench/py/remote_hosts.py --grist build/release/tools/grist --procs 1,4 --delay 20 --rounds 3
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
sys.path.insert(0, HERE)
import remote_servers as rs  # noqa: E402
from benchutil import scratch  # noqa: E402
from remote_bench import cpu_list, pin_tree  # noqa: E402


def stat(err, head):
    """The words of the --stats line starting with @head."""
    for line in err.splitlines():
        if line.startswith(head):
            return line[len(head):].replace(",", " ").split()
    raise RuntimeError("no %r line in --stats:\n%s" % (head, err[-2000:]))


def cpu_of(pids):
    """User + system CPU seconds so far of the processes @pids (the servers), every thread."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def run_hosts(grist, url, n, args, env, cpus, server_pids):
    """The N shards of @url at once, each a `grist load` process: a dict of the figures, with
    the CPU seconds the loaders and the servers took meanwhile (what bounds a shared machine)."""
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = cpu_of(server_pids)
    t0 = time.monotonic()
    procs = [subprocess.Popen([grist, "load", url, "--shard", "%d/%d" % (i, n), "--stats"] + args, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=pin)
             for i in range(n)]
    ends, errs = [], []
    for p in procs:
        _, err = p.communicate()
        ends.append(time.monotonic() - t0)
        if p.returncode:
            raise SystemExit("grist load (shard of %d) failed: exit %d\n%s" % (n, p.returncode, err[-2000:]))
        errs.append(err)
    wall = max(ends)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    loader_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    server_cpu = cpu_of(server_pids) - server_cpu
    records = [int(stat(e, "records: ")[0]) for e in errs]
    gets = sum(int(stat(e, "remote: ")[0]) for e in errs)
    body = sum(int(stat(e, "remote: ")[2]) for e in errs)
    wanted = sum(int(stat(e, "bytes read: ")[0]) for e in errs)
    own = [float(stat(e, "records/s: ")[0]) for e in errs]
    return {"procs": n, "wall_s": wall, "records_per_s": sum(records) / wall, "gets_per_s": gets / wall,
            "gets": gets, "body_bytes": body, "wanted_bytes": wanted, "body_per_wanted": body / max(wanted, 1),
            "share": [r / sum(records) for r in records], "own_records_per_s": own,
            "loader_cpu_s": loader_cpu, "server_cpu_s": server_cpu, "loadavg_1m": os.getloadavg()[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grist", default=os.path.join(ROOT, "build", "release", "tools", "grist"))
    ap.add_argument("--records", type=int, default=50000, help="1 KiB records in the file (50000)")
    ap.add_argument("--group", type=int, default=1, help="records a chunk (group_size, 1)")
    ap.add_argument("--procs", default="1,4", help="process counts to run, alternating (1,4)")
    ap.add_argument("--delay", type=float, default=20, help="proxy delay per request, ms (20)")
    ap.add_argument("--limit-delay", type=float, default=0,
                    help="the delay of the server-limit run of the largest process count, ms (0); -1: none")
    ap.add_argument("--epochs", type=int, default=2, help="epochs of its shard each process reads (2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shard-mode", choices=("contiguous", "strided"), default="contiguous",
                    help="contiguous (default; Grain's split): each host reads its own quarter of the object; "
                         "strided: every host wants records all over it, and its GETs span it whole")
    ap.add_argument("--load-args", default="--batch-size 256 --seed 1",
                    help="extra `grist load` arguments for every process")
    ap.add_argument("--server-cpus", type=cpu_list, help="pin rclone and the proxy to these CPUs (e.g. 1)")
    ap.add_argument("--grist-cpus", type=cpu_list, help="run the loaders on these CPUs (e.g. 0)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    counts = [int(x) for x in a.procs.split(",")]

    with scratch("grist-remote-hosts-") as (tmp, servers):
        data = os.path.join(tmp, "root", "b")
        os.makedirs(data)
        path = os.path.join(data, "d.ar")
        lines = b"".join(os.urandom(512).hex().encode() + b"\n" for _ in range(a.records))
        subprocess.run([a.grist, "write", "--options", "group_size:%d,zstd:3" % a.group, path], input=lines,
                       check=True)
        server = rs.Rclone(os.path.join(tmp, "root"), extra=["--etag-hash", ""])
        servers.append(server)
        proxies = {}
        for d in [a.delay] + ([a.limit_delay] if a.limit_delay >= 0 else []):
            if d not in proxies:
                proxies[d] = rs.DelayProxy(server.port, d / 1000.0)
                servers.append(proxies[d])
        if a.server_cpus:
            for s in servers:
                pin_tree(s.proc.pid, a.server_cpus)
        print("%d records of 1 KiB, group_size %d: %.1f MB object; %s shards; delay %g ms; servers on CPUs %s, "
              "loaders on %s"
              % (a.records, a.group, os.path.getsize(path) / 1e6, a.shard_mode, a.delay,
                 ",".join(map(str, sorted(a.server_cpus))) if a.server_cpus else "any (shared)",
                 ",".join(map(str, sorted(a.grist_cpus))) if a.grist_cpus else "any (shared)"), flush=True)

        def env_for(d):
            env = dict(os.environ, AWS_ACCESS_KEY_ID=rs.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=rs.SECRET_KEY,
                       AWS_ENDPOINT_URL=proxies[d].endpoint, AWS_REGION="us-east-1")
            for k in ("AWS_SESSION_TOKEN", "GRIST_REMOTE_OPTIONS"):
                env.pop(k, None)
            return env

        args = a.load_args.split() + ["--epochs", str(a.epochs), "--shard-mode", a.shard_mode]
        plan = [("%d@%g" % (n, a.delay), n, a.delay) for n in counts]
        if a.limit_delay >= 0 and a.limit_delay != a.delay:
            plan.append(("%d@%g" % (max(counts), a.limit_delay), max(counts), a.limit_delay))
        runs = {name: [] for name, _, _ in plan}
        for k in range(a.rounds):
            # rotated each round, so a busy machine weighs on every setting alike
            for name, n, d in plan[k % len(plan):] + plan[:k % len(plan)]:
                r = run_hosts(a.grist, "s3://b/d.ar", n, args, env_for(d), a.grist_cpus,
                              [s.proc.pid for s in servers])
                runs[name].append(r)
                print("round %d, %d process(es) at %g ms: %.0f records/s, %.0f GETs/s, body/wanted %.2f, "
                      "shares %s, own records/s %s; CPU s per wall s: loaders %.2f, servers %.2f (load average %.1f)"
                      % (k + 1, n, d, r["records_per_s"], r["gets_per_s"], r["body_per_wanted"],
                         " ".join("%.3f" % s for s in r["share"]), " ".join("%.0f" % s for s in r["own_records_per_s"]),
                         r["loader_cpu_s"] / r["wall_s"], r["server_cpu_s"] / r["wall_s"], r["loadavg_1m"]),
                      flush=True)
        med = {}
        for name, n, d in plan:
            rs_ = runs[name]
            med[name] = {key: statistics.median(r[key] for r in rs_)
                         for key in ("records_per_s", "gets_per_s", "body_per_wanted", "wall_s", "loader_cpu_s",
                                     "server_cpu_s")}
            med[name]["share_min"] = statistics.median(min(r["share"]) for r in rs_)
            med[name]["share_max"] = statistics.median(max(r["share"]) for r in rs_)
            m = med[name]
            print("median, %s: %.0f records/s, %.0f GETs/s, body/wanted %.2f, shares %.3f-%.3f, wall %.2f s, "
                  "CPU s per wall s: loaders %.2f, servers %.2f (of %d CPUs)"
                  % (name, m["records_per_s"], m["gets_per_s"], m["body_per_wanted"], m["share_min"], m["share_max"],
                     m["wall_s"], m["loader_cpu_s"] / m["wall_s"], m["server_cpu_s"] / m["wall_s"], os.cpu_count()))
        one = "1@%g" % a.delay
        top = "%d@%g" % (max(counts), a.delay)
        if one in med and max(counts) > 1:
            # speed-up from the median of each round's own ratio: the pair ran back to back
            per_round = [runs[top][k]["records_per_s"] / runs[one][k]["records_per_s"] for k in range(a.rounds)]
            print("%d processes / 1 process at %g ms: %.2fx (median of rounds: %s)"
                  % (max(counts), a.delay, statistics.median(per_round), " ".join("%.2f" % x for x in per_round)))
            lim = "%d@%g" % (max(counts), a.limit_delay)
            if lim in med and lim != top:
                bound = min(max(counts) * med[one]["records_per_s"], med[lim]["records_per_s"])
                print("server limit (%d processes at %g ms): %.0f records/s; %d x one process: %.0f; the target "
                      "bound min() is %s; reached %.2f of it"
                      % (max(counts), a.limit_delay, med[lim]["records_per_s"], max(counts),
                         max(counts) * med[one]["records_per_s"],
                         "the server's limit" if bound == med[lim]["records_per_s"] else "N x one process",
                         med[top]["records_per_s"] / bound))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"args": vars(a) | {"server_cpus": sorted(a.server_cpus or []),
                                              "grist_cpus": sorted(a.grist_cpus or [])},
                           "runs": runs, "median": med}, f, indent=1)


if __name__ == "__main__":
    main()
