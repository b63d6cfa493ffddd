#!/usr/bin/env python3
"""Grain's MNIST journey with grist: a TFDS name in, dict batches out, a jitted JAX step.

    python3 examples/tfds_jax.py                         # mnist from $TFDS_DATA_DIR or ~/tensorflow_datasets
    python3 examples/tfds_jax.py --name grist_mnist --data-dir tests/data/tfds --steps 200

The dataset is any prepared TFDS dataset (file_format="array_record") with an 'image' and a
'label' feature. grist.tfds.data_source reads its dataset_info.json and features.json;
grist.Loader parses each tf.train.Example and decodes each PNG on grist's threads straight
into the batch, and batch_map runs the tutorial's normalize on background threads. Each
batch is a plain dict {"image": float32 (B, H, W, C), "label": int64 (B,)}; it goes through
grist.jax.device_put (the transfers on background threads, batches kept ahead on the
device) into a jitted softmax regression step. The last line on stdout is a JSON summary (first and last losses, steps).
"""
import argparse
import json

import numpy as np

import grist
import grist.jax
import grist.tfds


def normalize(batch):
    """The Grain tutorial's map, on a whole batch at once."""
    return {"image": batch["image"].astype(np.float32) / 255.0, "label": batch["label"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="mnist", help="TFDS dataset name or version folder (mnist)")
    ap.add_argument("--data-dir", help="TFDS data_dir (default: $TFDS_DATA_DIR, ~/tensorflow_datasets)")
    ap.add_argument("--split", default="train")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.5)
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp

    src = grist.tfds.data_source(args.name, args.split, data_dir=args.data_dir)
    image = next(leaf for leaf in src.leaves if leaf.key == "image")
    classes = 10
    pixels = int(np.prod(image.shape))
    loader = grist.Loader(src, args.batch_size, seed=42, epochs=None, drop_remainder=True,
                          batch_map=normalize)

    params = {"w": jnp.zeros((pixels, classes), jnp.float32), "b": jnp.zeros(classes, jnp.float32)}

    def loss_fn(p, x, y):
        logits = x.reshape(x.shape[0], -1) @ p["w"] + p["b"]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(y.shape[0]), y])

    @jax.jit
    def train_step(p, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, d: a - args.lr * d, p, g), loss

    losses = []
    batches = grist.jax.device_put(loader, jax.devices()[0])
    for step, batch in enumerate(batches):
        if step >= args.steps:
            break
        params, loss = train_step(params, batch["image"], batch["label"])
        losses.append(float(loss))
    batches.close()
    loader.close()
    k = min(20, len(losses))
    print(json.dumps({"steps": len(losses), "first_loss": float(np.mean(losses[:k])),
                      "last_loss": float(np.mean(losses[-k:]))}))


if __name__ == "__main__":
    main()
