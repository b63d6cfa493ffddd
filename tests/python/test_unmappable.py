"""Files on a file system that refuses mmap (FUSE with direct I/O: `rclone mount --direct-io`,
where mmap fails with ENODEV), under the loader and under random access. Both follow one
rule (grist_io_map_file()): a mapping that io="auto" chose is an optimisation, and such a
file is read instead, the same records; a mapping the caller asked for with io="mmap" is
an error naming the file. `grist verify`, which maps a file without being asked to, reads
one it cannot map, here and under an address-space limit smaller than the file (ulimit -v,
as batch schedulers set). Skipped where FUSE cannot mount."""
import errno
import mmap
import os
import subprocess

import pytest

from conftest import grist, grist_cli, write_dataset, record
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


def verify(path, limit_as=None):
    """`grist verify PATH` (under an RLIMIT_AS of @limit_as bytes): (exit status, stdout, stderr)."""
    cli = grist_cli()
    if not cli:
        pytest.skip("the grist CLI is not built (set GRIST_CLI)")

    args = [cli, "verify", path]
    if limit_as:  # by the shell's ulimit: a preexec_fn would fork a process that may run JAX's threads
        args = ["/bin/sh", "-c", 'ulimit -v %d && exec "$@"' % (limit_as >> 10), "sh"] + args
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def test_verify_reads_a_file_it_cannot_map(mounted):
    paths, there = mounted
    for here, far in zip(paths, there):
        st, want, _ = verify(here)
        assert st == 0 and "ok:" in want, want
        st, out, err = verify(far)
        assert st == 0, err
        assert out.replace(far, here) == want
        assert far in err and "No such device" in err and "reading it" in err, err


def test_verify_reads_a_file_larger_than_its_address_space(tmp_path):
    """Before verify mapped through grist_io_map_file(), its mapping of the whole file failed
    here with ENOMEM and the file could not be verified at all."""
    limit = 64 << 20
    small = write_dataset(tmp_path / "small.ar", 10, "group_size:1,uncompressed")
    st, _, err = verify(small, limit)
    if st:  # a sanitizer's shadow memory, or a CLI linked against more: no room to test in
        pytest.skip("grist verify does not start under a %d MiB address space: %s" % (limit >> 20, err))
    big = str(tmp_path / "big.ar")
    blob = os.urandom(1 << 20)
    with grist.Writer(big, "group_size:1,uncompressed") as w:
        for i in range(80):  # 80 MiB: the mapping alone would not fit
            w.write(b"%03d" % i + blob)
    try:
        st, out, err = verify(big, limit)
        assert st == 0, err
        assert "ok: 80 records in 80 data chunks" in out, out
        assert big in err and "Cannot allocate memory" in err and "reading it" in err, err
    finally:
        os.remove(big)
