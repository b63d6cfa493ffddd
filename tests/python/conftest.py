"""Fixtures the Python package tests share: datasets written with grist.Writer, the CLI."""
import os
import random
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))

grist = pytest.importorskip("grist")


def record(i):
    """Record i of the test datasets: varied lengths, content that names its index."""
    rng = random.Random(i)
    return (b"rec-%06d-" % i) + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))


def write_dataset(path, n, options="group_size:3,zstd:3", first=0):
    with grist.Writer(str(path), options) as w:
        for i in range(first, first + n):
            w.write(record(i))
    return str(path)


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    """Three files of one dataset (1000 + 700 + 301 records), mixed group sizes and codecs."""
    d = tmp_path_factory.mktemp("data")
    return [write_dataset(d / "a.ar", 1000, "group_size:3,zstd:3"),
            write_dataset(d / "b.ar", 700, "group_size:1,snappy", first=1000),
            write_dataset(d / "c.ar", 301, "group_size:16,uncompressed", first=1700)]


@pytest.fixture(scope="session")
def all_records():
    return [record(i) for i in range(2001)]


def grist_cli():
    """The `grist` CLI: $GRIST_CLI, else a build folder of this tree, else PATH; None if absent."""
    for p in (os.environ.get("GRIST_CLI"), os.path.join(ROOT, "build", "release", "tools", "grist"),
              os.path.join(ROOT, "build", "tools", "grist")):
        if p and os.access(p, os.X_OK):
            return p
    from shutil import which
    return which("grist")


@pytest.fixture(scope="session")
def cli():
    path = grist_cli()
    if not path:
        pytest.skip("the grist CLI is not built (set GRIST_CLI)")

    def run(*args):
        p = subprocess.run([path] + [str(a) for a in args], capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        return p.stdout.decode()
    return run


@pytest.fixture(scope="session")
def xxh():
    """XXH64 of bytes, as the CLI's --digest computes it (tests/interop/gristcli.py)."""
    try:
        from gristcli import XXH64, Skip
    except ImportError:
        pytest.skip("tests/interop/gristcli.py not found")
    try:
        return XXH64()
    except Skip as e:
        pytest.skip(str(e))
