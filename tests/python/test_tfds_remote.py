"""grist.tfds.data_source(data_dir=URL) against real servers started here: rclone serve s3
(SigV4 checked), nginx (plain http, no listing) and the asyncio fault proxy between grist and
rclone. The TFDS-written datasets of tests/data/tfds are served as they are; every record must
equal what TFDS itself returns for them (expected/*.pkl.gz) and a Loader over the URL source
must give the batches it gives over the local folder. Missing datasets, versions, metadata and
shards, refused credentials and unreachable servers must fail with the URL named, in bounded
time. Skips only when a server cannot start."""
import errno
import json
import os
import shutil
import pathlib
import pickle
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from conftest import grist

rs = pytest.importorskip("remote_servers")
import test_tfds as T  # noqa: E402  (the golden values and TFDS's equality)
from gristcli import Skip  # noqa: E402

BUCKET = "tfds"
PREFIX = "datasets/v"          # data_dir = s3://tfds/datasets/v
S3_DIR = "s3://%s/%s" % (BUCKET, PREFIX)


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


@pytest.fixture(scope="module")
def served():
    """A data_dir holding the golden datasets, and beside them: an older full copy of
    grist_mnist (0.5.0), a newer version with features.json alone (2.0.0, not prepared), an
    unfinished one TFDS leaves while preparing, copies whose dataset_info.json is over 64 KiB
    or empty, and a dataset whose shard is gone."""
    # not under pytest's tmp_path (0700): nginx's workers run as another user
    root = pathlib.Path(tempfile.mkdtemp(prefix="grist-tfds-remote-"))
    os.chmod(root, 0o755)
    data = root / BUCKET / PREFIX
    for name in T.NAMES:
        _copy(os.path.join(T.DATA, name), data / name)
    mnist = data / "grist_mnist"
    _copy(mnist / "1.0.0", mnist / "0.5.0")
    (mnist / "2.0.0").mkdir()
    shutil.copy(mnist / "1.0.0" / "features.json", mnist / "2.0.0")
    _copy(mnist / "1.0.0", mnist / "3.0.0.incomplete7Q2M")
    big = _copy(mnist / "1.0.0", data / "big_meta" / "1.0.0")
    info = json.loads((big / "dataset_info.json").read_text())
    info["description"] = "x" * 100000  # past the opening GET's 64 KiB: a second, If-Match GET
    (big / "dataset_info.json").write_text(json.dumps(info))
    empty = _copy(mnist / "1.0.0", data / "empty_meta" / "1.0.0")
    (empty / "dataset_info.json").write_bytes(b"")
    broken = _copy(mnist / "1.0.0", data / "broken" / "1.0.0")
    os.remove(broken / "grist_mnist-train.array_record-00001-of-00002")
    for d, _, fs in os.walk(root):
        os.chmod(d, 0o755)
        for f in fs:
            os.chmod(os.path.join(d, f), 0o644)
    try:
        server = rs.Rclone(str(root))
    except Skip as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(str(e))
    with rs.remote_env(server.endpoint):
        yield {"root": str(root), "data": str(data), "rclone": server}
    server.stop()
    shutil.rmtree(root, ignore_errors=True)
    grist.set_remote_options()


def endpoint(url):
    os.environ["AWS_ENDPOINT_URL"] = url


def assert_golden(src, name, split):
    want = T.EXPECTED[name]["splits"][split]
    assert len(src) == len(want)
    got = src.__getitems__(range(len(src)))
    for i, w in enumerate(want):
        T.assert_same(got[i], w, f"{name} {split}[{i}]")
    for i in (0, len(want) - 1):
        T.assert_same(src[i], want[i], f"{name} {split}[{i}]")


def test_records_equal_tfds(served):
    """Every recorded split of both datasets from s3:// equals TFDS's own decode."""
    for name in T.NAMES:
        for split in T.EXPECTED[name]["splits"]:
            src = grist.tfds.data_source(name, split, data_dir=S3_DIR)
            assert src.version_dir == f"{S3_DIR}/{name}/1.0.0"
            assert all(f.startswith(src.version_dir + "/") for f in src.files)
            assert_golden(src, name, split)


def test_version_lookup_by_listing(served):
    """The newest prepared version (2.0.0 lacks dataset_info.json, 3.0.0.incomplete* is not a
    version), a named one, a version folder's URL, $TFDS_DATA_DIR, a pickled copy, and gs://
    through the same listing."""
    ds = grist.tfds.data_source
    assert ds("grist_mnist", data_dir=S3_DIR + "/").version_dir == S3_DIR + "/grist_mnist/1.0.0"
    old = ds("grist_mnist:0.5.0", "test", data_dir=S3_DIR)
    assert old.version_dir == S3_DIR + "/grist_mnist/0.5.0"
    assert_golden(old, "grist_mnist", "test")
    assert len(ds(S3_DIR + "/grist_mnist/1.0.0", "train[:10%]")) == T.EXPECTED["grist_mnist"]["lengths"]["train[:10%]"]
    os.environ["TFDS_DATA_DIR"] = S3_DIR
    try:
        src = ds("grist_mnist", "test[:10]")  # $TFDS_DATA_DIR as TFDS reads it
    finally:
        os.environ.pop("TFDS_DATA_DIR")
    copy = pickle.loads(pickle.dumps(src))  # a worker process's copy reads the URLs again
    assert copy.version_dir == S3_DIR + "/grist_mnist/1.0.0"
    T.assert_same(copy.__getitems__(range(10)), T.EXPECTED["grist_mnist"]["splits"]["test"][:10])
    os.environ["GRIST_GS_ENDPOINT_URL"] = served["rclone"].endpoint
    try:
        src = ds("grist_mnist", "test", data_dir="gs://%s/%s" % (BUCKET, PREFIX))
        assert src.version_dir == "gs://%s/%s/grist_mnist/1.0.0" % (BUCKET, PREFIX)
        assert_golden(src, "grist_mnist", "test")
    finally:
        os.environ.pop("GRIST_GS_ENDPOINT_URL", None)


