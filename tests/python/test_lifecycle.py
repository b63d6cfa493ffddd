"""Lifecycle stress from Python (issue 35), and what it found.

A Loader, a grist.grain.LoaderDataset iterator and a grist.jax.device_put iterator closed,
dropped and garbage-collected, or interrupted (KeyboardInterrupt from another thread) at
random points, while batches they gave are still alive. Every batch kept must still read as
the records it was given (its slot stays lent until the batch goes); a checkpoint taken on
the way resumes to the very next batch.

Seeded and time-bounded: GRIST_LIFECYCLE_SEED (default: from the clock) and
GRIST_PY_LIFECYCLE_SECONDS (default 4). A failure names the round's seed; run with
GRIST_LIFECYCLE_SEED=<seed> GRIST_PY_LIFECYCLE_ROUNDS=1 to replay it (the steps, not the
threads' timing). A round that hangs is ended by faulthandler after 60 s with every
thread's stack."""
import _thread
import faulthandler
import gc
import os
import random
import sys
import threading
import time

import pytest

from conftest import ROOT, grist, record

SECONDS = float(os.environ.get("GRIST_PY_LIFECYCLE_SECONDS", "4"))
ROUNDS = int(os.environ.get("GRIST_PY_LIFECYCLE_ROUNDS", "0"))


_MNIST = {}


def mnist():
    """grist_mnist's train split as a grist.tfds source, and every (image, label) row it has."""
    if not _MNIST:
        import grist.tfds
        src = grist.tfds.data_source("grist_mnist", "train", data_dir=os.path.join(ROOT, "tests", "data", "tfds"))
        _MNIST["src"] = src
        _MNIST["rows"] = {(r["image"].tobytes(), int(r["label"])) for r in (src[i] for i in range(len(src)))}
    return _MNIST["src"], _MNIST["rows"]


def check_batch(b, where):
    """A kept Batch (or a LoaderDataset copy) still holds the records its indices name; a kept
    dict batch of grist_mnist still holds rows of that dataset."""
    if isinstance(b, dict):
        rows = mnist()[1]
        for img, label in zip(b["image"], b["label"]):
            assert (img.tobytes(), int(label)) in rows, f"{where}: a row that is not grist_mnist's"
        return
    if b.segment_ids is not None:  # packed rows: tokens of records, no record per index
        assert b.data.shape[0] >= 1, where
        return
    recs = b.records()
    idx = b.indices.tolist()
    assert len(recs) == len(idx) >= 1, where
    for r, i in zip(recs, idx):
        want = record(i)
        assert r[:len(want)] == want, f"{where}: record {i} reads {r[:24]!r}"


def loader_options(rng):
    opts = dict(seed=rng.randrange(1 << 30), epochs=rng.choice([1, 2, None]), prefetch=rng.randint(2, 6),
                threads=rng.randint(1, 3), engine=rng.choice(["uring", "pread", "ref"]),
                granularity=rng.choice(["record", "chunk"]), drop_remainder=rng.random() < 0.3)
    if rng.random() < 0.2:
        opts.update(pack=rng.choice(["first-fit", "concat-split"]), pack_length=rng.randint(16, 96), token_bytes=1)
    return opts


class Interrupter:
    """Raises KeyboardInterrupt in the main thread after a random delay, as Ctrl-C would."""

    def __init__(self, rng):
        self.t = threading.Timer(rng.uniform(0.0, 0.05), _thread.interrupt_main)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.t.cancel()
        self.t.join()  # a fired interrupt is raised here at the latest, inside the round's try
        return False


def take(it, rng, n, kept, where):
    """next() up to n times; each item kept with some probability (the rest dropped at once)."""
    for _ in range(n):
        try:
            item = next(it)
        except StopIteration:
            return
        except grist.Error as e:  # the hold limit: a caller keeping every batch
            assert "held" in str(e), f"{where}: {e}"
            if not kept:
                raise
            kept.pop(rng.randrange(len(kept)))
            continue
        if rng.random() < 0.5:
            kept.append(item)


def end(rng, obj, kept, where):
    """Close, drop, or drop and collect @obj; some kept batches go before, some after."""
    how = rng.randrange(3)
    if kept and rng.random() < 0.5:
        del kept[rng.randrange(len(kept))]
    if how == 0:
        obj.close()
    del obj
    if how == 2:
        gc.collect(1)
    return ("close", "drop", "drop+gc")[how]


def round_loader(files, rng, kept, where):
    opts, batch = loader_options(rng), rng.randint(1, 24)
    if rng.random() < 0.3:  # typed: dicts of arrays decoded from tf.train.Example records
        files = mnist()[0]
        for k in ("pack", "pack_length", "token_bytes"):
            opts.pop(k, None)
    if rng.random() < 0.25:  # batch_map on its threads, ahead of the caller: the batch itself comes back
        opts.update(batch_map=lambda b: b, map_threads=rng.randint(1, 3))
    loader = grist.Loader(files, batch, **opts)
    it = iter(loader)
    take(it, rng, rng.randint(0, 30), kept, where)
    if rng.random() < 0.3 and "pack" not in opts and loader.held < loader.prefetch:
        # a checkpoint taken with batches alive resumes to the very next batch
        state = loader.get_state()
        after = next(it, None)
        with grist.Loader(files, batch, state=state, **opts) as again:
            first = next(iter(again), None)
            assert (after is None) == (first is None), where
            if after is not None:
                if isinstance(after, dict):
                    assert all((after[k] == first[k]).all() for k in after), where
                else:
                    assert after.records() == first.records() and after.sequence == first.sequence, where
            del first
        del after
    del it
    return end(rng, loader, kept, where)


