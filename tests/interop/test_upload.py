"""Writes to object storage by multipart upload, against rclone serve s3 (SigV4 and
Content-MD5 checked), with the fault proxy between grist and rclone where a test breaks
something. rclone itself is the second client: `rclone backend list-multipart-uploads`
says whether an upload was left behind, and rclone's own part files
(.rclone_temp_multipart_*) in the served folder say whether parts were.

A write in many parts reads back byte-identical to the same convert to a local file
(s3:// and gs://, shards too); a part that keeps failing, a part whose body is corrupted
on the way, a SIGTERM mid-upload and one while the upload is being created each leave no
object, no upload and no part.
Skips (77) when rclone cannot start here.
"""
import os
import random
import signal
import subprocess
import tempfile
import time

import gristcli as g
from gristcli import Skip
import remote_servers as rs

TMP = tempfile.mkdtemp(prefix="grist-upload-")
ROOT = os.path.join(TMP, "root")
BUCKET = os.path.join(ROOT, "bkt")
LINES = os.path.join(TMP, "lines.txt")
SMALL = os.path.join(TMP, "small.txt")
SERVERS = {}
# 5 MiB parts (the least S3 allows), 3 at once: the 26 MB input makes 5 parts
WRITE = ["--from", "lines", "--options", "group_size:64,uncompressed", "--remote", "part:5M,upload_inflight:3"]


def setup():
    r = random.Random(34)
    with open(LINES, "w") as f:
        f.write("\n".join(r.randbytes(220).hex() for _ in range(60000)))
    with open(SMALL, "w") as f:
        f.write("\n".join("line %d" % i for i in range(500)))
    os.makedirs(BUCKET)
    SERVERS["rclone"] = rs.Rclone(ROOT)
    setenv(SERVERS["rclone"].endpoint)


def setenv(endpoint):
    for k in rs.REMOTE_ENV:
        os.environ.pop(k, None)
    os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID=rs.ACCESS_KEY,
                      AWS_SECRET_ACCESS_KEY=rs.SECRET_KEY)


def local_convert(name, extra=()):
    out = os.path.join(TMP, name)
    g.run_ok(["convert"] + WRITE[:4] + list(extra) + [LINES, out])
    return out


def uploads_left():
    return rs.multipart_uploads(SERVERS["rclone"], "bkt")


def clear_uploads():
    """Abort every multipart upload rclone lists: what a test that leaves one on purpose, or a
    failed run of a loop, clears."""
    rs.clear_multipart_uploads(SERVERS["rclone"], "bkt")
    assert uploads_left() == [], uploads_left()


def nothing_left(key):
    """No object at @key (nor a shard of it), no upload listed, no part file of rclone's."""
    names = []
    for d, _, files in os.walk(BUCKET):
        names += [os.path.relpath(os.path.join(d, f), BUCKET) for f in files]
    assert not [n for n in names if n.startswith(key)], names
    assert not [n for n in names if ".rclone_temp_multipart" in n], names
    assert uploads_left() == [], uploads_left()


def same_file(served, local):
    with open(os.path.join(BUCKET, served), "rb") as a, open(local, "rb") as b:
        assert a.read() == b.read(), served


def test_write_in_parts_reads_back_equal():
    """26 MB in 5 parts, 3 at once: the object is the local convert's bytes; `grist verify` and
    `cat` read it back; no upload is left. Then 3 shards, gs:// through the XML API,
    `grist write` below 1 MiB (one PutObject) and of 2 MB (an upload of one short part)."""
    want = local_convert("one.ar")
    g.run_ok(["convert"] + WRITE + [LINES, "s3://bkt/one.ar"])
    same_file("one.ar", want)
    assert b"ok" in g.run_ok(["verify", "s3://bkt/one.ar"])
    assert uploads_left() == []
    want = local_convert("sh.ar", ["--shards", "3"])
    g.run_ok(["convert"] + WRITE + ["--shards", "3", LINES, "s3://bkt/sh/sh.ar"])
    for k in range(3):
        same_file("sh/sh.ar-%05d-of-00003" % k, want + "-%05d-of-00003" % k)
    os.environ["GRIST_GS_ENDPOINT_URL"] = SERVERS["rclone"].endpoint
    try:
        g.run_ok(["convert"] + WRITE + [LINES, "gs://bkt/gs.ar"])
    finally:
        os.environ.pop("GRIST_GS_ENDPOINT_URL")
    same_file("gs.ar", os.path.join(TMP, "one.ar"))
    with open(SMALL, "rb") as f:
        rc, _, err = g.run(["write", "s3://bkt/small.ar"], stdin=f.read())
    assert rc == 0, err
    local = os.path.join(TMP, "small.ar")
    with open(SMALL, "rb") as f:
        g.run_ok(["write", local], stdin=f.read())
    same_file("small.ar", local)
    # 2 MB: below a part, above PutObject's 1 MiB: an upload of one (short) part
    mid = b"\n".join(b"%06d" % i * 30 for i in range(10000))
    g.run_ok(["write", "s3://bkt/mid.ar", "--options", "uncompressed"], stdin=mid)
    g.run_ok(["write", os.path.join(TMP, "mid.ar"), "--options", "uncompressed"], stdin=mid)
    same_file("mid.ar", os.path.join(TMP, "mid.ar"))
    assert os.path.getsize(os.path.join(TMP, "mid.ar")) > 1 << 20
    assert uploads_left() == []