def test_metadata_longer_than_the_first_get(served):
    """A dataset_info.json of ~100 KB comes in two GETs (the second pinned by the first's
    ETag); past the caller's bound it is an error naming the URL, not an allocation; an
    empty one is read as empty, and is then bad JSON naming the URL."""
    assert_golden(grist.tfds.data_source("big_meta", "test", data_dir=S3_DIR), "grist_mnist", "test")
    url = S3_DIR + "/big_meta/1.0.0/dataset_info.json"
    assert len(grist._grist.remote_get(url, 1 << 20)) == os.path.getsize(
        os.path.join(served["data"], "big_meta", "1.0.0", "dataset_info.json"))
    with pytest.raises(grist.Error) as e:
        grist._grist.remote_get(url, 1000)
    assert e.value.errno == errno.EFBIG and url in str(e.value), str(e.value)
    # an empty object (a 416 to the opening GET, then a GET of all of it): b"", and bad JSON
    url = S3_DIR + "/empty_meta/1.0.0/dataset_info.json"
    assert grist._grist.remote_get(url, 1000) == b""
    with pytest.raises(ValueError, match="cannot read " + url):
        grist.tfds.data_source("empty_meta", data_dir=S3_DIR)


def assert_same_batches(a, b):
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        if isinstance(y, dict):
            assert list(x) == list(y)
            assert_same_batches([x[k] for k in y], [y[k] for k in y])
        else:
            np.testing.assert_array_equal(x, y)


FEATURES_PAD = {"png_gray_var": (19, 23, 1), "jpeg_var": (29, 29, 3), "ids": (5,), "points": (3, 2),
                "uid": (16,), "caption": (32,), "meta/source": (8,), "tokens": (6,)}


def test_loader_batches_equal_local(served):
    """The Loader over an s3:// source reads the URLs (remote stats count GETs) and gives
    the batches it gives over the local folder: both granularities, padded nested features."""
    cases = [("grist_mnist", "train+test", 32, dict(seed=42)),
             ("grist_mnist", "train+test", 32, dict(seed=9, granularity="chunk", threads=2)),
             ("grist_features", "train", 8, dict(seed=4, pad=FEATURES_PAD, skip=["names", "pair", "words"]))]
    for name, split, bs, opts in cases:
        remote = grist.tfds.data_source(name, split, data_dir=S3_DIR)
        local = grist.tfds.data_source(name, split, data_dir=served["data"])
        lr = grist.Loader(remote, bs, epochs=1, **opts)
        assert_same_batches(T.take(lr), T.take(grist.Loader(local, bs, epochs=1, **opts)))
        assert lr.stats()["remote"]["requests"] > 0


def test_checkpoint_moves_between_local_and_remote(served):
    """A Loader's state taken over the local folder resumes over the s3:// source, and back."""
    srcs = {"local": grist.tfds.data_source("grist_mnist", "train", data_dir=served["data"]),
            "s3": grist.tfds.data_source("grist_mnist", "train", data_dir=S3_DIR)}
    full = T.take(grist.Loader(srcs["local"], 32, seed=5, epochs=1))
    for first, then in (("local", "s3"), ("s3", "local")):
        loader = grist.Loader(srcs[first], 32, seed=5, epochs=1)
        head = T.take(next(loader) for _ in range(3))
        rest = T.take(grist.Loader(srcs[then], 32, seed=5, epochs=1, state=loader.get_state()))
        assert_same_batches(head + rest, full)


def test_http_needs_the_version(served):
    """http(s) has no listing: the version is named and the shard names come from
    dataset_info.json (TFDS's filepathTemplate and shard lengths)."""
    n = rs.Nginx(served["root"])
    try:
        base = "%s/%s/%s" % (n.url, BUCKET, PREFIX)
        src = grist.tfds.data_source("grist_features:1.0.0", "test", data_dir=base)
        assert src.files[0] == base + "/grist_features/1.0.0/grist_features-test.array_record-00000-of-00002"
        assert_golden(src, "grist_features", "test")
        with pytest.raises(ValueError, match="no listing"):
            grist.tfds.data_source("grist_features", data_dir=base)
        with pytest.raises(FileNotFoundError, match=r"grist_mnist/9\.9\.9/dataset_info\.json.*HTTP 404"):
            grist.tfds.data_source("grist_mnist:9.9.9", data_dir=base)
    finally:
        n.stop()


