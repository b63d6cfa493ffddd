"""grist.jax: batches onto JAX devices on background threads, as grain.experimental.device_put does.

    it = grist.jax.device_put(loader_or_iterator, NamedSharding(mesh, P("data")))
    for batch in it:            # pytrees of jax.Arrays, already on the devices
        state = train_step(state, batch)
    it.close()                  # or `with`: stops the threads

Two threads work ahead of the caller: one takes items from the iterator into a host buffer of
cpu_buffer_size items, the other moves them to the device(s) into a buffer of
device_buffer_size items and waits until each transfer is complete. The caller's thread only
takes finished items, so a step never waits on a transfer that could have been done earlier.
"""

import copy
import queue
import threading
import weakref

import jax
import numpy as np

from ._grist import Batch
from ._held import _ARRAYS, CopiedBatch, copy_array, next_keeping_a_slot, on_a_slot

__all__ = ["device_put", "device_prefetch", "DevicePutIterator"]

_ARRAY_TYPES = (np.ndarray, np.generic, jax.Array)
_END = object()       # the source is exhausted
_POLL_S = 0.05        # how often a thread blocked on a full or empty buffer checks for close()


def _as_tree(item):
    """A grist Batch (or CopiedBatch) as the dict of its arrays; anything else as it is."""
    if isinstance(item, (Batch, CopiedBatch)):
        return {k: v for k in _ARRAYS if (v := getattr(item, k)) is not None}
    return item


def _aliases_host_memory(target):
    """True when device_put to target may keep numpy memory under the device array: the CPU
    backend does so for aligned arrays such as grist's slots, whatever may_alias says."""
    if target is None:
        devices = [jax.devices()[0]]
    elif isinstance(target, jax.sharding.Sharding):
        devices = target.device_set
    else:
        devices = [target]
    return any(getattr(d, "platform", "") == "cpu" for d in devices)


def _transfer(item, target, copy_first):
    """item with every array leaf put on target in one jax.device_put call; other leaves
    (bytes, strings, ints: a checkpoint travelling with its batch) as they are. copy_first:
    numpy leaves over a grist slot are copied first, so that no device array lives on a slot
    (which the loader could then not get back while the array is kept)."""
    leaves, treedef = jax.tree_util.tree_flatten(_as_tree(item))
    where = [i for i, x in enumerate(leaves) if isinstance(x, _ARRAY_TYPES)]
    if where:
        host = [leaves[i] for i in where]
        if copy_first:
            host = [copy_array(x) if on_a_slot(x) else x for x in host]
        put = jax.device_put(host, target)
        del host
        jax.block_until_ready(put)  # the device buffer holds finished transfers only
        for i, x in zip(where, put):
            leaves[i] = x
    return jax.tree_util.tree_unflatten(treedef, leaves)


