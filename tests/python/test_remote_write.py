"""grist.Writer to s3:// against a real S3 server (rclone serve s3, started here): what it
writes reads back equal, nothing is at the key before close, and abort() (or an exception
in the with block, Ctrl-C's KeyboardInterrupt too) leaves no object and no multipart upload."""
import os
import signal
import time

import pytest

from conftest import grist, record

rs = pytest.importorskip("remote_servers")
from gristcli import Skip  # noqa: E402


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    root = tmp_path_factory.mktemp("remote-write")
    (root / "bkt").mkdir()
    try:
        server = rs.Rclone(str(root))
    except Skip as e:
        pytest.skip(str(e))
    with rs.remote_env(server.endpoint):
        grist.set_remote_options(part="5MiB", upload_inflight=2)
        yield server, root / "bkt"
    grist.set_remote_options()
    server.stop()


def uploads_left(server):
    return rs.multipart_uploads(server, "bkt")


def test_writer_to_s3_reads_back(s3, tmp_path):
    """7.5 MB of records (2 parts of 5 MiB): the object is byte-identical to the same writes to a
    local file, and absent until close."""
    server, bucket = s3
    recs = [record(i) * 300 for i in range(2500)]
    with grist.Writer(str(tmp_path / "l.ar"), "group_size:16,uncompressed") as w:
        for r in recs:
            w.write(r)
    w = grist.Writer("s3://bkt/w.ar", "group_size:16,uncompressed")
    for r in recs:
        w.write(r)
    assert not (bucket / "w.ar").exists()
    w.close()
    assert (bucket / "w.ar").read_bytes() == (tmp_path / "l.ar").read_bytes()
    assert grist.Reader("s3://bkt/w.ar").read([0, 2499]) == [recs[0], recs[2499]]
    assert uploads_left(server) == []


def test_abort_leaves_nothing(s3):
    server, bucket = s3
    w = grist.Writer("s3://bkt/gone.ar", "group_size:16,uncompressed")
    for i in range(2500):
        w.write(record(i) * 300)
    w.abort()
    with pytest.raises(RuntimeError):
        with grist.Writer("s3://bkt/gone2.ar", "group_size:16,uncompressed") as w:
            for i in range(2500):
                w.write(record(i) * 300)
            raise RuntimeError("the caller failed")
    assert not (bucket / "gone.ar").exists() and not (bucket / "gone2.ar").exists()
    assert not [n for n in os.listdir(bucket) if n.startswith(".rclone_temp_multipart")]
    assert uploads_left(server) == []


def test_ctrl_c_aborts(s3):
    """SIGINT while a `with grist.Writer("s3://...")` block writes, once rclone holds parts of
    the upload: Python's own handler raises KeyboardInterrupt on the main thread, the block's
    exit aborts the upload (the library installs no signal handling of its own in a Python
    process), and nothing is left."""
    server, bucket = s3

    def parts_held():
        return any(".rclone_temp_multipart" in n for _, _, names in os.walk(bucket) for n in names)
    # Python ignores SIGINT when its parent did (a background job): put its own handler in place
    was = signal.signal(signal.SIGINT, signal.default_int_handler)
    sent = False
    try:
        with pytest.raises(KeyboardInterrupt):
            with grist.Writer("s3://bkt/ctrl-c.ar", "group_size:16,uncompressed") as w:
                deadline = time.monotonic() + 60
                i = 0
                while time.monotonic() < deadline:
                    w.write(record(i) * 300)
                    i += 1
                    if i % 50 == 0 and parts_held():
                        sent = True
                        os.kill(os.getpid(), signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, was)
    assert sent
    assert not (bucket / "ctrl-c.ar").exists()
    assert not parts_held()
    assert uploads_left(server) == []


