"""grist.jax: feeding JAX from a grist.Loader.

device_prefetch() is the two-stage prefetch the Grain docs describe: while the model steps on
batch k, batches k+1..k+size are already on their way to the device.
"""

import collections
import itertools

import jax


def device_prefetch(iterator, size=2, sharding=None):
    """Yield the items of ``iterator`` put on the device, ``size`` items ahead.

    Each item (a numpy array, or any pytree of them, e.g. what a grist.Batch was turned
    into) goes through ``jax.device_put(item, sharding)`` as soon as it is read, so its
    transfer overlaps the steps on the items before it. With sharding None the default
    device is used. An item's host memory may be reused once device_put has returned.
    """
    if size < 1:
        raise ValueError("device_prefetch: size must be >= 1")
    queue = collections.deque()

    def enqueue(n):
        for item in itertools.islice(iterator, n):
            queue.append(jax.device_put(item, sharding))

    iterator = iter(iterator)
    enqueue(size)
    while queue:
        yield queue.popleft()
        enqueue(1)