def failing(mode, select, key, words, remote="retries:1,backoff_ms:5"):
    p = rs.FaultProxy(SERVERS["rclone"].port, mode=mode, select=select)
    try:
        setenv(p.endpoint)
        rc, _, err = g.run(["convert"] + WRITE[:-1] + [WRITE[-1] + "," + remote, LINES, "s3://bkt/" + key])
    finally:
        setenv(SERVERS["rclone"].endpoint)
        p.stop()
    assert rc == 1, (rc, err)
    for w in words:
        assert w in err, (w, err)
    assert p.faults > 0
    nothing_left(key)
    return p


def is_part(n):
    return lambda line, fields: line.startswith("PUT ") and ("partNumber=%d&" % n) in line


def test_failed_part_aborts():
    """Part 3 answers 500/502 every time, then (another upload) is cut off mid-body every time:
    the retries are spent, the upload is aborted, the error names the URL, the part and the
    status or the reset; nothing is left."""
    p = failing("5xx", is_part(3), "fail.ar", ["s3://bkt/fail.ar", "part 3", "HTTP 50"])
    assert any(l.startswith("DELETE ") and "uploadId=" in l for l, _ in p.heads), [l for l, _ in p.heads]
    # cut off mid-body every time: rclone holds half-received parts, the abort still leaves none
    p = failing("cut", is_part(3), "cut.ar", ["s3://bkt/cut.ar", "part 3", "(after 2 attempts)"])
    assert any(l.startswith("DELETE ") and "uploadId=" in l for l, _ in p.heads), [l for l, _ in p.heads]


def test_failed_abort_is_told():
    """Part 3 and the AbortMultipartUpload after it both answer 500 every time (a server that
    went away, as the upload's own failure often is): the upload cannot be aborted, and grist
    says so, naming the URL and the UploadId that the server still lists, rather than leave
    billed parts behind unannounced."""
    def select(line, fields):
        return is_part(3)(line, fields) or (line.startswith("DELETE ") and "uploadId=" in line)
    p = rs.FaultProxy(SERVERS["rclone"].port, mode="5xx", select=select)
    try:
        setenv(p.endpoint)
        rc, _, err = g.run(["convert"] + WRITE[:-1] + [WRITE[-1] + ",retries:1,backoff_ms:5", LINES,
                                                       "s3://bkt/unaborted.ar"])
    finally:
        setenv(SERVERS["rclone"].endpoint)
        p.stop()
    try:
        assert rc == 1 and "(part 3)" in err, (rc, err)
        ids = [l.split("uploadId=")[1].split()[0].split("&")[0] for l, _ in p.heads if l.startswith("DELETE ")]
        assert ids and "s3://bkt/unaborted.ar: the upload could not be aborted" in err, err
        assert "parts stay at the server until it is aborted (UploadId %s)" % ids[0] in err, (ids, err)
        assert uploads_left() == ["unaborted.ar"], uploads_left()
    finally:
        clear_uploads()


def once(pick):
    """A FaultProxy select that picks the first request @pick picks, and no other: the retry passes."""
    fired = []

    def select(line, fields):
        if fired or not pick(line, fields):
            return False
        fired.append(line)
        return True
    return select


def test_refused_part_is_retried():
    """Part 3 answered 503 SlowDown once, then part 2 cut off mid-body (half of it reaches rclone,
    then both connections reset): each is sent again, as a read would be, and the write succeeds
    with the local convert's bytes; the retries show in the proxy's log and nothing is left."""
    want = os.path.join(TMP, "one.ar")
    if not os.path.exists(want):
        want = local_convert("one.ar")
    for mode, part in (("slowdown", 3), ("cut", 2)):
        key = "retried-%s.ar" % mode
        p = rs.FaultProxy(SERVERS["rclone"].port, mode=mode, select=once(is_part(part)))
        try:
            setenv(p.endpoint)
            g.run_ok(["convert"] + WRITE[:-1] + [WRITE[-1] + ",retries:2,backoff_ms:5", LINES, "s3://bkt/" + key])
        finally:
            setenv(SERVERS["rclone"].endpoint)
            p.stop()
        assert p.faults == 1, (mode, p.faults)
        sent = [l for l, _ in p.heads if l.startswith("PUT ") and ("partNumber=%d&" % part) in l]
        assert len(sent) == 2, (mode, sent)
        same_file(key, want)
        assert uploads_left() == []