def test_abort_lets_other_threads_run(s3):
    """abort() against a server that refuses the AbortMultipartUpload (500 every time) takes
    its retries, seconds of network: Python's other threads go on meanwhile (the GIL is let
    go), and nothing is committed at the key."""
    import threading
    server, bucket = s3
    # 503 SlowDown with Retry-After: 1 to every abort: two retries make the abort last 2 s
    # whatever the backoff's jitter
    p = rs.FaultProxy(server.port, mode="slowdown", retry_after=1,
                      select=lambda line, fields: line.startswith("DELETE ") and "uploadId=" in line)
    saved = os.environ["AWS_ENDPOINT_URL"]
    ticks, stop = [], threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)
    t = threading.Thread(target=tick)
    try:
        os.environ["AWS_ENDPOINT_URL"] = p.endpoint
        grist.set_remote_options(part="5MiB", upload_inflight=2, retries=2, backoff_max_ms=2000)
        w = grist.Writer("s3://bkt/slow-abort.ar", "group_size:16,uncompressed")
        for i in range(2500):  # 7.5 MB: one part uploaded, the upload exists at the server
            w.write(record(i) * 300)
        t.start()
        t0 = time.monotonic()
        w.abort()
        t1 = time.monotonic()
    finally:
        stop.set()
        if t.is_alive():
            t.join()
        os.environ["AWS_ENDPOINT_URL"] = saved
        grist.set_remote_options(part="5MiB", upload_inflight=2)
        p.stop()
    try:
        assert p.faults == 3 and t1 - t0 >= 1.5, (p.faults, t1 - t0)
        inside = [x for x in ticks if t0 + 0.1 < x < t1 - 0.1]
        assert len(inside) >= (t1 - t0) * 10, (len(inside), t1 - t0)
        assert not (bucket / "slow-abort.ar").exists()
        # the upload the server would not abort stays listed
        assert uploads_left(server) == ["slow-abort.ar"], uploads_left(server)
    finally:  # cleared for the module's other tests, whatever failed above
        rs.clear_multipart_uploads(server, "bkt")
    assert uploads_left(server) == []


def test_bad_targets(s3):
    with pytest.raises(ValueError, match="s3:// and gs://"):
        grist.Writer("http://127.0.0.1:1/x.ar")
    with pytest.raises(ValueError, match="part=3 MiB"):
        grist.set_remote_options(part="3MiB")


def test_from_parquet_to_s3(s3, tmp_path):
    """grist.tfds.from_parquet(out_dir="s3://..."): every file byte-identical to the same call on
    a local folder, a second split added as locally, grist.tfds reads it back; a bad row
    after a shard was uploaded leaves nothing (the shard deleted again, no metadata)."""
    P = pytest.importorskip("test_parquet")
    server, bucket = s3
    t = P.table(n=40)
    files = P.write_files(tmp_path, t)
    local = str(tmp_path / "d" / "1.0.0")
    for out in (local, "s3://bkt/d/1.0.0"):
        P.from_parquet(files, out, features=P.FEATURES, shards=2)
        P.from_parquet(files[:1], out, split="test", features=P.FEATURES, shards=3)
    served = bucket / "d" / "1.0.0"
    assert sorted(os.listdir(served)) == sorted(os.listdir(local))
    for name in os.listdir(local):
        assert (served / name).read_bytes() == open(os.path.join(local, name), "rb").read(), name
    import grist.tfds
    a, b = grist.tfds.data_source(local, "train"), grist.tfds.data_source("s3://bkt/d/1.0.0", "train")
    assert len(a) == len(b) == 40 and a[39]["label"] == b[39]["label"]
    bad = t.set_column(t.schema.get_field_index("label"), "label",
                       P.pa.array([5 if i == 30 else v for i, v in enumerate(t.column("label").to_pylist())]))
    with pytest.raises(P.ConversionError, match="row"):
        P.from_parquet(P.write_files(tmp_path, bad), "s3://bkt/e/1.0.0", features=P.FEATURES, shards=2)
    assert not (bucket / "e").exists() or not os.listdir(bucket / "e" / "1.0.0")
    assert uploads_left(server) == []
