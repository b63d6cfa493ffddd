#!/usr/bin/env python3
"""grist-bench: a short JSON run on a generated dataset reports every figure, positive;
bad options exit 2. Of the baselines only the codec one runs here (--baselines codec):
fio and the Python stack take minutes and may need installing."""
import json
import os
import re
import subprocess
import sys
import tempfile

GRIST = os.environ.get("GRIST_CLI")
BENCH = os.environ.get("GRIST_BENCH")

POSITIVE = ["records_per_s", "batches_per_s", "bytes_read_per_s", "bytes_delivered_per_s",
            "bytes_decoded_per_s", "cpu_cores", "batch_p50_ms", "batch_p99_ms", "first_batch_ms"]
SHARES = ["consumer_stall_share", "io_wait_share", "decode_share", "producer_stall_share"]


def run(args, cwd):
    return subprocess.run([BENCH] + args, cwd=cwd, capture_output=True, text=True, timeout=120)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_codec_baseline(args, cwd):
    """The codec baseline alone runs on a grist-written file: its frames are the file's, its
    rates positive, and decode_efficiency is grist's decoded bytes/s over its rate x threads."""
    p = run(args + ["--baselines", "codec", "--json"], cwd)
    if p.returncode != 0:
        fail("%r exited %d: %s" % (args, p.returncode, p.stderr))
    doc = json.loads(p.stdout)
    bl = doc.get("baselines", [])
    if len(bl) != 1 or bl[0]["name"] != "codec, one core":
        fail("--baselines codec gave %r" % bl)
    b = bl[0]
    if not b["ran"]:
        fail("codec baseline did not run: %s" % b.get("why"))
    for key in ("records_per_s", "bytes_per_s", "decode_efficiency"):
        if not b[key] > 0:
            fail("codec baseline: %s = %r is not positive" % (key, b[key]))
    threads = doc["result"]["threads"]
    if b["bytes"] != "decoded" or b["decode_threads"] != threads:
        fail("codec baseline: bytes %r, decode_threads %r (grist ran %d)" % (b["bytes"], b["decode_threads"],
                                                                          threads))
    want = doc["bytes_decoded_per_s"] / (b["bytes_per_s"] * threads)
    if abs(b["decode_efficiency"] - want) > 1e-3 * want + 1e-4:
        fail("decode_efficiency %r, expected %r" % (b["decode_efficiency"], want))
    # The same frames in a shuffled order: measured, and grist's efficiency against it follows from it.
    if not b.get("shuffled_bytes_per_s", 0) > 0:
        fail("codec baseline: no shuffled-order rate: %r" % b)
    want = doc["bytes_decoded_per_s"] / (b["shuffled_bytes_per_s"] * threads)
    if abs(b["decode_efficiency_shuffled"] - want) > 1e-3 * want + 1e-4:
        fail("decode_efficiency_shuffled %r, expected %r" % (b["decode_efficiency_shuffled"], want))
    if abs(b["ratio_bytes"] - doc["bytes_decoded_per_s"] / b["bytes_per_s"]) > 1e-3 * b["ratio_bytes"] + 1e-4:
        fail("ratio_bytes %r is not of decoded bytes" % b["ratio_bytes"])
    # Records and bytes are counted frame by frame: bytes/s over records/s is the record size (1 KiB here).
    if abs(b["bytes_per_s"] - 1024 * b["records_per_s"]) > 1e-4 * b["bytes_per_s"]:
        fail("codec baseline: %r bytes/s for %r records/s of 1 KiB" % (b["bytes_per_s"], b["records_per_s"]))
    m = re.search(r"(\d+) chunks of the file recompressed.*?; (\d+) frames byte-identical", b["how"])
    if not m:
        fail("codec baseline note does not say what was sampled: %r" % b["how"])
    if m.group(1) != m.group(2) or int(m.group(1)) < 1:
        fail("the writer's own file: %s of %s frames byte-identical" % (m.group(2), m.group(1)))
    if "zstd:3" not in b["how"] or "ZSTD_decompressDCtx" not in b["how"]:
        fail("codec baseline note names no codec or call: %r" % b["how"])


