"""verify="headers" against the default "all", end to end: the Loader on every engine and read
mode, ArrayRecordDataSource, Reader and `grist load --verify`, on sound and corrupted files."""
import functools
import os
import pickle
import random
import shutil
import subprocess
import sys

import pytest

from conftest import grist, grist_cli

# 70,000-byte records: every one crosses a 64 KiB block header, as in the cold bench's files
N, SIZE = 24, 70000


@functools.lru_cache(maxsize=None)
def big(i):
    rng = random.Random(i)
    return bytes(rng.randrange(256) for _ in range(SIZE))


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    d = tmp_path_factory.mktemp("verify")
    path = str(d / "sound.ar")
    with grist.Writer(path, "group_size:1,uncompressed") as w:
        for i in range(N):
            w.write(big(i))
    zpath = str(d / "zstd.ar")
    with grist.Writer(zpath, "group_size:3,zstd:3") as w:
        for i in range(N):
            w.write(big(i)[:3000])
    return path, zpath


def corrupt(src, dst, offset, bit=0x40):
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ bit]))
    return str(dst)


def value_offset(path, i, at=30000):
    """The file offset of byte `at` of record i (16 bytes there found once in the file)."""
    data = open(path, "rb").read()
    needle = big(i)[at:at + 16]
    off = data.find(needle)
    assert off > 0 and data.find(needle, off + 1) < 0
    return off


def batches(path, verify, **kw):
    with grist.Loader(path, batch_size=5, seed=7, epochs=2, verify=verify, **kw) as loader:
        return [b.records() for b in loader]


# every engine, and each way the async engine reads (ref always reads buffered)
ENGINES = [("uring", "direct"), ("uring", "buffered"), ("uring", "mmap"), ("pread", "mmap"), ("pread", "auto"),
           ("ref", "auto")]


@pytest.mark.parametrize("engine,io", ENGINES)
def test_headers_reads_the_same_as_all(sound, engine, io):
    for path in sound:
        assert batches(path, "headers", engine=engine, io=io) == batches(path, "all", engine=engine, io=io)
    path, zpath = sound
    src = grist.ArrayRecordDataSource(path, verify="headers")
    assert [src[i] for i in range(N)] == [big(i) for i in range(N)]
    assert src.__getitems__([5, 3, 5]) == [big(5), big(3), big(5)]
    r = grist.Reader(zpath, verify="headers")
    assert r.read(list(range(N))) == [big(i)[:3000] for i in range(N)]


def test_checkpoint_resumes_under_either_setting(sound):
    """verify never changes what is delivered, so it is no part of a checkpoint: a state saved
    under one setting resumes under the other with exactly the batches that were left."""
    path = sound[1]
    whole = batches(path, "all")
    for first, then in (("all", "headers"), ("headers", "all")):
        with grist.Loader(path, batch_size=5, seed=7, epochs=2, verify=first) as loader:
            head = [next(loader).records() for _ in range(3)]
            state = loader.get_state()
        with grist.Loader(path, batch_size=5, seed=7, epochs=2, verify=then, state=state) as loader:
            assert head + [b.records() for b in loader] == whole, (first, then)


def test_flipped_value_byte(sound, tmp_path):
    path = corrupt(sound[0], tmp_path / "v.ar", value_offset(sound[0], 9))
    # the default: an error naming the file and the chunk's byte offset
    with pytest.raises(grist.Error, match=r"v\.ar: byte \d+: chunk data hash mismatch"):
        grist.ArrayRecordDataSource(path)[9]
    # headers: what it gives up, plainly: record 9 arrives with one bit flipped
    got = grist.ArrayRecordDataSource(path, verify="headers")[9]
    want = big(9)
    diff = [k for k in range(SIZE) if got[k] != want[k]]
    assert diff == [30000] and got[30000] ^ want[30000] == 0x40
    # every engine and read mode delivers it; under "all" each refuses it, naming file and chunk
    for engine, io in ENGINES:
        flat = [r for b in batches(path, "headers", engine=engine, io=io) for r in b]
        assert flat.count(got) == 2 and big(9) not in flat and len(flat) == 2 * N, (engine, io)
        with pytest.raises(grist.Error, match=r"v\.ar: byte \d+: chunk data hash mismatch"):
            batches(path, "all", engine=engine, io=io)
    # random access: batched reads (the fetcher, on its threads too) follow the reader
    src = grist.ArrayRecordDataSource(path, verify="headers")
    assert src.__getitems__([9, 2, 9]) == [got, big(2), got]
    assert grist.Reader(path, threads=2, verify="headers").read([9, 0]) == [got, big(0)]
    with pytest.raises(grist.Error, match="data hash mismatch"):
        grist.Reader(path, threads=2).read([9, 0])


