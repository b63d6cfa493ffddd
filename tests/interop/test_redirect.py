"""HTTP redirects of remote reads, against real servers: nginx serves the data (its
secure_link module is the expiring signed target a CDN hands out), a small Python http
server answers with the redirects (301, 302, 303, 307, 308), and the fault proxy in front
of nginx records what reaches the target.

A chain of 3 reads as the local file; a loop and a chain past the limit fail naming the
chain; an s3:// GET redirected to another host arrives there without Authorization or any
x-amz-* header; a signed target that expires mid-read is resolved again from the origin.
Skips (77) when nginx cannot start here.
"""
import base64
import hashlib
import http.server
import os
import tempfile
import threading
import time

import gristcli as g
from gristcli import Skip
import remote_servers as rs

TMP = tempfile.mkdtemp(prefix="grist-redirect-")
ROOT = os.path.join(TMP, "root")
SECRET = "grist-link-secret"
SERVERS = {}


def rec(i):
    return b"rec-%05d-" % i + bytes((i * 13 + k) % 251 for k in range(i % 200))


def local(name):
    return os.path.join(ROOT, "bkt", name)


class Redirector:
    """A threaded http server answering every GET with a redirect (never a body of data):
      /chain/N/PATH   -> /chain/N-1/PATH, and /chain/0/PATH -> TARGET/PATH (N+1 hops in all)
      /loop/a -> /loop/b -> /loop/a
      /signed/PATH    -> SIGNED/sl/PATH?md5=..&expires=now+1 (nginx secure_link)
      /badsig/PATH    -> the same with a wrong md5
      /bkt/KEY        -> OTHER/bkt/KEY, 307 (an S3 endpoint that sends its GETs elsewhere)
    The status cycles through 301, 302, 303, 307, 308. Each request's path and headers are kept."""

    CODES = (301, 302, 303, 307, 308)

    def __init__(self):
        self.hits = []
        self.target = self.signed = self.other = None
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                owner.hits.append((self.path, dict((k.lower(), v) for k, v in self.headers.items())))
                code, location = owner.answer(self.path, len(owner.hits))
                self.send_response(code)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path, n):
        code = self.CODES[n % len(self.CODES)]
        parts = path.split("/", 3)
        if parts[1] == "chain":
            k, rest = int(parts[2]), parts[3]
            return code, "/chain/%d/%s" % (k - 1, rest) if k else "%s/%s" % (self.target, rest)
        if path == "/loop/a":
            return code, "b"  # relative to the folder
        if path == "/loop/b":
            return code, self.url + "/loop/a"
        if parts[1] in ("signed", "badsig"):
            uri = "/sl/" + path.split("/", 2)[2]
            expires = int(time.time()) + 1
            md5 = base64.urlsafe_b64encode(hashlib.md5(("%d%s %s" % (expires, uri, SECRET)).encode())
                                           .digest()).rstrip(b"=").decode()
            if parts[1] == "badsig":
                md5 = md5[::-1]
            return code, "%s%s?md5=%s&expires=%d" % (self.signed, uri, md5, expires)
        if parts[1] == "bkt":
            return 307, "%s%s" % (self.other, path)
        return 404, None

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def setup():
    os.chmod(TMP, 0o755)  # nginx's workers run as another user
    os.makedirs(os.path.join(ROOT, "bkt"))
    g.write_records(local("a.ar"), "group_size:1,zstd:3", [rec(i) for i in range(900)])
    conf = ("location /sl/ { secure_link $arg_md5,$arg_expires; "
            "secure_link_md5 \"$secure_link_expires$uri %s\"; "
            "if ($secure_link = \"\") { return 403; } if ($secure_link = \"0\") { return 403; } "
            "alias %s/; }" % (SECRET, ROOT))
    SERVERS["nginx"] = rs.Nginx(ROOT, server_conf=conf)
    # the target seen through a recording proxy, by another name for the same machine
    SERVERS["proxy"] = rs.FaultProxy(SERVERS["nginx"].port)
    SERVERS["redir"] = r = Redirector()
    r.target = SERVERS["nginx"].url
    r.signed = "http://localhost:%d" % SERVERS["proxy"].port
    r.other = "http://localhost:%d" % SERVERS["proxy"].port


