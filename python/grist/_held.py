"""Batches that outlive their slot: what grist.grain and grist.jax hand out when the loader's slots run out.

A grist.Loader lends at most `prefetch` batches at once (a batch is lent until it is released
or its arrays are gone); one more next() is refused with EBUSY. Pipelines that buffer batches
downstream (Grain's ThreadPrefetchIterDataset, a device_put stage) can hold more than that, so
the wrappers take a batch, and when it was the last free slot they hand out a copy in ordinary
memory and give the slot back at once. The loader then never runs dry under a full buffer.
"""

import numpy as np

from ._grist import Batch, _View

_ARRAYS = ("data", "offsets", "indices", "datasets", "epochs", "segment_ids", "positions")
_ALIGN = 64  # bytes: what XLA's CPU client needs to use host memory without copying it again


def copy_array(a):
    """A copy of numpy array @a in memory of its own, aligned to 64 bytes as grist's slots are,
    so a CPU jax.device_put of it can alias it instead of copying a second time."""
    a = np.asarray(a)
    raw = np.empty(a.nbytes + _ALIGN, np.uint8)
    skip = -raw.ctypes.data % _ALIGN
    out = raw[skip:skip + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


class CopiedBatch:
    """A grist.Batch's contents copied into numpy-owned memory; the same attributes and methods.

    data, offsets, indices, datasets, epochs, segment_ids and positions are numpy arrays (or
    None, as on the Batch), num_records and sequence ints, epoch the first record's epoch; records(), release(), `with` and DLPack work
    as on a Batch. Its memory is not pinned and lent by no loader: keeping it costs no slot.
    """

    __slots__ = _ARRAYS + ("num_records", "sequence", "_released")

    def __init__(self, batch):
        for name in _ARRAYS:
            a = getattr(batch, name)
            setattr(self, name, None if a is None else copy_array(a))
        self.num_records = batch.num_records
        self.sequence = batch.sequence
        self._released = False

    @property
    def epoch(self):
        """The epoch of the first record, as Batch.epoch (None when packing or empty)."""
        return None if self.epochs is None or not self.num_records else int(self.epochs[0])

    @property
    def released(self):
        return self._released

    def _held(self):
        if self._released:
            raise ValueError("grist.Batch: the batch was released")
        return self

    def records(self):
        """records() -> list[bytes]: each record (ragged), or each real row's bytes."""
        self._held()
        if self.offsets is not None:
            o = self.offsets
            return [self.data[o[i]:o[i + 1]].tobytes() for i in range(self.num_records)]
        return [self.data[i].tobytes() for i in range(self.num_records)]

    def release(self):
        self._released = True
        for name in _ARRAYS:
            setattr(self, name, None)

    def __enter__(self):
        return self._held()

    def __exit__(self, *exc):
        self.release()

    def __dlpack__(self, **kwargs):
        return self._held().data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._held().data.__dlpack_device__()

    def __repr__(self):
        return f"grist.CopiedBatch(num_records={self.num_records}, sequence={self.sequence})"


def on_a_slot(a):
    """True for a numpy array over a grist batch slot (its base chain ends in a grist _View)."""
    while isinstance(a, np.ndarray):
        a = a.base
    if isinstance(a, memoryview):
        a = a.obj
    return isinstance(a, _View)


def copy_item(item):
    """A copy of what a loader yielded that holds no slot: a CopiedBatch for a Batch; for a dict
    (or list, tuple) of arrays, the same structure with every array over a slot copied (the
    others, e.g. a batch_map's results, are kept as they are)."""
    if isinstance(item, Batch):
        out = CopiedBatch(item)
        item.release()  # the slot goes back now (no view was taken from it)
        return out
    if isinstance(item, dict):
        return type(item)((k, copy_item(v)) for k, v in item.items())
    if isinstance(item, (list, tuple)) and not hasattr(item, "_fields"):
        return type(item)(copy_item(v) for v in item)
    if isinstance(item, np.ndarray) and on_a_slot(item):
        return copy_array(item)
    return item


def next_keeping_a_slot(loader):
    """next(loader), as a copy when it took the loader's last free slot.

    Whoever holds the batches (a queue, a device buffer, the caller) can then hold any number
    and the next call still finds a slot. Raises StopIteration at the end of the stream.
    """
    item = next(loader)
    if loader.held >= loader.prefetch:
        item = copy_item(item)
    return item

