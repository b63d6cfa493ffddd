"""Remote reads and writes over TLS, against rclone serve s3 and rclone serve http with
--cert/--key, their CA and certificates made here by the openssl CLI (remote_servers.TlsCerts).

An s3:// load at 2 threads gives the local file's --digest with the CA named in
AWS_CA_BUNDLE (CURL_CA_BUNDLE and SSL_CERT_FILE are honoured too); a multipart write over
https is the local convert's bytes, with no upload left. Without the CA, with a host name
the certificate does not carry, or with a CA file that is not there, every command fails at
once, naming the host and the TLS failure (no retries); a handshake cut short by a reset or
a close (remote_servers.CutRelay) is retried. An https:// dataset behind an
http -> https -> https redirect chain reads as the local file. Skips (77) when rclone or the
openssl CLI is missing. Python's Reader and Loader over https: tests/python/test_remote_tls.py.
"""
import http.server
import os
import random
import ssl
import tempfile
import threading
import time

import gristcli as g
import remote_servers as rs

TMP = tempfile.mkdtemp(prefix="grist-tls-")
ROOT = os.path.join(TMP, "root")
BUCKET = os.path.join(ROOT, "bkt")
LINES = os.path.join(TMP, "lines.txt")
SERVERS = {}
CERTS = []
TLS_ENV = ("AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")
LOAD = ["--batch-size", 64, "--seed", 3, "--epochs", 2, "--threads", 2, "--digest"]
# 5 MiB parts, 2 at once: the 13 MB input makes 3 parts
WRITE = ["--from", "lines", "--options", "group_size:64,uncompressed", "--remote", "part:5M,upload_inflight:2"]


def local(name):
    return os.path.join(BUCKET, name)


def setenv(endpoint, ca="AWS_CA_BUNDLE"):
    """The environment for the s3 server at @endpoint, the test CA in the variable @ca (None: no CA)."""
    for k in rs.REMOTE_ENV + ("http_proxy", "all_proxy", "ALL_PROXY"):
        os.environ.pop(k, None)
    os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID=rs.ACCESS_KEY,
                      AWS_SECRET_ACCESS_KEY=rs.SECRET_KEY)
    if ca:
        os.environ[ca] = CERTS[0].ca


class Hop:
    """A threaded http(s) server answering every GET with a 302 to TARGET + the same path."""

    def __init__(self, target, tls=None):
        owner = self
        self.target = target
        self.hits = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                owner.hits += 1
                self.send_response(302)
                self.send_header("Location", owner.target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.endpoint = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.port)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def setup():
    os.makedirs(BUCKET)
    r = random.Random(38)
    recs = [r.randbytes(200 + i % 300) for i in range(4000)]
    g.write_records(local("g64.ar"), "group_size:64,zstd:1", recs)
    with open(LINES, "w") as f:
        f.write("\n".join(r.randbytes(220).hex() for _ in range(30000)))
    certs = rs.TlsCerts(TMP)
    CERTS.append(certs)
    tls = certs.server("server", ["IP:127.0.0.1"])
    SERVERS["s3"] = rs.Rclone(ROOT, tls=tls)
    SERVERS["http"] = rs.RcloneHttp(ROOT, tls=tls)
    SERVERS["hop_tls"] = Hop(SERVERS["http"].endpoint, tls=tls)
    SERVERS["hop"] = Hop(SERVERS["hop_tls"].endpoint)
    setenv(SERVERS["s3"].endpoint)


def test_s3_load_over_https_at_two_threads():
    """The CA in AWS_CA_BUNDLE, CURL_CA_BUNDLE or SSL_CERT_FILE: the local file's digest; a
    glob's listing and gs:// too."""
    want = g.run_ok(["load", local("g64.ar")] + LOAD)
    for ca in ("AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"):
        setenv(SERVERS["s3"].endpoint, ca)
        assert g.run_ok(["load", "s3://bkt/g64.ar"] + LOAD) == want, ca
    setenv(SERVERS["s3"].endpoint)
    assert g.run_ok(["cat", "--hex", "s3://bkt/g6*.ar"]) == g.run_ok(["cat", "--hex", local("g64.ar")])  # a listing
    os.environ["GRIST_GS_ENDPOINT_URL"] = SERVERS["s3"].endpoint   # gs:// through rclone's S3 face
    try:
        assert g.run_ok(["load", "gs://bkt/g64.ar"] + LOAD) == want
    finally:
        os.environ.pop("GRIST_GS_ENDPOINT_URL")


