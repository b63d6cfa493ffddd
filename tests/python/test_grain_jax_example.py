"""examples/grain_jax.py: Parquet -> TFDS dataset -> Grain over grist -> sharded device_put -> jitted
step; the loss falls, and a run resumed from its checkpoint sees exactly the same batches."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("jax")
pytest.importorskip("grain")
pytest.importorskip("pyarrow")
EXAMPLE = os.path.join(ROOT, "examples", "grain_jax.py")


def run(*args):
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2")
    p = subprocess.run([sys.executable, EXAMPLE] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_loss_falls_and_resume_sees_the_same_batches(tmp_path):
    data = tmp_path / "data"
    whole = run("--data", data, "--steps", 160, "--trace", tmp_path / "whole.trace")
    assert whole["steps"] == 160 and whole["devices"] == 2
    assert whole["last_loss"] < 0.5 * whole["first_loss"]
    run("--data", data, "--steps", 70, "--trace", tmp_path / "split.trace", "--save", tmp_path / "ck.json")
    rest = run("--data", data, "--steps", 160, "--trace", tmp_path / "split.trace", "--resume", tmp_path / "ck.json")
    whole_trace = (tmp_path / "whole.trace").read_text().splitlines()
    assert len(whole_trace) == 160 and len(set(whole_trace)) == 160
    assert (tmp_path / "split.trace").read_text().splitlines() == whole_trace
    assert rest["w"] == whole["w"] and rest["b"] == whole["b"]
