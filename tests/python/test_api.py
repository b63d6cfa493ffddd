"""The Python API tells you what it is: len(), epochs, reprs, num_records, stats, stubs, help,
and what happens after os.fork() (issue 25, points 8 and 9)."""
import errno
import inspect
import multiprocessing
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import grist, grist_cli, write_dataset

HERE = os.path.dirname(os.path.abspath(__file__))


def count(loader):
    n = 0
    for b in loader:
        b.release()
        n += 1
    return n


@pytest.mark.parametrize("kw", [
    dict(epochs=1),
    dict(epochs=3),
    dict(epochs=2, drop_remainder=True),
    dict(epochs=2, shard_index=2, shard_count=3),
    dict(epochs=2, shard_index=1, shard_count=4, drop_remainder=True, shard_mode="contiguous"),
    dict(epochs=1, granularity="chunk"),
    dict(epochs=2, layout="padded", record_bytes=256),
])
def test_len_is_the_batches_it_yields(files, kw):
    assert len(grist.Loader(files, 37, **kw)) == count(grist.Loader(files, 37, **kw))


def test_len_of_a_mixture_and_a_resumed_loader(files):
    kw = dict(weights=[2, 1], epochs=2, seed=5)
    mix = [files[:2], files[2:]]
    assert len(grist.Loader(mix, 16, **kw)) == count(grist.Loader(mix, 16, **kw))
    l = grist.Loader(files, 50, epochs=2)
    total = len(l)
    it = iter(l)
    for _ in range(7):
        next(it).release()
    resumed = grist.Loader(files, 50, epochs=2, state=l.get_state())
    assert len(resumed) == total - 7 == count(resumed)


def test_no_len_when_unbounded_or_packed(files, tmp_path):
    l = grist.Loader(files, 8)  # epochs=None: unbounded
    with pytest.raises(TypeError, match=r"epochs=None \(or 0\) is an unbounded"):  # the caller's words
        len(l)
    assert bool(l)  # truth does not depend on len()
    with pytest.raises(TypeError):
        len(grist.Loader(files, 8, epochs=0))
    tok = str(tmp_path / "tok.ar")
    with grist.Writer(tok, "group_size:1") as w:
        for i in range(50):
            w.write(bytes(range(2 * (i % 7 + 1))))
    with pytest.raises(TypeError, match="packed"):
        len(grist.Loader(tok, 4, epochs=1, pack="first-fit", pack_length=8, token_bytes=2))


