"""The GET scheduler's own receive path (src/io/sched_direct.c) against rclone serve s3
and the fault proxy: plain http:// GETs whose bodies go from the socket straight into the
read buffers. The proxy tells its requests from libcurl's (curl sends "Accept: */*", the
direct path sends no Accept), so a fault can be aimed at them alone.

The same --digest as the local file, whole or through truncated bodies, a 503 then
success, and a stalled body; kept connections carry many GETs; a Content-Length that
disagrees with the Content-Range and a head of 1 MiB are clear errors naming the URL,
never a hang or an unbounded buffer. `--remote direct:0` is libcurl's path. Skips (77)
when rclone cannot start here.
"""
import os
import random
import re
import socket
import subprocess
import tempfile
import time

import gristcli as g
import remote_servers as rs

TMP = tempfile.mkdtemp(prefix="grist-direct-")
ROOT = os.path.join(TMP, "root")
SERVERS = {}
FAST = "backoff_ms:10,backoff_max_ms:200,retries:6"


def local(name):
    return os.path.join(ROOT, "bkt", name)


def s3(name):
    return "s3://bkt/" + name


def setenv(endpoint):
    for k in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "GRIST_REMOTE_OPTIONS", "http_proxy", "all_proxy",
              "ALL_PROXY"):
        os.environ.pop(k, None)
    os.environ.update(AWS_ACCESS_KEY_ID=rs.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=rs.SECRET_KEY,
                      AWS_ENDPOINT_URL=endpoint, AWS_REGION="us-east-1")


def setup():
    os.makedirs(os.path.join(ROOT, "bkt"))
    r = random.Random(5)
    recs = [r.randbytes(200 + i % 300) for i in range(6000)]
    g.write_records(local("g64.ar"), "group_size:64,zstd:1", recs)
    g.write_records(local("g1.ar"), "group_size:1,uncompressed", recs[:3000])
    SERVERS["rclone"] = rs.Rclone(ROOT)
    setenv(SERVERS["rclone"].endpoint)


def direct(line, fields):
    """A request of the direct path: a ranged GET without curl's Accept."""
    return "accept" not in fields and fields.get("range", "").startswith("bytes=") and \
        not fields["range"].startswith("bytes=-")


def nth_direct(*ns):
    """select= for the fault proxy: the @ns-th requests (1-based) of the direct path."""
    seen = [0]

    def pick(line, fields):
        if not direct(line, fields):
            return False
        seen[0] += 1
        return seen[0] in ns
    return pick


LOAD = ["--batch-size", 64, "--seed", 3, "--epochs", 2, "--digest"]


def digest(url, remote, extra=()):
    return g.run_ok(["load", url, "--remote", remote] + list(extra) + LOAD)


def local_digest(name, extra=()):
    return g.run_ok(["load", local(name)] + list(extra) + LOAD)


def test_direct_path_reads_the_same_bytes_on_kept_connections():
    """Both paths give the local digest at both granularities; the direct path's GETs are
    the ones without Accept, and GETs far outnumber the connections they came on."""
    for name in ("g64.ar", "g1.ar"):
        for gran in ([], ["--granularity", "chunk"]):
            want = local_digest(name, gran)
            p = rs.env_proxy(SERVERS["rclone"], setenv)
            try:
                assert digest(s3(name), "split:64K,inflight:2", gran) == want
                gets = sum(1 for line, f in p.heads if direct(line, f))
                assert gets >= 10, gets
                # the opening's connection, plus at most one per GET in flight: kept alive
                assert p.connections <= 4, (p.connections, gets)
                p.heads.clear()
                assert digest(s3(name), "split:64K,inflight:2,direct:0", gran) == want
                assert not any(direct(line, f) for line, f in p.heads)
            finally:
                rs.stop_env_proxy(p)