class _Pipeline:
    """The state the threads share; never refers to the DevicePutIterator, so dropping that
    iterator collects it and its finalizer stops the threads."""

    def __init__(self, source, target, cpu_buffer_size, device_buffer_size):
        self.source = source
        self.target = target
        self.host = queue.Queue(maxsize=cpu_buffer_size)
        self.device = queue.Queue(maxsize=device_buffer_size)
        self.stop = threading.Event()
        self.threads = []
        # A grist.Loader lends at most `prefetch` batches: take a copy when the buffers would
        # otherwise hold the last free slot (grist._held).
        self.take = next_keeping_a_slot if hasattr(source, "held") else next
        self.stateful = callable(getattr(source, "get_state", None))
        self.copy_first = _aliases_host_memory(target)

    def put(self, q, entry):
        while not self.stop.is_set():
            try:
                q.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                pass
        return False

    def get(self, q):
        while not self.stop.is_set():
            try:
                return q.get(timeout=_POLL_S)
            except queue.Empty:
                pass
        return None

    def fill_host(self):
        """Thread: source -> host buffer, each item with the source's state right after it."""
        while not self.stop.is_set():
            try:
                item = self.take(self.source)
            except StopIteration:
                self.put(self.host, (_END, self.state(), None))
                return
            except BaseException as e:  # noqa: B902 (handed to the consumer's thread)
                self.put(self.host, (None, None, e))
                return
            try:
                entry = (item, self.state(), None)
            except BaseException as e:  # noqa: B902
                entry = (None, None, e)
            del item  # the queue's entry is the only reference: nothing pins a slot after it
            if not self.put(self.host, entry) or entry[2] is not None:
                return

    def fill_device(self):
        """Thread: host buffer -> device(s) -> device buffer."""
        while True:
            entry = self.get(self.host)
            if entry is None:
                return
            item, state, err = entry
            del entry
            if err is None and item is not _END:
                try:
                    item = _transfer(item, self.target, self.copy_first)
                except BaseException as e:  # noqa: B902
                    item, state, err = None, None, e
            if not self.put(self.device, (item, state, err)) or err is not None or item is _END:
                return

    def state(self):
        return copy.deepcopy(self.source.get_state()) if self.stateful else None

    def start(self):
        """Start the threads, or those an interrupted start() left unstarted: a KeyboardInterrupt
        can land between the two starts, and a pipeline with one thread never started would
        wait forever for items (and halt() could not join it)."""
        if not self.threads:
            self.stop.clear()
            self.threads = [threading.Thread(target=self.fill_host, name="grist-device-put-host", daemon=True),
                            threading.Thread(target=self.fill_device, name="grist-device-put-device", daemon=True)]
        for t in self.threads:
            if t.ident is None:
                t.start()

    def drain(self):
        for q in (self.host, self.device):
            while True:
                try:
                    q.get_nowait()
                except queue.Empty:
                    break

    def halt(self):
        """Stop the threads, drop what the buffers hold (their slots go back), join."""
        self.stop.set()
        self.drain()
        for t in self.threads:
            if t is not threading.current_thread() and t.ident is not None:  # never started: nothing to join
                t.join()
        self.threads = []
        self.drain()


def _halt_and_close(pipeline, close_source):
    pipeline.halt()
    if close_source and callable(getattr(pipeline.source, "close", None)):
        pipeline.source.close()


