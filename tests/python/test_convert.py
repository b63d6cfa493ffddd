"""grist.convert(): the same bytes as `grist convert` with the same arguments, progress,
cancellation by an exception or Ctrl-C with nothing left behind, the GIL released, and an
output that is an input refused."""
import errno
import gzip
import os
import signal
import sys
import threading
import time

import pytest

from conftest import ROOT, grist, record
from test_gil import runs_during

TF_DIR = os.path.join(ROOT, "tests", "data", "tfrecord")


def lines_file(path, n, gz=False):
    data = b"".join(b"line %d %s\n" % (i, b"x" * (i % 50)) for i in range(n))
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(data)
    return str(path)


def folder(path):
    os.makedirs(os.path.join(path, "sub"))
    for name, body in (("b", b"second"), ("a", b"first"), ("sub/c", b"third"), ("z", record(7))):
        with open(os.path.join(path, name), "wb") as f:
            f.write(body)
    return str(path)


def read_all(path):
    return open(path, "rb").read()


def only(folder_path, names):
    assert sorted(os.listdir(folder_path)) == sorted(names)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("in")
    ar = str(d / "re.ar")
    with grist.Writer(ar, "group_size:4,snappy") as w:
        for i in range(300):
            w.write(record(i))
    return {
        "lines": lines_file(d / "a.txt", 3000),
        "lines_gz": lines_file(d / "b.txt.gz", 1000, gz=True),
        "dir": folder(d / "folder"),
        "ar": ar,
    }


# (inputs, CLI flags, keyword arguments): each converted both ways, compared byte for byte.
CASES = [
    (["lines"], [], {}),
    (["lines", "lines_gz"], ["--options", "group_size:16,zstd:5,max_parallelism:2"],
     {"options": "group_size:16,zstd:5,max_parallelism:2"}),
    (["lines"], ["--from", "lines", "--shards", "3", "--options", "brotli:3"],
     {"format": "lines", "shards": 3, "options": "brotli:3"}),
    (["dir"], [], {}),
    (["ar"], ["--options", "uncompressed,group_size:7"], {"options": "uncompressed,group_size:7"}),
    ([os.path.join(TF_DIR, "part-0.tfrecord"), os.path.join(TF_DIR, "part-1.tfrecord.gz")],
     ["--no-check", "--shards", "2"], {"check": False, "shards": 2}),
    ([os.path.join(TF_DIR, "small.tfrecord.gz")], ["--from", "tfrecord"], {"format": "tfrecord"}),
]


@pytest.mark.parametrize("names,flags,kwargs", CASES)
def test_same_bytes_as_the_cli(tmp_path, cli, inputs, names, flags, kwargs):
    paths = [inputs.get(n, n) for n in names]
    out_cli, out_py = str(tmp_path / "cli" / "o.ar"), str(tmp_path / "py" / "o.ar")
    os.mkdir(os.path.dirname(out_cli))
    os.mkdir(os.path.dirname(out_py))
    cli("convert", "--no-progress", *flags, *paths, out_cli)
    written = grist.convert(paths if len(paths) > 1 else paths[0], out_py, **kwargs)
    shards = kwargs.get("shards")
    want = [out_py] if not shards else ["%s-%05d-of-%05d" % (out_py, s, shards) for s in range(shards)]
    assert written == want
    assert sorted(os.listdir(os.path.dirname(out_cli))) == sorted(os.path.basename(w) for w in written)
    for w in written:
        assert read_all(w) == read_all(os.path.join(os.path.dirname(out_cli), os.path.basename(w))), w
    assert len(grist.Reader(written)) > 0


def test_progress_reports_and_ends_done(tmp_path, inputs):
    seen = []
    grist.convert(inputs["lines"], str(tmp_path / "o.ar"), progress=seen.append)
    assert seen[-1]["done"] and seen[-1]["records"] == 3000
    assert not any(s["done"] for s in seen[:-1])
    assert [s["records"] for s in seen] == sorted(s["records"] for s in seen)
    assert seen[-1]["input_bytes_done"] == seen[-1]["input_bytes_total"] == os.path.getsize(inputs["lines"])
    assert set(seen[0]) == {"records", "bytes", "input_bytes_done", "input_bytes_total", "seconds", "input",
                            "counting", "done"}


