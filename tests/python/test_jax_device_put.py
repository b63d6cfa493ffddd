"""grist.jax.device_put on two XLA CPU devices with a NamedSharding (in a subprocess: XLA_FLAGS must
be set before jax is imported). The checks themselves are in device_put_main.py."""
import os
import subprocess
import sys

import pytest

from conftest import HERE, write_dataset

pytest.importorskip("jax")

CHECKS = ["dicts", "loader_batches", "one_device", "transfer_off_the_callers_thread", "errors_reach_the_caller",
          "close_early", "state_is_exact", "grain_iterator_source"]


def test_device_put_on_two_devices(tmp_path):
    data = write_dataset(tmp_path / "d.ar", 900, "group_size:4,zstd:3")
    checks = list(CHECKS)
    try:
        import grain  # noqa: F401
    except ImportError:
        checks.remove("grain_iterator_source")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, os.path.join(HERE, "device_put_main.py"), data] + checks,
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert p.stdout.split() == [w for c in checks for w in ("ok", c)]
