"""Checks of grist.jax.device_put on 2 CPU devices; run by test_jax_device_put.py in a fresh process,
because XLA_FLAGS=--xla_force_host_platform_device_count=2 must be set before jax is imported.

    device_put_main.py DATASET CHECK...   prints "ok CHECK" for each check that passed
"""
import gc
import os
import sys
import threading

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import grist  # noqa: E402
import grist.jax  # noqa: E402

DATA = sys.argv[1]
OPTS = dict(seed=3, epochs=1, layout="padded", record_bytes=256)
assert len(jax.devices()) == 2, jax.devices()
MESH = Mesh(np.array(jax.devices()), ("data",))
SHARDED = NamedSharding(MESH, P("data"))


def split_in_two(a, rows):
    """The array is sharded as asked: each device holds its half of the leading axis."""
    assert a.sharding == SHARDED, a.sharding
    shards = sorted(a.addressable_shards, key=lambda s: s.device.id)
    assert [s.device for s in shards] == jax.devices()
    assert [s.data.shape[0] for s in shards] == [rows // 2, rows // 2]
    assert np.array_equal(np.concatenate([np.asarray(s.data) for s in shards]), np.asarray(a))


def check_dicts():
    rng = np.random.default_rng(0)
    items = [{"x": rng.normal(size=(8, 3)).astype(np.float32), "y": np.arange(8) + 8 * k, "tag": b"k%d" % k}
             for k in range(20)]
    got = list(grist.jax.device_put(iter(items), SHARDED))
    assert len(got) == 20
    for want, have in zip(items, got):  # order kept, values equal
        assert np.array_equal(np.asarray(have["x"]), want["x"]) and np.array_equal(np.asarray(have["y"]), want["y"])
        split_in_two(have["x"], 8)
        split_in_two(have["y"], 8)
        assert have["tag"] == want["tag"]  # not an array: passes through


def check_loader_batches():
    with grist.Loader(DATA, 32, **OPTS) as ref:
        want = [(b.data.copy(), b.indices.copy()) for b in ref]
    # 2 slots, a host buffer of 4 and a device buffer of 2, and the loop keeps every item:
    # the loader must never be short of a slot.
    loader = grist.Loader(DATA, 32, prefetch=2, **OPTS)
    got = list(grist.jax.device_put(loader, SHARDED, cpu_buffer_size=4, device_buffer_size=2))
    assert len(got) == len(want) > 10
    for (data, indices), have in zip(want, got):
        assert set(have) == {"data", "indices", "datasets", "epochs"}, set(have)
        assert np.array_equal(np.asarray(have["data"]), data)
        assert np.array_equal(np.asarray(have["indices"]), indices.astype(np.uint32))
        split_in_two(have["data"], 32)
    assert loader.held == 0  # every slot went back although every item is still alive


def check_one_device():
    dev = jax.devices()[1]
    items = [np.full((5, 2), k, np.int32) for k in range(6)]
    got = list(grist.jax.device_put(items, dev))
    assert [int(np.asarray(a)[0, 0]) for a in got] == list(range(6))
    assert all(a.devices() == {dev} for a in got)


def check_transfer_off_the_callers_thread():
    real, seen = jax.device_put, set()

    def spy(*a, **k):
        seen.add(threading.current_thread().name)
        return real(*a, **k)
    jax.device_put = spy
    try:
        with grist.Loader(DATA, 32, **OPTS) as loader:
            n = sum(1 for _ in grist.jax.device_put(loader, SHARDED))
    finally:
        jax.device_put = real
    assert n > 10 and seen == {"grist-device-put-device"}, seen


def check_errors_reach_the_caller():
    def gen():
        for k in range(3):
            yield np.zeros((4, 2)) + k
        raise KeyError("the producer failed")
    it = grist.jax.device_put(gen(), SHARDED)
    assert [int(np.asarray(a)[0, 0]) for a in (next(it), next(it), next(it))] == [0, 1, 2]
    try:
        next(it)
        raise AssertionError("no error")
    except KeyError as e:
        assert "the producer failed" in str(e)
    # A transfer that cannot be done (3 rows over 2 devices) fails in the caller's thread too.
    it = grist.jax.device_put([np.zeros((4, 1)), np.zeros((3, 1))], SHARDED)
    next(it)
    try:
        next(it)
        raise AssertionError("no error")
    except ValueError as e:
        assert "3" in str(e)
    # Bad data in the loader: grist.Error naming the file.
    try:
        list(grist.jax.device_put(grist.Loader(DATA, 32, seed=0, layout="padded", record_bytes=8), SHARDED))
        raise AssertionError("no error")
    except grist.Error as e:
        assert os.path.basename(DATA) in str(e)


def threads_alive():
    return [t for t in threading.enumerate() if t.name.startswith("grist-device-put")]


def check_close_early():
    loader = grist.Loader(DATA, 32, seed=0, epochs=None, layout="padded", record_bytes=256)
    it = grist.jax.device_put(loader, SHARDED)
    next(it), next(it)
    assert len(threads_alive()) == 2
    it.close()
    assert not threads_alive()
    try:
        loader.get_state()
        raise AssertionError("the loader was not closed")
    except ValueError:
        pass
    # close() from another thread while the caller waits in next() on a stalled source.
    stall = threading.Event()

    def slow():
        yield np.zeros((2, 1))
        stall.wait(30)
        yield np.ones((2, 1))
    it = grist.jax.device_put(slow(), SHARDED)
    next(it)
    threading.Timer(0.2, it.close).start()
    try:
        next(it)
        raise AssertionError("no error")
    except ValueError as e:
        assert "closed" in str(e)
    stall.set()
    for t in threads_alive():
        t.join(5)
    assert not threads_alive()
    # Dropped without close(): the threads stop when the iterator is collected.
    it = grist.jax.device_put(grist.Loader(DATA, 32, seed=0, epochs=None, layout="padded", record_bytes=256),
                              SHARDED)
    next(it)
    del it
    gc.collect()
    assert not threads_alive()


def check_state_is_exact():
    with grist.Loader(DATA, 16, **OPTS) as ref:
        want = [b.indices.tolist() for b in ref]
    loader = grist.Loader(DATA, 16, **OPTS)
    it = grist.jax.device_put(loader, SHARDED)
    head = [np.asarray(next(it)["indices"]).tolist() for _ in range(5)]
    state = it.get_state()  # 5 batches given, more already buffered
    it.close()
    with grist.Loader(DATA, 16, state=state, **OPTS) as resumed:
        assert head + [b.indices.tolist() for b in resumed] == want


def check_grain_iterator_source():
    import grist.grain

    def make():
        ds = grist.grain.LoaderDataset(DATA, 16, **OPTS).map(
            lambda b: {"x": b.data, "i": b.indices.astype(np.int32)})
        return grist.jax.device_put(iter(ds), SHARDED, cpu_buffer_size=3)
    full = [np.asarray(e["i"]).tolist() for e in make()]
    it = make()
    head = [np.asarray(next(it)["i"]).tolist() for _ in range(7)]
    state = it.get_state()
    it.close()
    it = make()
    it.set_state(state)
    assert head + [np.asarray(e["i"]).tolist() for e in it] == full


for name in sys.argv[2:]:
    globals()["check_" + name]()
    print("ok", name, flush=True)
