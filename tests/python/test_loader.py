"""grist.Loader and grist.Batch: the same batches as `grist load`, checkpoints, zero-copy lifetimes."""
import errno
import gc

import numpy as np
import pytest

from conftest import grist, record, write_dataset


def cli_batches(cli, args):
    """`grist load ARGS --digest --print-indices` -> [(digest, [index, ...]), ...]."""
    out = []
    for line in cli("load", *args, "--digest", "--print-indices").split():
        if len(line) == 16 and ":" not in line:
            out.append((line, []))
        else:
            out[-1][1].append(line)
    return out


def py_batches(loader, xxh, mixed=False):
    out = []
    for b in loader:
        with b:
            if mixed:
                idx = ["%d:%d" % (d, i) for d, i in zip(b.datasets.tolist(), b.indices.tolist())]
            else:
                idx = [str(i) for i in b.indices.tolist()]
                assert not b.datasets.any()
            out.append(("%016x" % xxh(b.data.tobytes()), idx))
    return out


CASES = [
    (dict(seed=7, epochs=2), ["--seed", 7, "--epochs", 2]),
    (dict(seed=3, epochs=1, shard_index=1, shard_count=3, drop_remainder=True),
     ["--seed", 3, "--shard", "1/3", "--drop-remainder"]),
    (dict(epochs=1, shuffle=False), ["--no-shuffle"]),
    (dict(seed=5, epochs=1, layout="padded", record_bytes=220, pad_value=9),
     ["--seed", 5, "--layout", "padded:220", "--pad-value", 9]),
    (dict(seed=2, epochs=2, granularity="chunk", window=4), ["--seed", 2, "--epochs", 2, "--granularity", "chunk",
                                                             "--window", 4]),
    (dict(seed=11, epochs=1, engine="pread", threads=1, queue_depth=2, prefetch=2), ["--seed", 11]),
    (dict(seed=11, epochs=1, engine="ref", io="mmap"), ["--seed", 11]),
]


@pytest.mark.parametrize("kwargs,args", CASES)
def test_same_batches_as_cli(files, cli, xxh, kwargs, args):
    bs = 50
    cli_args = files + ["--batch-size", bs] + args
    if "--epochs" not in args:
        cli_args += ["--epochs", 1]
    with grist.Loader(files, bs, **kwargs) as loader:
        got = py_batches(loader, xxh)
    assert got == cli_batches(cli, cli_args)
    assert len(got) > 5


def test_mixture_same_as_cli(files, cli, xxh):
    loader = grist.Loader([files[:2], files[2]], 32, seed=4, epochs=1, weights=[3, 1])
    got = py_batches(loader, xxh, mixed=True)
    assert got == cli_batches(cli, ["--mix", "3,1"] + files[:2] + ["+", files[2]] +
                              ["--batch-size", 32, "--seed", 4, "--epochs", 1])


def test_fixed_layout_rows(tmp_path):
    path = str(tmp_path / "fixed.ar")
    with grist.Writer(path, "group_size:8") as w:
        for i in range(100):
            w.write(i.to_bytes(4, "little") * 4)
    rows = []
    for b in grist.Loader(path, 16, epochs=1, layout="fixed", record_bytes=16):
        assert b.data.shape == (b.num_records, 16) and b.offsets is None
        assert b.records() == [bytes(r) for r in b.data]
        rows += [int.from_bytes(bytes(r[:4]), "little") for r in b.data]
        assert rows[-b.num_records:] == b.indices.tolist()
    assert sorted(rows) == list(range(100))


def test_records_and_offsets(files, all_records):
    for b in grist.Loader(files, 64, seed=1, epochs=1):
        assert b.records() == [all_records[i] for i in b.indices.tolist()]
        assert b.offsets[0] == 0 and b.offsets[-1] == b.data.size and len(b.offsets) == b.num_records + 1


def test_resume_continues_with_the_next_batch(files):
    whole = [(b.sequence, b.records()) for b in grist.Loader(files, 40, seed=9, epochs=2)]
    loader = grist.Loader(files, 40, seed=9, epochs=2, prefetch=8)
    first = [(b.sequence, b.records()) for _, b in zip(range(17), loader)]
    state = loader.get_state()
    loader.close()
    rest = [(b.sequence, b.records()) for b in grist.Loader(files, 40, seed=9, epochs=2, state=state)]
    assert first + rest == whole
    with pytest.raises(grist.Error) as e:  # a state for another configuration is refused
        grist.Loader(files, 40, seed=10, epochs=2, state=state)
    assert e.value.errno in (errno.ESTALE, errno.EBADMSG)


def test_unbounded_epochs_and_stats(files):
    loader = grist.Loader(files, 500, seed=1)
    seen = [b.num_records for _, b in zip(range(10), loader)]
    assert seen == [500] * 10  # epochs=None never ends; batches cross epoch boundaries
    st = loader.stats()
    assert st["batches"] == 10 and st["records"] == 5000 and st["engine"] in ("uring", "pread")


