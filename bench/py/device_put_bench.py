#!/usr/bin/env python3
"""Step time with the host-to-device transfer hidden behind a simulated training step:
grist.jax.device_put beside grain.experimental.device_put, on the same batches.

Both sides read the same grist.grain.LoaderDataset (fixed layout, no shuffle) mapped to
{"x": (batch, record_bytes) uint8}, and move it to the target with their device_put
(cpu_buffer_size 4, device_buffer_size 2 on both). The loop then runs the simulated step:
a jitted reduction over the batch (so the step really reads the device array) and
--step-ms of sleep with the GIL released (the accelerator busy, the host idle). The step
time is measured per step from the end of one step to the end of the next, after
--warmup steps; a round runs every variant once, the order reversed every other round;
the medians over rounds are printed with the input time the step could not hide
(step time - step alone) and each variant's ratio to the first.

    bench/py/device_put_bench.py [--target default|sharded] [--batch 256] [--record-bytes 16384]
        [--step-ms 5] [--steps 200] [--rounds 5] [--data DIR]

--target sharded uses a NamedSharding over every device (the leading axis split); on a
CPU-only machine add XLA_FLAGS=--xla_force_host_platform_device_count=2 to have two.
"""
import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np


def make_data(path, records, record_bytes):
    import grist
    if os.path.exists(path):
        return
    rng = np.random.default_rng(0)
    with grist.Writer(path, "group_size:64,uncompressed") as w:
        for _ in range(records):
            w.write(rng.integers(0, 256, record_bytes, dtype=np.uint8).tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", choices=["default", "sharded"], default="default")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--record-bytes", type=int, default=16384)
    ap.add_argument("--step-ms", type=float, default=5.0, help="simulated accelerator time per step (5)")
    ap.add_argument("--steps", type=int, default=200, help="timed steps per run (200)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data", help="folder for the dataset (a temporary one by default)")
    a = ap.parse_args()

    import grain
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import grist.grain
    import grist.jax

    folder = a.data or tempfile.mkdtemp(prefix="grist-device-put-")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "bench-%d.ar" % a.record_bytes)
    records = a.batch * (a.steps + a.warmup + 8)
    make_data(path, records, a.record_bytes)
    if a.target == "sharded":
        target = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))
    else:
        target = jax.devices()[0]

    def source():
        ds = grist.grain.LoaderDataset(path, a.batch, shuffle=False, epochs=None, layout="fixed",
                                       record_bytes=a.record_bytes)
        return ds.map(lambda b: {"x": b.data})

    @jax.jit
    def touch(x):
        return jnp.sum(x[:, ::256].astype(jnp.int32))

    def run(make_iter):
        it = make_iter()
        times = []
        t = time.perf_counter()
        for k in range(a.warmup + a.steps):
            batch = next(it)
            touch(batch["x"]).block_until_ready()
            time.sleep(a.step_ms / 1000)
            now = time.perf_counter()
            if k >= a.warmup:
                times.append(now - t)
            t = now
        it.close()
        return statistics.median(times) * 1000, statistics.mean(times) * 1000

    variants = {
        "grist.jax.device_put": lambda: grist.jax.device_put(iter(source()), target),
        "grain.experimental.device_put": lambda: iter(grain.experimental.device_put(source(), target)),
    }
    # The step alone: the batch already on the device, nothing to hide.
    x0 = jax.device_put(np.zeros((a.batch, a.record_bytes), np.uint8), target)

    class Same:
        def __next__(self):
            return {"x": x0}

        def close(self):
            pass
    variants["step alone"] = Same

    results = {k: [] for k in variants}
    names = list(variants)
    for r in range(a.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            results[name].append(run(variants[name]))
    alone = statistics.median(m for m, _ in results["step alone"])
    base = None
    print("target %s (%s), batch %d x %d B = %.1f MiB, step %.1f ms, %d steps x %d rounds" % (
        a.target, jax.devices()[0].platform, a.batch, a.record_bytes, a.batch * a.record_bytes / 2**20,
        a.step_ms, a.steps, a.rounds))
    summary = {}
    for name in names:
        med = statistics.median(m for m, _ in results[name])
        mean = statistics.median(m for _, m in results[name])
        base = base or med
        summary[name] = {"median_ms": round(med, 3), "mean_ms": round(mean, 3),
                         "exposed_input_ms": round(med - alone, 3)}
        print("%-32s step %.3f ms median (%.3f mean), input not hidden %.3f ms, ratio %.3f" % (
            name, med, mean, med - alone, med / base))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
