#!/usr/bin/env python3
"""Train a logistic regression with JAX on ArrayRecord data fed by grist, checkpoint, resume.

    python3 examples/train_jax.py --data /tmp/lr --steps 300
    python3 examples/train_jax.py --data /tmp/lr --steps 150 --save ckpt.npz
    python3 examples/train_jax.py --data /tmp/lr --steps 300 --resume ckpt.npz

The first run writes DATA/train.ar: 20000 records of 16 float32 features and a float32 label
1.0 when x . w_true + b_true > 0 (a fixed rule, so the loss must fall). Each step takes one
batch from grist.Loader (layout "fixed": a (64, 68) uint8 array of pinned memory, viewed as
float32 without a copy), through grist.jax.device_prefetch (two batches on their way to the
device while the model steps), and takes an SGD step. --save writes the parameters, the step
and the loader state of the last batch trained on into one .npz; --resume continues from it
with exactly the next batch. On several hosts, give every process its own shard:
shard_index=jax.process_index(), shard_count=jax.process_count() (--multihost).

--trace FILE writes one line per step: the step and the dataset indices of its batch.
The last line on stdout is a JSON summary (first and last losses, steps, final parameters).
"""
import argparse
import json
import os

import numpy as np

import grist
import grist.jax

FEATURES = 16
RECORD_BYTES = (FEATURES + 1) * 4
RECORDS = 20000


def true_rule():
    rng = np.random.default_rng(1234)
    return rng.normal(size=FEATURES).astype(np.float32), np.float32(0.25)


def write_dataset(path):
    """The known rule: label = 1 when x . w + b > 0; features standard normal."""
    w, b = true_rule()
    rng = np.random.default_rng(99)
    x = rng.normal(size=(RECORDS, FEATURES)).astype(np.float32)
    y = (x @ w + b > 0).astype(np.float32)
    rows = np.concatenate([x, y[:, None]], axis=1)
    with grist.Writer(path, "group_size:64,zstd:3") as wr:
        for row in rows:
            wr.write(row.tobytes())


def make_train_step(lr):
    """A jitted SGD step of the logistic regression: (params, x, y) -> (params, loss)."""
    import jax
    import jax.numpy as jnp

    def loss_fn(p, x, y):
        logits = x @ p["w"] + p["b"]
        return jnp.mean(jnp.logaddexp(0.0, logits) - y * logits)   # binary cross-entropy

    @jax.jit
    def train_step(p, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, d: a - lr * d, p, g), loss
    return train_step


def batches(loader):
    """(features, labels) numpy views of each batch, with the loader state taken right after it."""
    for batch in loader:
        rows = batch.data.view(np.float32)      # (64, 17) float32, still the pinned slot
        yield {"x": rows[:, :FEATURES], "y": rows[:, FEATURES], "indices": batch.indices,
               "state": loader.get_state()}
        # The arrays above keep the slot lent until JAX and this loop are done with them.


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="folder for train.ar (written when missing)")
    ap.add_argument("--steps", type=int, default=300, help="stop after this many steps in total")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--save", help="write params + step + loader state here at the end")
    ap.add_argument("--resume", help="continue from a file written by --save")
    ap.add_argument("--trace", help="append 'STEP INDEX,INDEX,...' per step to this file")
    ap.add_argument("--multihost", action="store_true",
                    help="shard by jax.process_index()/jax.process_count() (after jax.distributed.initialize)")
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp

    os.makedirs(args.data, exist_ok=True)
    path = os.path.join(args.data, "train.ar")
    if not os.path.exists(path):
        write_dataset(path)

    params = {"w": jnp.zeros(FEATURES, jnp.float32), "b": jnp.zeros((), jnp.float32)}
    step, state = 0, None
    if args.resume:
        ck = np.load(args.resume)
        params = {"w": jnp.asarray(ck["w"]), "b": jnp.asarray(ck["b"])}
        step, state = int(ck["step"]), ck["loader_state"].tobytes()

    shard = dict(shard_index=jax.process_index(), shard_count=jax.process_count()) if args.multihost else {}
    loader = grist.Loader(path, args.batch_size, seed=args.seed, epochs=None, layout="fixed",
                          record_bytes=RECORD_BYTES, state=state, **shard)

    train_step = make_train_step(args.lr)
    losses = []
    trace = open(args.trace, "a") if args.trace else None
    last_state = state
    for item in grist.jax.device_prefetch(batches(loader), size=2):
        if step >= args.steps:
            break
        params, loss = train_step(params, item["x"], item["y"])
        losses.append(float(loss))
        if trace:
            trace.write("%d %s\n" % (step, ",".join(map(str, np.asarray(item["indices"]).tolist()))))
        last_state = item["state"]
        step += 1
    loader.close()
    if trace:
        trace.close()
    if args.save:
        np.savez(args.save, w=np.asarray(params["w"]), b=np.asarray(params["b"]), step=step,
                 loader_state=np.frombuffer(last_state, np.uint8))
    k = min(20, len(losses))
    print(json.dumps({"steps": step, "first_loss": float(np.mean(losses[:k])) if losses else None,
                      "last_loss": float(np.mean(losses[-k:])) if losses else None,
                      "w": np.asarray(params["w"]).tolist(), "b": float(params["b"])}))


if __name__ == "__main__":
    main()