def test_missing_things_name_the_url(served):
    ds = grist.tfds.data_source
    with pytest.raises(FileNotFoundError, match=r"'nosuch' is not prepared in s3://tfds/datasets/v"):
        ds("nosuch", data_dir=S3_DIR)
    with pytest.raises(FileNotFoundError, match=r"nothing under s3://tfds/datasets/v/grist_mnist/1\.2\.3/.*"
                                                r"'0\.5\.0', '1\.0\.0', '2\.0\.0'"):
        ds("grist_mnist:1.2.3", data_dir=S3_DIR)
    with pytest.raises(FileNotFoundError, match=r"s3://tfds/datasets/v/grist_mnist/2\.0\.0/ has no "
                                                r"dataset_info\.json"):
        ds("grist_mnist:2.0.0", data_dir=S3_DIR)
    url = S3_DIR + "/grist_mnist/2.0.0/dataset_info.json"
    with pytest.raises(FileNotFoundError) as e:  # a version folder's URL, read without a listing
        ds(S3_DIR + "/grist_mnist/2.0.0")
    assert e.value.errno == errno.ENOENT and url in str(e.value) and "HTTP 404 NoSuchKey" in str(e.value)
    with pytest.raises(FileNotFoundError, match=r"split 'train': a shard is missing: "
                                                r"s3://tfds/datasets/v/broken/1\.0\.0/grist_mnist-train\."
                                                r"array_record-00001-of-00002: HTTP 404"):
        ds("broken", "train", data_dir=S3_DIR)
    with pytest.raises(FileNotFoundError, match=r"s3://nobucket/x/.*HTTP 404 NoSuchBucket"):
        ds("grist_mnist", data_dir="s3://nobucket/x")
    assert len(ds("broken", "test", data_dir=S3_DIR)) == 103  # the other split is whole


def run_python(code, **env):
    """@code in a fresh interpreter (the C library reads credentials once per process)."""
    pkg = os.path.dirname(os.path.dirname(grist.__file__))
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([pkg] + sys.path[1:]), **env)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


PROBE = ("import grist, sys\n"
         "try:\n"
         "    grist.tfds.data_source('grist_mnist', data_dir=sys.argv[1] if len(sys.argv) > 1 else %r)\n"
         "except grist.Error as e:\n"
         "    print('ERRNO', e.errno, e); sys.exit(3)\n" % S3_DIR)


def test_wrong_credentials_name_the_url(served):
    rc, out, _ = run_python(PROBE, AWS_SECRET_ACCESS_KEY="wrong-secret-key-000000")
    assert rc == 3 and "ERRNO %d" % errno.EACCES in out, out
    assert "s3://tfds/datasets/v/grist_mnist/" in out and "HTTP 403 SignatureDoesNotMatch" in out, out
    # a version folder's URL: the 403 comes on the metadata read
    rc, out, _ = run_python(PROBE.replace("data_source('grist_mnist', data_dir=",
                                          "data_source(%r, data_dir=" % (S3_DIR + "/grist_mnist/1.0.0")),
                            AWS_SECRET_ACCESS_KEY="wrong-secret-key-000000")
    assert rc == 3 and "grist_mnist/1.0.0/dataset_info.json" in out and "HTTP 403" in out, out


def test_unreachable_and_silent_servers_end_in_time(served):
    grist.set_remote_options(retries=1, connect_timeout_ms=500, timeout_ms=300, backoff_ms=10)
    dead = "http://127.0.0.1:%d" % rs.free_port()
    silent = rs.FaultProxy(served["rclone"].port, delay=30)
    try:
        for ep, why in ((dead, "after 2 attempts"), (silent.endpoint, "after 2 attempts")):
            endpoint(ep)
            t0 = time.monotonic()
            with pytest.raises(grist.Error) as e:
                grist.tfds.data_source("grist_mnist", data_dir=S3_DIR)
            assert time.monotonic() - t0 < 15
            assert "s3://tfds/datasets/v/grist_mnist/" in str(e.value) and why in str(e.value), str(e.value)
    finally:
        silent.stop()
        endpoint(served["rclone"].endpoint)
        grist.set_remote_options()


@pytest.mark.parametrize("mode", ["slowdown", "reset", "truncate"])
def test_faults_on_metadata_and_shards_are_retried(served, mode):
    """Every other request fails (the listing passes, dataset_info.json's and features.json's
    first GETs fail, ...): retried, and the same records."""
    grist.set_remote_options(retries=8, backoff_ms=10, backoff_max_ms=100, timeout_ms=5000)
    p = rs.FaultProxy(served["rclone"].port, mode=mode, every=2)
    try:
        endpoint(p.endpoint)
        src = grist.tfds.data_source("grist_mnist", "test", data_dir=S3_DIR)
        assert p.faults >= 2  # both metadata reads were refused once
        assert_golden(src, "grist_mnist", "test")
    finally:
        p.stop()
        endpoint(served["rclone"].endpoint)
        grist.set_remote_options()