def test_multipart_write_over_https():
    """Three parts uploaded over https: the object is the local convert's bytes; none left."""
    out = os.path.join(TMP, "conv.ar")
    g.run_ok(["convert"] + WRITE[:4] + [LINES, out])
    g.run_ok(["convert"] + WRITE + [LINES, "s3://bkt/conv.ar"])
    with open(local("conv.ar"), "rb") as a, open(out, "rb") as b:
        assert a.read() == b.read()
    assert os.path.getsize(out) > 10 << 20
    assert g.run_ok(["load", "s3://bkt/conv.ar"] + LOAD) == g.run_ok(["load", out] + LOAD)
    assert rs.multipart_uploads(SERVERS["s3"], "bkt", ca=CERTS[0].ca) == []


def refused(args, words, seconds=5.0):
    """@args fail within @seconds, at the first attempt, with @words in the message."""
    t0 = time.monotonic()
    err = g.expect_error(args, words, timeout=30)
    assert time.monotonic() - t0 < seconds, err
    assert "attempts" not in err, err
    return err


def test_untrusted_certificate_is_a_clear_error():
    """No CA given: every command that meets the server stops at once, naming the host."""
    host = "127.0.0.1:%d" % SERVERS["s3"].port
    setenv(SERVERS["s3"].endpoint, None)
    try:
        words = ["TLS with " + host, "certificate", "AWS_CA_BUNDLE"]
        refused(["info", "s3://bkt/g64.ar"], words)
        refused(["load", "s3://bkt/g64.ar", "--remote", "retries:5,backoff_ms:500"] + LOAD, words)
        refused(["cat", "s3://bkt/*.ar"], words)           # the listing
        refused(["write", "s3://bkt/never.ar"], words + ["never.ar"])
        refused(["info", SERVERS["http"].endpoint + "/bkt/g64.ar"],
                ["TLS with 127.0.0.1:%d" % SERVERS["http"].port] + words[1:])
        assert not os.path.exists(local("never.ar"))
        os.environ["AWS_CA_BUNDLE"] = os.path.join(TMP, "no-such-ca.pem")
        refused(["info", "s3://bkt/g64.ar"], ["TLS with " + host, "AWS_CA_BUNDLE=" + os.environ["AWS_CA_BUNDLE"]])
    finally:
        setenv(SERVERS["s3"].endpoint)


def test_host_name_mismatch_is_a_clear_error():
    """The certificate names 127.0.0.1 only: "localhost" is refused, naming it."""
    setenv("https://localhost:%d" % SERVERS["s3"].port)
    try:
        refused(["info", "s3://bkt/g64.ar"], ["TLS with localhost:%d" % SERVERS["s3"].port, "localhost",
                                              "AWS_CA_BUNDLE=" + CERTS[0].ca])
    finally:
        setenv(SERVERS["s3"].endpoint)


def test_handshake_cut_short_is_retried():
    """A reset or a close during the handshake (a balancer under load) is retried as a reset
    before a plain http answer is; when every handshake is cut, the error names it and the
    attempts, within the retries."""
    want = g.run_ok(["load", local("g64.ar")] + LOAD)
    for reset in (True, False):
        relay = rs.CutRelay(SERVERS["s3"].port, cut=1, reset=reset)
        try:
            setenv("https://127.0.0.1:%d" % relay.port)
            out = g.run_ok(["load", "s3://bkt/g64.ar", "--remote", "backoff_ms:10", "--stats"] + LOAD)
            assert out == want and relay.seen >= 2, (reset, relay.seen)
        finally:
            relay.stop()
    relay = rs.CutRelay(SERVERS["s3"].port, cut=1000)
    try:
        setenv("https://127.0.0.1:%d" % relay.port)
        g.expect_error(["info", "s3://bkt/g64.ar", "--remote", "retries:2,backoff_ms:10"],
                       ["TLS with 127.0.0.1:%d" % relay.port, "cut during the handshake", "after 3 attempts"])
        assert relay.seen == 3, relay.seen
    finally:
        relay.stop()
        setenv(SERVERS["s3"].endpoint)


def test_redirects_http_to_https_to_https():
    """http://hop -> https://hop_tls -> https://rclone-http: the local file's digest."""
    url = SERVERS["hop"].endpoint + "/bkt/g64.ar"
    hits = SERVERS["hop"].hits
    assert g.run_ok(["load", url] + LOAD) == g.run_ok(["load", local("g64.ar")] + LOAD)
    assert SERVERS["hop"].hits > hits and SERVERS["hop_tls"].hits > 0


def main():
    rs.run_suite(setup, [test_s3_load_over_https_at_two_threads, test_multipart_write_over_https, test_untrusted_certificate_is_a_clear_error,
                         test_host_name_mismatch_is_a_clear_error, test_handshake_cut_short_is_retried,
                         test_redirects_http_to_https_to_https],
                 SERVERS, TMP)


if __name__ == "__main__":
    main()
