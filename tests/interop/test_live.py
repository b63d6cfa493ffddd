#!/usr/bin/env python3
"""Live round trips against the official library (pip package array-record).

Skipped (exit 77) when array_record cannot be imported. Checks that
  - grist reads files the official writer makes, for every codec, group size
    and padding setting, exactly;
  - the official reader reads files grist writes exactly, and reports the same
    writer_options text the official writer stores for the same options;
  - uncompressed grist output is byte-identical to the official writer's.
"""
import os
import random
import shutil
import tempfile

import gristcli as g
import make_golden  # on sys.path through gristcli

try:
    from array_record.python import array_record_module as ar
except ImportError:
    ar = None

CODECS = ["uncompressed", "", "zstd:1,window_log:25", "snappy", "brotli", "brotli:5,window_log:26"]
GROUPS = [1, 16, 65536]
PADS = [False, True]


def options_text(codec, group, pad):
    parts = ["group_size:%d" % group]
    if pad:
        parts.append("pad_to_block_boundary:true")
    if codec:
        parts.append(codec)
    return ",".join(parts)


def make_records(rng, n, spanning):
    """@n records of 0..2000 bytes (some empty, some text); one of 70000 bytes
    (crossing a 64 KiB block) when @spanning."""
    out = []
    for i in range(n):
        size = 0 if i % 11 == 0 else rng.randrange(2001)
        out.append(rng.randbytes(size) if i % 2 else (b"text %d " % i * 300)[:size])
    if spanning:
        out.insert(n // 2, rng.randbytes(70000))
    return out


def official_write(path, options, records):
    make_golden.official_write(ar, path, options, records)


def official_read(path, indices):
    return make_golden.official_read(ar, path, indices)


class Workdir:
    def __enter__(self):
        if ar is None:
            raise g.Skip("array_record is not importable")
        self.dir = tempfile.mkdtemp(prefix="grist-live-")
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)


def combos():
    for ci, codec in enumerate(CODECS):
        for group in GROUPS:
            for pad in PADS:
                # Padding with small groups means a 64 KiB block per chunk: keep it short.
                n = 12 if pad and group == 1 else 60
                yield codec, group, pad, n, (ci + group) % 2 == 0


def test_official_to_grist():
    rng = random.Random(2024)
    with Workdir() as wd:
        for codec, group, pad, n, spanning in combos():
            opts = options_text(codec, group, pad)
            records = make_records(rng, n, spanning)
            path = wd.path("official.array_record")
            official_write(path, opts, records)
            label = "official file with %r" % opts
            assert g.info_records(g.run_ok(["info", path])) == len(records), label
            got = g.parse_hex_lines(g.run_ok(["cat", "--hex", path]))
            assert got == records, "%s: grist cat differs" % label
            idx = [rng.randrange(len(records)) for _ in range(25)] + [len(records) - 1, 0]
            got = g.parse_hex_lines(g.run_ok(["get", "--hex", path, "--"] + idx))
            assert got == [records[i] for i in idx], "%s: grist get differs" % label
            g.run_ok(["verify", path])


def test_grist_to_official():
    rng = random.Random(4048)
    with Workdir() as wd:
        for codec, group, pad, n, spanning in combos():
            opts = options_text(codec, group, pad)
            records = make_records(rng, n, spanning)
            ours, theirs = wd.path("grist.array_record"), wd.path("official.array_record")
            g.write_records(ours, opts, records)
            official_write(theirs, opts, records)
            label = "grist file with %r" % opts
            idx = [rng.randrange(len(records)) for _ in range(25)]
            num, stored, everything, some = official_read(ours, idx)
            assert num == len(records), "%s: official reader counts %d records" % (label, num)
            assert everything == records, "%s: official read_all differs" % label
            assert some == [records[i] for i in idx], "%s: official read(indices) differs" % label
            want = official_read(theirs, [])[1]
            assert stored == want, "%s: writer options %r, official writer stores %r" % (
                label, stored, want)
            g.run_ok(["verify", ours])


