"""grist's Python face on URLs, against a real S3 server (rclone serve s3, started here):
Reader, ArrayRecordDataSource and Loader read s3:// exactly as the local files, remote globs
expand sorted, set_remote_options() goes through the C parser, errors are grist.Error with
the URL and status."""
import errno
import os
import shutil

import pytest

from conftest import grist, record, write_dataset

rs = pytest.importorskip("remote_servers")
from gristcli import Skip  # noqa: E402


SERVER = []
SHARDS = 100  # of 2,500 one-record chunks: each footer is larger than the 64 KiB read at open


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    root = tmp_path_factory.mktemp("remote")
    bucket = root / "bkt"
    bucket.mkdir()
    write_dataset(bucket / "a.ar", 500, "group_size:1,zstd:3")
    write_dataset(bucket / "b.ar", 300, "group_size:8,snappy", first=500)
    (bucket / "shards").mkdir()
    shard = write_dataset(bucket / "shards" / "s000.ar", 2500, "group_size:1,uncompressed")
    for i in range(1, SHARDS):
        shutil.copyfile(shard, str(bucket / "shards" / ("s%03d.ar" % i)))
    many = bucket / "many"
    many.mkdir()
    for name in ["k%d.x" % i for i in range(1100)] + ["a&b<c> \u00e9.x", "sub/k.x", "k.y", "odd[1].x", "odd1.x"]:
        (many / name).parent.mkdir(exist_ok=True)
        (many / name).touch()
    try:
        server = rs.Rclone(str(root))
    except Skip as e:
        pytest.skip(str(e))
    SERVER.append(server)
    with rs.remote_env(server.endpoint):
        yield str(bucket)
    SERVER.clear()
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
    assert st["remote"]["inflight_max"] >= 1 and st["remote"]["inflight_mean"] > 0
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


def test_expired_token_rereads_credentials(s3):
    """A session token that expires mid-run: the server's ExpiredToken makes grist read the
    environment again and sign the retry with the new token (the proxy refuses the old one
    from then on, so a retry with the cached token could never pass)."""
    p = rs.FaultProxy(SERVER[0].port)
    saved = os.environ["AWS_ENDPOINT_URL"]
    try:
        os.environ["AWS_ENDPOINT_URL"] = p.endpoint
        grist.set_remote_options(retries=2, backoff_ms=1)
        # credentials this process read before (other tests) had no token: refused as expired
        p.expired_tokens.add(None)
        os.environ["AWS_SESSION_TOKEN"] = "token-one"
        r = grist.Reader("s3://bkt/a.ar")
        assert r[499] == record(499)
        p.expired_tokens.add("token-one")
        os.environ["AWS_SESSION_TOKEN"] = "token-two"
        assert r.read([0, 250]) == [record(0), record(250)]
        sent = [f.get("x-amz-security-token") for _, f in p.heads]
        assert sent.count(None) <= 1 and p.faults == 1 + sent.count(None), sent
        assert sent[sent.index("token-two") - 1] == "token-one" and set(sent[sent.index("token-two"):]) == {
            "token-two"}, sent
    finally:
        grist.set_remote_options()
        os.environ.pop("AWS_SESSION_TOKEN", None)
        os.environ["AWS_ENDPOINT_URL"] = saved
        p.stop()


def test_glob_over_many_pages(s3):
    """A glob over 1,101 keys spans two ListObjectsV2 pages (continuation token); XML
    entities and unicode in keys come back decoded; '*' does not cross '/'; bytewise order."""
    urls = grist._grist.remote_glob("s3://bkt/many/*.x")
    want = ["s3://bkt/many/" + n for n in ["k%d.x" % i for i in range(1100)] + ["a&b<c> \u00e9.x", "odd[1].x", "odd1.x"]]
    assert urls == sorted(want, key=lambda u: u.encode()), (len(urls), urls[:3])


def test_glob_characters_in_a_key(s3):
    """A key that holds glob characters and exists is taken as it is, as a local name is
    (grist.Reader, and the CLI's argument expansion, both go through grist_remote_glob())."""
    assert grist._grist.remote_glob("s3://bkt/many/odd[1].x") == ["s3://bkt/many/odd[1].x"]
    assert grist._grist.remote_glob("s3://bkt/many/odd[12].x") == ["s3://bkt/many/odd1.x"]
    assert grist._grist.remote_glob("s3://bkt/many/odd[2].x") == []


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_reader_fds_per_remote_shard(s3):
    """A Reader over 100 remote shards holds a bounded number of descriptors (it held 4 per
    shard whose footer lies before its last 64 KiB: a dataset of 250 such shards failed to
    open under the usual 1,024 limit, as 'Couldn't connect to server', the EMFILE hidden)."""
    before = len(os.listdir("/proc/self/fd"))
    r = grist.Reader("s3://bkt/shards/*.ar")
    held = len(os.listdir("/proc/self/fd")) - before
    assert len(r) == SHARDS * 2500 and r[SHARDS * 2500 - 1] == record(2499)
    assert held <= 4 * 16 + 8, held  # at most 16 objects keep an io object (src/io/remote_read.c)


def test_reader_memory_per_remote_shard(s3):
    """A Reader over 100 remote shards costs memory of the order of the local Reader's,
    not half a megabyte more per shard."""
    before = rss_bytes()
    local = grist.Reader(os.path.join(s3, "shards", "*.ar"))
    mid = rss_bytes()
    remote = grist.Reader("s3://bkt/shards/*.ar")
    after = rss_bytes()
    assert len(local) == len(remote) == SHARDS * 2500
    # the local Reader's footprint, and the 64 KiB tail each object keeps from its opening GET
    assert after - mid < 3 * (mid - before) + SHARDS * (160 << 10), (after - mid, mid - before)


def test_reader_threads_over_remote_shards(s3):
    """Threads reading records of 100 remote shards at random: the kept io objects are
    evicted and made again under them, and every record is right."""
    import random
    import threading

    r = grist.Reader("s3://bkt/shards/*.ar")
    bad = []

    def work(seed):
        rng = random.Random(seed)
        for _ in range(60):
            i = rng.randrange(len(r))
            if r[i] != record(i % 2500):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, bad[:5]