def test_epochs_of_every_record(files):
    n = sum(grist.Reader(f).__len__() for f in files)
    seen = 0
    for b in grist.Loader(files, 64, epochs=3, seed=9):
        e = b.epochs
        assert e.dtype == np.uint64 and e.shape == (b.num_records,)
        # one dataset, one shard: record k of the stream is in epoch k // n
        assert list(e) == [(seen + i) // n for i in range(b.num_records)]
        assert b.epoch == e[0]
        seen += b.num_records
        b.release()
    assert seen == 3 * n


def test_epochs_of_a_mixture(files):
    l = grist.Loader([files[2:], files[:1]], 32, weights=[1, 1], epochs=2, seed=1)
    per = {0: [], 1: []}
    for b in l:
        for d, e in zip(b.datasets, b.epochs):
            per[int(d)].append(int(e))
        b.release()
    # each dataset's epochs run 0, 0, ..., 1, 1, ... in its own stream
    for d, n in ((0, 301), (1, 1000)):
        assert per[d] == sorted(per[d]) and per[d][:n] == [0] * min(n, len(per[d]))


def test_reprs(files):
    l = grist.Loader(files, 128, epochs=1, layout="padded", record_bytes=1024, shard_index=1, shard_count=2)
    assert repr(l) == ("grist.Loader(datasets=1, files=3, batch_size=128, epochs=1, shard='1/2', "
                       "layout='padded')")
    b = next(iter(l))
    assert repr(b) == "grist.Batch(records=128, bytes=131072, epoch=0, layout='padded')"
    b.release()
    assert repr(b) == "grist.Batch(released)"
    assert repr(grist.Loader(files, 4)).endswith("epochs=None, shard='0/1', layout='ragged')")
    assert repr(grist.Reader(files)) == "grist.Reader(files=3, records=2001)"
    l.close()
    assert repr(l).endswith(", closed)")


def test_num_records_validates(files):
    l = grist.Loader(files, 8, epochs=1)
    assert l.num_records() == l.num_records(0) == 2001
    for bad in (1, -1, 10 ** 6):
        with pytest.raises(IndexError, match="dataset"):
            l.num_records(bad)
    with pytest.raises(TypeError):
        l.num_records("0")
    mix = grist.Loader([files[:1], files[1:]], 8, weights=[1, 1], epochs=1)
    assert (mix.num_records(0), mix.num_records(1)) == (1000, 1001)


# `grist load --stats` labels -> the keys of Loader.stats() that carry them
STATS_KEYS = {
    "engine": ["engine", "read_mode", "threads"], "batches": ["batches"],
    "records": ["records", "records_filtered"], "seconds": ["seconds"], "records/s": ["records_per_second"],
    "reads issued": ["reads_issued"], "bytes read": ["bytes_read"], "chunks decoded": ["chunks_decoded"],
    "bytes decoded": ["bytes_decoded"], "io wait": ["io_wait_ns"], "decode": ["decode_ns"],
    "assemble": ["assemble_ns"], "consumer stall": ["consumer_stall_ns"], "producer stall": ["producer_stall_ns"],
    "reads in flight": ["reads_in_flight_mean", "reads_in_flight_max"], "queue occupancy": ["queue_occupancy"],
    "memory": ["memory_bytes", "pinned", "registered_buffers"], "slot maps": ["slot_maps"], "first batch": ["first_batch_seconds"], "start-up": ["startup_seconds"],
    "packed tokens": ["pack_tokens", "pack_capacity"], "packing efficiency": ["pack_efficiency"],
    "dataset": ["dataset_records"],
}


def test_stats_names_everything_the_cli_prints(files, tmp_path):
    cli = grist_cli()
    if not cli:
        pytest.skip("the grist CLI is not built")
    tok = str(tmp_path / "tok.ar")
    with grist.Writer(tok, "group_size:1") as w:
        for i in range(50):
            w.write(bytes(range(2 * (i % 7 + 1))))
    labels, cli_records = set(), None
    for args in (["load", "--mix", "1,1", files[0], files[1], "--epochs", "1", "--stats"],
                 ["load", tok, "--pack", "first-fit:8", "--token-bytes", "2", "--stats"]):
        p = subprocess.run([cli] + args, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        labels |= {re.sub(r" \d+$", "", line.split(":")[0]) for line in p.stderr.splitlines() if ":" in line}
        if cli_records is None:
            cli_records = int(re.search(r"^records: (\d+)", p.stderr, re.M).group(1))
    unmapped = labels - set(STATS_KEYS)
    assert not unmapped, "--stats prints %s, which Loader.stats() does not name" % sorted(unmapped)
    l = grist.Loader([[files[0]], [files[1]]], 32, weights=[1, 1], epochs=1)
    n = count(l)
    st = l.stats()
    for label in labels:
        for key in STATS_KEYS[label]:
            assert key in st, (label, key)
    assert st["batches"] == n and sum(st["dataset_records"]) == st["records"] == cli_records
    assert st["first_batch_seconds"] is not None and st["seconds"] >= st["first_batch_seconds"]


def test_stubs_match_the_extension():
    stub = open(os.path.join(os.path.dirname(grist.__file__), "_grist.pyi")).read()
    assert os.path.exists(os.path.join(os.path.dirname(grist.__file__), "py.typed"))
    classes = dict(re.findall(r"^class (\w+)[^\n]*:\n((?:    [^\n]*\n|\n)*)", stub, re.M))
    for name in ("Reader", "Writer", "Batch", "Loader", "Error"):
        assert name in classes, name
        body = classes[name]
        stubbed = set(re.findall(r"def (\w+)\(", body))
        real = {n for n in vars(getattr(grist._grist, name)) if not n.startswith("_")}
        dunders = {n for n in ("__len__", "__getitem__", "__iter__", "__next__", "__enter__", "__exit__",
                               "__dlpack__", "__dlpack_device__") if n in vars(getattr(grist._grist, name))}
        assert real | dunders <= stubbed, (name, sorted((real | dunders) - stubbed))
        assert {n for n in stubbed if not n.startswith("_")} <= real, (name, sorted(stubbed - real))
    declared = set(re.findall(r"^(\w+)\s*:", stub, re.M)) | set(re.findall(r"^(?:def|class) (\w+)", stub, re.M))
    public = {n for n in dir(grist._grist) if not n.startswith("_")}
    assert public <= declared, "in grist._grist, not in _grist.pyi: %s" % sorted(public - declared)


def test_help_shows_docstrings():
    for obj in (grist.Loader, grist.Reader, grist.Writer, grist.ArrayRecordDataSource):
        assert obj.__doc__ and len(obj.__doc__) > 80, obj
    for attr in ("epoch", "epochs", "data", "indices", "release", "records"):
        assert getattr(grist.Batch, attr).__doc__, attr
    for attr in ("stats", "num_records", "get_state", "close"):
        assert getattr(grist._grist.Loader, attr).__doc__, attr
    assert "len(loader)" in inspect.getdoc(grist.Loader) and "fork" in inspect.getdoc(grist.Loader)


def _iterate_in_child(loader, q):
    try:
        n = 0
        for b in loader:
            b.release()
            n += 1
        q.put(("no error", n, ""))
    except grist.Error as e:
        q.put(("grist.Error", e.errno, str(e)))
    except BaseException as e:  # anything else is a failure the parent reports
        q.put((type(e).__name__, None, str(e)))


def test_iterating_after_fork_raises_instead_of_hanging(files):
    l = grist.Loader(files, 16, epochs=1)
    it = iter(l)
    next(it).release()  # the engine is running: its threads stay behind in the parent
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_iterate_in_child, args=(l, q))
    p.start()
    p.join(60)
    if p.is_alive():
        p.kill()
        p.join()
        pytest.fail("the child blocked on a loader inherited through fork()")
    kind, code, msg = q.get(timeout=10)
    assert kind == "grist.Error" and code == errno.ENOTRECOVERABLE, (kind, code, msg)
    assert "fork()" in msg and "create the loader in the child" in msg, msg
    # the parent's loader goes on undisturbed
    assert count(l) == len(grist.Loader(files, 16, epochs=1)) - 1
