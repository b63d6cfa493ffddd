"""grist.grain.LoaderDataset: a grist.Loader inside Grain pipelines, checkpointed through Grain's own machinery."""
import json

import numpy as np
import pytest

from conftest import grist

grain = pytest.importorskip("grain")
import grist.grain  # noqa: E402  (needs grain)
from grist._held import CopiedBatch, copy_item  # noqa: E402

OPTS = dict(seed=7, epochs=2, layout="padded", record_bytes=256)


def rows(b):
    """What a test compares of a batch: its records and their indices, as plain Python values."""
    return (b.records(), b.indices.tolist())


def test_yields_the_loaders_batches(files):
    ours = [rows(b) for b in grist.grain.LoaderDataset(files, 33, **OPTS)]
    with grist.Loader(files, 33, **OPTS) as loader:
        theirs = [rows(b) for b in loader]
    assert ours == theirs and len(ours) == -(-2 * 2001 // 33)  # 2 epochs of 2001 records
    assert isinstance(grist.grain.LoaderDataset(files, 4), grain.IterDataset)


def pipeline(files, prefetch_buffer=None, prefetch=8):
    ds = grist.grain.LoaderDataset(files, 16, prefetch=prefetch, **OPTS)
    ds = ds.map(lambda b: {"x": b.data[:b.num_records].copy(), "i": b.indices.astype(np.int64)})
    ds = ds.filter(lambda e: int(e["i"][0]) % 3 != 0)
    ds = ds.map(lambda e: {"x": e["x"], "i": e["i"], "sum": e["i"].sum()})
    ds = ds.batch(2, drop_remainder=False)
    if prefetch_buffer:
        ds = grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=prefetch_buffer)
    return ds


def as_plain(e):
    return ([x.tobytes() for x in e["x"]], e["i"].tolist(), e["sum"].tolist())


@pytest.mark.parametrize("prefetch_buffer", [None, 8])
def test_map_filter_batch_resume_is_exact(files, prefetch_buffer, tmp_path):
    full = [as_plain(e) for e in pipeline(files, prefetch_buffer)]
    assert len(full) > 30
    for stop in (0, 1, 17, len(full) - 1, len(full)):
        it = iter(pipeline(files, prefetch_buffer))
        head = [as_plain(next(it)) for _ in range(stop)]
        state = json.loads(json.dumps(it.get_state()))  # what a checkpoint file holds
        it.close()
        resumed = iter(pipeline(files, prefetch_buffer))
        resumed.set_state(state)
        assert head + [as_plain(e) for e in resumed] == full, stop


def test_grain_checkpoint_handler_round_trip(files, tmp_path):
    from etils import epath
    full = [as_plain(e) for e in pipeline(files, 8)]
    it = iter(pipeline(files, 8))
    head = [as_plain(next(it)) for _ in range(9)]
    grain.checkpoint.CheckpointHandler().save(epath.Path(tmp_path), item=it)
    it.close()
    restored = grain.checkpoint.CheckpointHandler().restore(epath.Path(tmp_path), item=iter(pipeline(files, 8)))
    assert head + [as_plain(e) for e in restored] == full


def test_thread_prefetch_of_8_runs_to_the_end_with_few_slots(files):
    """A buffer of 8 downstream of a loader lending only 2 slots: copies keep it going."""
    ds = grist.grain.LoaderDataset(files, 16, prefetch=2, **OPTS)
    it = iter(grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=8))
    got = list(it)  # every batch held at once: the buffer, then this list
    with grist.Loader(files, 16, **OPTS) as loader:
        assert [rows(b) for b in got] == [rows(b) for b in loader]
    kinds = {type(b).__name__ for b in got}
    assert kinds == {"Batch", "CopiedBatch"}
    assert sum(isinstance(b, grist.Batch) for b in got) <= 2


def test_resume_mid_stream_through_thread_prefetch(files):
    def make():
        return grain.experimental.ThreadPrefetchIterDataset(
            grist.grain.LoaderDataset(files, 50, prefetch=3, **OPTS), prefetch_buffer_size=8)
    full = [rows(b) for b in make()]
    it = iter(make())
    head = [rows(next(it)) for _ in range(23)]
    state = it.get_state()
    tail = [rows(b) for b in it]  # the uninterrupted run's continuation
    resumed = iter(make())
    resumed.set_state(state)
    assert [rows(b) for b in resumed] == tail and head + tail == full


