"""Remote datasets end to end against real servers started here: rclone serve s3 (SigV4
checked), nginx (plain http), and an asyncio fault proxy between grist and rclone.

Every command's output from a URL must be byte-identical to the same command on the
local files, under delay, 503 SlowDown, resets and truncated bodies; wrong keys, no
keys, a missing key or bucket, an unreachable endpoint and an object replaced mid-read
must fail with the right message, exit 1, and never hang. Skips (77) when rclone cannot
start here.
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import gristcli as g
from gristcli import Skip
import remote_servers as rs

TMP = tempfile.mkdtemp(prefix="grist-remote-")
ROOT = os.path.join(TMP, "root")
BUCKET = "bkt"
DATA = os.path.join(ROOT, BUCKET)
ODD = "dir with space/\u00fc+plus=1.ar"   # a key with a space, unicode, '+' and '='
SERVERS = {}
CORRUPT_AT = [70, 65536 + 5, 40000, 65536 + 30, 100000]


def rec(i):
    return b"record-%06d-" % i + bytes((i * 7 + k) % 251 for k in range(i % 300))


def local(name):
    return os.path.join(DATA, name)


def s3(name):
    return "s3://%s/%s" % (BUCKET, name)


def setenv(endpoint, ak=rs.ACCESS_KEY, sk=rs.SECRET_KEY):
    for k in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "GRIST_REMOTE_OPTIONS"):
        os.environ.pop(k, None)
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    os.environ["AWS_REGION"] = "us-east-1"
    for k, v in (("AWS_ACCESS_KEY_ID", ak), ("AWS_SECRET_ACCESS_KEY", sk)):
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def setup():
    os.chmod(TMP, 0o755)  # nginx's workers run as another user
    os.makedirs(os.path.join(DATA, "dir with space"))
    g.write_records(local("a.ar"), "group_size:1,zstd:3", [rec(i) for i in range(1200)])
    g.write_records(local("b.ar"), "group_size:64,snappy", [rec(i) for i in range(1200, 1800)])
    g.write_records(local(ODD), "group_size:4,uncompressed", [rec(i) for i in range(200)])
    os.makedirs(os.path.join(DATA, "seq"))
    # b.ar with one byte flipped: in a chunk header, a block header, record data, the footer, the postscript
    os.makedirs(os.path.join(DATA, "corrupt"))
    with open(local("b.ar"), "rb") as f:
        good = f.read()
    for at in CORRUPT_AT + [len(good) - 100]:
        with open(local("corrupt/%d.ar" % at), "wb") as f:
            f.write(good[:at] + bytes([good[at] ^ 0x10]) + good[at + 1:])
    g.write_records(local("seq/big.ar"), "group_size:64,uncompressed", [bytes([i % 251]) * 4000 for i in range(12000)])
    g.write_records(local("seq/seq.ar"), "group_size:1,uncompressed", [rec(i) * 4 for i in range(2000)])
    os.makedirs(os.path.join(DATA, "window"))
    r = random.Random(21)
    recs = [r.randbytes(300).hex().encode() for _ in range(20000)]
    g.write_records(local("window/g1.ar"), "group_size:1,uncompressed", recs)
    g.write_records(local("window/g64.ar"), "group_size:64,uncompressed", recs)
    # 64,000 chunks of 600 bytes (38 MB): four times the 16,384 reads a queue depth once held
    g.write_records(local("window/g1big.ar"), "group_size:1,uncompressed",
                    [r.randbytes(300).hex().encode() for _ in range(64000)])
    SERVERS["rclone"] = rs.Rclone(ROOT)
    setenv(SERVERS["rclone"].endpoint)


LOADS = [
    ["--batch-size", 32, "--seed", 7, "--digest"],
    ["--batch-size", 256, "--seed", 1, "--epochs", 2, "--digest", "--threads", 2],
    ["--batch-size", 16, "--granularity", "chunk", "--seed", 3, "--digest"],
    ["--batch-size", 8, "--engine", "ref", "--seed", 5, "--digest"],
]


def same(args_remote, args_local):
    out_r = g.run_ok(args_remote)
    out_l = g.run_ok(args_local)
    assert out_r == out_l, (args_remote, len(out_r), len(out_l))
    return out_r


def test_every_command_matches_local():
    """info, cat, get, verify, load (both engines, both granularities), convert: URL = local."""
    for name in ("a.ar", "b.ar"):
        same(["cat", "--hex", s3(name)], ["cat", "--hex", local(name)])
        same(["get", "--hex", s3(name), "--", 0, 5, 77, 599], ["get", "--hex", local(name), "--", 0, 5, 77, 599])
        out = g.run_ok(["info", s3(name)])
        assert g.info_records(out) == g.info_records(g.run_ok(["info", local(name)]))
        assert b"ok" in g.run_ok(["verify", s3(name)])
    for a in LOADS:
        same(["load", s3("a.ar"), s3("b.ar")] + a, ["load", local("a.ar"), local("b.ar")] + a)
    out = os.path.join(TMP, "conv.ar")
    g.run_ok(["convert", s3("a.ar"), out])
    assert g.run_ok(["cat", out]) == g.run_ok(["cat", local("a.ar")])


def test_glob_and_odd_keys():
    """s3://bkt/*.ar lists sorted like a local glob; keys with ' ', unicode, '+' and '=' sign and read."""
    a = ["--batch-size", 64, "--seed", 11, "--digest"]
    same(["load", s3("*.ar")] + a, ["load", local("a.ar"), local("b.ar")] + a)
    same(["cat", "--hex", s3(ODD)], ["cat", "--hex", local(ODD)])
    same(["cat", "--hex", s3("dir with space/*.ar")], ["cat", "--hex", local(ODD)])
    rc, _, err = g.run(["info", s3("*.zz")])
    assert rc == 2 and "no object matches" in err, (rc, err)


def test_gs_urls():
    """gs:// through the same signer (the GCS XML API with HMAC keys), pointed at rclone."""
    os.environ["GRIST_GS_ENDPOINT_URL"] = SERVERS["rclone"].endpoint
    try:
        same(["cat", "--hex", "gs://%s/*.ar" % BUCKET], ["cat", "--hex", local("a.ar"), local("b.ar")])
        a = ["--batch-size", 64, "--seed", 4, "--digest"]
        same(["load", "gs://%s/b.ar" % BUCKET] + a, ["load", local("b.ar")] + a)
    finally:
        os.environ.pop("GRIST_GS_ENDPOINT_URL", None)


