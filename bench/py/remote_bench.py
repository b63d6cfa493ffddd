#!/usr/bin/env python3
"""Remote reads: grist on s3:// through a latency proxy, against Grain through a FUSE mount.

Starts `rclone serve s3` over a folder of ArrayRecord files (1 KiB records, zstd:3, group
sizes 1 and 64), a proxy in front of it that delays every request by --delay ms (--proxy c:
bench/delay_proxy, epoll + splice, the default; py: the asyncio fault proxy of
tests/interop/remote_servers.py, which costs about half as much CPU per byte as rclone
itself), and, for the baseline, `rclone mount` of the same server through the same proxy
with rclone's defaults. Then, each for --seconds, alternating, --rounds times (medians
reported):

  grist-record       grist load s3://... shuffled records, batches of 256
  grain-fuse         grain.sources.ArrayRecordDataSource(mount/...).__getitems__(256), shuffled
  grist-window       grist load s3://... --granularity chunk (chunk-window shuffling)
  grist-local-window grist load on the local files, the same settings as grist-window: read
                     from the page cache (--io auto maps the cached file), the local side at
                     its fastest ("local, page cache" in the report)
  grist-local-window-direct   the same read with --io direct (O_DIRECT, no page cache), the
                     page cache dropped before each run when run as root: the local side as
                     a cold disk read ("local, O_DIRECT cold"); this VM's disk is cached by
                     its host, so it is a warm device, not a cold one
  grist-window-deep, grist-local-window-deep, grist-local-window-deep-direct   the same with
                     --deep (default: --queue-depth 16384 --read-ahead 256M): a read-ahead
                     window holding most of an epoch
  http-window, http-window-deep   grist-window and grist-window-deep over http:// from nginx
                     behind the same delay: the same reads from a server that costs ~7x less
                     CPU per byte than rclone

Each remote figure is reported against both local readings, labelled; the target (0.5x of
local) is judged against the page cache one, the faster.

and a sweep of proxy delay (--sweep-delays) against GETs in flight (--sweep-inflight:
"adaptive" is the default rtt x bandwidth budget, N pins N GETs) for grist-record and
grist-window-deep, drawn as an SVG with --svg. Figures are whole-process: records delivered
/ wall time of the process, opening included (the issue's targets are these). Beside them, for
each run of the main table: records/s from the first record delivered on, the time to it, and the
process's CPU time per record (all threads), each a median; the remote / local ratios are
printed for all three. The last two move less with a shared machine's load: CPU time hardly
depends on what else runs, and a remote start-up (most of an object before the first batch of a
chunk-window shuffle; docs/tuning.md, run J) weighs more the shorter the run. --runs picks runs
of the main table by name; --baseline GRIST runs each grist run again with another build, right
after, for old/new comparisons in alternating pairs. rclone serves with --etag-hash '' (no ETag):
with its default MD5 it hashes the whole object on every GET, which would be the limit of
every figure here.

    bench/py/remote_bench.py --grist build/release/tools/grist --delay 20 --seconds 10

--serve starts the files and servers only and prints the environment that reaches them, so a
single run can be profiled or timed by hand (docs/tuning.md, run E).

--server-cpus and --grist-cpus split the cores: every server process (rclone, nginx and its
workers, the proxies, the FUSE mount), all their threads, is pinned to the first set and every
grist and Grain run (remote and local alike) to the second. On this 2-core VM the servers
otherwise take their CPU from the reader's cores, which a store on its own machines does not
(docs/tuning.md, run G). grist sizes its default thread count by its affinity mask.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
import remote_servers as rs  # noqa: E402
from benchutil import scratch  # noqa: E402
from cold import drop_caches  # noqa: E402


def write_file(grist, path, n, group):
    lines = b"".join(os.urandom(512).hex().encode() + b"\n" for _ in range(n))  # 1 KiB records
    subprocess.run([grist, "write", "--options", "group_size:%d,zstd:3" % group, path], input=lines, check=True)


CLIENT_CPUS = None  # --grist-cpus: the affinity of every grist and Grain run


def pin_client():
    if CLIENT_CPUS:
        os.sched_setaffinity(0, CLIENT_CPUS)


def cpu_list(text):
    """'0', '1-3' or '0,2' as a set of CPU numbers."""
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def pin_tree(pid, cpus):
    """Pin @pid, every thread of it and every descendant process (nginx's workers) to @cpus.
    A new thread or process takes its creator's mask, so one started by a thread not pinned
    yet (after its process's task list was read) would keep the old one: walk again until a
    walk finds nothing to pin. A thread whose creation was under way while its creator was
    pinned took the old mask too, and it is listed only once its clone() is done, which a
    busy machine can delay: so each walk checks every thread's actual mask, not a set of those
    already pinned, and the last clean walk must follow a pause in which such clones end."""
    pause = 0.0
    while True:
        todo, new = [pid], False
        while todo:
            p = todo.pop()
            try:
                for tid in os.listdir("/proc/%d/task" % p):
                    try:
                        if os.sched_getaffinity(int(tid)) != cpus:
                            os.sched_setaffinity(int(tid), cpus)
                            new = True
                        with open("/proc/%d/task/%s/children" % (p, tid)) as f:
                            todo += [int(c) for c in f.read().split()]
                    except (FileNotFoundError, ProcessLookupError):
                        pass  # that thread exited meanwhile
            except (FileNotFoundError, ProcessLookupError):
                pass  # exited meanwhile
        if not new and pause:
            return
        # nothing new: look once more after a pause; something new: walk again at once
        pause = 0.0 if new else 0.05
        time.sleep(pause)


def pin_server(srv, cpus):
    """Pin a server to @cpus: its process tree, or for the asyncio proxy (--proxy py), a thread of
    this process, that thread alone. Not this whole process: its main thread starts every grist
    and Grain run, which would inherit the servers' CPUs where --grist-cpus is not given."""
    if hasattr(srv, "proc"):
        pin_tree(srv.proc.pid, cpus)
    else:
        os.sched_setaffinity(srv.thread.native_id, cpus)


def cpu_seconds(pid):
    """User + system CPU seconds of process @pid so far, all its threads (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_grist_figures(grist, args, seconds, env, cold=False):
    """`grist load ARGS` stopped after about @seconds: {"whole": records/s of the whole process,
    opening included; "steady": records/s from the first record delivered on; "first_s": seconds
    to that record; "cpu_us": the process's CPU microseconds per record (all threads, user +
    system)}. "cpu_us" and "steady" move less with the machine's load than "whole": CPU time
    barely depends on what else runs, and the start-up (a remote one waits for most of an
    object before its first batch; docs/tuning.md, run J) is a larger share of a short run."""
    if cold and os.geteuid() == 0:
        drop_caches()  # root only: otherwise --io direct alone keeps the reads off the page cache
    t0 = time.monotonic()
    p = subprocess.Popen([grist, "load"] + [str(a) for a in args] + ["--print-indices"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=pin_client)
    n = 0
    t1 = None
    deadline = t0 + seconds
    for line in p.stdout:
        n += 1
        if t1 is None:
            t1 = time.monotonic()
        if time.monotonic() >= deadline:
            break
    wall = time.monotonic() - t0
    try:
        cpu = cpu_seconds(p.pid)
    except OSError:
        cpu = float("nan")  # it exited (an error): the figures below say so
    p.kill()
    p.wait()
    if not n:
        raise RuntimeError("grist load %s delivered nothing" % " ".join(map(str, args)))
    return {"whole": n / wall, "steady": (n - 1) / (wall - (t1 - t0)) if wall > t1 - t0 else float("nan"),
            "first_s": t1 - t0, "cpu_us": cpu * 1e6 / n}


def run_grist(grist, args, seconds, env, cold=False):
    """Records/s of `grist load ARGS` stopped after about @seconds (whole process)."""
    return run_grist_figures(grist, args, seconds, env, cold)["whole"]


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
                         timeout=seconds + 120, preexec_fn=pin_client)
    if out.returncode:
        raise RuntimeError(out.stderr[-500:])
    return float(out.stdout.split()[-1])


class Mount(rs.RcloneMount):
    """rclone mount of the S3 server behind the proxy, rclone's defaults otherwise."""

    def __init__(self, endpoint, bucket, where):
        env = dict(os.environ, RCLONE_CONFIG_GB_TYPE="s3", RCLONE_CONFIG_GB_PROVIDER="Other",
                   RCLONE_CONFIG_GB_ENDPOINT=endpoint, RCLONE_CONFIG_GB_ACCESS_KEY_ID=rs.ACCESS_KEY,
                   RCLONE_CONFIG_GB_SECRET_ACCESS_KEY=rs.SECRET_KEY)
        try:
            super().__init__("gb:" + bucket, where, env=env)
        except rs.Skip as e:
            raise RuntimeError(str(e)) from None


COLORS = ["#000000", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def draw_sweep(path, sweep, delays, settings, command):
    """One panel per workload: records/s against proxy delay, one line per in-flight setting (SVG, no deps)."""
    W, H, L, B, T, R, GAP = 460, 300, 70, 45, 40, 20, 30
    panels = list(sweep)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="11">' % (len(panels) * (W + GAP), H + 40)]
    out.append('<text x="10" y="%d" font-size="10" fill="#555">bench/py/remote_bench.py %s</text>' % (
        H + 30, command.replace("&", "&amp;").replace("<", "&lt;")))
    for k, what in enumerate(panels):
        ox = k * (W + GAP)
        top = max(sweep[what].values()) * 1.1 or 1
        x = lambda d: ox + L + (delays.index(d) / max(1, len(delays) - 1)) * (W - L - R)
        y = lambda v: T + (1 - v / top) * (H - T - B)
        out.append('<text x="%d" y="20" font-size="13">%s, records/s</text>' % (
            ox + 10, "s3://, shuffled records, group_size 1" if what == "record" else
            "s3://, chunk windows, group_size 64, --deep"))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (ox + L, H - B, ox + W - R, H - B))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (ox + L, T, ox + L, H - B))
        for i in range(5):
            v = top * i / 4
            out.append('<text x="%d" y="%.1f" text-anchor="end">%.0fk</text>' % (ox + L - 5, y(v) + 4, v / 1000))
        for d in delays:
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%g ms</text>' % (x(d), H - B + 15, d))
        out.append('<text x="%d" y="%d" text-anchor="middle">proxy delay per request</text>' % (
            ox + (L + W - R) // 2, H - B + 32))
        for j, s in enumerate(settings):
            c = COLORS[j % len(COLORS)]
            pts = " ".join("%.1f,%.1f" % (x(d), y(sweep[what]["%g,%s" % (d, s)])) for d in delays)
            out.append('<polyline fill="none" stroke="%s" stroke-width="%d" points="%s"/>' % (
                c, 3 if s == "adaptive" else 1.5, pts))
            out.append('<text x="%d" y="%d" fill="%s">%s</text>' % (
                ox + W - R - 90, T + 14 * j + 10, c, "adaptive (default)" if s == "adaptive" else "inflight %s" % s))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def serve(env, data, hproxy):
    """--serve: what a shell needs to reach the servers; waits until SIGINT or SIGTERM (the
    caller's finally stops the servers and removes the files)."""
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        print("export %s=%s" % (k, env[k]))
    print("# s3://b/g1.ar, s3://b/g64.ar; local: %s/g1.ar, %s/g64.ar" % (data, data))
    if hproxy:
        print("# http: %s/b/g64.ar" % hproxy.endpoint)
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grist", default=os.path.join(ROOT, "build", "release", "tools", "grist"))
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--delay", type=float, default=20, help="proxy delay per request, ms (20)")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sweep-delays", default="0,5,20,50")
    ap.add_argument("--sweep-inflight", default="adaptive,8,32,128")
    ap.add_argument("--proxy", choices=("c", "py"), default="c", help="the delay proxy (c)")
    ap.add_argument("--deep", default="--queue-depth 16384 --read-ahead 256M",
                    help="the -deep runs' extra arguments (for remote and local alike)")
    ap.add_argument("--no-grain", action="store_true")
    ap.add_argument("--no-main", action="store_true", help="the sweep only")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--svg", help="draw the sweep here")
    ap.add_argument("--server-cpus", type=cpu_list,
                    help="pin every server process and thread to these CPUs (e.g. 1); default: unpinned")
    ap.add_argument("--grist-cpus", type=cpu_list,
                    help="run grist and Grain on these CPUs (e.g. 0); default: unpinned")
    ap.add_argument("--runs", type=lambda t: set(x for x in t.split(",") if x),
                    help="only these runs of the main table (comma-separated names, e.g. "
                         "grist-window,grist-local-window); default: all")
    ap.add_argument("--baseline", metavar="GRIST",
                    help="also run every grist run with this binary, beside the same run with --grist "
                         "(alternating pairs, which goes first swapped every round), reported with "
                         "' (baseline)' after its name")
    ap.add_argument("--serve", action="store_true",
                    help="start the files and servers, print the environment to reach them, and wait (for "
                         "perf or /usr/bin/time by hand) until interrupted; no runs")
    a = ap.parse_args()
    global CLIENT_CPUS
    CLIENT_CPUS = a.grist_cpus

    def delay_proxy(port, seconds):
        return rs.DelayProxy(port, delay=seconds) if a.proxy == "c" else rs.FaultProxy(port, delay=seconds)

    with scratch("grist-remote-bench-") as (tmp, servers):
        os.chmod(tmp, 0o755)  # nginx's workers run as another user
        data = os.path.join(tmp, "root", "b")
        os.makedirs(data)
        results = {"delay_ms": a.delay, "records": a.records, "seconds": a.seconds, "rounds": a.rounds}
        hproxy = mount = None
        for g in (1, 64):
            write_file(a.grist, os.path.join(data, "g%d.ar" % g), a.records, g)
        server = rs.Rclone(os.path.join(tmp, "root"), extra=["--etag-hash", ""])
        servers.append(server)
        proxy = delay_proxy(server.port, a.delay / 1000.0)
        servers.append(proxy)
        if not a.no_main:
            try:
                nginx = rs.Nginx(os.path.join(tmp, "root"))
                servers.append(nginx)
                hproxy = delay_proxy(nginx.port, a.delay / 1000.0)
                servers.append(hproxy)
            except rs.Skip as e:
                print("http runs skipped: %s" % e)
        env = dict(os.environ, AWS_ACCESS_KEY_ID=rs.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=rs.SECRET_KEY,
                   AWS_ENDPOINT_URL=proxy.endpoint)
        env.pop("AWS_SESSION_TOKEN", None)

        def pin_servers():
            if a.server_cpus:
                for srv in servers:
                    pin_server(srv, a.server_cpus)
        pin_servers()
        if a.server_cpus or a.grist_cpus:
            print("servers on CPUs %s, grist on CPUs %s" % (
                ",".join(map(str, sorted(a.server_cpus))) if a.server_cpus else "any",
                ",".join(map(str, sorted(a.grist_cpus))) if a.grist_cpus else "any"), flush=True)
        if a.serve:
            serve(env, data, hproxy)
            return
        if not a.no_grain and not a.no_main:
            os.makedirs(os.path.join(tmp, "mnt"))
            mount = Mount(proxy.endpoint, "b", os.path.join(tmp, "mnt"))
            servers.append(mount)
            pin_servers()
        rec = ["--batch-size", 256, "--seed", 1, "--epochs", 0]
        win = rec + ["--granularity", "chunk"]
        deep = win + a.deep.split()
        for g in (1, 64) if not a.no_main else ():
            url, local = "s3://b/g%d.ar" % g, os.path.join(data, "g%d.ar" % g)
            hurl = "%s/b/g%d.ar" % (hproxy.endpoint, g) if hproxy else None
            plan = [("grist-record", [url] + rec, False)]
            plan += [("grist-window", [url] + win, False), ("grist-local-window", [local] + win, False),
                     ("grist-local-window-direct", [local] + win + ["--io", "direct"], True)]
            plan += [("http-window", [hurl] + win, False)] if hurl else []
            plan += [("grist-window-deep", [url] + deep, False), ("grist-local-window-deep", [local] + deep, False),
                     ("grist-local-window-deep-direct", [local] + deep + ["--io", "direct"], True)]
            plan += [("http-window-deep", [hurl] + deep, False)] if hurl else []
            if a.runs:
                plan = [x for x in plan if x[0] in a.runs]
            builds = [("", a.grist)] + ([(" (baseline)", a.baseline)] if a.baseline else [])
            runs = {name + tag: [] for name, _, _ in plan for tag, _ in builds}
            figs = {name + tag: [] for name, _, _ in plan for tag, _ in builds}
            runs["grain-fuse"] = []
            for rnd in range(a.rounds):
                for name, args, cold in plan:
                    # alternating pairs, the order swapped every round: the second run of a pair
                    # read 8-9% more CPU per record than the first, whichever build it was (run J)
                    for tag, binary in builds if rnd % 2 == 0 else builds[::-1]:
                        f = run_grist_figures(binary, args, a.seconds, env, cold)
                        runs[name + tag].append(f["whole"])
                        figs[name + tag].append(f)
                    if name == "grist-record" and mount and (not a.runs or "grain-fuse" in a.runs):
                        runs["grain-fuse"].append(run_grain(os.path.join(mount.where, "g%d.ar" % g), a.seconds))
            med = {k: statistics.median(v) for k, v in runs.items() if v}
            fmed = {k: {q: statistics.median(f[q] for f in v) for q in ("steady", "first_s", "cpu_us")}
                    for k, v in figs.items() if v}
            results["group_size_%d" % g] = {"runs": runs, "median_records_per_s": med, "figures": figs,
                                            "median_figures": fmed}
            print("group_size %d, %g ms: %s" % (g, a.delay, json.dumps({k: round(v) for k, v in med.items()})))
            for k, f in fmed.items():
                print("  %s: %.0f records/s from the first record (after %.3f s), %.2f us of CPU per record" % (
                    k, f["steady"], f["first_s"], f["cpu_us"]))
            if "grain-fuse" in med:
                print("  grist / grain through FUSE: %.1fx" % (med["grist-record"] / med["grain-fuse"]))
            for what, remote, local_run in (("chunk windows, s3:// (rclone)", "grist-window", "grist-local-window"),
                                            ("chunk windows, http:// (nginx)", "http-window", "grist-local-window"),
                                            ("chunk windows, --deep, s3:// (rclone)", "grist-window-deep",
                                             "grist-local-window-deep"),
                                            ("chunk windows, --deep, http:// (nginx)", "http-window-deep",
                                             "grist-local-window-deep")):
                for tag, _ in builds:
                    r, l = remote + tag, local_run + tag
                    if r not in med or l not in med:
                        continue
                    direct = ("; %.2fx against local, O_DIRECT cold" % (med[r] / med[l + "-direct"])
                              if l + "-direct" in med else "")
                    print("  %s%s / local, page cache: %.2fx whole-process%s; %.2fx from the first record; "
                          "%.2fx by CPU per record (local's / remote's)" % (
                              what, tag, med[r] / med[l], direct, fmed[r]["steady"] / fmed[l]["steady"],
                              fmed[l]["cpu_us"] / fmed[r]["cpu_us"]))
        proxy.stop()
        servers.remove(proxy)
        sweep = {}
        delays = [float(x) for x in a.sweep_delays.split(",") if x]
        settings = [x for x in a.sweep_inflight.split(",") if x]
        for d in delays:
            p = delay_proxy(server.port, d / 1000.0)
            servers.append(p)
            if a.server_cpus:
                pin_server(p, a.server_cpus)
            env["AWS_ENDPOINT_URL"] = p.endpoint
            for inf in settings:
                for what, args in (("record", ["s3://b/g1.ar"] + rec), ("window-deep", ["s3://b/g64.ar"] + deep)):
                    pin = [] if inf == "adaptive" else ["--remote", "inflight:%s,inflight_min:%s" % (inf, inf)]
                    r = run_grist(a.grist, args + pin, a.seconds / 2, env)
                    sweep.setdefault(what, {})["%g,%s" % (d, inf)] = r
                    print("sweep %s: delay %g ms, inflight %s: %.0f records/s" % (what, d, inf, r), flush=True)
            p.stop()
            servers.remove(p)
        results["sweep_records_per_s"] = sweep
        if a.svg:
            draw_sweep(a.svg, sweep, delays, settings, " ".join(sys.argv[1:]))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
