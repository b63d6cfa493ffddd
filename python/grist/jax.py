"""grist.jax: feeding JAX from a grist.Loader.

device_prefetch() is the two-stage prefetch the Grain docs describe: while the model steps on
batch k, batches k+1..k+size are already on their way to the device.
"""

import collections
import itertools

import jax
import numpy as np


def device_prefetch(iterator, size=2, sharding=None):
    """Yield the items of ``iterator`` put on the device, ``size`` items ahead.

    Each item (a numpy array, or any pytree of them, e.g. what a grist.Batch was turned
    into) goes through ``jax.device_put(leaf, sharding)`` as soon as it is read, so its
    transfer overlaps the steps on the items before it. With sharding None the default
    device is used. Leaves that are not arrays (bytes, ints, strings) pass through as they
    are, so a batch can travel with the loader state taken right after it: with ``size``
    batches in flight, ``loader.get_state()`` is ``size`` batches ahead of the step.

    The numpy arrays of a grist.Batch keep its slot lent for as long as JAX holds them (a
    CPU device_put may alias the host memory), so no slot is reused under a device array.
    """
    if size < 1:
        raise ValueError("device_prefetch: size must be >= 1")
    queue = collections.deque()

    def enqueue(n):
        for item in itertools.islice(iterator, n):
            queue.append(jax.tree_util.tree_map(put, item))

    def put(leaf):
        if isinstance(leaf, (np.ndarray, np.generic, jax.Array)):
            return jax.device_put(leaf, sharding)
        return leaf

    iterator = iter(iterator)
    enqueue(size)
    while queue:
        yield queue.popleft()
        enqueue(1)