def test_python_paths():
    """The C API through Python when the package is importable: Reader, data source, Loader."""
    try:
        import grist  # noqa: F401
    except ImportError:
        raise Skip("the grist Python package is not importable")
    r = grist.Reader(s3("*.ar"))
    assert r.paths == [s3("a.ar"), s3("b.ar")] and len(r) == 1800
    assert r.read([0, 1799, 1200]) == [rec(0), rec(1799), rec(1200)]
    ds = grist.ArrayRecordDataSource(s3(ODD))
    assert ds.__getitems__([3, 199]) == [rec(3), rec(199)]
    seen = []
    loader = grist.Loader([s3("a.ar"), s3("b.ar")], 500, seed=0, epochs=1)
    for b in loader:
        seen.extend(int(i) for i in b.indices)
        b.release()
    assert sorted(seen) == list(range(1800))
    assert loader.stats()["remote"]["requests"] > 0


def with_proxy(mode, every=3, delay=0.0, cause=None):
    p = rs.FaultProxy(SERVERS["rclone"].port, mode=mode, every=every, delay=delay)
    try:
        setenv(p.endpoint)
        for a in (LOADS[0], LOADS[2]):
            same(["load", s3("a.ar"), s3("b.ar"), "--remote", "backoff_ms:10,backoff_max_ms:200,retries:8",
                  "--stats"] + a, ["load", local("a.ar"), local("b.ar")] + a)
        same(["cat", "--hex", s3("b.ar"), "--remote", "backoff_ms:10,retries:8"], ["cat", "--hex", local("b.ar")])
        assert mode is None or p.faults > 0
        if cause:
            _, _, err = g.run(["load", s3("a.ar"), "--batch-size", 64, "--stats", "--remote",
                               "backoff_ms:10,retries:8,coalesce:0,split:4096"])
            assert (" %s 0" % cause) not in err.split("remote retries:")[1], err
    finally:
        p.stop()
        setenv(SERVERS["rclone"].endpoint)


def test_faults_give_identical_bytes():
    """Delay, 503 SlowDown with Retry-After, 500/502/504, resets, truncated bodies and an expired token:
    retried, the same bytes, and --stats counts the retries by cause."""
    with_proxy(None, delay=0.005)
    with_proxy("slowdown", every=4, cause="slowdown")
    with_proxy("5xx", every=4, cause="5xx")  # 500, 502 and 504
    with_proxy("reset", every=5, cause="reset")
    with_proxy("truncate", every=5, cause="short")
    with_proxy("expired", every=6, cause="token")  # credentials re-read, the request signed again


def test_threads_same_digest():
    """1, 2 and 4 engine threads hand their reads to one GET scheduler: the same --digest as
    the local files through 503 SlowDown, resets, truncated bodies and bench/delay_proxy's
    20 ms, at both granularities (the batches do not depend on which GETs carried what)."""
    proxies = [lambda: rs.FaultProxy(SERVERS["rclone"].port, mode=m, every=4) for m in ("slowdown", "reset", "truncate")]
    proxies.append(lambda: rs.DelayProxy(SERVERS["rclone"].port, delay=0.02))
    for make in proxies:
        p = make()
        try:
            setenv(p.endpoint)
            for threads in (1, 2, 4):
                for a in (["--granularity", "chunk"], []):
                    args = ["--batch-size", 32, "--seed", 9, "--threads", threads, "--digest"] + a
                    same(["load", s3("a.ar"), s3("b.ar"), "--remote", "backoff_ms:10,backoff_max_ms:200,retries:8"]
                         + args, ["load", local("a.ar"), local("b.ar")] + args)
            assert getattr(p, "faults", 1) > 0
        finally:
            p.stop()
            setenv(SERVERS["rclone"].endpoint)


def test_errors_name_url_status_and_code():
    g.expect_error(["info", s3("missing.ar")], [s3("missing.ar"), "HTTP 404", "NoSuchKey"])
    g.expect_error(["cat", "s3://nobucket/a.ar"], ["s3://nobucket/a.ar", "HTTP 404", "NoSuchBucket"])
    setenv(SERVERS["rclone"].endpoint, sk="wrong-secret-key-000000")
    try:
        g.expect_error(["load", s3("a.ar")], [s3("a.ar"), "HTTP 403", "SignatureDoesNotMatch"])
    finally:
        setenv(SERVERS["rclone"].endpoint)
    setenv(SERVERS["rclone"].endpoint, ak=None, sk=None)
    try:
        g.expect_error(["info", s3("a.ar")], [s3("a.ar"), "HTTP 400"])
    finally:
        setenv(SERVERS["rclone"].endpoint)
    setenv("http://127.0.0.1:%d" % rs.free_port())
    try:
        g.expect_error(["info", s3("a.ar"), "--remote", "retries:2,backoff_ms:10,connect_timeout_ms:500"],
                     [s3("a.ar"), "after 3 attempts"], timeout=20)
    finally:
        setenv(SERVERS["rclone"].endpoint)
    # Content-Range headers grist cannot act on: refused, saying why, never read as asked or as absent
    for mode, every, args, words in (
            # not the range asked for
            ("badrange", 2, ["cat", s3("b.ar")], ["the server sent"]),
            # junk after it: malformed, and quoted
            ("junkrange", 2, ["cat", s3("b.ar")], ["a malformed Content-Range header: 'bytes ", "xyz'"]),
            # a length of "*": the opening GET cannot learn the object's size from it
            ("starlen", 1, ["info", s3("b.ar")], ["without the object's size"])):
        p = rs.env_proxy(SERVERS["rclone"], setenv, mode=mode, every=every)
        try:
            g.expect_error(args, [args[1]] + words)
        finally:
            rs.stop_env_proxy(p)
    # ... but the reads after the opening can do without it: the size is known by then
    p = rs.env_proxy(SERVERS["rclone"], setenv, mode="starlen_reads", every=1)
    try:
        same(["cat", "--hex", s3("b.ar")], ["cat", "--hex", local("b.ar")])
        assert p.faults > 0
    finally:
        rs.stop_env_proxy(p)
    # a server that never answers: the request timeout ends it
    p = rs.FaultProxy(SERVERS["rclone"].port, delay=30)
    try:
        setenv(p.endpoint)
        g.expect_error(["info", s3("a.ar"), "--remote", "retries:1,timeout_ms:300,backoff_ms:10"],
                     [s3("a.ar"), "after 2 attempts"], timeout=20)
    finally:
        p.stop()
        setenv(SERVERS["rclone"].endpoint)