def test_data_source_keeps_verify_across_processes(sound, tmp_path):
    """Grain hands a data source to its worker processes pickled: the setting goes with it,
    for an element and for a batch of them, and the default stays the default."""
    path = corrupt(sound[0], tmp_path / "p.ar", value_offset(sound[0], 9))
    child = ("import pickle, sys\n"
             "src = pickle.loads(sys.stdin.buffer.read())\n"
             "try:\n"
             "    got = [src[9], src.__getitems__([9, 1])[0]]\n"
             "    sys.stdout.write(repr(src) + ' ' + ' '.join('%d:%d' % (len(g), g[30000]) for g in got))\n"
             "except Exception as e:\n"
             "    sys.stdout.write(repr(src) + ' error: ' + str(e))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(grist.__file__)),
                                                                  os.environ.get("PYTHONPATH")] if p))
    run = lambda src: subprocess.run([sys.executable, "-c", child], input=pickle.dumps(src), capture_output=True,
                                     env=env, timeout=120)
    p = run(grist.ArrayRecordDataSource(path, verify="headers"))
    flipped = big(9)[30000] ^ 0x40
    assert p.returncode == 0 and p.stdout.decode() == "grist.ArrayRecordDataSource(%r, verify='headers') %d:%d %d:%d" % (
        [path], SIZE, flipped, SIZE, flipped), (p.stdout, p.stderr[-2000:])
    p = run(grist.ArrayRecordDataSource(path))
    assert p.returncode == 0 and "error: " in p.stdout.decode() and "data hash mismatch" in p.stdout.decode(), (
        p.stdout, p.stderr[-2000:])


def chunk_begin(path, i):
    """The file offset of record i's chunk (group_size 1): its header precedes the value bytes."""
    # the chunk header (40 bytes) and a 5-byte simple-chunk preamble come just before the values;
    # records start far enough from 64 KiB block edges here to make that exact (checked below)
    off = value_offset(path, i, at=0)
    return off - 5 - 40


def test_headers_still_checks_headers_and_structure(sound, tmp_path):
    path = sound[0]
    begin = chunk_begin(path, 4)
    data = open(path, "rb").read()
    assert int.from_bytes(data[begin + 8:begin + 16], "little") == SIZE + 5  # data_size
    assert data[begin + 24:begin + 26] == b"r\x01"  # a simple chunk of 1 record
    assert data[begin + 40] == 0  # uncompressed
    cases = {
        "chunk header": begin + 16,      # its data_hash field: covered by the header hash
        "block header": 65536 * 3 + 2,   # a block header's hash
        "sizes": begin + 40 + 2,         # record 4's size varint: the sizes no longer add up
    }
    for what, off in cases.items():
        bad = corrupt(path, tmp_path / ("h-%s.ar" % what.replace(" ", "-")), off, bit=0x01)
        for verify in ("all", "headers"):
            for engine in ("uring", "ref"):
                with pytest.raises(grist.Error, match=r"h-.*\.ar"):
                    batches(bad, verify, engine=engine)


def test_verify_refused_words(sound):
    with pytest.raises(ValueError, match="verify: 'none' is not one of all, headers"):
        grist.Loader(sound[0], batch_size=2, verify="none")
    with pytest.raises(ValueError, match="verify"):
        grist.ArrayRecordDataSource(sound[0], verify="data")


def test_cli_verify(sound, tmp_path):
    cli = grist_cli()
    if not cli:
        pytest.skip("the grist CLI is not built (set GRIST_CLI)")
    path = sound[0]

    def load(p, verify):
        return subprocess.run([cli, "load", p, "--batch-size", "4", "--epochs", "2", "--digest",
                               "--verify", verify], capture_output=True, text=True, timeout=120)
    a, h = load(path, "all"), load(path, "headers")
    assert a.returncode == 0 and h.returncode == 0 and a.stdout == h.stdout and a.stdout
    bad = corrupt(path, tmp_path / "c.ar", value_offset(path, 2))
    a, h = load(bad, "all"), load(bad, "headers")
    assert a.returncode == 1 and "c.ar: byte" in a.stderr and "data hash mismatch" in a.stderr
    assert h.returncode == 0 and h.stdout != load(path, "all").stdout
