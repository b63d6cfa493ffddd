"""Lifecycle of the Python pipeline pieces (issue 35): grist.jax.device_put interrupted while it
starts its threads."""
import threading

import pytest

from conftest import grist  # noqa: F401


def test_device_put_interrupted_while_starting_its_threads(monkeypatch):
    """A KeyboardInterrupt between device_put's two thread starts (found by a
    lifecycle stress run) left the pipeline holding a thread never started: the next next() saw threads and
    waited forever for items nobody made, and close() raised "cannot join thread before it is
    started". The iteration now goes on where it stopped, and close() always stops it."""
    pytest.importorskip("jax")
    import numpy as np

    import grist.jax
    real = threading.Thread.start

    def interrupt_second_start(n):
        calls = []

        def start(self):
            calls.append(self.name)
            if len(calls) == n:
                raise KeyboardInterrupt
            return real(self)
        return start

    items = [np.full(4, k) for k in range(5)]
    monkeypatch.setattr(threading.Thread, "start", interrupt_second_start(2))
    it = grist.jax.device_put(iter(items))
    with pytest.raises(KeyboardInterrupt):
        next(it)
    monkeypatch.undo()
    got = []
    t = threading.Thread(target=lambda: got.extend(np.asarray(x) for x in it), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "device_put hung after an interrupted start"
    assert [int(x[0]) for x in got] == list(range(5))
    it.close()

    monkeypatch.setattr(threading.Thread, "start", interrupt_second_start(2))
    it = grist.jax.device_put(iter(items))
    with pytest.raises(KeyboardInterrupt):
        next(it)
    monkeypatch.undo()
    it.close()  # raised RuntimeError: cannot join thread before it is started
