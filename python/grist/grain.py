"""grist.grain: a grist.Loader as a Grain IterDataset, so Grain's transformations and checkpoints chain after it.

    ds = grist.grain.LoaderDataset("train-*.ar", 256, seed=0, layout="padded", record_bytes=128)
    ds = ds.map(lambda b: {"x": b.data, "i": b.indices}).filter(keep)
    ds = grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=8)
    it = iter(ds)
    ...
    state = it.get_state()        # JSON-able; grain.checkpoint / Orbax save it
    it.set_state(state)           # the next element is the one after the checkpoint
"""

import grain

from . import Loader
from ._held import next_keeping_a_slot

__all__ = ["LoaderDataset", "LoaderDatasetIterator"]

# The key of the loader's checkpoint in the iterator state (hex of Loader.get_state()).
_STATE_KEY = "grist_loader_state"


class LoaderDataset(grain.IterDataset):
    """LoaderDataset(source_or_paths, batch_size, **loader_options): a grist.Loader as a grain.IterDataset.

    source_or_paths, batch_size (records per batch) and the keywords are grist.Loader's (a
    path, a glob, a list of them, a grist.tfds source, weights=, layout=, seed=, ...; see
    help(grist.Loader) for each and its default); state= starts from a Loader checkpoint.
    Its iterator yields what the Loader yields, in the same order: grist.Batch objects for
    bytes, dicts of numpy arrays for typed sources.

    get_state() is {"grist_loader_state": hex of Loader.get_state()}: a few dozen bytes, JSON
    as Grain's checkpointing (grain.checkpoint, Orbax) wants it; set_state() reopens the loader
    at that checkpoint, so the next batch is exactly the one after it. Through
    ThreadPrefetchIterDataset that is exact too: Grain stores each buffered element with the
    state taken right after it.

    Held batches: the loader lends at most `prefetch` batches (8 here unless given) and Grain's
    buffers downstream may hold more (a ThreadPrefetchIterDataset of 8 holds 8 plus the one its
    thread is putting; device_put holds 4 + 2 and the ones in transfer). When a batch takes the
    last free slot, the iterator hands out a copy in ordinary memory instead (a
    grist._held.CopiedBatch with the same attributes as a Batch, or the dict with its arrays
    copied) and gives the slot back at once. So any buffer runs to the end; the copies cost
    one memcpy of the batch each, and none are made while the consumers hold fewer than
    prefetch - 1 batches. Raise prefetch to the batches your pipeline holds to avoid them.
    """

    def __init__(self, source_or_paths, batch_size, **loader_options):
        super().__init__()
        state = loader_options.pop("state", None)
        loader_options.setdefault("prefetch", 8)
        self._source = source_or_paths
        self._batch_size = batch_size
        self._options = loader_options
        self._state = bytes(state) if state is not None else None

    def __iter__(self):
        return LoaderDatasetIterator(self)

    def __str__(self):
        return f"LoaderDataset(batch_size={self._batch_size}, options={self._options!r})"

    def _open(self, state):
        return Loader(self._source, self._batch_size, state=state, **self._options)


class LoaderDatasetIterator(grain.DatasetIterator):
    """LoaderDatasetIterator(ds): the iterator of the LoaderDataset ds (what iter(ds) returns).

    ds is the LoaderDataset whose loader options it uses. The loader starts on the first
    next() (or start_prefetch()), so get_state()/set_state() before it cost nothing."""

    def __init__(self, ds):
        super().__init__()
        self._ds = ds
        self._loader = None
        self._pending = ds._state  # where the loader starts when it opens (None: the beginning)

    def _opened(self):
        if self._loader is None:
            self._loader = self._ds._open(self._pending)
        return self._loader

    def __next__(self):
        self._assert_not_closed()
        return next_keeping_a_slot(self._opened())

    def get_state(self):
        s = self._loader.get_state() if self._loader is not None else self._pending
        return {_STATE_KEY: s.hex() if s is not None else ""}

    def set_state(self, state):
        text = state[_STATE_KEY]
        self._close_loader()
        self._pending = bytes.fromhex(text) if text else None

    def start_prefetch(self):
        self._assert_not_closed()
        self._opened()

    def _close_loader(self):
        # Batches still held downstream stay valid: the loader's memory goes when the last
        # of them is released.
        if self._loader is not None:
            self._loader.close()
            self._loader = None

    def close(self):
        super().close()
        self._close_loader()

    def __str__(self):
        return f"LoaderDatasetIterator({self._ds})"
