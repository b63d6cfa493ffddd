"""Several processes on one file, each its own shard: disjoint and complete, epoch by epoch."""
import json
import os
import socket
import subprocess
import sys

from conftest import HERE, write_dataset

HOSTS = 4
RECORDS = 4000  # a multiple of HOSTS: each shard's first RECORDS / HOSTS positions are epoch 0


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return str(s.getsockname()[1])


def test_four_processes_cover_two_epochs(tmp_path):
    path = write_dataset(tmp_path / "one.ar", RECORDS, "group_size:5,zstd:1")
    port = free_port()
    script = os.path.join(HERE, "multihost_main.py")
    procs = [subprocess.Popen([sys.executable, script, str(i), str(HOSTS), port, path],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(HOSTS)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["index"] for r in results) == list(range(HOSTS))
    assert all(r["count"] == HOSTS for r in results)
    per_shard = RECORDS // HOSTS
    for epoch in range(2):
        parts = [r["indices"][epoch * per_shard:(epoch + 1) * per_shard] for r in results]
        assert all(len(p) == per_shard for p in parts)
        union = [i for p in parts for i in p]
        assert sorted(union) == list(range(RECORDS))  # disjoint (no index twice) and complete
    assert all(len(r["indices"]) == 2 * per_shard for r in results)
    assert results[0]["indices"][:per_shard] != results[0]["indices"][per_shard:]  # reshuffled