def test_object_replaced_mid_read():
    """A load whose object is rewritten under it fails naming it: never a mix of versions."""
    name = "victim.ar"
    g.write_records(local(name), "group_size:1,zstd:3", [rec(i) for i in range(2000)])
    p = rs.env_proxy(SERVERS["rclone"], setenv, delay=0.02)
    cmd = [g.grist_cli(), "load", s3(name), "--batch-size", "4", "--digest", "--remote",
           "inflight:1,coalesce:0,split:4096"]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)
        # same records, another codec: another ETag (and size) under the same key
        tmp = os.path.join(TMP, name + ".new")
        g.write_records(tmp, "group_size:1,snappy", [rec(i) for i in range(2000)])
        os.replace(tmp, local(name))
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("hang: the load went on past 60 s after the object changed")
        err = err.decode()
        assert proc.returncode == 1, (proc.returncode, err)
        # rclone's metadata cache (--dir-cache-time) can serve the new bytes under the old
        # ETag and size for a moment; then the chunk hashes catch the mix, naming the URL too.
        # On a loaded machine the swap can also land while the object is being opened, when
        # rclone answers 404 for the key for a moment: a clear error naming it, and no mix.
        assert s3(name) in err and ("changed under the reader" in err or "hash mismatch" in err
                                    or "HTTP 404 NoSuchKey" in err), err
    finally:
        p.stop()
        setenv(SERVERS["rclone"].endpoint)


def test_checkpoint_across_local_and_remote():
    """A checkpoint taken on the local copy resumes on the remote one and back: same batches."""
    ck = os.path.join(TMP, "ck")
    base = ["--batch-size", 32, "--seed", 9]
    for first, second in ((local, s3), (s3, local)):
        g.run_ok(["load", first("a.ar"), first("b.ar"), "--stop-after", 5, "--save-state", ck] + base)
        same(["load", second("a.ar"), second("b.ar"), "--resume", ck, "--digest"] + base,
             ["load", first("a.ar"), first("b.ar"), "--resume", ck, "--digest"] + base)


def range_lengths(heads):
    """The lengths of the bytes=A-B ranges that grist asked for (suffix ranges left out)."""
    out = []
    for _, f in heads:
        r = f.get("range", "")
        if r.startswith("bytes=") and not r.startswith("bytes=-"):
            a, b = r[6:].split("-")
            out.append(int(b) - int(a) + 1)
    return out


def test_sequential_reads_coalesce():
    """cat and convert scan a file in order: its 1 KiB chunks come in GETs of about 1 MiB,
    not one round trip per chunk (2,000 of them here), and the bytes are the local ones."""
    name = "seq/seq.ar"
    p = rs.env_proxy(SERVERS["rclone"], setenv)
    try:
        same(["cat", "--hex", s3(name)], ["cat", "--hex", local(name)])
        gets = len(p.heads)
        del p.heads[:]
        out = os.path.join(TMP, "seq-conv.ar")
        g.run_ok(["convert", s3(name), out])
        conv_gets = len(p.heads)
    finally:
        rs.stop_env_proxy(p)
    assert g.run_ok(["cat", out]) == g.run_ok(["cat", local(name)])
    size = os.path.getsize(local(name))
    # opening (the tail, the footer), the first chunk, then one GET per MiB read ahead and
    # one where a chunk straddles a window's end; one GET per chunk would be 2,000
    assert gets <= 5 + size // (1 << 20), (gets, size)
    assert conv_gets <= 5 + size // (1 << 20), (conv_gets, size)


def max_rss(args):
    """The peak resident memory (bytes) of `grist ARGS`, alone in a fresh child process."""
    code = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, g.grist_cli()] + [str(a) for a in args], capture_output=True,
                         text=True, timeout=120).stdout.split()
    assert out[0] == "0", (args, out)
    return int(out[1]) * 1024


def test_verify_memory_is_bounded():
    """verify of a 48 MB object walks it in windows: its memory does not grow with the object."""
    big, small = local("seq/big.ar"), local("b.ar")
    grow = max_rss(["verify", s3("seq/big.ar")]) - max_rss(["verify", s3("b.ar")])
    assert grow < os.path.getsize(big) // 2, (grow, os.path.getsize(big), os.path.getsize(small))
    assert g.run_ok(["verify", s3("seq/big.ar")]).replace(s3("seq/big.ar").encode(), b"") == \
        g.run_ok(["verify", big]).replace(big.encode(), b"")


def test_verify_corrupt_matches_local():
    """verify of a damaged object says what verify of the damaged file says, byte for byte
    (the windows a URL is walked in change nothing), and exits 1 alike."""
    for name in sorted(os.listdir(os.path.join(DATA, "corrupt"))):
        rc_l, out_l, err_l = g.run(["verify", local("corrupt/" + name)])
        rc_r, out_r, err_r = g.run(["verify", s3("corrupt/" + name)])
        assert rc_l == rc_r == 1, (name, rc_l, rc_r, err_l, err_r)
        assert err_r.replace(s3("corrupt/" + name), "F") == err_l.replace(local("corrupt/" + name), "F"), (err_r, err_l)


def test_load_coalesces_and_splits():
    """A shuffled load's chunk reads leave in far fewer GETs than chunks, none longer than
    split (8 MiB by default, here 64 KiB given alone); with coalesce:0,split:4096 gaps are not joined, and
    the GETs share a few keep-alive connections."""
    a = ["--batch-size", 64, "--seed", 5, "--digest"]
    p = rs.env_proxy(SERVERS["rclone"], setenv)
    try:
        same(["load", s3("a.ar")] + a, ["load", local("a.ar")] + a)
        joined = range_lengths(p.heads)
        del p.heads[:]
        # split alone: coalesce comes down to it (1 MiB by default, above 64 KiB, was refused)
        same(["load", s3("a.ar"), "--remote", "split:64K"] + a, ["load", local("a.ar")] + a)
        split = range_lengths(p.heads)
        del p.heads[:]
        conns = p.connections
        threads = ["--threads", 2]  # the connection bound below counts them
        same(["load", s3("a.ar"), "--remote", "coalesce:0,split:4096,inflight:8"] + a + threads,
             ["load", local("a.ar")] + a + threads)
        single = range_lengths(p.heads)
        conns = p.connections - conns
    finally:
        rs.stop_env_proxy(p)
    # HTTP/1.1 keep-alive: each reading thread keeps at most `inflight` connections, the
    # opening one of its own. How many GETs there are depends on scheduling (reads that wait
    # for their turn join their touching neighbours): hundreds, or as few as the 320 KiB read
    # in GETs of at most 4 KiB (asserted below) allows, 80. Over 4 a connection either way,
    # where a connection per GET would be 1.
    assert conns <= 2 * 8 + 1 and len(single) > 4 * conns, (conns, len(single))
    assert 0 < len(joined) <= 1200 // 10, len(joined)  # 1,200 chunks
    assert max(joined) <= 8 << 20 and max(split) <= 64 << 10, (max(joined), max(split))
    # (coalesce:0 still joins chunks that touch, and reads riding on a GET already out)
    assert len(single) >= 5 * len(joined) and max(single) <= 4096, (len(single), len(joined), max(single))


