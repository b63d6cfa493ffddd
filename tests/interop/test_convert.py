#!/usr/bin/env python3
"""`grist convert` end to end, checked with the official ArrayRecord reader.

Inputs: the golden TFRecord files of tests/data/tfrecord (made by the pip
package `tfrecord`, plain and GZIP), text lines, folders and ArrayRecord files.
Every output is read back by the official reader (array_record), so the test
is skipped (77) when that cannot be imported. Checks:
  - records and their order, several inputs concatenated, auto-detection;
  - max_parallelism: the same bytes as one thread, the official options text;
    uncompressed output byte-identical to the official writer's;
  - --shards: TFDS names, contiguous, counts within one record;
  - every bad input (CRC, truncation, GZIP damage, unreadable) exits 1 naming
    the file and byte, leaving nothing at the target and no temporary;
  - usage errors exit 2; SIGTERM leaves nothing behind (convert and write);
  - an OUT that is an INPUT (same path, hard link, symbolic link, a shard name, a name
    inside an input folder) is refused with exit 2 and the input is untouched.
"""
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time

import gristcli as g
import make_golden

try:
    from array_record.python import array_record_module as ar
except ImportError:
    ar = None

TF_DIR = os.path.join(os.path.dirname(g.golden_dir()), "tfrecord")


def tf_manifest():
    with open(os.path.join(TF_DIR, "MANIFEST.json")) as f:
        return json.load(f)


def need_official():
    if ar is None:
        raise g.Skip("array_record is not importable")


def official_records(path):
    n, _opts, everything, _ = make_golden.official_read(ar, path)
    assert n == len(everything)
    return list(everything)


def official_options(path):
    return make_golden.official_read(ar, path)[1]


class Workdir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="grist-convert-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def tfrecord_frame(records):
    """Frame @records as TFRecord, with the tfrecord package's own CRC helper."""
    try:
        from tfrecord.writer import TFRecordWriter
    except ImportError:
        raise g.Skip("the pip package tfrecord is not importable")
    import struct
    out = bytearray()
    for r in records:
        length = struct.pack("<Q", len(r))
        out += length + TFRecordWriter.masked_crc(length) + r + TFRecordWriter.masked_crc(r)
    return bytes(out)


def assert_clean(folder, allowed=()):
    """Nothing but @allowed in @folder: no output, no shard, no temporary."""
    left = sorted(set(os.listdir(folder)) - set(allowed))
    if left:
        raise AssertionError("left behind after a failure: %s" % left)


def test_golden_tfrecord():
    need_official()
    man = tf_manifest()
    with Workdir() as d:
        for name, entry in sorted(man.items()):
            for extra in ([], ["--from", "tfrecord"]):
                out = os.path.join(d, "out.ar")
                g.run_ok(["convert"] + extra + [os.path.join(TF_DIR, name), out])
                recs = official_records(out)
                assert len(recs) == entry["num_records"], (name, len(recs))
                assert make_golden.record_digest(recs) == entry["digest"], name
                os.unlink(out)


def test_concatenated_inputs_in_order():
    need_official()
    with Workdir() as d:
        parts = []
        for name in ("part-0.tfrecord", "part-1.tfrecord.gz"):
            out = os.path.join(d, name + ".ar")
            g.run_ok(["convert", os.path.join(TF_DIR, name), out])
            parts.append(official_records(out))
        both = os.path.join(d, "both.ar")
        g.run_ok(["convert", os.path.join(TF_DIR, "part-0.tfrecord"), os.path.join(TF_DIR, "empty.tfrecord"),
                  os.path.join(TF_DIR, "part-1.tfrecord.gz"), both])
        assert official_records(both) == parts[0] + parts[1]


