#!/usr/bin/env python3
"""`grist load --iolog FILE`: the engine's reads as a fio version 2 iolog.

The log must name exactly the reads the engine made: together they cover every chunk of
the epoch, they add up to the `bytes read` of --stats, they are the same reads whatever
the thread count, and fio (when installed) replays the file to the same byte count.
"""
import json
import os
import random
import re
import shutil
import subprocess
import tempfile

import gristcli as g

TMP = None
RNG = random.Random(22)


def records(n):
    return [bytes([i % 251]) * RNG.choice([0, 10, 700, 5000, 70000]) for i in range(n)]


def chunks(path):
    """[begin, end) of every data chunk, in file order (group_size 1: record i is chunk i)."""
    with open(path, "rb") as f:
        data = f.read()
    lay = g.layout(data)
    out, c = [], lay["data"][0]
    while c < lay["footer_offset"]:
        hdr, end = g.chunk_extent(data, c)
        if hdr["num_records"]:
            out.append((c, end))
        c = end
    return out


def parse_iolog(text, path):
    lines = text.splitlines()
    assert lines[0] == "fio version 2 iolog", lines[0]
    assert lines[1] == path + " add" and lines[2] == path + " open", lines[1:3]
    assert lines[-1] == path + " close", lines[-1]
    reads = []
    for ln in lines[3:-1]:
        m = re.fullmatch(re.escape(path) + r" read (\d+) (\d+)", ln)
        assert m, ln
        reads.append((int(m.group(1)), int(m.group(2))))
    return reads


def load_with_log(path, threads, io):
    log = os.path.join(TMP, "t%d-%s.iolog" % (threads, io))
    rc, _, err = g.run(["load", path, "--batch-size", "5", "--seed", "3", "--threads", threads, "--queue-depth", 4,
                        "--io", io, "--stats", "--iolog", log])
    assert rc == 0, err
    got = int(re.search(r"^bytes read: (\d+)", err, re.M).group(1))
    # the reading phase that bench/py/cold.py sets beside fio's run time: seconds less start-up
    secs = float(re.search(r"^seconds: ([0-9.]+)", err, re.M).group(1))
    startup, startup_cpu = map(float, re.search(r"^start-up: ([0-9.]+) s \(([0-9.]+) s of CPU\)", err, re.M).groups())
    assert 0 <= startup <= secs and startup_cpu >= 0, (startup, secs)
    with open(log) as f:
        return parse_iolog(f.read(), path), got, log


def test_iolog_names_the_reads():
    path = os.path.join(TMP, "f.array_record")
    g.write_records(path, "group_size:1,uncompressed", records(300))
    extents = chunks(path)
    assert len(extents) == 300
    size = os.path.getsize(path)
    for io in ("buffered", "direct"):
        reads, bytes_read, log = load_with_log(path, 2, io)
        if io == "direct" and not reads:
            raise g.Skip("no O_DIRECT reads here")
        # what the reads returned: all of each, but the part past the end of the file
        assert sum(min(n, size - off) for off, n in reads) == bytes_read, (reads[:3], bytes_read)
        for off, n in reads:
            assert n > 0 and off + n <= size + 4096, (off, n)
            if io == "direct":
                assert off % 512 == 0 and n % 512 == 0, (off, n)
        # every chunk of the epoch lies inside one read
        starts = sorted(reads)
        for b, e in extents:
            assert any(off <= b and e <= off + n for off, n in starts), (b, e)
        # the same reads at one thread (the order differs: two rings submit side by side)
        one, _, _ = load_with_log(path, 1, io)
        assert sorted(one) == sorted(reads)
        if shutil.which("fio"):
            p = subprocess.run(["fio", "--name=replay", "--readonly", "--read_iolog=" + log, "--ioengine=psync",
                                "--output-format=json"], capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stderr
            replayed = json.loads(p.stdout[p.stdout.index("{"):])["jobs"][0]["read"]["io_bytes"]
            # fio stops a read at the end of the file, as the engine's last read does
            want = sum(min(n, size - off) for off, n in reads)
            assert replayed == want, (replayed, want)


def test_iolog_unwritable_path_fails():
    path = os.path.join(TMP, "g.array_record")
    g.write_records(path, "group_size:1,uncompressed", records(20))
    rc, _, err = g.run(["load", path, "--iolog", os.path.join(TMP, "no", "such", "dir", "x.iolog")])
    assert rc == 1 and "--iolog" in err, (rc, err)


if __name__ == "__main__":
    TMP = tempfile.mkdtemp(prefix="grist-iolog-")
    try:
        g.main([test_iolog_names_the_reads, test_iolog_unwritable_path_fails])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
