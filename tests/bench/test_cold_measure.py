#!/usr/bin/env python3
"""bench/py/cold.py's measuring, without root, fio or a loop device: run_timed() gives a whole
process's wait4() figures (a child that touches 64 MiB shows the faults and the peak RSS),
measure() reads grist's reading phase and whole process from one real `grist load --stats`
run, and contenders()/ratio_pairs() make one grist per --verify mode, each judged against
every fio job. With `perf` here, perf_stat() counts a run's syscalls."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "py"))
GRIST = os.environ.get("GRIST_CLI")
BENCH = os.environ.get("GRIST_BENCH")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_rusage(cold):
    # 64 MiB touched page by page: at least 16384 minor faults and that much resident
    ru, out, _ = cold.run_timed([sys.executable, "-c", "b = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
                                 "print('ok')"])
    if out.strip() != "ok":
        fail("the child printed %r" % out)
    if ru["minflt"] < 16384 or ru["maxrss_kib"] < 64 * 1024 or ru["user"] + ru["sys"] <= 0 or ru["wall"] <= 0:
        fail("run_timed's figures for a child touching 64 MiB: %r" % ru)


def check_grist(cold, tmp):
    subprocess.run([BENCH, "--dir", tmp, "--records", "4096", "--record-size", "4096", "--compression", "uncompressed",
                    "--batches", "1", "--batch-size", "1"], check=True, stdout=subprocess.DEVNULL)
    path = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".array_record")][0]
    size = os.path.getsize(path)
    got = cold.measure("grist", [GRIST, "load", path, "--batch-size", "16", "--seed", "1", "--epochs", "4", "--stats"],
                        4 * size)
    for k in ("wall", "gbps", "cpu_per_gb", "proc_wall", "proc_gbps", "proc_cpu_per_gb", "proc_maxrss_kib"):
        if not got[k] > 0:
            fail("measure() of a grist run: %s is %r" % (k, got[k]))
    if got["first_batch"] is None or got["startup"] > got["proc_wall"] or got["wall"] > got["proc_wall"]:
        fail("measure(): the reading phase or start-up outlasts the process: %r" % got)
    return path


def check_contenders(cold):
    class A:
        grist, grist_arg, env, vs_grist, vs_arg, vs_env = "/g", [], [], None, [], []
        queue_depth, epochs, no_fio, fio, verify = 32, 1, False, "shape,replay", "headers,all"

    cmds = cold.contenders(A, "/f", 100, 120, "/log", 4096, ["load", "/f"])
    if list(cmds) != ["grist.headers", "grist.all", "shape", "replay"]:
        fail("contenders: %r" % list(cmds))
    if cmds["grist.headers"][1][-2:] != ["--verify", "headers"] or cmds["grist.all"][1][-2:] != ["--verify", "all"]:
        fail("the verify modes' commands: %r" % cmds)
    if cold.ratio_pairs(cmds) != [("grist.headers", "shape"), ("grist.headers", "replay"), ("grist.all", "shape"),
                                  ("grist.all", "replay")]:
        fail("ratio_pairs: %r" % cold.ratio_pairs(cmds))
    A.verify, A.fio, A.vs_arg = "all", "shape", ["--threads", "1"]
    cmds = cold.contenders(A, "/f", 100, 120, "/log", 4096, ["load", "/f"])
    if list(cmds) != ["grist", "b", "shape"] or cold.ratio_pairs(cmds) != [("grist", "shape"), ("grist", "b"),
                                                                          ("b", "shape")]:
        fail("one mode with a second grist: %r, %r" % (list(cmds), cold.ratio_pairs(cmds)))
    if cold.rkey("ratio", "grist", "shape") != "ratio_shape" or cold.rkey("pratio", "grist.all", "b") != \
            "pratio_grist.all_b":
        fail("rkey")


def check_perf(cold, path, tmp):
    why = cold.perf_available()
    if why:
        print("perf_stat not checked: " + why)
        return
    c = cold.perf_stat([GRIST, "load", path, "--batch-size", "16", "--seed", "1"], None, tmp)
    if not c.get("raw_syscalls:sys_enter") or not c.get("task-clock"):
        fail("perf_stat counted %r" % c)


def main():
    import cold
    check_rusage(cold)
    check_contenders(cold)
    if not GRIST or not BENCH:
        print("GRIST_CLI and GRIST_BENCH unset: measure() not checked")
        return
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        path = check_grist(cold, tmp)
        check_perf(cold, path, tmp)
    print("ok")


if __name__ == "__main__":
    main()