@pytest.mark.parametrize("shards", [None, 4])
def test_exception_in_progress_cancels_and_leaves_nothing(tmp_path, inputs, shards):
    class Stop(Exception):
        pass

    calls = []

    def progress(p):
        calls.append(p)
        if len(calls) == 2:
            raise Stop()
    with pytest.raises(Stop):
        grist.convert([inputs["lines"], inputs["lines_gz"]], str(tmp_path / "o.ar"), shards=shards,
                      progress=progress)
    assert len(calls) == 2
    only(tmp_path, [])


def big_slow_input(tmp_path):
    """Lines that brotli:11 takes seconds to compress, so a signal finds the conversion running."""
    return lines_file(tmp_path / "big.txt", 200000)


def test_ctrl_c_cancels_and_leaves_nothing(tmp_path):
    src = big_slow_input(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    # A pytest started in the background of a non-interactive shell (`cmd &`, nohup) inherits
    # SIGINT ignored, and Python then never installs the handler that raises KeyboardInterrupt:
    # the signal would be dropped before grist could see it. Put Python's own handler in place.
    was = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            grist.convert(src, str(out / "o.ar"), options="brotli:11,group_size:64")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, was)
    # Seen within the next progress call (0.1 s), plus the chunk being compressed.
    assert time.monotonic() - t0 < 20
    only(out, [])


def test_releases_the_gil(tmp_path, inputs):
    out = str(tmp_path / "o.ar")
    assert runs_during(lambda: grist.convert(inputs["lines"], out), tries=20)


def test_output_that_is_an_input_is_refused(tmp_path, inputs):
    """The defect of `grist convert --from lines data.txt data.txt`: the input replaced by its
    own conversion. grist.convert() gets the library's refusal."""
    data = lines_file(tmp_path / "data.txt", 500)
    before = read_all(data)
    os.symlink("data.txt", tmp_path / "soft.txt")
    os.link(data, tmp_path / "hard.txt")
    for src, out, kw in ((data, data, {"format": "lines"}), (data, tmp_path / "soft.txt", {}),
                         (tmp_path / "soft.txt", data, {}), (data, tmp_path / "hard.txt", {}),
                         (str(tmp_path / "folder"), str(tmp_path / "folder" / "o.ar"), {})):
        if "folder" in str(src) and not os.path.exists(src):
            folder(src)
        with pytest.raises(ValueError, match="the output is"):
            grist.convert(src, out, **kw)
        assert read_all(data) == before
    only(tmp_path, ["data.txt", "soft.txt", "hard.txt", "folder"])


def test_errors(tmp_path, inputs):
    with open(os.path.join(TF_DIR, "small.tfrecord"), "rb") as f:
        bad = bytearray(f.read())
    bad[-10] ^= 0x40
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(bad))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(grist.Error) as e:
        grist.convert(str(path), str(out / "o.ar"))
    assert e.value.errno == errno.EBADMSG and str(path) in str(e.value)
    with pytest.raises(grist.Error) as e:
        grist.convert(str(tmp_path / "missing.txt"), str(out / "o.ar"), format="lines")
    assert e.value.errno == errno.ENOENT
    for kw in ({"format": "csv"}, {"options": "group_size:0"}, {"shards": 0}, {"shards": 100000}):
        with pytest.raises(ValueError):
            grist.convert(inputs["lines"], str(out / "o.ar"), **kw)
    with pytest.raises(ValueError, match="no file matches"):
        grist.convert(str(tmp_path / "nothing-*.txt"), str(out / "o.ar"))
    with pytest.raises(TypeError):
        grist.convert(inputs["lines"], str(out / "o.ar"), progress=3)
    only(out, [])
