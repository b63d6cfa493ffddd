"""grist load --device: batches that went through OpenCL device memory equal the host batches.

Runs on PoCL's CPU device (pocl-opencl-icd); skipped when no OpenCL platform is present.
Every check compares the per-batch XXH64 digests computed from bytes read back from the
device with the digests of a host-only run, and asks --device-check to compare each device
batch with the host bytes recorded before its transfer.
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
import gristcli  # noqa: E402

TMP = None
FILES = []


def run(args, env_extra=None, timeout=120):
    env = dict(os.environ)
    env.update(env_extra or {})
    cmd = [gristcli.grist_cli()] + [str(a) for a in args]
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise AssertionError("hang: %s" % " ".join(cmd))
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0 or p.returncode > 2:
        raise AssertionError("%s: exit %d (crash)\n%s" % (" ".join(cmd), p.returncode, err[-2000:]))
    return p.returncode, p.stdout.decode(), err


def setup():
    global TMP
    TMP = tempfile.mkdtemp(prefix="grist-device-")
    rng = random.Random(7)
    for name, opts, n in (("a.ar", "group_size:1,zstd:3", 300), ("b.ar", "group_size:5,snappy", 211)):
        lines = []
        for i in range(n):
            size = rng.choice([0, 1, 17, 300, 1000, 4000])
            lines.append(bytes(rng.randrange(256) for _ in range(size)).hex())
        path = os.path.join(TMP, name)
        p = subprocess.run([gristcli.grist_cli(), "write", "--hex", "--options", opts, path],
                           input=("\n".join(lines) + "\n").encode(), capture_output=True)
        assert p.returncode == 0, p.stderr
        FILES.append(path)
    rc, _, err = run(["load"] + FILES + ["--batch-size", "16", "--device", "opencl"])
    if rc != 0 and ("no OpenCL platform" in err or "without OpenCL" in err):
        raise gristcli.Skip("no OpenCL platform: %s" % err.strip())


def same_as_host(args, env_extra=None):
    rc, host, err = run(["load"] + FILES + args + ["--digest"])
    assert rc == 0, err
    rc, dev, err = run(["load"] + FILES + args + ["--digest", "--device-check"], env_extra)
    assert rc == 0, err
    assert "mismatches: 0" in err, err
    assert dev == host, "device digests differ from host digests for %s" % args
    assert dev.count("\n") > 10


def test_mapped_and_staging_strategies():
    for strategy in ("mapped", "staging"):
        env = {"GRIST_DEVICE_STRATEGY": strategy}
        same_as_host(["--batch-size", "16", "--epochs", "3", "--seed", "9", "--device", "opencl"], env)
        same_as_host(["--batch-size", "7", "--granularity", "chunk", "--window", "2", "--device", "opencl"], env)
        # chunk granularity copies batches into device slots on helper threads (two with 9
        # decode threads); they must still arrive in order
        same_as_host(["--batch-size", "5", "--granularity", "chunk", "--window", "3", "--threads", "9",
                      "--epochs", "2", "--device", "opencl"], env)
        same_as_host(["--batch-size", "16", "--engine", "ref", "--device", "opencl"], env)
        same_as_host(["--batch-size", "10", "--shard", "1/3", "--threads", "3", "--prefetch", "1",
                      "--device", "opencl"], env)


def test_stats_one_command_per_batch():
    """With one device a ragged batch is one OpenCL command (its row offsets ride with its rows)."""
    for strategy in ("mapped", "staging"):
        for extra in ([], ["--granularity", "chunk"]):
            rc, _, err = run(["load"] + FILES + ["--batch-size", "16", "--epochs", "2", "--device", "opencl",
                                                 "--stats"] + extra, {"GRIST_DEVICE_STRATEGY": strategy})
            assert rc == 0, err
            m = re.search(r"device transfers: (\d+) batches, \d+ bytes, (\d+) commands", err)
            assert m, err
            assert int(m.group(1)) > 10 and m.group(1) == m.group(2), (strategy, extra, m.group(0))
            m = re.search(r"device slots: (\d+) in the ring, (\d+) with memory", err)
            assert m and 1 <= int(m.group(2)) <= int(m.group(1)), err


def test_device_vs_host_script():
    """bench/py/device_vs_host.py (the H100 figures in docs/tuning.md) runs both modes, every round."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "py",
                          "device_vs_host.py")
    log = os.path.join(TMP, "dvh.jsonl")
    grist = gristcli.grist_cli()
    p = subprocess.run([sys.executable, script, "--threads", "2", "--rounds", "2", "--batch-size", "16",
                        "--epochs", "20", "--args=--granularity,chunk", "--log", log] + FILES +
                       ["host=" + grist, "dev=" + grist + "@device"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["host"]["ratio"] == 1.0 and out["dev"]["records_per_s"] > 0, out
    assert out["dev"]["ratio_after_first"] is not None, out
    rows = [json.loads(line) for line in open(log)]
    assert sorted(r["label"] for r in rows) == ["dev", "dev", "host", "host"], rows
    assert all(r["records"] == rows[0]["records"] for r in rows), rows
    assert all(("--device opencl" in r["cmd"]) == (r["label"] == "dev") for r in rows), rows


def test_split_across_two_devices():
    env = {"POCL_DEVICES": "pthread pthread"}
    same_as_host(["--batch-size", "16", "--epochs", "2", "--drop-remainder", "--device", "opencl:all"], env)
    # an odd batch size cannot be split along the first axis across 2 devices
    rc, _, err = run(["load"] + FILES + ["--batch-size", "15", "--device", "opencl:all"], env)
    assert rc == 2 and "split evenly" in err, (rc, err)


def test_checkpoint_resume_in_device_mode():
    state = os.path.join(TMP, "state")
    common = ["--batch-size", "8", "--epochs", "2", "--seed", "3"]
    rc, whole, err = run(["load"] + FILES + common + ["--digest"])
    assert rc == 0, err
    rc, head, err = run(["load"] + FILES + common + ["--digest", "--device", "opencl", "--stop-after", "11",
                                                      "--save-state", state])
    assert rc == 0, err
    rc, tail, err = run(["load"] + FILES + common + ["--digest", "--device", "opencl", "--resume", state])
    assert rc == 0, err
    assert head + tail == whole


def test_bad_device_arguments():
    rc, _, err = run(["load"] + FILES + ["--device", "cuda"])
    assert rc == 2 and "expected opencl" in err, (rc, err)
    rc, _, err = run(["load"] + FILES + ["--device", "opencl:7:0"])
    assert rc == 1 and "no platform 7" in err, (rc, err)
    rc, _, err = run(["load"] + FILES + ["--device-check"])
    assert rc == 2, (rc, err)


def test_no_platform_is_a_clear_error():
    empty = os.path.join(TMP, "no-vendors")
    os.makedirs(empty, exist_ok=True)
    rc, _, err = run(["load"] + FILES + ["--device", "opencl"], {"OCL_ICD_VENDORS": empty})
    assert rc == 1 and "OpenCL" in err and "platform" in err, (rc, err)


if __name__ == "__main__":
    try:
        setup()
    except gristcli.Skip as e:
        print("SKIP: %s" % e)
        sys.exit(gristcli.EXIT_SKIP)
    try:
        gristcli.main([test_mapped_and_staging_strategies, test_stats_one_command_per_batch,
                       test_device_vs_host_script,
                       test_split_across_two_devices,
                       test_checkpoint_resume_in_device_mode, test_bad_device_arguments,
                       test_no_platform_is_a_clear_error])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