def check_side_by_side(path, tmp):
    """bench/py/side_by_side.py on a small file: every side ran on every record of every
    epoch, and grist's ratios are its rate over each peer's. Skipped without the Python
    stack (array_record, grain)."""
    try:
        import array_record.python.array_record_module  # noqa: F401
        import grain  # noqa: F401
    except ImportError as e:
        print("skip side_by_side.py: %s" % e)
        return
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "py",
                          "side_by_side.py")
    p = subprocess.run([sys.executable, script, path, "--grist", GRIST, "--rounds", "2", "--epochs", "2",
                        "--batch", "64"], cwd=tmp, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail("side_by_side.py exited %d: %s" % (p.returncode, p.stderr))
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    sides = doc["sides"]
    if doc["records"] != 2 * 2000:
        fail("side_by_side.py: %r records per run, 2 epochs of 2000 expected" % doc["records"])
    if sorted(sides) != ["grain __getitems__", "grist", "official read(indices)"]:
        fail("side_by_side.py sides: %r" % sorted(sides))
    g = sides["grist"]["all_records_per_s"]
    for name, side in sides.items():
        rates = side["all_records_per_s"]
        if len(rates) != 2 or not all(r > 0 for r in rates) or not side["records_per_cpu_s"] > 0:
            fail("side_by_side.py %s: %r" % (name, side))
        want = sorted(a / b for a, b in zip(g, rates))
        if abs(side["grist_ratio"] - (want[0] + want[1]) / 2) > 1e-6 * side["grist_ratio"]:
            fail("side_by_side.py %s ratio %r, expected the median of %r" % (name, side["grist_ratio"], want))


def check_vision(tmp):
    """--vision: generated images, and a folder of images given, transformed on 2 threads for
    a short round; every figure positive and per core the rate over the threads; a folder
    without images, and a bad --vision value, are refused."""
    p = run(["--vision", "--images", "6", "--threads", "2", "--seconds", "0.3", "--repeat", "2", "--json"], tmp)
    if p.returncode != 0:
        fail("--vision exited %d: %s" % (p.returncode, p.stderr))
    doc = json.loads(p.stdout)
    if doc["mode"] != "vision" or doc["images"] != 6 or not doc["generated"] or len(doc["rounds"]) != 2:
        fail("--vision gave %r" % doc)
    for key in ("images_per_s", "images_per_s_per_core", "images_per_cpu_s"):
        if not doc[key] > 0:
            fail("--vision: %s = %r is not positive" % (key, doc[key]))
    if abs(doc["images_per_s_per_core"] * doc["cores"] - doc["images_per_s"]) > 0.2:
        fail("--vision: per core %r x %d cores is not %r" % (doc["images_per_s_per_core"], doc["cores"],
                                                            doc["images_per_s"]))
    folder = os.path.join(tmp, "images", "a")
    os.makedirs(folder)
    # a 1x1 RGB PNG (green), byte by byte: no imaging library in this test
    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
                        "0000000c49444154789c63f8cfc0000003010100c9fe92ef0000000049454e44ae426082")
    with open(os.path.join(folder, "one.png"), "wb") as f:
        f.write(png)
    with open(os.path.join(folder, "notes.txt"), "w") as f:
        f.write("not an image")
    p = run(["--vision=fast", os.path.join(tmp, "images"), "--threads", "1", "--seconds", "0.2", "--json"], tmp)
    if p.returncode != 0:
        fail("--vision=fast FOLDER exited %d: %s" % (p.returncode, p.stderr))
    doc = json.loads(p.stdout)
    if doc["images"] != 1 or doc["generated"] or doc["decode"] != "fast":
        fail("--vision=fast FOLDER gave %r" % doc)
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    p = run(["--vision", empty, "--seconds", "0.1"], tmp)
    if p.returncode != 1 or "no JPEG or PNG" not in p.stderr:
        fail("--vision on an empty folder exited %d: %s" % (p.returncode, p.stderr))
    p = run(["--vision=slow"], tmp)
    if p.returncode != 2:
        fail("--vision=slow exited %d, not 2" % p.returncode)