def test_state_before_first_batch_and_start_state(files):
    with grist.Loader(files, 10, **OPTS) as loader:
        next(loader), next(loader)
        s = loader.get_state()
        want = [rows(b) for b in loader]
    it = iter(grist.grain.LoaderDataset(files, 10, state=s, **OPTS))
    assert it.get_state() == {"grist_loader_state": s.hex()}  # nothing opened yet
    assert [rows(b) for b in it] == want
    fresh = iter(grist.grain.LoaderDataset(files, 10, **OPTS))
    assert fresh.get_state() == {"grist_loader_state": ""}
    fresh.set_state(iter(grist.grain.LoaderDataset(files, 10, state=s, **OPTS)).get_state())
    assert [rows(b) for b in fresh] == want


def test_device_put_of_grain_after_it(files):
    jax = pytest.importorskip("jax")
    ds = grist.grain.LoaderDataset(files, 32, **OPTS).map(lambda b: {"x": b.data, "i": b.indices})
    got = [(np.asarray(e["x"]).tobytes(), np.asarray(e["i"]).tolist())
           for e in grain.experimental.device_put(ds, jax.devices()[0])]
    with grist.Loader(files, 32, **OPTS) as loader:
        assert got == [(b.data.tobytes(), b.indices.tolist()) for b in loader]


def test_close_stops_and_errors_name_the_file(files, tmp_path):
    it = iter(grist.grain.LoaderDataset(files, 10, **OPTS))
    next(it)
    it.close()
    with pytest.raises(ValueError):
        next(it)
    bad = tmp_path / "bad.ar"
    bad.write_bytes(b"not an array record file" * 10)
    with pytest.raises((grist.Error, ValueError), match="bad.ar"):
        next(iter(grist.grain.LoaderDataset(str(bad), 10)))


def test_copy_item_releases_the_slot(files):
    # prefetch=1 lends two slots: a for loop holds the previous batch while it asks for the next
    with grist.Loader(files, 10, prefetch=1, **OPTS) as loader:
        a, b = next(loader), next(loader)
        assert loader.held == 2 == loader.prefetch
        with pytest.raises(grist.Error) as e:  # no free slot: the loader refuses
            next(loader)
        assert "prefetch" in str(e.value)
        records, data, epochs, epoch = a.records(), a.data.copy(), a.epochs.copy(), a.epoch
        c = copy_item(a)
        assert isinstance(c, CopiedBatch) and loader.held == 1 and a.released
        assert c.records() == records and np.array_equal(c.data, data)
        assert np.array_equal(c.epochs, epochs) and c.epoch == epoch  # a copy keeps the epochs
        assert np.asarray(np.from_dlpack(c)).tobytes() == data.tobytes()
        own = np.arange(3)
        d = copy_item({"x": b.data, "y": [b.indices], "own": own})
        del b
        assert loader.held == 0 and isinstance(d["y"], list)
        assert d["own"] is own  # not over a slot: kept as it is
        next(loader)


def test_dict_batches_of_a_tfds_source_through_thread_prefetch():
    """A typed source: the loader yields dicts of views of the slot; a buffer of 8 over 2 slots
    gets copies of those dicts, and a resume mid-stream is exact."""
    import os

    from conftest import ROOT
    tfds = pytest.importorskip("grist.tfds")
    mnist = os.path.join(ROOT, "tests", "data", "tfds", "grist_mnist", "1.0.0")
    if not hasattr(tfds, "data_source") or not os.path.isdir(mnist):
        pytest.skip("grist.tfds.data_source and tests/data/tfds are not on this branch")
    src = tfds.data_source(mnist, split="train")
    opts = dict(seed=5, epochs=1)

    def plain(b):
        return (b["image"].tobytes(), b["label"].tolist())

    def make():
        return grain.experimental.ThreadPrefetchIterDataset(
            grist.grain.LoaderDataset(src, 16, prefetch=2, **opts), prefetch_buffer_size=8)
    with grist.Loader(src, 16, **opts) as loader:
        want = [plain(b) for b in loader]
    got = list(iter(make()))  # every batch held at once
    assert [plain(b) for b in got] == want and len(want) == 20
    assert all(isinstance(b, dict) and b["image"].shape[1:] == (28, 28, 1) for b in got)
    it = iter(make())
    head = [plain(next(it)) for _ in range(7)]
    state = it.get_state()
    it.close()
    resumed = iter(make())
    resumed.set_state(state)
    assert head + [plain(b) for b in resumed] == want