def test_arrays_keep_the_slot_alive(files, all_records):
    loader = grist.Loader(files, 100, seed=2, epochs=1)
    b = next(loader)
    data, offsets, indices = b.data, b.offsets, b.indices
    expect = [all_records[i] for i in indices.tolist()]
    assert not data.flags.writeable
    b.release()
    assert b.released
    with pytest.raises(ValueError):
        b.data
    # The slot stays lent while its arrays live, even past the loader's close.
    del b
    for _ in loader:
        pass
    loader.close()
    gc.collect()
    assert [data[offsets[k]:offsets[k + 1]].tobytes() for k in range(100)] == expect
    with pytest.raises(ValueError):
        next(loader)


@pytest.mark.parametrize("kw", [{}, {"prefetch": 2}, {"prefetch": 64}])
def test_prefetch_is_the_libraries_hold_limit(files, kw):
    """Loader.prefetch is the hold limit the library resolved (grist_loader_get_config()):
    its default when none is given, one more than asked for a for loop's previous batch,
    up to the option's bound. Holding that many works; one more is EBUSY."""
    with grist.Loader(files, 8, seed=1, **kw) as loader:
        if kw:
            assert loader.prefetch == min(kw["prefetch"] + 1, 64)
        held = [next(loader) for _ in range(loader.prefetch)]
        with pytest.raises(grist.Error) as e:
            next(loader)
        assert e.value.errno == errno.EBUSY
        for b in held:
            b.release()


@pytest.mark.parametrize("kw", [{}, {"prefetch": 2}, {"prefetch": 8}])
def test_batch_map_reads_ahead_to_the_libraries_hold_limit(files, kw):
    """batch_map pulls as far ahead as the hold limit the library resolved (Loader.prefetch)
    allows with the caller's batch in it: its depth was computed from the prefetch= asked
    for, or a copy of the library's default, not from the limit the loader enforces. A
    result that is the Batch itself keeps its slot, so the slots lent show the depth."""
    with grist.Loader(files, 8, seed=1, batch_map=lambda b: b, map_threads=16, **kw) as loader:
        first = next(loader)
        assert loader.held == loader.prefetch - 1
        second = next(loader)  # the loop's previous batch still held: the limit is reached, not passed
        assert loader.held == loader.prefetch
        first.release()
        second.release()


def test_holding_too_many_batches_raises(files):
    loader = grist.Loader(files, 8, seed=1, prefetch=4)
    held = []
    with pytest.raises((ValueError, grist.Error)) as e:
        for b in loader:
            held.append(b)
            assert len(held) <= 1000
    # A clear refusal, not a hang: the C message says how many batches are held.
    assert "held" in str(e.value) or getattr(e.value, "errno", None) == errno.EBUSY
    del held


def test_dlpack_is_zero_copy(files):
    loader = grist.Loader(files, 64, seed=3, epochs=1)
    b = next(loader)
    ptr = b.data.__array_interface__["data"][0]
    assert b.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(b)
    assert a.__array_interface__["data"][0] == ptr and a.tobytes() == b.data.tobytes()
    expect = a.tobytes()
    b.release()  # the exported tensor still holds the slot: no later batch may reuse it
    del b
    for _ in loader:
        pass
    assert a.tobytes() == expect
    padded = next(grist.Loader(files, 8, epochs=1, layout="padded", record_bytes=256))
    assert np.from_dlpack(padded).shape == (8, 256)


def test_dlpack_into_jax(files):
    jax = pytest.importorskip("jax")
    b = next(grist.Loader(files, 64, seed=3, epochs=1, layout="padded", record_bytes=256))
    x = jax.dlpack.from_dlpack(b)
    assert x.shape == (64, 256) and bytes(np.asarray(x).tobytes()) == b.data.tobytes()


def test_dlpack_into_torch(files):
    torch = pytest.importorskip("torch")
    b = next(grist.Loader(files, 64, seed=3, epochs=1))
    t = torch.from_dlpack(b)
    assert t.data_ptr() == b.data.__array_interface__["data"][0]


def test_bad_arguments(files):
    with pytest.raises(ValueError):
        grist.Loader(files, 0)
    with pytest.raises(ValueError):
        grist.Loader(files, 8, shard_index=3, shard_count=3)
    with pytest.raises(ValueError):
        grist.Loader(files, 8, layout="jagged")
    with pytest.raises(ValueError):
        grist.Loader(files, 8, epochs=-1)
    with pytest.raises(ValueError):
        grist.Loader(files, 8, layout="fixed")
    with pytest.raises(ValueError):
        grist.Loader([files], 8, weights=[1, 2])
    with pytest.raises(TypeError):
        grist.Loader(files, 8, shufle=False)
    with pytest.raises(grist.Error) as e:  # a damaged checkpoint is bad data, as in C
        grist.Loader(files, 8, state=b"not a state")
    assert e.value.errno == errno.EBADMSG


def test_corrupt_data_raises_with_file_and_offset(tmp_path):
    path = write_dataset(tmp_path / "bad.ar", 60, "group_size:4,uncompressed")
    data = bytearray(open(path, "rb").read())
    pos = data.index(record(33)[:10])
    data[pos + 3] ^= 0x55
    open(path, "wb").write(bytes(data))
    with pytest.raises(grist.Error) as e:
        for b in grist.Loader(path, 10, shuffle=False, epochs=1):
            b.release()
    assert e.value.errno == errno.EBADMSG and "bad.ar" in str(e.value) and "byte" in str(e.value)