def test_truncated_bodies_and_503_are_retried():
    """A body cut off mid-way (the connection reset), a 503 SlowDown and a body that stalls
    (timeout_ms as a stall rule): retried, the same bytes, --stats counts each cause."""
    want = local_digest("g64.ar")
    for mode, cause, extra in (("truncate", "short", ""), ("slowdown", "slowdown", ""),
                               ("stall", "timeout", ",timeout_ms:1000")):
        p = rs.env_proxy(SERVERS["rclone"], setenv, mode=mode, select=nth_direct(2, 5))
        try:
            t0 = time.monotonic()
            rc, out, err = g.run(["load", s3("g64.ar"), "--remote", "split:64K,inflight:2," + FAST + extra,
                                  "--stats"] + LOAD)
            assert rc == 0, (mode, err)
            assert out == want, (mode, out, want)
            assert p.faults == 2, (mode, p.faults)
            retries = err.split("remote retries:")[1].split("\n")[0]
            assert (" %s 2" % cause) in retries, (mode, retries)
            assert time.monotonic() - t0 < 25, mode
        finally:
            rs.stop_env_proxy(p)


def test_kept_connection_closed_by_the_server():
    """The server closes each connection after its answer without saying so (as an idle
    keep-alive times out): the next GET finds its kept connection closed before any byte
    of an answer and goes again on a new one, not counted as a retry."""
    want = local_digest("g64.ar")
    p = rs.env_proxy(SERVERS["rclone"], setenv, mode="close", select=direct)
    try:
        rc, out, err = g.run(["load", s3("g64.ar"), "--remote", "split:64K,inflight:2,retries:0", "--stats"] + LOAD)
        assert rc == 0 and out == want, err
        assert p.faults >= 10 and p.connections > p.faults // 2, (p.faults, p.connections)
        assert "remote retries: 0 " in err or " reset 0" in err.split("remote retries:")[1].split("\n")[0], err
    finally:
        rs.stop_env_proxy(p)


def test_wrong_content_length_is_an_error():
    """A Content-Length one byte short of the Content-Range (and that many bytes): refused at
    once, naming the URL and both figures, not read as a short body again and again."""
    p = rs.env_proxy(SERVERS["rclone"], setenv, mode="shortlength", select=direct)
    try:
        err = g.expect_error(["load", s3("g64.ar"), "--remote", "split:64K," + FAST] + LOAD,
                           [s3("g64.ar"), "a Content-Length of", "for a Content-Range of"])
        # final at once: not a short body retried until the attempts ran out
        assert p.faults >= 1 and "attempts" not in err, (p.faults, err)
    finally:
        rs.stop_env_proxy(p)


def test_head_too_long_is_an_error():
    """1 MiB of header fields: an error naming the URL and the limit, after at most 32 KiB was held."""
    p = rs.env_proxy(SERVERS["rclone"], setenv, mode="longhead", select=direct)
    try:
        g.expect_error(["load", s3("g64.ar"), "--remote", "split:64K," + FAST] + LOAD,
                     [s3("g64.ar"), "head is longer than 32768 bytes", "127.0.0.1"])
    finally:
        rs.stop_env_proxy(p)


def dead_port():
    """A socket bound on 127.0.0.1 that does not listen: a connect to its port is refused
    (kept open, so no other process takes the port meanwhile)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s, "127.0.0.1:%d" % s.getsockname()[1]


def addrs_check(lists, retries, every_ms=None):
    """tests/io/sched_check.c (addrs): reads of g64.ar whose direct GETs see @lists as the
    endpoint's addresses; (returncode, {offset: bytes}, lookups, stderr)."""
    exe = os.environ.get("GRIST_SCHED_CHECK")
    if not exe:
        raise rs.Skip("GRIST_SCHED_CHECK is not set")
    args = [exe, "addrs", s3("g64.ar"), lists, str(retries)] + ([str(every_ms)] if every_ms else [])
    r = subprocess.run(args, capture_output=True, timeout=60)
    got, lookups = {}, None
    for line in r.stdout.decode().splitlines():
        w = line.split()
        if w[0] == "main":
            got[int(w[1])] = bytes.fromhex(w[2])
        elif w[0] == "lookups":
            lookups = int(w[1])
    return r.returncode, got, lookups, r.stderr.decode()


