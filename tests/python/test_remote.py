"""grist's Python face on URLs, against a real S3 server (rclone serve s3, started here):
Reader, ArrayRecordDataSource and Loader read s3:// exactly as the local files, remote globs
expand sorted, set_remote_options() goes through the C parser, errors are grist.Error with
the URL and status."""
import errno
import os

import pytest

from conftest import grist, record, write_dataset

rs = pytest.importorskip("remote_servers")
from gristcli import Skip  # noqa: E402


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    root = tmp_path_factory.mktemp("remote")
    bucket = root / "bkt"
    bucket.mkdir()
    write_dataset(bucket / "a.ar", 500, "group_size:1,zstd:3")
    write_dataset(bucket / "b.ar", 300, "group_size:8,snappy", first=500)
    try:
        server = rs.Rclone(str(root))
    except Skip as e:
        pytest.skip(str(e))
    with rs.remote_env(server.endpoint):
        yield str(bucket)
    server.stop()
    grist.set_remote_options()


def test_reader_and_data_source(s3):
    r = grist.Reader("s3://bkt/*.ar")
    assert r.paths == ["s3://bkt/a.ar", "s3://bkt/b.ar"]
    assert len(r) == 800
    assert r.read([799, 0, 500, 3]) == [record(799), record(0), record(500), record(3)]
    assert r[42] == record(42)
    ds = grist.ArrayRecordDataSource(["s3://bkt/b.ar"])
    assert len(ds) == 300 and ds.__getitems__([0, 299]) == [record(500), record(799)]


def test_loader_matches_local(s3):
    def batches(paths):
        out = []
        loader = grist.Loader(paths, 64, seed=3, epochs=1)
        for b in loader:
            out.append(([int(i) for i in b.indices], bytes(b.data), list(b.offsets)))
            b.release()
        return out, loader.stats()

    remote, st = batches(["s3://bkt/a.ar", "s3://bkt/b.ar"])
    local, st_local = batches([os.path.join(s3, "a.ar"), os.path.join(s3, "b.ar")])
    assert remote == local
    assert st["remote"]["requests"] > 0 and st["remote"]["bytes"] > 0
    assert st["remote"]["latency_p99_us"] >= st["remote"]["latency_p50_us"] > 0
    assert set(st["remote"]["retries"]) == {"5xx", "slowdown", "reset", "timeout", "short", "token"}
    assert st_local["remote"]["requests"] == 0


def test_options_and_errors(s3):
    grist.set_remote_options(retries=1, inflight=4, coalesce=0)
    assert grist.Reader("s3://bkt/a.ar")[1] == record(1)
    with pytest.raises(ValueError, match="inflight"):
        grist.set_remote_options(inflight=0)
    with pytest.raises(ValueError, match="unknown remote option"):
        grist.set_remote_options(speed=3)
    grist.set_remote_options()
    with pytest.raises(grist.Error) as e:
        grist.Reader("s3://bkt/missing.ar")
    assert e.value.errno == errno.ENOENT and "s3://bkt/missing.ar" in str(e.value) and "404" in str(e.value)
    with pytest.raises(ValueError, match="no object matches"):
        grist.Reader("s3://bkt/*.zz")