def test_retry_after_is_honoured():
    """503 SlowDown with Retry-After: 1 waits that second (backoff_ms:1 would retry at once)
    and --stats-less commands still end, naming the URL, the status and the code."""
    p = rs.env_proxy(SERVERS["rclone"], setenv, mode="slowdown", every=1, retry_after=1)
    try:
        t0 = time.monotonic()
        g.expect_error(["info", s3("b.ar"), "--remote", "retries:2,backoff_ms:1,backoff_max_ms:5000"],
                     [s3("b.ar"), "HTTP 503 SlowDown", "after 3 attempts"])
        took = time.monotonic() - t0
        assert p.count == 3 and took >= 2.0, (p.count, took)
        # Retry-After is capped by backoff_max_ms: a server cannot stall a reader for long
        t0 = time.monotonic()
        g.expect_error(["info", s3("b.ar"), "--remote", "retries:2,backoff_ms:1,backoff_max_ms:50"],
                     [s3("b.ar"), "after 3 attempts"])
        assert time.monotonic() - t0 < took, (time.monotonic() - t0, took)
    finally:
        rs.stop_env_proxy(p)


def slowdown_once(retry_after, remote):
    """`info` through a proxy whose second request gets 503 SlowDown with @retry_after: (faults, seconds taken)."""
    p = rs.env_proxy(SERVERS["rclone"], setenv, mode="slowdown", every=2, retry_after=retry_after)
    try:
        t0 = time.monotonic()
        g.run_ok(["info", s3("b.ar"), "--remote", remote])
        return p.faults, time.monotonic() - t0
    finally:
        rs.stop_env_proxy(p)


def test_retry_after_http_date():
    """Retry-After may also be an HTTP-date (RFC 9110): 2 s ahead, then at least 1 s is waited
    (the date is whole seconds); capped by backoff_max_ms as the seconds form is."""
    faults, took = slowdown_once(2.0, "retries:2,backoff_ms:1,backoff_max_ms:5000")
    assert faults == 1 and took >= 1.0, (faults, took)
    faults, took = slowdown_once(30.0, "retries:2,backoff_ms:1,backoff_max_ms:200")
    assert faults == 1 and took < 10, (faults, took)
    # a wait whose nanoseconds pass 2^64 is capped, not wrapped (18446744074 s x 10^9 would
    # wrap to 0.29 s; a date more than 584 years ahead does the same)
    faults, took = slowdown_once(18446744074, "retries:2,backoff_ms:1,backoff_max_ms:2000")
    assert faults == 1 and took >= 1.5, (faults, took)


def test_signing_environment():
    """What goes out signed: the region from AWS_REGION, else AWS_DEFAULT_REGION; the session
    token as a signed x-amz-security-token (rclone checks the signature); path style under a
    custom endpoint, AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL; If-Match from the first GET on."""
    p = rs.env_proxy(SERVERS["rclone"], setenv)
    try:
        os.environ.pop("AWS_REGION")
        os.environ["AWS_DEFAULT_REGION"] = "eu-west-2"
        os.environ["AWS_SESSION_TOKEN"] = "tok/en+with=odd chars"
        same(["cat", "--hex", s3("b.ar")], ["cat", "--hex", local("b.ar")])
        n = len(p.heads)
        os.environ["AWS_REGION"] = "ap-south-1"
        g.run_ok(["info", s3("b.ar")])
        os.environ["AWS_ENDPOINT_URL"] = "http://127.0.0.1:%d" % rs.free_port()  # nothing listens there
        os.environ["AWS_ENDPOINT_URL_S3"] = p.endpoint
        g.run_ok(["info", s3("b.ar")])
    finally:
        os.environ.pop("AWS_DEFAULT_REGION", None)
        rs.stop_env_proxy(p)
    first = [f for line, f in p.heads if "x-amz-date" in f]
    assert len(first) == len(p.heads) and len(p.heads) >= 4, p.heads
    scope = [f["authorization"].split("Credential=")[1].split(",")[0].split("/")[2] for f in first]
    assert scope[:n] == ["eu-west-2"] * n and set(scope[n:]) == {"ap-south-1"}, scope
    for f in first[:n]:
        assert f["x-amz-security-token"] == "tok/en+with=odd chars"
        assert "x-amz-security-token" in f["authorization"].split("SignedHeaders=")[1].split(",")[0]
    assert all(line.startswith("GET /%s/b.ar " % BUCKET) for line, _ in p.heads), p.heads
    etags = set(f.get("if-match") for f in first[1:n])
    assert len(etags) == 1 and None not in etags and "if-match" not in first[0], (etags, first[0])


def test_loader_remote_options():
    """The option table's remote_* options reach the loader's GETs: with --remote-retries 0
    the first SlowDown is the end, with 8 the load goes through."""
    p = rs.env_proxy(SERVERS["rclone"], setenv, mode="slowdown", every=2)
    a = ["--batch-size", 64, "--seed", 2, "--digest"]
    try:
        g.expect_error(["load", s3("b.ar"), "--remote-retries", 0, "--remote-backoff-ms", 1] + a,
                     [s3("b.ar"), "HTTP 503 SlowDown", "after 1 attempts"])
        same(["load", s3("b.ar"), "--remote-retries", 8, "--remote-backoff-ms", 1] + a, ["load", local("b.ar")] + a)
    finally:
        rs.stop_env_proxy(p)


def test_bad_remote_options_env():
    """A GRIST_REMOTE_OPTIONS that does not parse is an error naming the variable, for reads and
    writes alike: dropped silently, it left every one of its options, the sound ones too, at
    their defaults. Local files do not look at it."""
    try:
        for env, words in (("retries:0,timout_ms:5000", ["unknown remote option 'timout_ms'"]),
                           ("part:4M", ["part=4 MiB is outside"])):
            os.environ["GRIST_REMOTE_OPTIONS"] = env
            for args, stdin in ((["info", s3("a.ar")], None), (["write", s3("env.ar")], b"x\n")):
                rc, _, err = g.run(args, stdin=stdin)
                assert rc == 2 and "GRIST_REMOTE_OPTIONS='%s'" % env in err, (args, rc, err)
                assert all(w in err for w in words), (words, err)
            g.run_ok(["info", local("a.ar")])
        assert not os.path.exists(local("env.ar"))
    finally:
        os.environ.pop("GRIST_REMOTE_OPTIONS", None)


