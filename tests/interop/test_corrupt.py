#!/usr/bin/env python3
"""CLI-level bad input: damaged copies of golden files and garbage files.

For `info`, `cat` and `verify` every run must end with exit 0 or 1 (never a
signal, never a hang) and, when it fails, name the file and a byte offset.
A command must fail (exit 1) when the damage lies in bytes it reads:
  verify  everything (it walks every chunk of the file);
  cat     the data chunks, the footer and the postscript;
  info    the footer and the postscript.
Every case is fixed or drawn from a seeded generator, so runs repeat exactly.
"""
import os
import random
import shutil
import tempfile

import gristcli as g

COMMANDS = {"info": ["info"], "cat": ["cat", "--hex"], "verify": ["verify"]}
ALL = ("info", "cat", "verify")
TIMEOUT = 30


def golden(name):
    with open(os.path.join(g.golden_dir(), name), "rb") as f:
        return f.read()


class Cases:
    """Writes each damaged image into a temporary folder and runs the commands."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="grist-corrupt-")
        self.count = 0
        self.failures = []

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def check(self, label, image, must_fail):
        """Run every command on @image; those in @must_fail must exit 1."""
        self.count += 1
        path = os.path.join(self.dir, "case%03d.array_record" % self.count)
        with open(path, "wb") as f:
            f.write(image)
        for cmd in ALL:
            try:
                rc, _, err = g.run(COMMANDS[cmd] + [path], timeout=TIMEOUT)
                if rc == 2:
                    raise AssertionError("usage error (exit 2): %s" % err.strip()[-300:])
                if rc == 0 and cmd in must_fail:
                    raise AssertionError("exit 0 on damage in bytes it reads")
                if rc == 1:
                    g.check_names_offset(err, path)
            except AssertionError as e:
                self.failures.append("%s: grist %s: %s" % (label, cmd, e))
        os.unlink(path)

    def done(self):
        if self.failures:
            raise AssertionError("%d of the checks failed:\n  %s"
                                 % (len(self.failures), "\n  ".join(self.failures)))


def flip(data, offset, bit=0):
    out = bytearray(data)
    out[offset] ^= 1 << bit
    return bytes(out)


def region_readers(lay, offset):
    """The commands that read byte @offset of a file with layout @lay."""
    def inside(r):
        return r[0] <= offset < r[1]
    if inside(lay["footer"]) or inside(lay["postscript"]):
        return ALL
    if inside(lay["data"]):
        return ("cat", "verify")
    return ("verify",)


def with_cases(body):
    c = Cases()
    try:
        body(c)
        c.done()
    finally:
        c.close()


def test_truncation():
    def body(c):
        for name in ("uncompressed_g1.array_record", "big_zstd_g1.array_record"):
            data = golden(name)
            lay = g.layout(data)
            mid_chunk = (lay["data"][0] + lay["data"][1]) // 2
            for cut in (0, 100, 65535, 65536 + 7, mid_chunk, len(data) - 1):
                c.check("%s cut at %d" % (name, cut), data[:cut], ALL)
    with_cases(body)


def test_flipped_structures():
    def body(c):
        data = golden("uncompressed_g1.array_record")
        lay = g.layout(data)
        first_chunk = 64
        proto_len = 2 + len(g.varint(lay["footer_offset"])) + 9
        magic = lay["postscript"][1] - 3 * proto_len + 2 + len(g.varint(lay["footer_offset"]))
        cases = [
            ("signature chunk header", 24 + 9),
            ("block header at 0", 17),
            ("block header at 65536 (postscript)", 65536 + 3),
            ("first data chunk header", first_chunk + 9),
            ("first data chunk data", first_chunk + g.CHUNK_HEADER + 3),
            ("last byte of the data chunks", lay["data"][1] - 1),
            ("footer chunk header", lay["footer"][0] + 30),
            ("footer data", lay["footer"][0] + g.CHUNK_HEADER + 5),
            ("postscript chunk header", lay["postscript"][0] + 24 + 8),
            # The first of the three postscript copies: {footer_offset, magic}.
            ("postscript magic", magic + 4),
            ("padding after the footer", lay["footer"][1] + 50),
            ("padding after the postscript", len(data) - 1),
        ]
        for label, off in cases:
            c.check("uncompressed_g1 %s (byte %d)" % (label, off), flip(data, off, 3),
                    region_readers(lay, off))
        # A data chunk crossing a block boundary: its block header is inside the chunk.
        big = golden("big_uncompressed_g2.array_record")
        blay = g.layout(big)
        for off in (2 * 65536 + 2, 2 * 65536 + 12, 2 * 65536 + 20, 5 * 65536 + 4):
            c.check("big_uncompressed_g2 block header byte %d" % off, flip(big, off, 1),
                    region_readers(blay, off))
        # A compressed stream: damage is found by the hash before the codec sees it.
        z = golden("zstd_default_g1.array_record")
        zlay = g.layout(z)
        for off in (64 + 41, 64 + 45, zlay["footer"][0] + 44):
            c.check("zstd_default_g1 byte %d" % off, flip(z, off, 5), region_readers(zlay, off))
    with_cases(body)


def test_random_bit_flips():
    # Every byte of an uncompressed group_size:1 file is covered by some hash,
    # so verify must reject any flip; cat and info by where it lands.
    rng = random.Random(1234)
    data = golden("uncompressed_g1.array_record")
    lay = g.layout(data)

    def body(c):
        for _ in range(24):
            off = rng.randrange(len(data))
            c.check("random flip at %d" % off, flip(data, off, rng.randrange(8)),
                    region_readers(lay, off))
    with_cases(body)


def test_chunk_padding():
    # A chunk holding more records than bytes is padded with zeros up to one
    # byte per record, and no hash covers that padding: only a check that it
    # is zero finds a flip there. verify reads everything, so it must.
    data = golden("zstd_g65536.array_record")
    hdr, end = g.chunk_extent(data, 64)
    data_end = g.add_with_overhead(64, g.CHUNK_HEADER + hdr["data_size"])
    assert end - data_end > 1000, "the golden file no longer has a padded chunk"

    def body(c):
        for off in (data_end, (data_end + end) // 2, end - 1):
            c.check("zstd_g65536 zero padding of the first chunk, byte %d" % off,
                    flip(data, off, 2), ("verify",))
    with_cases(body)


def test_write_bad_input():
    # Bad hex on stdin is reported with its line number and leaves no file.
    tmp = tempfile.mkdtemp(prefix="grist-corrupt-")
    try:
        out = os.path.join(tmp, "out.array_record")
        for stdin, line in ((b"zz\n", 1), (b"00\nabc\n", 2), (b"00\n\n0g\n", 3),
                            (b"0011\n" * 5 + b"\xff\n", 6), (b"00\n123", 2)):
            rc, _, err = g.run(["write", "--hex", out], stdin=stdin, timeout=TIMEOUT)
            assert rc in (1, 2), "write --hex %r: exit %d" % (stdin, rc)
            assert "line %d" % line in err, "write --hex %r: message does not name line %d: %r" % (
                stdin, line, err)
            assert not os.path.exists(out), "write --hex %r: left %s behind" % (stdin, out)
            assert os.listdir(tmp) == [], "write --hex %r: left %s" % (stdin, os.listdir(tmp))
    finally:
        shutil.rmtree(tmp)


def test_rebuilt_postscript():
    # Postscripts with valid hashes but wrong values: the checks behind the
    # hashes (magic, footer bounds, chunk boundaries) must catch them.
    hh = g.HighwayHash()
    data = golden("uncompressed_g1.array_record")
    lay = g.layout(data)
    fo = lay["footer_offset"]
    assert g.rebuild_postscript(data, hh, fo) == data  # the rebuild itself is exact
    assert len(g.varint(fo)) == 3

    chunk = 64
    while chunk < 16384:  # the first data chunk whose offset takes a 3-byte varint
        chunk = g.chunk_extent(data, chunk)[1]

    def body(c):
        c.check("wrong magic", g.rebuild_postscript(data, hh, fo, g.POSTSCRIPT_MAGIC ^ 1), ALL)
        for label, off in (("outside the file", 2000000), ("just past the end", len(data)),
                           ("inside the postscript", len(data) - 65536 + 30),
                           ("one byte after the footer start", fo + 1),
                           ("at a data chunk, not the footer", chunk)):
            if len(g.varint(off)) != 3:
                continue
            c.check("footer offset %s (%d)" % (label, off), g.rebuild_postscript(data, hh, off), ALL)
    with_cases(body)


def test_garbage():
    rng = random.Random(99)
    head = golden("uncompressed_g1.array_record")[:64]

    def body(c):
        for size in (1, 23, 100, 4096, 65536, 131072, 200000, 262144):
            c.check("random %d bytes" % size, rng.randbytes(size), ALL)
        # A real signature, then noise: passes the first look, fails after.
        c.check("signature then noise", head + rng.randbytes(131072 - 64), ALL)
        c.check("zeros", bytes(131072), ALL)
        # A golden file with its first and second halves swapped.
        d = golden("zstd_g65536.array_record")
        c.check("blocks reordered", d[65536:] + d[:65536], ALL)
    with_cases(body)


def test_missing_and_directory():
    # Not data errors of a file's bytes, but still exit 1, not a crash.
    tmp = tempfile.mkdtemp(prefix="grist-corrupt-")
    try:
        # A missing file is an I/O error (1); a directory may also count as a
        # bad argument (2, the -EINVAL of "not a regular file").
        for cmd in ALL:
            for p, codes in ((os.path.join(tmp, "missing.array_record"), (1,)), (tmp, (1, 2))):
                rc, _, err = g.run(COMMANDS[cmd] + [p], timeout=TIMEOUT)
                assert rc in codes, "grist %s %s: exit %d" % (cmd, p, rc)
                assert p in err, "grist %s: message does not name %s: %r" % (cmd, p, err)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    g.main([test_truncation, test_flipped_structures, test_random_bit_flips,
            test_chunk_padding, test_rebuilt_postscript, test_garbage, test_missing_and_directory,
            test_write_bad_input])