def test_corrupted_part_is_refused():
    """Part 2's body has one bit flipped on the way: its Content-MD5 no longer matches and rclone
    refuses it (rclone then drops the whole upload: NoSuchUpload; S3 says BadDigest); grist fails
    and leaves nothing."""
    failing("corrupt", is_part(2), "bad.ar", ["s3://bkt/bad.ar", "HTTP 400 BadDigest", "(part 2)"])


def sigterm_when(key, delay, ready):
    """`grist convert` to s3://bkt/@key through a proxy that holds every request @delay s, sent
    SIGTERM once ready(request lines the proxy has seen) holds: it must die of the signal,
    having sent AbortMultipartUpload, and leave nothing. Returns the request lines."""
    p = rs.FaultProxy(SERVERS["rclone"].port, delay=delay)
    try:
        setenv(p.endpoint)
        proc = subprocess.Popen([g.grist_cli(), "convert"] + WRITE + [LINES, "s3://bkt/" + key],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=g.default_signal_actions)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not ready([l for l, _ in p.heads]):
            time.sleep(0.01)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        err = proc.stderr.read()
    finally:
        setenv(SERVERS["rclone"].endpoint)
        p.stop()
    lines = [l for l, _ in p.heads]
    assert rc == -signal.SIGTERM, (rc, err)
    assert any(l.startswith("DELETE ") and "uploadId=" in l for l in lines), lines
    nothing_left(key)
    return lines


def test_sigterm_mid_upload_aborts():
    """SIGTERM while parts are uploading through a 300 ms proxy: the process dies of it and the
    upload is aborted on the way out: no object, no upload, no part."""
    sigterm_when("term.ar", 0.3, lambda lines: sum(1 for l in lines if "partNumber=" in l) >= 2)


def test_sigterm_while_creating_aborts():
    """SIGTERM while CreateMultipartUpload is on its way (every request held 1 s by the proxy,
    the signal sent once the POST reached it): the server makes the upload after the signal,
    so the process waits for its UploadId and aborts it before dying of the signal. A
    handler that gave up when no upload was known yet left this upload behind every time."""
    lines = sigterm_when("creating.ar", 1.0, lambda lines: any(l.startswith("POST ") for l in lines))
    assert not any("partNumber=" in l for l in lines), lines


def test_second_signal_kills_at_once():
    """A second signal while the first one's abort waits (for a CreateMultipartUpload the proxy
    holds 1 s) ends the process at once, of the second signal, as a second Ctrl-C does
    elsewhere: SIGINT, then SIGTERM. Deferred, the process would die of the SIGINT after the
    abort; had both come before the first was taken, SIGINT (the lower number) is taken first
    and SIGTERM still kills. What the abort had not done (the upload) is left, and cleared here."""
    p = rs.FaultProxy(SERVERS["rclone"].port, delay=1.0)
    try:
        setenv(p.endpoint)
        proc = subprocess.Popen([g.grist_cli(), "convert"] + WRITE + [LINES, "s3://bkt/twice.ar"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=g.default_signal_actions)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(l.startswith("POST ") for l, _ in p.heads):
            time.sleep(0.01)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        err = proc.stderr.read()
        time.sleep(1.2)  # the held POST reaches rclone: the upload the killed process left
    finally:
        setenv(SERVERS["rclone"].endpoint)
        p.stop()
    assert rc == -signal.SIGTERM, (rc, err)
    clear_uploads()


def test_outputs_that_cannot_be_written():
    """http(s):// cannot be written, a bucket is not an object, and --from imagefolder (a folder
    renamed into place whole) refuses a URL: each a clear error, and nothing made locally (no
    folder named "s3:" in the working directory): usage errors, exit 2."""
    os.makedirs(os.path.join(TMP, "imgs", "train", "cat"))
    cwd = os.getcwd()
    os.chdir(TMP)
    try:
        for out, words in (("http://127.0.0.1:1/x.ar", ["s3:// and gs:// URLs only"]),
                           ("s3://bkt/", ["names a bucket but no object key"]),
                           ("s3://bkt/dir/", ["names a folder"])):
            rc, _, err = g.run(["convert", "--from", "lines", SMALL, out])
            assert rc == 2 and all(w in err for w in words), (out, rc, err)
        rc, _, err = g.run(["convert", "--from", "imagefolder", os.path.join(TMP, "imgs"), "s3://bkt/ds/1.0.0"])
        assert rc == 2 and "writes a local dataset folder" in err, (rc, err)
        assert not os.path.exists(os.path.join(TMP, "s3:")), os.listdir(TMP)
    finally:
        os.chdir(cwd)
    nothing_left("ds")


def main():
    rs.run_suite(setup, [test_write_in_parts_reads_back_equal, test_failed_part_aborts, test_failed_abort_is_told,
                  test_refused_part_is_retried,
                  test_corrupted_part_is_refused,
                  test_sigterm_mid_upload_aborts, test_sigterm_while_creating_aborts,
                  test_second_signal_kills_at_once, test_outputs_that_cannot_be_written], SERVERS, TMP)


if __name__ == "__main__":
    main()
