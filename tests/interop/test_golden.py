#!/usr/bin/env python3
"""grist reads every golden file (written by the official library) exactly:
info, cat --hex, cat, get --hex and verify, checked against MANIFEST.json."""
import os
import random

import gristcli as g

MANIFEST = g.load_manifest()
FILES = {f["name"]: f for f in MANIFEST["files"]}


def path_of(name):
    return os.path.join(g.golden_dir(), name)


def check_records(entry, records):
    """@records are exactly the records the manifest describes for @entry."""
    name = entry["name"]
    assert len(records) == entry["num_records"], \
        "%s: %d records, want %d" % (name, len(records), entry["num_records"])
    if "record_sha256" in entry:
        for i, (rec, want) in enumerate(zip(records, entry["record_sha256"])):
            assert g.record_sha256(rec) == want, "%s: record %d differs" % (name, i)
    for s in entry.get("samples", []):
        rec = records[s["index"]]
        assert len(rec) == s["length"] and g.record_sha256(rec) == s["sha256"], \
            "%s: record %d differs" % (name, s["index"])
    assert g.record_digest(records) == entry["records_digest"], "%s: records digest differs" % name


def test_files_match_manifest():
    # Catches a golden file damaged or replaced without regenerating the manifest.
    import hashlib
    for name, entry in FILES.items():
        with open(path_of(name), "rb") as f:
            data = f.read()
        assert len(data) == entry["file_size"], name
        assert hashlib.sha256(data).hexdigest() == entry["file_sha256"], name


def test_info():
    for name, entry in FILES.items():
        out = g.run_ok(["info", path_of(name)])
        assert g.info_records(out) == entry["num_records"], name
        assert entry["writer_options"].encode() in out, \
            "%s: info does not show the writer options %s" % (name, entry["writer_options"])


def test_cat_hex():
    for name, entry in FILES.items():
        check_records(entry, g.parse_hex_lines(g.run_ok(["cat", "--hex", path_of(name)])))


def test_cat_raw():
    # Raw cat is the plain concatenation of the records.
    for name in ("uncompressed_g1.array_record", "big_zstd_g1.array_record",
                 "zstd_g65536.array_record", "empty.array_record"):
        records = g.parse_hex_lines(g.run_ok(["cat", "--hex", path_of(name)]))
        check_records(FILES[name], records)
        assert g.run_ok(["cat", path_of(name)]) == b"".join(records), name


def test_get():
    rng = random.Random(7)
    for name, entry in FILES.items():
        n = entry["num_records"]
        if n == 0:
            continue
        if "record_sha256" in entry:
            want = entry["record_sha256"]
            idx = [n - 1, 0] + [rng.randrange(n) for _ in range(20)]
            idx += idx[:3]  # repeats come back every time they are asked for
        else:
            want = {s["index"]: s["sha256"] for s in entry["samples"]}
            idx = list(want)
            rng.shuffle(idx)
        got = g.parse_hex_lines(g.run_ok(["get", "--hex", path_of(name), "--"] + idx))
        assert len(got) == len(idx), "%s: get returned %d records for %d indices" % (
            name, len(got), len(idx))
        for i, rec in zip(idx, got):
            assert g.record_sha256(rec) == want[i], "%s: get %d differs" % (name, i)


def test_get_out_of_range():
    for name in ("uncompressed_g1.array_record", "empty.array_record", "zstd_g65536.array_record"):
        n = FILES[name]["num_records"]
        rc, out, err = g.run(["get", "--hex", path_of(name), "--", n])
        assert rc == 1, "%s: get %d (past the end) exited %d" % (name, n, rc)
        assert str(n) in err, "%s: the error does not name index %d: %r" % (name, n, err)


def test_verify():
    for name in FILES:
        g.run_ok(["verify", path_of(name)])
    g.run_ok(["verify"] + [path_of(n) for n in FILES])


def test_datasets():
    # A dataset is the concatenation of its files; global indices cross files,
    # and an empty file in the middle contributes nothing.
    rng = random.Random(11)
    for ds in MANIFEST["datasets"]:
        paths = [path_of(n) for n in ds["files"]]
        assert g.info_records(g.run_ok(["info"] + paths)) == ds["num_records"], ds["name"]
        records = g.parse_hex_lines(g.run_ok(["cat", "--hex"] + paths))
        assert len(records) == ds["num_records"], ds["name"]
        start = 0
        for n in ds["files"]:
            k = FILES[n]["num_records"]
            check_records(FILES[n], records[start:start + k])
            start += k
        total = ds["num_records"]
        bounds = [0, total - 1]
        start = 0
        for n in ds["files"]:
            start += FILES[n]["num_records"]
            bounds += [max(start - 1, 0), min(start, total - 1)]
        idx = bounds + [rng.randrange(total) for _ in range(30)]
        got = g.parse_hex_lines(g.run_ok(["get", "--hex"] + paths + ["--"] + idx))
        assert got == [records[i] for i in idx], "%s: get across files differs" % ds["name"]
        rc, _, err = g.run(["get", "--hex"] + paths + ["--", total])
        assert rc == 1, "%s: get %d (past the end) exited %d" % (ds["name"], total, rc)
        g.run_ok(["verify"] + paths)


if __name__ == "__main__":
    g.main([test_files_match_manifest, test_info, test_cat_hex, test_cat_raw, test_get,
            test_get_out_of_range, test_verify, test_datasets])