def test_every_address_of_the_name_is_tried():
    """A name with several addresses, the first dead (one pod of a MinIO service down;
    "localhost" as ::1 first while the server listens on 127.0.0.1): the direct path goes
    on to the next address within the attempt, as curl does, so the reads get the file's
    bytes with retries:0 (a counted retry would fail them). The addresses come from
    sched-check's resolver (grist_direct_set_resolver()), as /etc/hosts here cannot give a
    name two. When the first lookup's addresses are all dead, the attempt fails naming the
    host, the port and each address, and the name is looked up again before the next
    connection: with one retry, the second lookup's addresses serve. Before, only the first
    address was kept, for the scheduler's life."""
    with open(local("g64.ar"), "rb") as f:
        data = f.read()
    real = "127.0.0.1:%d" % SERVERS["rclone"].port
    s1, dead1 = dead_port()
    s2, dead2 = dead_port()
    try:
        rc, got, lookups, err = addrs_check("%s,%s" % (dead1, real), 0)
        assert rc == 0, err[-2000:]
        assert sorted(got) == [10000, 11500, 1200000] and lookups == 1, (sorted(got), lookups)
        for off, b in got.items():
            assert b == data[off:off + 1000], off
        # every address dead: one error naming each, and with no retry no second lookup
        rc, got, lookups, err = addrs_check("%s,%s" % (dead1, dead2), 0)
        assert rc != 0 and not got, (rc, got)
        port = SERVERS["rclone"].port
        for w in ("127.0.0.1 port %d at %s" % (port, dead1), "at %s: Connection refused" % dead2):
            assert w in err, (w, err[-2000:])
        # the retry looks the name up again and gets through on the new list
        rc, got, lookups, err = addrs_check("%s/%s,%s" % (dead1, dead2, real), 1)
        assert rc == 0, err[-2000:]
        assert sorted(got) == [10000, 11500, 1200000] and lookups == 2, (sorted(got), lookups)
    finally:
        s1.close()
        s2.close()


def test_the_name_is_looked_up_again():
    """A long run survives its endpoint's address changing: before a new connection, the
    name is looked up again once the last lookup is older than 60 s (curl's DNS cache
    timeout), here 200 ms (sched-check addrs ... 200). Two fault proxies in front of rclone
    close each connection after its answer, so each read, 250 ms after the last, needs a new
    one: the first lookup gives the first proxy, the later ones the second. A lookup for age
    runs in the background while the list known serves (test_the_lookup_again_runs_behind_
    the_known_addresses), so the second read still goes to the first proxy, as it starts
    the second lookup, and the third to the second proxy. With the one lookup kept for the
    scheduler's life, all three went to the first proxy."""
    with open(local("g64.ar"), "rb") as f:
        data = f.read()
    p1 = rs.FaultProxy(SERVERS["rclone"].port, mode="close", select=direct)
    p2 = rs.FaultProxy(SERVERS["rclone"].port, mode="close", select=direct)
    try:
        rc, got, lookups, err = addrs_check("127.0.0.1:%d/127.0.0.1:%d" % (p1.port, p2.port), 0, 200)
        assert rc == 0, err[-2000:]
        # the third read starts a third lookup, which may not have begun when they are counted
        assert sorted(got) == [10000, 11500, 1200000] and lookups in (2, 3), (sorted(got), lookups)
        for off, b in got.items():
            assert b == data[off:off + 1000], off
        assert (p1.faults, p2.faults) == (2, 1), (p1.faults, p2.faults)
    finally:
        p1.stop()
        p2.stop()