def round_grain(files, rng, kept, where):
    import grain
    import grist.grain
    ds = grist.grain.LoaderDataset(files, rng.randint(1, 24), **loader_options(rng))
    if rng.random() < 0.5:
        ds = grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=rng.randint(1, 8))
    it = iter(ds)
    take(it, rng, rng.randint(0, 30), kept, where)
    return end(rng, it, kept, where)


def round_device_put(files, rng, kept, where):
    import grist.jax
    opts = loader_options(rng)
    opts.pop("pack", None), opts.pop("pack_length", None), opts.pop("token_bytes", None)
    loader = grist.Loader(files, rng.randint(1, 24), layout="padded", record_bytes=256, **opts)
    it = grist.jax.device_put(loader, None, cpu_buffer_size=rng.randint(1, 4), device_buffer_size=rng.randint(1, 3))
    take(it, rng, rng.randint(0, 20), [], where)  # the items are device arrays: the slots went back
    # kept host batches of the same loader, still alive while device_put's threads stop
    how = end(rng, it, kept, where)
    del loader
    return how


def kinds():
    """The rounds this machine can run. Grain and JAX are imported here, before any round
    arms its interrupter: a KeyboardInterrupt inside `import jax` leaves jaxlib half
    initialised, and freeing that module crashes in nanobind (jaxlib 0.10, not grist). The
    grist_mnist rows are read here too."""
    mnist()  # read before any interrupter too
    out = [round_loader]
    try:
        import grist.grain  # noqa: F401
        out.append(round_grain)
    except ImportError:
        pass
    try:
        import grist.jax  # noqa: F401
        import jax  # noqa: F401
        out.append(round_device_put)
    except ImportError:
        pass
    return out


def test_close_drop_interrupt_with_batches_alive(files):
    rounds = kinds()
    seed = int(os.environ.get("GRIST_LIFECYCLE_SEED") or time.time_ns() % (1 << 40))
    print(f"lifecycle: seed {seed} (GRIST_LIFECYCLE_SEED)", file=sys.stderr)
    t0, n, interrupted = time.monotonic(), 0, 0
    # An exception in a finalizer (a dropped iterator's, a loader's) is only "ignored": collect
    # them. A KeyboardInterrupt landing in one is Python's to swallow; anything else is a bug.
    where, unraisable, previous_hook = "", [], sys.unraisablehook
    sys.unraisablehook = lambda u: unraisable.append((u.exc_type, str(u.exc_value), str(u.object), where))
    try:
        while (n < ROUNDS) if ROUNDS else (time.monotonic() - t0 < SECONDS):
            rng = random.Random(seed + n)
            where = f"round seed {seed + n} (replay: GRIST_LIFECYCLE_SEED={seed + n} GRIST_PY_LIFECYCLE_ROUNDS=1)"
            kind = rounds[rng.randrange(len(rounds))]
            kept = []
            if os.environ.get("GRIST_PY_LIFECYCLE_TRACE"):
                print(f"round {seed + n}: {kind.__name__}", file=sys.stderr, flush=True)
            faulthandler.dump_traceback_later(60, exit=True)
            try:
                try:
                    if rng.random() < 0.3:
                        with Interrupter(rng):
                            how = kind(files, rng, kept, where)
                    else:
                        how = kind(files, rng, kept, where)
                except KeyboardInterrupt:
                    interrupted += 1
                    how = "interrupted"
                gc.collect(1)  # whatever the interrupt left behind goes now, with batches kept
                for b in kept:
                    check_batch(b, f"{where}, {kind.__name__} ended by {how}")
                del kept
                gc.collect(1)
            except KeyboardInterrupt:  # an interrupt that landed after the round's own handler
                interrupted += 1
            finally:
                faulthandler.cancel_dump_traceback_later()
            n += 1
    finally:
        sys.unraisablehook = previous_hook
    print(f"lifecycle: {n} rounds from seed {seed}, {interrupted} interrupted", file=sys.stderr)
    assert n >= 1
    bad = [u for u in unraisable if u[0] is not KeyboardInterrupt]
    assert not bad, f"exceptions in finalizers: {bad}"


def test_device_put_interrupted_while_starting_its_threads(monkeypatch):
    """A KeyboardInterrupt between device_put's two thread starts left the pipeline holding a
    thread never started: the next next() saw threads and waited forever for items nobody
    made, and close() raised "cannot join thread before it is started" (the stress test above
    met it with GRIST_LIFECYCLE_SEED=1000 GRIST_PY_LIFECYCLE_SECONDS=40, rounds 2139 and 2329).
    The iteration now goes on where it stopped, and close() stops it."""
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