def same(args_remote, args_local):
    out_r = g.run_ok(args_remote)
    assert out_r == g.run_ok(args_local), args_remote
    return out_r


def test_chain_of_three():
    """3 redirects (three different codes) to nginx: the same bytes as the local file, and the
    later ranged GETs go straight to the final URL (the redirector sees only the opening's chain)."""
    r = SERVERS["redir"]
    url = r.url + "/chain/2/bkt/a.ar"
    del r.hits[:]
    same(["cat", "--hex", url, "--remote", "split:16K,coalesce:0"], ["cat", "--hex", local("a.ar")])
    # one chain per opening: the CLI opens the file once for its reads (more GETs than 3)
    assert len(r.hits) % 3 == 0 and 0 < len(r.hits) <= 6, [h[0] for h in r.hits]
    a = ["--batch-size", 32, "--seed", 4, "--digest"]
    same(["load", url] + a, ["load", local("a.ar")] + a)
    # the limit: 3 hops with redirects:2 is an error naming the chain
    g.expect_error(["info", url, "--remote", "redirects:2"],
                 [url, "more than 2 redirects", "/chain/1/bkt/a.ar", "/chain/0/bkt/a.ar -> " + r.target])


def test_loop_is_an_error():
    url = SERVERS["redir"].url + "/loop/a"
    t0 = time.monotonic()
    g.expect_error(["info", url], [url, "redirect loop", "/loop/a -> %s/loop/b -> %s" % (SERVERS["redir"].url, url)])
    assert time.monotonic() - t0 < 10


def test_no_credentials_to_another_host():
    """s3:// with keys, its endpoint answering 307 to another host: the origin got a signed
    request, the target got neither Authorization nor any x-amz-* header, and the bytes match."""
    r, p = SERVERS["redir"], SERVERS["proxy"]
    del r.hits[:]
    del p.heads[:]
    with rs.remote_env(r.url):
        same(["cat", "--hex", "s3://bkt/a.ar"], ["cat", "--hex", local("a.ar")])
    assert r.hits and all(h[1].get("authorization", "").startswith("AWS4-HMAC-SHA256") for h in r.hits), r.hits
    assert p.heads, "nothing reached the target"
    for line, fields in p.heads:
        leaked = [k for k in fields if k == "authorization" or k.startswith("x-amz-")]
        assert not leaked, (line, leaked)
        assert fields.get("host", "").startswith("localhost:"), fields


def test_expiring_target_is_resolved_again():
    """A signed target valid 1-2 s, read in 15 GETs one at a time through a 200 ms proxy (3 s):
    once it expires (403) the reader asks the origin again and reads on; the
    bytes are the local file's. A target refused from the start is an error saying so."""
    r = SERVERS["redir"]
    p = SERVERS["proxy"]
    del r.hits[:]
    p.delay = 0.2
    try:
        same(["cat", "--hex", r.url + "/signed/bkt/a.ar", "--remote", "split:16K,coalesce:16K,inflight:1"],
             ["cat", "--hex", local("a.ar")])
    finally:
        p.delay = 0
    print("signed target: %d resolutions" % len(r.hits))
    assert len(r.hits) >= 2, len(r.hits)
    url = r.url + "/badsig/bkt/a.ar"
    g.expect_error(["info", url], [url, "HTTP 403", "at a redirect's target"])


def main():
    rs.run_suite(setup, [test_chain_of_three, test_loop_is_an_error, test_no_credentials_to_another_host,
                  test_expiring_target_is_resolved_again], SERVERS, TMP)


if __name__ == "__main__":
    main()