class DevicePutIterator:
    """DevicePutIterator(source, target, cpu_buffer_size, device_buffer_size): the iterator
    device_put() returns (call device_put(); the arguments are its own): next(), close(),
    `with`, and get_state()/set_state() when the source has them (the state after the last
    item returned, however many items the buffers hold; set_state() drops the buffers and
    restarts from that point).

    source is the iterator whose items are moved; target the jax Device or Sharding they go
    to (device_put's device_or_sharding, resolved); cpu_buffer_size the items the host
    thread keeps ready and device_buffer_size the items already on the device (device_put's
    defaults: 4 and 2)."""

    def __init__(self, source, target, cpu_buffer_size, device_buffer_size):
        if cpu_buffer_size < 1 or device_buffer_size < 1:
            raise ValueError("device_put: cpu_buffer_size and device_buffer_size must be >= 1")
        self._p = _Pipeline(source, target, cpu_buffer_size, device_buffer_size)
        self._state = self._p.state()
        self._done = False
        self._closed = False
        self._finalizer = weakref.finalize(self, _halt_and_close, self._p, False)

    def __iter__(self):
        return self

    def __next__(self):
        if self._closed:
            raise ValueError("grist.jax.device_put: the iterator is closed")
        if self._done:
            raise StopIteration
        self._p.start()
        entry = self._p.get(self._p.device)
        if entry is None:  # close() from another thread while this one waited
            raise ValueError("grist.jax.device_put: the iterator was closed")
        item, state, err = entry
        if err is not None:
            self._done = True
            self._p.halt()
            raise err
        self._state = state
        if item is _END:
            self._done = True
            self._p.halt()
            raise StopIteration
        return item

    def start_prefetch(self):
        """Start the threads now (e.g. while the model is restored) instead of at the first next()."""
        if not self._closed and not self._done:
            self._p.start()

    def get_state(self):
        """get_state(): the source's state right after the last item next() returned, however
        many items the buffers hold (TypeError when the source has no get_state())."""
        if not self._p.stateful:
            raise TypeError("grist.jax.device_put: the source iterator has no get_state()")
        return self._state

    def set_state(self, state):
        """set_state(state): drop the buffered items, set the source's state and restart the
        threads from it: the next item is the one after that checkpoint."""
        if not callable(getattr(self._p.source, "set_state", None)):
            raise TypeError("grist.jax.device_put: the source iterator has no set_state()")
        self._p.halt()
        self._p.source.set_state(state)
        self._state = self._p.state()
        self._done = False

    def close(self):
        """Stop the threads, drop the buffered items and close the source (when it has close())."""
        if not self._closed:
            self._closed = True
            self._finalizer.detach()
            _halt_and_close(self._p, True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def device_put(iterator, device_or_sharding=None, *, cpu_buffer_size=4, device_buffer_size=2):
    """Iterate the items of ``iterator`` moved onto ``device_or_sharding`` by background threads.

    Mirrors grain.experimental.device_put (same arguments, the same two buffers), for any
    iterator: a grist.Loader, the iterator of a Grain dataset (grist.grain.LoaderDataset
    included), a generator. Each item is a pytree: a dict batch, a tuple, an array, or a grist
    Batch (turned into the dict of its arrays: data, offsets, indices, datasets and, packed,
    segment_ids and positions). Its array leaves become jax.Arrays with the given Sharding (a
    NamedSharding(mesh, P("data")) splits the leading axis across the mesh's devices, so
    that axis must divide evenly: use the padded or fixed layout, or a packing loader) or on
    the one device given (None: the default device); other leaves (bytes, str, int) pass
    through unchanged. Items keep their order. As with jax.device_put, 64-bit arrays (a Batch's
    indices and offsets are uint64) become 32-bit unless jax_enable_x64 is set.

    The caller's thread never runs a transfer: a host thread fills a buffer of
    cpu_buffer_size items from the iterator, a device thread puts them on the device and
    waits until each transfer is complete before it enters the buffer of device_buffer_size.
    An exception in either thread is raised by next() in the caller's thread, and ends the
    iteration. close() (or leaving `with`, or dropping the iterator) stops both threads and
    drops the buffered items; close() also closes the source.

    Slots. A grist Batch's arrays keep its pinned slot lent until they are gone. No device
    array is left on host memory of the source (the CPU backend would alias aligned numpy
    arrays, so there the leaves over a slot are copied first), so an item's slot goes back once it is on
    the device, and the pipeline holds at most cpu_buffer_size
    + 2 items of the source (the host buffer, one being taken, one being transferred). Given a
    grist.Loader (or a LoaderDataset's iterator), an item that takes the loader's last free
    slot is handed on as a copy and the slot goes back (see grist.grain), so the buffers never
    stall the loader. A generator around a Loader has no such guard: give that Loader
    prefetch >= cpu_buffer_size + 2.

    With a source that has get_state() (a grist.Loader, a Grain iterator), the returned
    iterator's get_state() is the source's state right after the last item returned, so a
    checkpoint is exact although later items are already buffered; set_state() (Grain
    iterators) drops the buffers and continues from a state.
    """
    return DevicePutIterator(iter(iterator), device_or_sharding, cpu_buffer_size, device_buffer_size)


def device_prefetch(iterator, size=2, sharding=None):
    """device_prefetch(iterator, size=2, sharding=None): the earlier name of
    device_put(iterator, sharding, cpu_buffer_size=size, device_buffer_size=size), kept for
    existing code; new code calls device_put.

    iterator is any iterator (a Loader, a Grain iterator, a generator); size is the items
    kept ahead on the host and on the device (default 2); sharding the
    jax Sharding or Device the items go to (None, the default: the default device)."""
    if size < 1:
        raise ValueError("device_prefetch: size must be >= 1")
    return device_put(iterator, sharding, cpu_buffer_size=size, device_buffer_size=size)