def test_options_text():
    # The stored options text for option strings written in other ways.
    with Workdir() as wd:
        for opts in ("", "default", "zstd", "zstd:7", "brotli:11", "brotli:3,window_log:24",
                     "group_size:1000,snappy", "uncompressed,pad_to_block_boundary:false",
                     "window_log:18,zstd:-5", "max_parallelism:1,uncompressed"):
            ours, theirs = wd.path("grist.array_record"), wd.path("official.array_record")
            official_write(theirs, opts, [b"x"])
            g.write_records(ours, opts, [b"x"])
            want = official_read(theirs, [])[1]
            got = official_read(ours, [])[1]
            assert got == want, "%r: grist stores %r, official %r" % (opts, got, want)


# Option strings at and past the edges of the official grammar.
EDGE_OPTIONS = [
    "", ",", "group_size:1,", "default", "default,group_size:2", "default,default", "bogus",
    " group_size:2 , snappy", "group_size:0", "group_size:-1", "group_size:2147483647",
    "group_size:2147483648", "group_size:18446744073709551615", "group_size:1,group_size:2",
    "zstd:", "zstd:22", "zstd:99", "zstd:-131072", "zstd:-131073", "zstd,snappy",
    "zstd:3,window_log:20,uncompressed", "uncompressed,window_log:20", "window_log:9",
    "window_log:31", "window_log:32", "window_log:auto", "brotli:", "brotli:11", "brotli:12",
    "snappy:0", "snappy:1", "snappy:2", "snappy:3", "pad_to_block_boundary",
    "pad_to_block_boundary:yes", "max_parallelism:auto", "max_parallelism:4",
    "max_parallelism:0", "saturation_delay_ms:5", "saturation_delay_ms:-1", "transpose:false",
    "transpose_bucket_size:100",
]


def test_options_accept_reject():
    # grist accepts exactly the option strings the official writer accepts
    # (and stores the same text for them); the others are usage errors (exit
    # 2) that leave no file behind. transpose:true is the one deliberate
    # difference: grist writes simple chunks only.
    failures = []
    with Workdir() as wd:
        for opts in EDGE_OPTIONS + ["transpose", "transpose:true"]:
            theirs, ours = wd.path("official.array_record"), wd.path("grist.array_record")
            try:
                official_write(theirs, opts, [b"x"])
                want = official_read(theirs, [])[1]
            except Exception:
                want = None
            rc, _, err = g.run(["write", "--options", opts, ours], stdin=b"x\n")
            if "transpose" in opts and want and "transpose:true" in want:
                if rc == 0:
                    failures.append("%r: grist accepted transposition" % opts)
            elif want is None:
                if rc != 2:
                    failures.append("%r: official writer rejects it, grist exits %d" % (opts, rc))
                elif os.path.exists(ours):
                    failures.append("%r: rejected, but grist left %s" % (opts, ours))
            elif rc != 0:
                failures.append("%r: official writer accepts it, grist exits %d: %s"
                                % (opts, rc, err.strip()))
            else:
                got = official_read(ours, [])[1]
                if got != want:
                    failures.append("%r: grist stores %r, official %r" % (opts, got, want))
            if os.path.exists(ours):
                os.unlink(ours)
    assert not failures, "\n  ".join([""] + failures)


def test_uncompressed_identical():
    rng = random.Random(77)
    with Workdir() as wd:
        sets = [
            ("empty", []),
            ("one empty record", [b""]),
            ("small", make_records(rng, 50, False)),
            ("spanning blocks", make_records(rng, 30, True) + [rng.randbytes(200000), b""]),
            # Chunks of many empty records are padded to one byte per record.
            ("many empty", [b""] * 3000 + [b"x"] * 10),
        ]
        for group in (1, 2, 16, 65536):
            for pad in PADS:
                for label, records in sets:
                    if pad and group == 1 and len(records) > 100:
                        continue  # one 64 KiB block per record: slow and adds nothing
                    opts = options_text("uncompressed", group, pad)
                    ours, theirs = wd.path("grist.array_record"), wd.path("official.array_record")
                    g.write_records(ours, opts, records)
                    official_write(theirs, opts, records)
                    with open(ours, "rb") as f:
                        a = f.read()
                    with open(theirs, "rb") as f:
                        b = f.read()
                    at = g.first_difference(a, b)
                    assert at < 0, "%s with %r: grist output (%d bytes) differs from the " \
                        "official (%d bytes) first at byte %d" % (label, opts, len(a), len(b), at)


if __name__ == "__main__":
    g.main([test_official_to_grist, test_grist_to_official, test_options_text,
            test_options_accept_reject, test_uncompressed_identical])
