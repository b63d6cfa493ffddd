"""Files on a file system that refuses mmap (FUSE with direct I/O: `rclone mount --direct-io`,
where mmap fails with ENODEV), under the loader and under random access. Both follow one
rule (grist_io_map_file()): a mapping that io="auto" chose is an optimisation, and such a
file is read instead, the same records; a mapping the caller asked for with io="mmap" is
an error naming the file. Skipped where FUSE cannot mount."""
import errno
import mmap
import os

import pytest

from conftest import grist, write_dataset, record
import remote_servers as rs

N = 500


@pytest.fixture(scope="module")
def mounted(tmp_path_factory):
    """(the dataset's files on disk, the same files through the mount)."""
    d = tmp_path_factory.mktemp("unmappable")
    os.mkdir(d / "src")
    os.mkdir(d / "mnt")
    # small chunks, a small dataset: io="auto" maps it whether cached or not (grist_io_map_small())
    names = ["a.ar", "b.ar", "c.ar"]
    paths = [write_dataset(d / "src" / n, N // 3 + (k < N % 3), "group_size:1,zstd:3",
                           first=k * (N // 3) + min(k, N % 3)) for k, n in enumerate(names)]
    try:
        m = rs.RcloneMount(str(d / "src"), str(d / "mnt"), ["--direct-io"])
    except rs.Skip as e:
        pytest.skip(str(e))
    try:
        there = [str(d / "mnt" / n) for n in names]
        with open(there[0], "rb") as f:
            try:
                mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ).close()
                pytest.skip("this kernel maps files of a FUSE mount with direct I/O")
            except OSError as e:
                assert e.errno == errno.ENODEV, e
        yield paths, there
    finally:
        m.stop()


def records(loader):
    out = []
    for b in loader:
        with b:
            offs = b.offsets.tolist()
            data = b.data.tobytes()
            out += [data[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
    return out


@pytest.mark.parametrize("engine", ["uring", "pread"])
def test_auto_reads_a_file_it_cannot_map(mounted, engine, caplog):
    paths, there = mounted
    want = [record(i) for i in range(N)]
    on_disk = grist.Loader(paths, 64, epochs=1, shuffle=False, engine=engine)
    assert records(on_disk) == want
    assert on_disk.stats()["read_mode"] == "mmap"  # auto maps this dataset where it can
    with caplog.at_level("INFO", logger="grist"):
        l = grist.Loader(there, 64, epochs=1, shuffle=False, engine=engine)
    assert records(l) == want
    assert l.stats()["read_mode"] == "buffered"
    # why, once for the three files
    told = [r.getMessage() for r in caplog.records if "cannot map" in r.getMessage()]
    assert len(told) == 1 and there[0] in told[0] and "No such device" in told[0], told


def test_mmap_asked_for_fails_naming_the_file(mounted):
    _, there = mounted
    with pytest.raises(grist.Error) as e:
        records(grist.Loader(there, 64, epochs=1, shuffle=False, io="mmap"))
    assert e.value.errno == errno.ENODEV
    assert there[0] in str(e.value) and "io=mmap" in str(e.value), str(e.value)


def test_random_access_reads_a_file_it_cannot_map(mounted):
    _, there = mounted
    with grist.Reader(there) as r:
        assert r.read([N - 1, 0, 7, 7, 250]) == [record(i) for i in (N - 1, 0, 7, 7, 250)]
        assert r[123] == record(123)
