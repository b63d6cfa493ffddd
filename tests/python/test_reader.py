"""grist.Reader and grist.Writer: against the official array_record library where installed."""
import errno
import os
import threading

import pytest

from conftest import grist, record, write_dataset


def test_version():
    assert grist.__version__.count(".") == 2


def test_random_and_batched_reads(files, all_records):
    with grist.Reader(files) as r:
        assert len(r) == 2001
        assert r[0] == all_records[0]
        assert r[-1] == all_records[-1]
        assert r[1500] == all_records[1500]
        idx = [1999, 3, 3, 1000, 0, 1700, 17]
        assert r.read(idx) == [all_records[i] for i in idx]
        assert r.read([]) == []
        with pytest.raises(IndexError):
            r[2001]
        with pytest.raises(IndexError):
            r.read([0, 2001])
    with pytest.raises(ValueError):
        r[0]


def test_glob_and_info(files):
    folder = os.path.dirname(files[0])
    r = grist.Reader(os.path.join(folder, "*.ar"))
    assert r.paths == sorted(files)
    info = r.info()
    assert [i["records"] for i in info] == [1000, 700, 301]
    assert [i["group_size"] for i in info] == [3, 1, 16]
    assert [i["compression"] for i in info] == ["zstd", "snappy", "uncompressed"]
    assert info[0]["writer_options"].startswith("group_size:3,")
    # a bound on every record (the largest decoded chunk): at least the longest, at most a chunk
    for i in info:
        with grist.Reader(i["path"]) as one:
            longest = max(len(one[k]) for k in range(len(one)))
        assert longest <= i["max_record_bytes"] <= longest * i["group_size"] + 64 * i["group_size"]
    with pytest.raises(ValueError):
        grist.Reader(os.path.join(folder, "nothing-*.ar"))


def test_batched_reads_split_over_threads(files, all_records):
    idx = [(i * 7919) % 2001 for i in range(1500)] + [3, 3, 3]
    for threads in (1, 2, 3):
        assert grist.Reader(files, threads=threads).read(idx) == [all_records[i] for i in idx]
    with pytest.raises(ValueError):
        grist.Reader(files, threads=0)


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_share_a_reader(files, all_records, threads):
    r = grist.Reader(files, threads=threads)
    bad = []

    def work(seed):
        for k in range(300):
            i = (seed * 7919 + k * 104729) % 2001
            if r[i] != all_records[i] or r.read([i, 2000 - i]) != [all_records[i], all_records[2000 - i]]:
                bad.append(i)
    ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


def test_writer_commits_only_on_close(tmp_path):
    path = tmp_path / "w.ar"
    w = grist.Writer(str(path), "group_size:2,zstd:1")
    w.write(b"a")
    w.write(memoryview(b"bc"))
    assert not path.exists()
    w.close()
    assert grist.Reader(str(path)).read([0, 1]) == [b"a", b"bc"]
    with pytest.raises(ValueError):
        w.write(b"x")


def test_writer_with_block_exception_leaves_nothing(tmp_path):
    path = tmp_path / "x.ar"
    with pytest.raises(RuntimeError):
        with grist.Writer(str(path)) as w:
            w.write(b"1")
            raise RuntimeError("stop")
    assert os.listdir(tmp_path) == []
    w = grist.Writer(str(path))
    w.write(b"1")
    del w
    assert os.listdir(tmp_path) == []


def test_errors(tmp_path):
    with pytest.raises(grist.Error) as e:
        grist.Reader(str(tmp_path / "missing.ar"))
    assert e.value.errno == errno.ENOENT and "missing.ar" in str(e.value)
    assert isinstance(e.value, OSError)
    with pytest.raises(ValueError):
        grist.Writer(str(tmp_path / "bad.ar"), "group_size:zero")
    # A flipped byte inside a chunk: EBADMSG naming the file and the byte offset.
    path = write_dataset(tmp_path / "c.ar", 50, "group_size:5,uncompressed")
    data = bytearray(open(path, "rb").read())
    pos = data.index(record(20)[:10])
    data[pos + 4] ^= 0xFF
    open(path, "wb").write(bytes(data))
    r = grist.Reader(path)
    with pytest.raises(grist.Error) as e:
        r[20]
    assert e.value.errno == errno.EBADMSG
    assert "c.ar" in str(e.value) and "byte" in str(e.value)
    # the same through read() (the batched fetcher) and the data source; other chunks still read
    for read in (r.read, grist.ArrayRecordDataSource(path).__getitems__):
        with pytest.raises(grist.Error) as e:
            read([3, 20, 40])
        assert e.value.errno == errno.EBADMSG and "c.ar" in str(e.value) and "byte" in str(e.value)
        assert read([3, 40, 3]) == [record(3), record(40), record(3)]


def test_official_reader_reads_grist_files_and_back(tmp_path, files, all_records):
    arm = pytest.importorskip("array_record.python.array_record_module")
    path = write_dataset(tmp_path / "o.ar", 200, "group_size:7,zstd:3")
    off = arm.ArrayRecordReader(path)
    assert off.read(list(range(200))) == [record(i) for i in range(200)]
    off.close()
    theirs = str(tmp_path / "theirs.ar")
    w = arm.ArrayRecordWriter(theirs, "group_size:4,brotli")
    for i in range(100):
        w.write(record(i))
    w.close()
    assert grist.Reader(theirs).read(range(100)) == [record(i) for i in range(100)]
