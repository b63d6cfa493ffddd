"""examples/train_jax.py: the loss falls, and a run resumed from a checkpoint sees the same batches."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("jax")
EXAMPLE = os.path.join(ROOT, "examples", "train_jax.py")


def run(*args):
    p = subprocess.run([sys.executable, EXAMPLE] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_loss_falls_and_resume_sees_the_same_batches(tmp_path):
    data = tmp_path / "data"
    whole = run("--data", data, "--steps", 300, "--trace", tmp_path / "whole.trace")
    assert whole["steps"] == 300
    assert whole["last_loss"] < 0.5 * whole["first_loss"]

    first = run("--data", data, "--steps", 140, "--trace", tmp_path / "split.trace", "--save", tmp_path / "ck.npz")
    assert first["steps"] == 140
    rest = run("--data", data, "--steps", 300, "--trace", tmp_path / "split.trace", "--resume", tmp_path / "ck.npz")
    assert rest["steps"] == 300
    whole_trace = (tmp_path / "whole.trace").read_text().splitlines()
    assert len(whole_trace) == 300
    assert (tmp_path / "split.trace").read_text().splitlines() == whole_trace
    assert rest["w"] == whole["w"] and rest["b"] == whole["b"]
