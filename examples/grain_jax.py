#!/usr/bin/env python3
"""Parquet in, a Grain pipeline over grist, batches sharded over the devices, a jitted step, a checkpoint.

    python3 examples/grain_jax.py --data /tmp/lr --steps 200
    python3 examples/grain_jax.py --data /tmp/lr --steps 100 --save ckpt.json
    python3 examples/grain_jax.py --data /tmp/lr --steps 200 --resume ckpt.json

The first run writes DATA/lr.parquet (20000 rows: x, 16 float32 features; y, a float32 label
1.0 when x . w_true + b_true > 0) and converts it with grist.tfds.from_parquet into the TFDS
dataset DATA/lr/1.0.0 (2 shards). Then:

  source   grist.tfds.data_source(DATA/lr/1.0.0, "train"): dict batches {"x", "y"} decoded
           from the tf.train.Example records by grist's engine
  Grain    grist.grain.LoaderDataset(source, 64, seed=0) -> .map(to x, y) -> .filter(all
           batches here; the hook for a real predicate)
  device   grist.jax.device_put(iterator, NamedSharding(mesh, P("data"))): the batch's rows
           split over every device, transferred on background threads
  step     a jitted SGD step of a logistic regression
  ckpt     --save writes the parameters, the step and the pipeline's state (the Grain
           iterator's, the position after the last batch trained on, however many batches
           the buffers hold) as JSON; --resume continues with exactly the next batch.

--trace FILE appends one line per step: the step and a digest of its batch's x. The last line
on stdout is a JSON summary (first and last losses, steps, final parameters). For two CPU
devices: XLA_FLAGS=--xla_force_host_platform_device_count=2.
"""
import argparse
import hashlib
import json
import os

import numpy as np

import grist
import grist.grain
import grist.jax

from grist.tfds import data_source, from_parquet

from train_jax import FEATURES, make_train_step, true_rule  # the same model and rule, beside this file

ROWS = 20000


def make_dataset(data):
    """DATA/lr.parquet, then the TFDS dataset DATA/lr/1.0.0 converted from it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = os.path.join(data, "lr", "1.0.0")
    if os.path.exists(out):
        return out
    w, b = true_rule()
    rng = np.random.default_rng(99)
    x = rng.normal(size=(ROWS, FEATURES)).astype(np.float32)
    y = (x @ w + b > 0).astype(np.float32)
    table = pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), FEATURES), "y": y})
    path = os.path.join(data, "lr.parquet")
    pq.write_table(table, path, row_group_size=4096)
    from_parquet(path, out, shards=2)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="folder for lr.parquet and the lr dataset (made when missing)")
    ap.add_argument("--steps", type=int, default=200, help="stop after this many steps in total")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--save", help="write params + step + pipeline state here (JSON) at the end")
    ap.add_argument("--resume", help="continue from a file written by --save")
    ap.add_argument("--trace", help="append 'STEP DIGEST' per step to this file")
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    os.makedirs(args.data, exist_ok=True)
    source = data_source(make_dataset(args.data), "train")
    ds = grist.grain.LoaderDataset(source, args.batch_size, seed=0, epochs=None)
    ds = ds.map(lambda b: {"x": np.asarray(b["x"], np.float32), "y": np.asarray(b["y"], np.float32)})
    ds = ds.filter(lambda b: len(b["y"]) == args.batch_size)

    mesh = Mesh(np.array(jax.devices()), ("data",))
    batches = grist.jax.device_put(iter(ds), NamedSharding(mesh, P("data")))

    params = {"w": jnp.zeros(FEATURES, jnp.float32), "b": jnp.zeros((), jnp.float32)}
    step = 0
    if args.resume:
        ck = json.load(open(args.resume))
        params = {"w": jnp.asarray(ck["w"], jnp.float32), "b": jnp.asarray(ck["b"], jnp.float32)}
        step = ck["step"]
        batches.set_state(ck["pipeline"])

    train_step = make_train_step(args.lr)

    losses = []
    trace = open(args.trace, "a") if args.trace else None
    while step < args.steps:
        batch = next(batches)
        params, loss = train_step(params, batch["x"], batch["y"])
        losses.append(float(loss))
        if trace:
            trace.write("%d %s\n" % (step, hashlib.sha1(np.asarray(batch["x"]).tobytes()).hexdigest()[:16]))
        step += 1
    state = batches.get_state()  # the position after the last batch trained on
    batches.close()
    if trace:
        trace.close()
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"w": np.asarray(params["w"]).tolist(), "b": float(params["b"]), "step": step,
                       "pipeline": state}, f)
    k = min(20, len(losses))
    print(json.dumps({"steps": step, "devices": len(jax.devices()),
                      "first_loss": float(np.mean(losses[:k])) if losses else None,
                      "last_loss": float(np.mean(losses[-k:])) if losses else None,
                      "w": np.asarray(params["w"]).tolist(), "b": float(params["b"])}))


if __name__ == "__main__":
    main()