def test_server_gone_mid_load():
    """The server goes away mid-load (the proxy in front of rclone stops: resets, then
    connections refused): the load fails naming the URL within one read's retries. Once the
    error was out, the loader's workers used to wait for every read still queued to run out
    its retries too, one GET at a time, minutes for a deep read-ahead, before the process
    could exit."""
    import threading
    p = rs.FaultProxy(SERVERS["rclone"].port, delay=0.02)
    setenv(p.endpoint)

    def stop_soon():
        while p.count < 10:
            time.sleep(0.01)
        p.stop()
    t = threading.Thread(target=stop_soon)
    t.start()
    try:
        # 64 KiB GETs, 2 at once: the 48 MB object is 750 GETs, all queued by the read-ahead
        g.expect_error(["load", s3("seq/big.ar"), "--batch-size", 64, "--digest", "--threads", 2, "--remote",
                        "split:64K,coalesce:64K,inflight:2,retries:3,backoff_ms:50"],
                       [s3("seq/big.ar"), "(after 4 attempts)"], timeout=20)
    finally:
        t.join()
        setenv(SERVERS["rclone"].endpoint)


def test_bench_reads_urls():
    """grist-bench takes URLs as FILE, as grist load does."""
    bench = os.environ.get("GRIST_BENCH")
    if not bench:
        raise Skip("GRIST_BENCH is not set")
    r = subprocess.run([bench, s3("b.ar"), "--batches", "3", "--batch-size", "64", "--threads", "1", "--json"],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    d = json.loads(r.stdout)
    assert d["files"] == [s3("b.ar")] and d["records_per_s"] > 0, d
    assert "page cache" in d["cache_note"] and "network" in d["cache_note"], d  # not "warm"


def remote_stats(err):
    """The in-flight figures of `grist load --stats`: mean GETs in flight, peak budget, rtt (ms)."""
    line = [l for l in err.splitlines() if l.startswith("remote: ")][0]
    budget = [l for l in err.splitlines() if l.startswith("remote budget: ")][0]
    mean = float(line.split("in flight mean ")[1].split()[0])
    peak = int(budget.split("(peak ")[1].split()[0])
    rtt = float(budget.split(", rtt ")[1].split()[0])
    return mean, peak, rtt


def budget_run(delay):
    """(mean depth, peak budget, rtt ms) of one --stats load of a.ar behind a proxy of @delay s."""
    p = rs.FaultProxy(SERVERS["rclone"].port, delay=delay)
    try:
        setenv(p.endpoint)
        # 8 epochs, not 3: the first GETs go out on the starting budget before any bandwidth is
        # measured, and at 0 ms that burst (up to ~200 GETs) weighed enough in 3 epochs' mean
        # depth to fail the comparison in 2 of 10 loaded runs
        args = ["--batch-size", 64, "--seed", 4, "--epochs", 8, "--threads", 1, "--queue-depth", 512]
        rc, out, err = g.run(["load", s3("a.ar"), "--stats", "--digest", "--remote",
                              "coalesce:0,inflight:256,inflight_min:2"] + args)
        assert rc == 0, err[-2000:]
        assert out == g.run_ok(["load", local("a.ar"), "--digest"] + args)
        return remote_stats(err)
    finally:
        p.stop()
        setenv(SERVERS["rclone"].endpoint)


def test_budget_follows_latency():
    """The GETs in flight follow a measured rtt x bandwidth budget: behind a 50 ms proxy the
    same reads run deeper than behind a 0 ms one (stats, not timings: the rtt the backend
    measured, its peak budget, and the mean depth). Held to the best of up to 3 tries: on
    2 cores starved by other work (load average 8-27 while several builds ran) the 0 ms side's
    reader fell behind and its GETs piled up to a mean depth of 60 (11-24 when it keeps up),
    1 try in 5; a budget that ignored the rtt fails every try."""
    tries = []
    for _ in range(3):
        (m0, b0, r0), (m50, b50, r50) = got = budget_run(0.0), budget_run(0.05)
        tries.append(got)
        # the round trip measured is the proxy's; the budget follows it, and the depth with it (by
        # less than the rtt's ratio: the bandwidth at 0 ms is the server's, at 50 ms what 256 GETs
        # bring; measured 28-71 KB against 111-133 KB, and 11-24 against 162-223 GETs)
        if r50 >= 45 and r0 < 25 and b50 > b0 and m50 > 2 * m0:
            return
    raise AssertionError("no try had the 50 ms side deeper, with a larger budget and the proxy's rtt: %s" % tries)


def test_opening_gets_counted():
    """--stats counts every GET the server saw, the opening ones included (each shard's tail,
    then its footer on the same connection), and every body byte: the GETs and bytes the
    recording proxy saw, which the stats left 2 GETs a shard short before."""
    names = ["a.ar", "b.ar"]
    p = rs.env_proxy(SERVERS["rclone"], setenv)
    try:
        a = ["--batch-size", 64, "--seed", 2, "--digest", "--threads", 2]
        rc, out, err = g.run(["load"] + [s3(n) for n in names] + ["--stats"] + a)
        assert rc == 0, err[-2000:]
        assert out == g.run_ok(["load"] + [local(n) for n in names] + a)
        gets = [(line, f) for line, f in p.heads if line.startswith("GET ")]
    finally:
        rs.stop_env_proxy(p)
    size = {"/%s/%s" % (BUCKET, n): os.path.getsize(local(n)) for n in names}
    body = 0
    for line, f in gets:
        whole = size[line.split()[1].split("?")[0]]
        r = f.get("range", "")
        if r.startswith("bytes=-"):
            body += min(int(r[7:]), whole)
        elif r.startswith("bytes="):
            lo, hi = r[6:].split("-")
            body += min(int(hi), whole - 1) - int(lo) + 1
        else:
            body += whole
    line = [l for l in err.splitlines() if l.startswith("remote: ")][0]
    assert all(s > 65536 for s in size.values()), size  # the opening GET is a suffix range, not a 416
    assert (int(line.split()[1]), int(line.split()[3])) == (len(gets), body), (line, len(gets), body)


def test_two_threads_share_one_get():
    """Reads of one object from two threads (two io objects, as two engine workers have) leave
    as one GET: tests/io/sched_check.c (merge) holds the one GET slot (inflight:1) with a first read
    while each thread asks for 1,000 bytes, 500 apart, behind a 0.5 s proxy; the proxy then
    sees one GET spanning both, and each thread gets its own bytes. With a backend per
    thread (before the GET scheduler) each read was a GET of its own."""
    exe = os.environ.get("GRIST_SCHED_CHECK")
    if not exe:
        raise Skip("GRIST_SCHED_CHECK is not set")
    p = rs.env_proxy(SERVERS["rclone"], setenv, delay=0.5)
    try:
        r = subprocess.run([exe, "merge", s3("seq/seq.ar")], capture_output=True, timeout=60)
        gets = [f.get("range", "") for line, f in p.heads if line.startswith("GET ")]
    finally:
        rs.stop_env_proxy(p)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    with open(local("seq/seq.ar"), "rb") as f:
        data = f.read()
    got = {}
    for line in r.stdout.decode().split("\n"):
        if line:
            who, off, hexed = line.split()
            got[who] = (int(off), bytes.fromhex(hexed))
    assert {w: o for w, (o, _) in got.items()} == {"main": 10000, "other": 11500}, got.keys()
    for off, b in got.values():
        assert b == data[off:off + 1000], off
    # the opening (a suffix range), the first read's, then one GET for both threads' reads
    assert gets[1:] == ["bytes=1200000-1200999", "bytes=10000-12499"], gets


def test_read_after_fork():
    """An http io object used before fork() reads on in the child (a reader's object kept
    from before a fork, as with multiprocessing's fork start): the parent's GET scheduler
    has no thread there, so the child takes its own (tests/io/sched_check.c, fork) instead
    of waiting forever, and gets the file's bytes."""
    exe = os.environ.get("GRIST_SCHED_CHECK")
    if not exe:
        raise Skip("GRIST_SCHED_CHECK is not set")
    r = subprocess.run([exe, "fork", s3("seq/seq.ar")], capture_output=True, timeout=60)
    if b"ThreadSanitizer: starting new threads after multi-threaded fork" in r.stderr:
        raise Skip("ThreadSanitizer does not start threads in a child of a threaded process")
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    with open(local("seq/seq.ar"), "rb") as f:
        data = f.read()
    lines = dict((l.split()[0], (int(l.split()[1]), bytes.fromhex(l.split()[2])))
                 for l in r.stdout.decode().splitlines())
    assert sorted(lines) == ["child", "main"], lines.keys()
    for off, b in lines.values():
        assert b == data[off:off + 1000], off


def test_horizon_counts_from_the_consumer():
    """The GET scheduler's read-ahead horizon counts from where the consumer is
    (grist_io_consumed()), not only from the oldest read not yet landed: a read handed over
    far past a consumer that has 990 landed reads in hand is judged and held (no GET), goes
    out once the consumer says it consumed them, and a consumer gone quiet holds it while its
    last word is 499 ms old and no longer at 599 (tests/io/sched_check.c, hold). Before, the
    read went out at once (nothing was in flight), which in a starved process swept regions a
    few reads at a time (docs/tuning.md, run I). Deterministic: the rules' clock is the
    checker's own (grist_sched_set_clock()) and each step waits for the scheduler's judgement
    (grist_sched_probe()), so a busy machine makes it slower, never wrong."""
    exe = os.environ.get("GRIST_SCHED_CHECK")
    if not exe:
        raise Skip("GRIST_SCHED_CHECK is not set")
    r = subprocess.run([exe, "hold", s3("seq/seq.ar")], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert r.stdout.decode().split() == ["held", "landed", "held", "499", "quiet"], r.stdout


def test_long_handover_goes_out_in_parts():
    """A hand-over of 16,384 pieces or more goes out in parts (grist_sched_may_launch()): one
    io object hands over 16,383 reads of 64 bytes without reaping, and nothing is judged
    within 200 ms (its hand-over holds them, as before); the 16,384th lets GETs out before
    the hand-over ends, and every read lands with the file's bytes (tests/io/sched_check.c,
    handover). The first hand-over of a chunk-window shuffle of 611-byte records is 110,000
    reads: held whole, its first GET waited for 0.1 s of planning, then a round trip in
    which no grist thread had anything to do (docs/tuning.md, session 38). Deterministic but
    for the 200 ms: a scheduler that went out early and took longer to do so than that
    would pass the first check, never fail a correct one."""
    exe = os.environ.get("GRIST_SCHED_CHECK")
    if not exe:
        raise Skip("GRIST_SCHED_CHECK is not set")
    r = subprocess.run([exe, "handover", s3("seq/seq.ar")], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    with open(local("seq/seq.ar"), "rb") as f:
        data = f.read(16384 * 64)
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    assert r.stdout.decode().split() == ["held", "out", "sum", "%016x" % h], r.stdout


def test_scheduler_thread_sleeps_through_bodies():
    """The GET scheduler's thread is woken only for what it can act on (tests/io/sched_check.c,
    quiet; one GET slot, behind bench/delay_proxy at 1 s a request). A 2 MiB body, its
    client never waiting in reap, is received in few socket reads: the socket wakes the
    thread once 512 KiB wait (SO_RCVLOWAT), not for every segment the server's side sent
    (5-7 reads here; main made 21-42). Then, while one GET holds the only slot, 50 hand-overs
    of one read, 2 ms apart, wake the thread at most twice (here never): none can go out
    before that GET ends, which wakes it anyway (main woke it 55-81 times). At group_size
    64 those wake-ups were each a task switch pair on the worker's core (docs/tuning.md,
    session 39). Every byte read is the file's. The bounds hold on a loaded machine too: a late thread only finds more bytes
    waiting per read, and the hand-overs never wake it."""
    exe = os.environ.get("GRIST_SCHED_CHECK")
    if not exe:
        raise Skip("GRIST_SCHED_CHECK is not set")
    # 1 s: the 50 rounds (100 ms of sleeps) must end while the slot's GET waits, on a loaded machine too
    p = rs.DelayProxy(SERVERS["rclone"].port, delay=1.0)
    try:
        setenv(p.endpoint)
        r = subprocess.run([exe, "quiet", s3("seq/big.ar")], capture_output=True, timeout=120)
    finally:
        p.stop()
        setenv(SERVERS["rclone"].endpoint)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    out = r.stdout.decode().split()
    assert out[0] == "receives" and out[2] == "wakes" and out[4] == "sum", out
    far = (2 << 20) + (2 << 20)
    with open(local("seq/big.ar"), "rb") as f:
        data = f.read()
    want = data[:2 << 20] + data[far:far + 1000] + b"".join(
        data[far + (2 << 20) + i * 65536:far + (2 << 20) + i * 65536 + 1000] for i in range(50))
    h = 14695981039346656037
    for b in want:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    assert out[5] == "%016x" % h, out
    assert int(out[1]) <= 9, "%s socket reads for a 2 MiB body" % out[1]
    assert int(out[3]) <= 2, "%s wake-ups for 50 hand-overs that could not go out" % out[3]


def window_load(name, epochs, delay=0.02, threads=2):
    """`grist load s3://NAME` by chunk windows behind bench/delay_proxy (20 ms unless told),
    2 threads unless told, checked against the local file: (GETs, GET body bytes, chunk bytes
    wanted, reads in flight per ring on average) from --stats."""
    p = rs.DelayProxy(SERVERS["rclone"].port, delay=delay)
    try:
        setenv(p.endpoint)
        args = ["--batch-size", 256, "--seed", 1, "--epochs", epochs, "--granularity", "chunk", "--threads", threads]
        rc, out, err = g.run(["load", s3(name), "--stats", "--digest"] + args)
        assert rc == 0, err[-2000:]
        assert out == g.run_ok(["load", local(name), "--digest"] + args)
    finally:
        p.stop()
        setenv(SERVERS["rclone"].endpoint)
    stat = lambda head: [l for l in err.splitlines() if l.startswith(head)][0]
    line = stat("remote: ")
    depth = float(stat("reads in flight: ").split(" mean ")[1].split()[0].rstrip(","))
    return int(line.split()[1]), int(line.split()[3]), int(stat("bytes read: ").split()[2]), depth


def test_chunk_window_gets_dense():
    """Chunk windows over a 13 MB object whose read-ahead window covers most of it take a few
    dense GETs per object and epoch (stats, not timings):
    - group_size 1 (20,000 600-byte chunks): the backend holds the reads not due within a
      GET's time, so they join the next GET instead of each unit's few hundred reads
      spanning the object in GETs of their own (behind 50 ms; figures below).
    - group_size 64 (313 chunks of 38 KB): the engine fills its read-ahead window in one
      pass instead of one 16-read unit per wait, so the reads of several epochs wait at once
      and one GET's bytes serve each of them: fewer body bytes than chunk bytes wanted.
      Measured over 10 epochs: about 1,500 reads in flight per ring and 0.3-0.8x, against
      about 130 and 1.3-1.5x before."""
    # 50 ms, not 20: how many reads a GET gathers depends on how fast grist runs against the
    # proxy's delay, and at 20 ms an ASan build took 92-101 GETs (3.5-4.2x) where release
    # took 25-43. At 50 ms: release 32-39 GETs (1.3x), ASan 30-60 (1.5-2.0x), and the
    # build before the change 258-437 (3.0-3.2x).
    # What this line guards now is the engine's full window (about 12,000 reads a ring here),
    # not the backend's holding: with launch() sending every waiting group at once (its
    # horizon check taken out) it passed as well, release, 3 runs each: 48-99 GETs held,
    # 51-62 not, bodies 96-141 MB either way. Holding halves the GETs only where the window
    # is smaller (--queue-depth 2048: 469-823 held, 953-1,505 not, release, 12 and 8 runs),
    # too close and too noisy for a bound here.
    # The g1 GET count is noisy under ASan on a loaded 2-core machine (30-152 in 12 runs of
    # this main and the one before it, 2026-11-28): the best of up to 3 runs is held to the
    # bound, which the build before the change (258-437) cannot meet in any run. The bound
    # is 200 GETs: a CI clone's ASan build took 114, 126 and 123 in its 3 tries (3.0-3.4x
    # the bytes), the machine otherwise idle, where the clone before it passed.
    tries = []
    for _ in range(3):
        gets, body, wanted, _ = window_load("window/g1.ar", 6, delay=0.05)
        tries.append((gets, body, wanted))
        if gets <= 200 and body <= 3.5 * wanted:
            break
    else:
        raise AssertionError("no run within 200 GETs and 3.5x the bytes wanted: %s" % tries)
    gets, body, wanted, depth = window_load("window/g64.ar", 10)
    assert depth >= 500 and body < wanted, (gets, body, wanted, depth)


def test_tiny_chunks_read_ahead_in_bytes():
    """Chunk windows over 64,000 chunks of 600 bytes (a 38 MB object, group_size 1), one
    thread, 6 epochs: the reads waiting in the GET scheduler are as many as the read-ahead
    holds in bytes, not a count of reads (16,384 a process, a quarter of the object). A GET
    carries about the object's bytes over the bytes of reads waiting in its span, so with
    that cap each byte wanted came with 3.1 bytes of body here (103 GETs, 14,785 reads in
    flight on average; 8.5-8.7 bytes on a 122 MB object: docs/tuning.md, "group_size 1:
    the read-ahead in bytes"); now 0.90-1.06 (31-37 GETs, 63,000-67,000 reads in flight).
    Stats, not timings, with two guards: the reads in flight above 16,384 (the old cap: the
    build before the change cannot pass it in any run) and the body bytes. How many reads a
    GET gathers still depends on how fast grist runs against the proxy's delay (see
    test_chunk_window_gets_dense): a CI clone's ASan build, the machine busy with nothing
    else, sent 1.81 bytes of body per byte wanted (56 GETs, 79,966 reads in flight on
    average), where release sends 0.90-1.06. So the body is held to 2.0x, the best of up to
    3 runs: the issue's 1.3 with room for a slow build, and well under the 3.1 before."""
    tries = []
    for _ in range(3):
        gets, body, wanted, depth = window_load("window/g1big.ar", 6, threads=1)
        tries.append((gets, body, wanted, depth))
        assert depth > 16384, tries
        if body <= 2.0 * wanted:
            break
    else:
        raise AssertionError("no run within 2.0x the bytes wanted: %s" % tries)


def test_read_window_not_rounded():
    """A URL's chunk reads take only their bytes of the read-ahead arena, not whole 4 KiB
    pages: with a 64 KiB arena and one thread, more than 64 KiB / 4 KiB = 16 reads of
    a.ar's chunks (under 400 bytes each) wait for the GETs at once behind a 50 ms proxy
    (measured: 16 with page-rounded regions, 160 without), and the bytes are the local ones."""
    p = rs.FaultProxy(SERVERS["rclone"].port, delay=0.05)
    try:
        setenv(p.endpoint)
        args = ["--batch-size", 16, "--seed", 6, "--granularity", "chunk", "--threads", 1,
                "--read-ahead", "64K", "--queue-depth", 4096]
        rc, out, err = g.run(["load", s3("a.ar"), "--stats", "--digest"] + args)
        assert rc == 0, err[-2000:]
        assert out == g.run_ok(["load", local("a.ar"), "--digest"] + args)
    finally:
        p.stop()
        setenv(SERVERS["rclone"].endpoint)
    line = [l for l in err.splitlines() if l.startswith("reads in flight: ")][0]
    most = int(line.split(" max ")[1].split()[0])
    assert most > 64 * 1024 // 4096, line


def test_http_through_nginx():
    n = rs.Nginx(ROOT)
    try:
        url = n.url + "/" + BUCKET
        same(["cat", "--hex", url + "/b.ar"], ["cat", "--hex", local("b.ar")])
        same(["load", url + "/a.ar", "--batch-size", 32, "--seed", 2, "--digest"],
             ["load", local("a.ar"), "--batch-size", 32, "--seed", 2, "--digest"])
        g.expect_error(["info", url + "/missing.ar"], [url + "/missing.ar", "HTTP 404"])
    finally:
        n.stop()
    # a refusal's <Code> and <Message> are XML: their entities are decoded in the message
    n = rs.Nginx(ROOT, server_conf="location = /%s/denied.ar { return 403 '<?xml version=\"1.0\"?><Error>"
                 "<Code>AccessDenied</Code><Message>Key &#34;denied.ar&#34; &amp; &lt;others&gt; &#x2192; "
                 "&quot;no&quot;</Message></Error>'; }" % BUCKET)
    try:
        url = n.url + "/" + BUCKET + "/denied.ar"
        g.expect_error(["info", url], [url, 'HTTP 403 AccessDenied: Key "denied.ar" & <others> \u2192 "no"'])
    finally:
        n.stop()
    # a server that ignores Range (nginx's max_ranges 0): a clear error, not the wrong bytes
    n = rs.Nginx(ROOT, server_conf="max_ranges 0;")
    try:
        url = n.url + "/" + BUCKET
        g.expect_error(["info", url + "/a.ar"], [url + "/a.ar", "ignore Range"])
    finally:
        n.stop()


def test_many_shards_open_at_once():
    """A dataset of many URL shards opens with its GETs together (2 per shard: the last 64 KiB,
    then the footer), many in flight at once through a 50 ms proxy rather than one after
    another, and reads as the local files do; a missing shard among them is an error naming it."""
    n = 40
    os.makedirs(local("many"), exist_ok=True)
    for i in range(n):
        g.write_records(local("many/%02d.ar" % i), "group_size:%d,zstd:1" % (1 + i % 3),
                        [rec(i * 50 + k) for k in range(50)])
    urls = [s3("many/%02d.ar" % i) for i in range(n)]
    files = [local("many/%02d.ar" % i) for i in range(n)]
    p = rs.env_proxy(SERVERS["rclone"], setenv, delay=0.05)
    try:
        out = g.run_ok(["info"] + urls)
        requests, most, conns = p.count, p.max_active, p.connections
        p.delay = 0  # the rest checks bytes, not concurrency: no need to wait
        assert g.info_records(out) == g.info_records(g.run_ok(["info"] + files))
        a = ["--batch-size", 64, "--seed", 3, "--digest"]
        same(["load"] + urls + a, ["load"] + files + a)
        same(["cat", "--hex", s3("many/*.ar")], ["cat", "--hex"] + files)
        g.expect_error(["info"] + urls[:20] + [s3("many/gone.ar")] + urls[20:], [s3("many/gone.ar"), "HTTP 404"])
    finally:
        rs.stop_env_proxy(p)
    print("many shards: %d requests, %d at most at once, %d connections" % (requests, most, conns))
    assert requests == 2 * n, requests
    # one after another, one GET would be in flight at a time; together, up to `inflight` (64),
    # each footer's GET on the connection of its shard's first
    assert most >= n // 4 and n // 4 <= conns <= n, (most, conns)
    # A footer longer than split comes in pieces of split bytes, one after another. A proxy
    # of its own: the failed command above leaves its other shards' 64 KiB opening GETs on
    # their way through the first proxy when it exits, and that proxy recorded some of them
    # after the list was cleared (a CI run, 2026-11-28: 60,397 bytes among the 4 KiB pieces).
    p = rs.env_proxy(SERVERS["rclone"], setenv)
    try:
        out = g.run_ok(["info"] + urls[:4] + ["--remote", "split:4K"])
        assert g.info_records(out) == g.info_records(g.run_ok(["info"] + files[:4]))
        assert len(range_lengths(p.heads)) > 4 and max(range_lengths(p.heads)) <= 4096, range_lengths(p.heads)
    finally:
        rs.stop_env_proxy(p)


def test_slow_link_is_not_a_timeout():
    """timeout_ms is a stall rule, not a deadline: through nginx at 512 KB/s a 1 MiB GET takes
    2 s and passes with timeout_ms:1000 (a whole-transfer deadline cut it on every attempt);
    a server that sends nothing is still cut (test_errors_name_url_status_and_code)."""
    n = rs.Nginx(ROOT, server_conf="limit_rate 512k;")
    try:
        url = n.url + "/" + BUCKET + "/seq/seq.ar"
        assert os.path.getsize(local("seq/seq.ar")) > 1 << 20
        same(["cat", "--hex", url, "--remote", "timeout_ms:1000,retries:0"], ["cat", "--hex", local("seq/seq.ar")])
    finally:
        n.stop()


# The tests of the GET scheduler's threads (merging, routing, faults at 1-4 threads, fork):
# GRIST_REMOTE_ONLY=SCHED_TESTS runs just these, as the ThreadSanitizer build does
# (tests/meson.build, io/test_sched_tsan).
SCHED_TESTS = ("test_two_threads_share_one_get", "test_horizon_counts_from_the_consumer", "test_threads_same_digest", "test_faults_give_identical_bytes",
               "test_read_after_fork", "test_long_handover_goes_out_in_parts",
               "test_scheduler_thread_sleeps_through_bodies")


def main():
    tests = [test_every_command_matches_local, test_glob_and_odd_keys, test_gs_urls, test_python_paths,
             test_faults_give_identical_bytes, test_threads_same_digest, test_errors_name_url_status_and_code,
             test_object_replaced_mid_read, test_checkpoint_across_local_and_remote,
             test_sequential_reads_coalesce, test_verify_memory_is_bounded,
             test_verify_corrupt_matches_local, test_load_coalesces_and_splits, test_retry_after_is_honoured,
             test_retry_after_http_date, test_signing_environment, test_loader_remote_options, test_bad_remote_options_env,
             test_server_gone_mid_load,
             test_bench_reads_urls,
             test_budget_follows_latency, test_opening_gets_counted, test_two_threads_share_one_get,
             test_horizon_counts_from_the_consumer, test_long_handover_goes_out_in_parts,
             test_scheduler_thread_sleeps_through_bodies,
             test_read_after_fork, test_chunk_window_gets_dense, test_tiny_chunks_read_ahead_in_bytes,
             test_read_window_not_rounded,
             test_http_through_nginx, test_slow_link_is_not_a_timeout, test_many_shards_open_at_once]
    only = os.environ.get("GRIST_REMOTE_ONLY")
    if only:
        names = SCHED_TESTS if only == "SCHED_TESTS" else only.split(",")
        tests = [t for t in tests if t.__name__ in names]
    rs.run_suite(setup, tests, SERVERS, TMP)


if __name__ == "__main__":
    main()