def test_parallel_writer_matches_serial_and_official():
    need_official()
    rng = random.Random(7)
    records = [(b"line %d " % i) * rng.randrange(0, 200) for i in range(3000)]
    records[1234] = rng.randbytes(200000)  # one chunk much larger than the others
    with Workdir() as d:
        src = os.path.join(d, "in.tfrecord")
        with open(src, "wb") as f:
            f.write(tfrecord_frame(records))
        by_codec = {}
        for codec in ("zstd:3", "snappy", "brotli:2", "uncompressed"):
            outs = {}
            for par in (1, 2, 5):
                opts = "group_size:7,%s,max_parallelism:%d" % (codec, par)
                out = os.path.join(d, "p%d.ar" % par)
                g.run_ok(["convert", "--options", opts, src, out])
                assert official_records(out) == records, opts
                with open(out, "rb") as f:
                    outs[par] = f.read()
                # What the official writer stores for the same options text.
                ref = os.path.join(d, "official.ar")
                make_golden.official_write(ar, ref, opts, records[:3])
                assert official_options(out) == official_options(ref), opts
            assert outs[1] == outs[2] == outs[5], codec
            by_codec[codec] = outs[1]
            if codec == "uncompressed":
                make_golden.official_write(ar, ref, "group_size:7,uncompressed,max_parallelism:2", records)
                with open(ref, "rb") as f:
                    assert f.read() == outs[2], "uncompressed output differs from the official writer's"
        # auto: one thread per CPU, same bytes again
        out = os.path.join(d, "auto.ar")
        g.run_ok(["convert", "--options", "group_size:7,zstd:3,max_parallelism:auto", src, out])
        with open(out, "rb") as f:
            assert f.read() == by_codec["zstd:3"], "max_parallelism:auto changed the bytes"
        assert official_records(out) == records


def test_shards():
    need_official()
    man = tf_manifest()
    with Workdir() as d:
        src = os.path.join(TF_DIR, "small.tfrecord.gz")
        whole = os.path.join(d, "whole.ar")
        g.run_ok(["convert", src, whole])
        records = official_records(whole)
        assert make_golden.record_digest(records) == man["small.tfrecord.gz"]["digest"]
        for n in (1, 2, 7, 60, 75):
            sub = os.path.join(d, "s%d" % n)
            os.mkdir(sub)
            out = os.path.join(sub, "data.array_record")
            g.run_ok(["convert", "--shards", n, "--options", "group_size:4,max_parallelism:2", src, out])
            names = sorted(os.listdir(sub))
            if n == 1:
                assert names == ["data.array_record"], names
                assert official_records(out) == records
                continue
            assert names == ["data.array_record-%05d-of-%05d" % (i, n) for i in range(n)], names
            got = [official_records(os.path.join(sub, x)) for x in names]
            sizes = [len(x) for x in got]
            assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True), sizes
            assert [r for shard in got for r in shard] == records, n
        # An empty input still gives every shard, each empty.
        out = os.path.join(d, "e")
        g.run_ok(["convert", "--shards", 3, os.path.join(TF_DIR, "empty.tfrecord"), out])
        for i in range(3):
            assert official_records("%s-%05d-of-00003" % (out, i)) == []


def test_lines():
    need_official()
    with Workdir() as d:
        text = b"first\n\nthird has \xc3\xa4\r\n" + b"x" * 3000000 + b"\nlast without newline"
        want = [b"first", b"", b"third has \xc3\xa4\r", b"x" * 3000000, b"last without newline"]
        src = os.path.join(d, "in.txt")
        with open(src, "wb") as f:
            f.write(text)
        with gzip.open(src + ".gz", "wb") as f:
            f.write(text)
        for args in (["--from", "lines", src], [src], ["--from", "lines", src + ".gz"]):
            out = os.path.join(d, "out.ar")
            g.run_ok(["convert"] + args + [out])
            assert official_records(out) == want, args
            os.unlink(out)
        # A trailing newline ends the last line; it does not start an empty record.
        with open(src, "wb") as f:
            f.write(b"a\nb\n")
        g.run_ok(["convert", "--from", "lines", src, out])
        assert official_records(out) == [b"a", b"b"]