def main():
    if not GRIST or not BENCH:
        print("GRIST_CLI or GRIST_BENCH is not set")
        return 77
    # The benchmarks left the CLI: `grist bench` is a usage error that names grist-bench.
    p = subprocess.run([GRIST, "bench", "--help"], capture_output=True, text=True, timeout=30)
    if p.returncode != 2 or "grist-bench" not in p.stderr:
        fail("grist bench exited %d: %s" % (p.returncode, p.stderr))
    with tempfile.TemporaryDirectory() as tmp:
        p = run(["--records", "2000", "--seconds", "1", "--json", "--dir", "data"], tmp)
        if p.returncode != 0:
            fail("bench exited %d: %s" % (p.returncode, p.stderr))
        doc = json.loads(p.stdout)
        res = doc["result"]
        for key in POSITIVE:
            for where, obj in (("top level", doc), ("result", res)):
                if key not in obj:
                    fail("%s: no %s" % (where, key))
                if not obj[key] > 0:
                    fail("%s: %s = %r is not positive" % (where, key, obj[key]))
        for key in SHARES:
            if not 0 <= res[key] <= 1.5:
                fail("%s = %r is not a share of time" % (key, res[key]))
        if res["records"] < 2000 or res["batches"] < 1:
            fail("a 1 s run delivered %d records in %d batches" % (res["records"], res["batches"]))
        if res["batch_p99_ms"] < res["batch_p50_ms"]:
            fail("p99 %.4f ms below p50 %.4f ms" % (res["batch_p99_ms"], res["batch_p50_ms"]))
        if doc["mode"] != "warm" or "baselines" in doc:
            fail("unexpected mode or baselines: %r" % doc)
        # It runs with, and reports, the library's defaults: read from its option table, not copied.
        table = subprocess.run([GRIST, "load", "--options"], capture_output=True, text=True, timeout=30).stdout
        for key in ("queue_depth", "prefetch"):
            m = re.search(r"^  %s +number \S+; default (\d+)$" % key, table, re.M)
            if not m or doc[key] != int(m.group(1)):
                fail("grist-bench ran with %s %r; the library's default: %s" % (key, doc[key], m and m.group(1)))
        cached = [f for f in os.listdir(os.path.join(tmp, "data")) if f.endswith(".array_record")]
        if len(cached) != 1:
            fail("expected one cached dataset, found %r" % cached)

        # --record-size is a size like every other: 1KiB and 1K are the default 1024, so the
        # cached dataset serves them; decimal units are refused as everywhere.
        for size in ("1KiB", "1K"):
            p = run(["--records", "2000", "--record-size", size, "--batches", "1", "--json", "--dir", "data"], tmp)
            if p.returncode != 0:
                fail("--record-size %s exited %d: %s" % (size, p.returncode, p.stderr))
        cached = [f for f in os.listdir(os.path.join(tmp, "data")) if f.endswith(".array_record")]
        if len(cached) != 1:
            fail("--record-size 1KiB did not reuse the 1024-byte dataset: %r" % cached)
        p = run(["--record-size", "1kB", "--dir", "data"], tmp)
        if p.returncode != 2 or "record-size" not in p.stderr or "KiB" not in p.stderr:
            fail("--record-size 1kB exited %d: %s" % (p.returncode, p.stderr))

        # A count-limited run on the cached file (given as FILE) delivers exactly that many batches.
        path = os.path.join(tmp, "data", cached[0])
        p = run([path, "--batches", "3", "--batch-size", "100", "--json"], tmp)
        if p.returncode != 0:
            fail("bench FILE --batches 3 exited %d: %s" % (p.returncode, p.stderr))
        res = json.loads(p.stdout)["result"]
        if res["batches"] != 3 or res["records"] != 300:
            fail("--batches 3 --batch-size 100 gave %d batches, %d records" % (res["batches"], res["records"]))

        check_side_by_side(path, tmp)
        check_vision(tmp)

        # The codec baseline on the group_size 1 file (a frame per record) and on a chunked one.
        check_codec_baseline([path, "--seconds", "0.3"], tmp)
        check_codec_baseline(["--records", "4096", "--group-size", "64", "--granularity", "chunk", "--seconds", "0.3",
                              "--dir", "data"], tmp)

        # --sweep=batch_size: one CSV row per batch size 1..256, each run at that batch size,
        # with the ring's depth reported (buffered: --io auto would map the cached file and read
        # nothing); an unknown axis is a usage error.
        out = os.path.join(tmp, "sweep")
        p = run([path, "--sweep=batch_size", "--seconds", "0.2", "--io", "buffered", "--out", out], tmp)
        if p.returncode != 0:
            fail("--sweep=batch_size exited %d: %s" % (p.returncode, p.stderr))
        with open(os.path.join(out, "batch_size.csv")) as f:
            rows = [line.rstrip("\n").split(",") for line in f]
        head, rows = rows[0], rows[1:]
        col = {name: i for i, name in enumerate(head)}
        sizes = [int(r[col["value"]]) for r in rows]
        if sizes != [1, 2, 4, 8, 16, 32, 64, 128, 256]:
            fail("batch_size sweep points %r" % sizes)
        for r in rows:
            if int(r[col["batch_size"]]) != int(r[col["value"]]) or not float(r[col["records_per_s"]]) > 0:
                fail("batch_size sweep row %r" % r)
            if not 0 < float(r[col["reads_in_flight_mean"]]) <= 64:
                fail("batch_size sweep: reads in flight %r" % r[col["reads_in_flight_mean"]])
        if os.path.exists(os.path.join(out, "threads.csv")):
            fail("--sweep=batch_size also swept threads")
        p = run([path, "--sweep=nope", "--out", out], tmp)
        if p.returncode != 2:
            fail("--sweep=nope exited %d, not 2" % p.returncode)

        for bad in (["--records", "0"], ["--seconds", "0"], ["--seconds", "-1"], ["--threads", "x"],
                    ["--engine", "nope"], ["--queue-depth", "0"], ["--bogus"], ["--cold", "--io", "buffered"],
                    ["--records"], ["--compression", "zstd:3,group_size:4"], ["--baselines", "nope"],
                    ["--baselines", ""], ["--baselines", "codec,"], ["--baselines"]):
            p = run(bad + ["--dir", "data"], tmp)
            if p.returncode != 2:
                fail("%r exited %d, not 2 (stderr: %s)" % (bad, p.returncode, p.stderr))

        # A file that is not an ArrayRecord file is a data error.
        junk = os.path.join(tmp, "junk")
        with open(junk, "wb") as f:
            f.write(b"not an array record file" * 100)
        p = run([junk, "--seconds", "1"], tmp)
        if p.returncode != 1:
            fail("a junk file exited %d, not 1" % p.returncode)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
