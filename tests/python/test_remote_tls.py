"""grist.Reader and grist.Loader over https: s3:// from rclone serve s3 --cert/--key, its CA
made here by the openssl CLI (tests/interop/remote_servers.py's TlsCerts) and named in
AWS_CA_BUNDLE. The CA variables are read once per process, at its first remote request, so
each case runs in a Python process of its own (the same interpreter and package as pytest's),
not in pytest's, whose earlier tests have already read them."""
import os
import subprocess
import sys

import pytest

from conftest import grist, write_dataset  # noqa: F401  (skips when grist is not importable)

rs = pytest.importorskip("remote_servers")
from gristcli import Skip  # noqa: E402

CODE = r"""
import sys, grist
local, url = sys.argv[1:3]
want = grist.Reader(local)
r = grist.Reader(url)
idx = [0, len(want) - 1, 1234, 77]
assert len(r) == len(want) and r.read(idx) == want.read(idx)
seen = []
loader = grist.Loader(url, 500, seed=0, epochs=1, threads=2)
for b in loader:
    seen.extend(int(i) for i in b.indices)
    b.release()
assert sorted(seen) == list(range(len(want))), len(seen)
assert loader.stats()["remote"]["requests"] > 0
print("ok")
"""


@pytest.fixture(scope="module")
def https_s3(tmp_path_factory):
    root = tmp_path_factory.mktemp("tls")
    (root / "bkt").mkdir()
    write_dataset(root / "bkt" / "a.ar", 3000, "group_size:16,zstd:1")
    try:
        certs = rs.TlsCerts(str(root))
        server = rs.Rclone(str(root), tls=certs.server("server", ["IP:127.0.0.1"]))
    except Skip as e:
        pytest.skip(str(e))
    env = {k: v for k, v in os.environ.items() if k not in rs.REMOTE_ENV}
    env.update(AWS_ENDPOINT_URL=server.endpoint, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID=rs.ACCESS_KEY,
               AWS_SECRET_ACCESS_KEY=rs.SECRET_KEY)
    yield str(root / "bkt" / "a.ar"), certs.ca, env
    server.stop()


def run(local, env):
    return subprocess.run([sys.executable, "-c", CODE, local, "s3://bkt/a.ar"], env=env, capture_output=True,
                          text=True, timeout=60)


def test_reader_and_loader_over_https(https_s3):
    local, ca, env = https_s3
    p = run(local, dict(env, AWS_CA_BUNDLE=ca))
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


def test_untrusted_is_grist_error_naming_the_host(https_s3):
    local, _, env = https_s3
    p = run(local, env)
    assert p.returncode != 0
    assert "grist.Error" in p.stderr and "TLS with 127.0.0.1:" in p.stderr and "AWS_CA_BUNDLE" in p.stderr, p.stderr