def test_dir_order():
    need_official()
    with Workdir() as d:
        root = os.path.join(d, "tree")
        files = {"B": b"upper", "a": None, "a.txt": b"dot", "a/b": b"in a", "a/c/d": b"deep",
                 "\u00e4": b"umlaut", "z-empty": b"", "Z": b"big" * 50000}
        for rel, data in files.items():
            p = os.path.join(root, rel)
            if data is None:
                os.makedirs(p, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
        os.symlink("a.txt", os.path.join(root, "link"))  # not a regular file: skipped
        want_paths = sorted((k for k, v in files.items() if v is not None), key=lambda s: s.encode())
        want = [files[k] for k in want_paths]
        other = os.path.join(d, "other")
        os.mkdir(other)
        with open(os.path.join(other, "only"), "wb") as f:
            f.write(b"second folder")
        out = os.path.join(d, "out.ar")
        for args in (["--from", "dir"], []):
            g.run_ok(["convert"] + args + [root, other, out])
            assert official_records(out) == want + [b"second folder"], args
            os.unlink(out)


def test_arrayrecord_reencode():
    need_official()
    with Workdir() as d:
        src = os.path.join(g.golden_dir(), "zstd_default_g1.array_record")
        want = official_records(src)
        out = os.path.join(d, "out.ar")
        for opts in ("group_size:16,brotli:3", "group_size:1000,snappy,max_parallelism:2"):
            for args in (["--from", "arrayrecord"], []):
                g.run_ok(["convert"] + args + ["--options", opts, src, out])
                assert official_records(out) == want
                ref = os.path.join(d, "ref.ar")
                make_golden.official_write(ar, ref, opts, want[:2])
                assert official_options(out) == official_options(ref)
                os.unlink(out)


def test_detection_errors():
    with Workdir() as d:
        binary = os.path.join(d, "blob.bin")
        with open(binary, "wb") as f:
            f.write(bytes(range(256)) * 10)
        rc, _, err = g.run(["convert", binary, os.path.join(d, "out.ar")])
        assert rc == 2 and "cannot tell" in err and binary in err and "--from" in err, (rc, err)
        text = os.path.join(d, "t.txt")
        with open(text, "w") as f:
            f.write("hello\n")
        rc, _, err = g.run(["convert", text, os.path.join(TF_DIR, "small.tfrecord"), os.path.join(d, "out.ar")])
        assert rc == 2 and "lines" in err and "tfrecord" in err, (rc, err)
        assert_clean(d, ["blob.bin", "t.txt"])


def test_usage_errors():
    with Workdir() as d:
        src = os.path.join(TF_DIR, "small.tfrecord")
        out = os.path.join(d, "o")
        for args in ([], [src], ["--shards", "0", src, out], ["--shards", "100000", src, out],
                     ["--from", "csv", src, out], ["--options", "group_size:0", src, out],
                     ["--options", "zstd,snappy", src, out], ["--bogus", src, out], ["--from"]):
            rc, _, err = g.run(["convert"] + args)
            assert rc == 2, (args, rc, err)
        assert_clean(d)
        rc, out_text, _ = g.run(["convert", "--help"])
        assert rc == 0 and b"usage: grist convert" in out_text


def corrupt_cases(d):
    """(name, file bytes, what the message must say) for every kind of bad input."""
    with open(os.path.join(TF_DIR, "small.tfrecord"), "rb") as f:
        good = f.read()
    import struct
    # Offsets of the records: walk the framing.
    offs, p = [], 0
    while p < len(good):
        offs.append(p)
        p += 16 + struct.unpack_from("<Q", good, p)[0]
    r5 = offs[5]
    n5 = struct.unpack_from("<Q", good, r5)[0]
    data_flip = bytearray(good)
    data_flip[r5 + 12 + n5 // 2] ^= 0x40
    len_flip = bytearray(good)
    len_flip[offs[9]] ^= 0x01
    crc_flip = bytearray(good)
    crc_flip[offs[9] + 8] ^= 0x01
    gz = gzip.compress(good, mtime=0)
    gz_flip = bytearray(gz)
    gz_flip[len(gz) // 2] ^= 0xff
    gz_trailer = bytearray(gz)
    gz_trailer[-6] ^= 0x01  # the stored CRC-32 of the data
    return [
        ("data_crc", bytes(data_flip), "data CRC mismatch", r5 + 12 + n5),
        ("length_crc", bytes(len_flip), "length CRC mismatch", offs[9]),
        ("length_crc_field", bytes(crc_flip), "length CRC mismatch", offs[9]),
        ("truncated_data", good[:offs[20] + 12 + 3], "truncated", offs[20]),
        ("truncated_header", good[:offs[20] + 5], "truncated header", offs[20]),
        ("truncated_footer", good[:offs[21] - 2], "truncated", offs[20]),
        ("gzip_truncated", gz[:len(gz) * 2 // 3], "GZIP", None),
        ("gzip_damaged", bytes(gz_flip), "GZIP", None),
        ("gzip_bad_trailer", bytes(gz_trailer), "GZIP", None),
    ]


def test_bad_inputs_leave_nothing():
    with Workdir() as d:
        good_src = os.path.join(TF_DIR, "part-0.tfrecord")
        for name, data, says, offset in corrupt_cases(d):
            src = os.path.join(d, name + ".tfrecord")
            with open(src, "wb") as f:
                f.write(data)
            outdir = os.path.join(d, "out")
            os.mkdir(outdir)
            for extra in ([], ["--shards", "3"], ["--options", "group_size:2,max_parallelism:3"]):
                for inputs in ([src], [good_src, src]):
                    rc, _, err = g.run(["convert", "--from", "tfrecord"] + extra + inputs +
                                       [os.path.join(outdir, "ds.array_record")])
                    assert rc == 1, (name, extra, rc, err)
                    assert says in err, (name, err)
                    g.check_names_offset(err, src)
                    if offset is not None:
                        assert "byte %d" % offset in err, (name, offset, err)
                    assert_clean(outdir)
            os.rmdir(outdir)
        # --no-check skips the data CRC only, and then delivers the damaged bytes as they are.
        need_official()
        cases = {c[0]: c for c in corrupt_cases(d)}
        src = os.path.join(d, "data_crc.tfrecord")
        out = os.path.join(d, "nocheck.ar")
        g.run_ok(["convert", "--no-check", src, out])
        assert len(official_records(out)) == 60
        rc, _, err = g.run(["convert", "--no-check", os.path.join(d, "length_crc.tfrecord"), out + "2"])
        assert rc == 1 and "length CRC" in err
        del cases


def test_huge_length_with_valid_crc():
    """A length whose CRC checks out but that no file holds (up to 2^64-1) is
    refused before any allocation, plain or GZIP, counting pass or not."""
    import struct
    try:
        from tfrecord.writer import TFRecordWriter
    except ImportError:
        raise g.Skip("the pip package tfrecord is not importable")
    with Workdir() as d:
        good = tfrecord_frame([b"first", b"second"])
        for length in (2**64 - 1, 2**64 - 4, 2**63, 2**40):
            hdr = struct.pack("<Q", length)
            bad = good + hdr + TFRecordWriter.masked_crc(hdr) + b"tail"
            for gz in (False, True):
                src = os.path.join(d, "huge.tfrecord" + (".gz" if gz else ""))
                with open(src, "wb") as f:
                    f.write(gzip.compress(bad, mtime=0) if gz else bad)
                outdir = os.path.join(d, "out")
                os.mkdir(outdir)
                for extra in ([], ["--shards", "2"]):
                    rc, _, err = g.run(["convert"] + extra + [src, os.path.join(outdir, "o")])
                    assert rc == 1, (length, gz, rc, err)
                    assert ("too large" if gz else "truncated") in err, err
                    assert "byte %d" % len(good) in err and "record 2" in err, err
                    assert_clean(outdir)
                os.rmdir(outdir)


def test_unreadable_inputs():
    with Workdir() as d:
        out = os.path.join(d, "out", "o.ar")
        os.mkdir(os.path.dirname(out))
        missing = os.path.join(d, "missing.tfrecord")
        for args in (["--from", "tfrecord", missing], ["--from", "lines", missing],
                     ["--from", "dir", missing], ["--from", "arrayrecord", missing], [missing],
                     ["--from", "tfrecord", os.path.join(TF_DIR, "small.tfrecord"), missing],
                     ["--from", "tfrecord", d]):
            rc, _, err = g.run(["convert"] + args + [out])
            assert rc == 1, (args, rc, err)
            assert args[-1] in err, (args, err)
            assert_clean(os.path.dirname(out))
        # A damaged ArrayRecord input names the file and byte.
        src = os.path.join(g.golden_dir(), "zstd_default_g1.array_record")
        with open(src, "rb") as f:
            data = bytearray(f.read())
        data[300] ^= 0xff
        bad = os.path.join(d, "bad.array_record")
        with open(bad, "wb") as f:
            f.write(data)
        rc, _, err = g.run(["convert", "--from", "arrayrecord", bad, out])
        assert rc == 1, err
        g.check_names_offset(err, bad)
        assert_clean(os.path.dirname(out))
        # An output folder that does not exist is an error too, with nothing made.
        rc, _, err = g.run(["convert", os.path.join(TF_DIR, "small.tfrecord"), os.path.join(d, "nope", "o")])
        assert rc == 1 and "nope" in err, err


def wait_for_temporary(folder, proc, deadline):
    while time.time() < deadline and proc.poll() is None:
        if any(".tmp-" in x for x in os.listdir(folder)):
            return True
        time.sleep(0.001)
    return False


def test_signal_leaves_nothing():
    with Workdir() as d:
        src = os.path.join(d, "big.txt")
        rng = random.Random(3)
        with open(src, "wb") as f:
            for i in range(40000):
                f.write(b"%d %s\n" % (i, rng.randbytes(600).hex().encode()))
        outdir = os.path.join(d, "out")
        os.mkdir(outdir)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            for extra in ([], ["--shards", "4"]):
                caught = False
                for _attempt in range(5):
                    p = subprocess.Popen([g.grist_cli(), "convert", "--options", "group_size:8,brotli:9,max_parallelism:2"]
                                         + extra + [src, os.path.join(outdir, "o.ar")],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         preexec_fn=g.default_signal_actions)
                    if wait_for_temporary(outdir, p, time.time() + 20):
                        p.send_signal(sig)
                        caught = True
                    p.communicate(timeout=60)
                    if caught:
                        assert p.returncode == -sig, (sig, p.returncode)
                        assert_clean(outdir)
                        break
                    shutil.rmtree(outdir)
                    os.mkdir(outdir)
                assert caught, "convert finished before a signal could reach it"
        # `grist write` shares the cleanup: its temporary exists while stdin is open.
        p = subprocess.Popen([g.grist_cli(), "write", os.path.join(outdir, "w.ar")], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=g.default_signal_actions)
        p.stdin.write(b"one\ntwo\n")
        p.stdin.flush()
        assert wait_for_temporary(outdir, p, time.time() + 20)
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
        assert p.returncode == -signal.SIGTERM
        assert_clean(outdir)


def test_imagefolder_signal_leaves_nothing():
    """`grist convert --from imagefolder` builds the dataset in a folder beside OUT and renames
    it into place whole. A signal once that folder holds a finished split must remove it with
    its files: before, only the shard being written was a listed temporary, and the folder
    with the finished split stayed behind."""
    try:
        from PIL import Image
    except ImportError:
        print("  (skipped: Pillow is not installed)")
        return
    with Workdir() as d:
        rng = random.Random(5)
        root = os.path.join(d, "imgs")
        for split in ("train", "test"):
            os.makedirs(os.path.join(root, split, "cat"))
            for i in range(40):
                im = Image.frombytes("RGB", (1200, 900), rng.randbytes(1200 * 900 * 3))
                im.save(os.path.join(root, split, "cat", "%02d.jpg" % i), quality=95)
        parent = os.path.join(d, "ds")  # OUT is ds/1.0.0; the dataset is made in ds/.1.0.0.tmp-*
        os.mkdir(parent)

        def finished_split(deadline, proc):
            while time.time() < deadline and proc.poll() is None:
                for x in os.listdir(parent):
                    try:
                        inside = os.listdir(os.path.join(parent, x))
                    except OSError:
                        continue
                    if ".tmp-" in x and any(".tmp-" not in y for y in inside):
                        return True
                time.sleep(0.002)
            return False

        caught = False
        for _attempt in range(5):
            p = subprocess.Popen([g.grist_cli(), "convert", "--from", "imagefolder", "--max-side", "64", root,
                                  os.path.join(parent, "1.0.0")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 preexec_fn=g.default_signal_actions)
            if finished_split(time.time() + 60, p):
                p.send_signal(signal.SIGTERM)
                caught = True
            err = p.communicate(timeout=60)[1]
            if caught:
                assert p.returncode == -signal.SIGTERM, (p.returncode, err)
                assert_clean(parent)
                break
            shutil.rmtree(parent)
            os.mkdir(parent)
        assert caught, "convert finished before a signal could reach it"


def test_output_that_is_an_input_is_refused():
    """`grist convert --from lines data.txt data.txt` used to exit 0 having replaced the
    input with its own conversion: the source data gone. Every way of naming an input as
    the output is now refused before anything is written."""
    with Workdir() as d:
        data = os.path.join(d, "data.txt")
        body = b"".join(b"line %d\n" % i for i in range(1000))
        with open(data, "wb") as f:
            f.write(body)
        os.link(data, os.path.join(d, "hard.txt"))
        os.symlink("data.txt", os.path.join(d, "soft.txt"))
        os.symlink("data.txt", os.path.join(d, "o-00001-of-00002"))
        folder = os.path.join(d, "folder")
        os.makedirs(os.path.join(folder, "sub"))
        with open(os.path.join(folder, "a"), "wb") as f:
            f.write(b"a record")
        before = sorted(os.listdir(d))
        for args in (["--from", "lines", data, data], [data, data], [data, os.path.join(d, "hard.txt")],
                     [data, os.path.join(d, "soft.txt")], [os.path.join(d, "soft.txt"), data],
                     [os.path.join(d, ".", "data.txt"), data], ["--shards", "2", data, os.path.join(d, "o")],
                     [folder, os.path.join(folder, "out.ar")], [folder, os.path.join(folder, "sub", "out.ar")]):
            rc, _, err = g.run(["convert"] + args)
            assert rc == 2, (args, rc, err)
            assert "the output is" in err and args[-1].split("/")[-1] in err, (args, err)
            with open(data, "rb") as f:
                assert f.read() == body, args
            assert sorted(os.listdir(d)) == before, (args, sorted(os.listdir(d)))
            assert sorted(os.listdir(folder)) == ["a", "sub"] and os.listdir(os.path.join(folder, "sub")) == []
        # A different file beside it is fine.
        rc, _, err = g.run(["convert", data, os.path.join(d, "data.ar")])
        assert rc == 0, err


def test_progress_line():
    with Workdir() as d:
        out = os.path.join(d, "o.ar")
        rc, _, err = g.run(["convert", "--progress", os.path.join(TF_DIR, "small.tfrecord.gz"), out])
        assert rc == 0, err
        last = err.rstrip("\n").split("\r")[-1]
        assert "60 records" in last and "100%" in last and "/s" in last, repr(err)
        rc, _, err = g.run(["convert", "--no-progress", os.path.join(TF_DIR, "small.tfrecord.gz"), out])
        assert rc == 0 and err == "", repr(err)


if __name__ == "__main__":
    g.main([test_golden_tfrecord, test_concatenated_inputs_in_order, test_parallel_writer_matches_serial_and_official,
            test_shards, test_lines, test_dir_order, test_arrayrecord_reencode, test_detection_errors,
            test_usage_errors, test_bad_inputs_leave_nothing, test_huge_length_with_valid_crc, test_unreadable_inputs, test_signal_leaves_nothing,
            test_imagefolder_signal_leaves_nothing,
            test_progress_line, test_output_that_is_an_input_is_refused])