def lookup_check(step):
    """tests/io/sched_check.c (lookup @step): g64.ar at rclone (E1) and through a fault proxy
    that closes each connection after its answer (E2), each with its scheduler, sched-check's
    resolver slow or hung for E2 alone; (returncode, {name: {offset: bytes}}, {word: rest
    of its line}, stderr)."""
    exe = os.environ.get("GRIST_SCHED_CHECK")
    if not exe:
        raise rs.Skip("GRIST_SCHED_CHECK is not set")
    p = rs.FaultProxy(SERVERS["rclone"].port, mode="close", select=direct)
    try:
        r = subprocess.run([exe, "lookup", s3("g64.ar"), p.endpoint, step], capture_output=True, timeout=60)
    finally:
        p.stop()
    got, said = {}, {}
    for line in r.stdout.decode().splitlines():
        w = line.split(" ", 2)
        if w[0] in ("e1", "e2"):
            got.setdefault(w[0], {})[int(w[1])] = bytes.fromhex(w[2])
        else:
            said[w[0]] = line.split(" ", 1)[1]
    return r.returncode, got, said, r.stderr.decode()


def check_bytes(got):
    with open(local("g64.ar"), "rb") as f:
        data = f.read()
    for reads in got.values():
        for off, b in reads.items():
            assert b == data[off:off + 1000], off


def test_a_slow_lookup_stalls_no_other_endpoint():
    """While one endpoint's name is being looked up (1.5 s, sched-check lookup others),
    a read through another endpoint by the same io object (as an engine worker reading
    two datasets) lands at once, and the first then lands too: its first lookup gates its
    first connect. Before, the lookup ran on the scheduler's thread under its lock, and the
    client, waiting for a completion, first took that lock (grist_sched_starved()): the
    other endpoint's read came back only with the lookup's end."""
    rc, got, said, err = lookup_check("others")
    assert rc == 0, err[-2000:]
    assert int(said["others"]) < 1000, said
    assert sorted(got) == ["e1", "e2"], got
    check_bytes(got)


def test_a_lookup_slower_than_the_connect_timeout():
    """E2's first lookup takes 1.5 s, connect_timeout_ms 300 (sched-check lookup timeout):
    with retries:0 the read fails naming the host and how long the attempt waited; with
    retries it lands once the lookup answers, the one lookup serving every attempt (none
    starts it again). Before, the lookup blocked the scheduler all the while, no
    timer could fire, and the read simply landed late."""
    rc, got, said, err = lookup_check("timeout")
    assert rc == 0, err[-2000:]
    msg = said["failed"]
    m = re.search(r"Resolving timed out after (\d+) milliseconds: the lookup of 127\.0\.0\.1 has not answered", msg)
    assert m and 300 <= int(m.group(1)) < 1400, msg
    assert s3("g64.ar") in msg and "(after 1 attempts)" in msg, msg
    assert int(said["lookups"]) == 1 and sorted(got["e2"]) == [10000], (said, got)
    check_bytes(got)


def test_the_lookup_again_runs_behind_the_known_addresses():
    """E2's name is looked up again after 200 ms, and that lookup hangs (sched-check
    lookup background): a read needing a new connection 250 ms later still lands at once,
    on the address already known, and closing the io object with the lookup hung returns
    at once (the lookup's thread finishes, and frees its state, on its own). Before, the
    read waited for the lookup, and so did the close."""
    rc, got, said, err = lookup_check("background")
    assert rc == 0, err[-2000:]
    assert int(said["background"]) < 1000 and int(said["close"]) < 1000, said
    assert sorted(got["e2"]) == [10000, 11500], got
    check_bytes(got)


def main():
    rs.run_suite(setup, [test_direct_path_reads_the_same_bytes_on_kept_connections,
                         test_truncated_bodies_and_503_are_retried, test_kept_connection_closed_by_the_server,
                         test_wrong_content_length_is_an_error,
                         test_head_too_long_is_an_error, test_every_address_of_the_name_is_tried,
                         test_the_name_is_looked_up_again, test_a_slow_lookup_stalls_no_other_endpoint,
                         test_a_lookup_slower_than_the_connect_timeout,
                         test_the_lookup_again_runs_behind_the_known_addresses], SERVERS, TMP)


if __name__ == "__main__":
    main()
