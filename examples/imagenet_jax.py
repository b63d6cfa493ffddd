#!/usr/bin/env python3
"""ImageNet-style input with grist: JPEGs of every size in, fixed-shape float32 batches out, a jitted JAX step.

    python3 examples/imagenet_jax.py --data ~/tensorflow_datasets/imagenet2012/5.1.0
    python3 examples/imagenet_jax.py --make 300 --size 64 --steps 100   # a small dataset made here

The dataset is a TFDS version folder of JPEGs with an 'image' and a 'label' feature and a
'train' and a 'validation' split (TFDS's imagenet2012, or any ImageFolder converted with
`grist convert --from imagefolder`). With --make N the example first makes one of N
JPEGs per split in a temporary folder: photographs are not shipped, so each image is a
smooth random scene tinted by its class (red, green or blue), of a random size (shorter
side 120-400, aspect 3:4 to 16:9) and quality, written as an ImageFolder and converted
with grist.convert(format="imagefolder").

Training reads batches through grist.vision.RandomResizedCrop (torchvision's crop, flip,
normalize, on grist's decode threads, straight into the batch), evaluation through
CenterCrop (torchvision's Resize(size * 256 / 224) then the centre crop). Both go through
grist.jax.device_put into a jitted step of a small model (8x8 average pooling and a
linear layer: enough to learn the tint). The last line on stdout is a JSON summary: the
batch shapes, steps, first and last losses, and the validation accuracy.
"""
import argparse
import io
import json
import os
import shutil
import tempfile

import numpy as np

import grist
import grist.jax
import grist.tfds
import grist.vision

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLASSES = ("blue", "green", "red")  # the folder names, sorted as the label indices are


def make_dataset(tmp, n, seed=0):
    """A TFDS folder of @n JPEGs per split in 3 tinted classes; returns its version folder."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    root = os.path.join(tmp, "folder")
    for split in ("train", "validation"):
        for i in range(n):
            label = i % len(CLASSES)
            short = int(rng.integers(120, 401))
            aspect = rng.uniform(0.75, 16 / 9)
            h, w = (short, int(short * aspect)) if rng.random() < 0.7 else (int(short * aspect), short)
            # a smooth scene: a few random blobs over a gradient, then the class's tint
            yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
            img = np.zeros((h, w, 3))
            for _ in range(4):
                cy, cx, r = rng.random(3)
                img += rng.random(3) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2)[..., None] / (0.05 + r * 0.2))
            img = img / img.max() * 160 + 40
            img[..., 2 - label] += 55  # CLASSES sorted: blue is channel 2, green 1, red 0
            folder = os.path.join(root, split, CLASSES[label])
            os.makedirs(folder, exist_ok=True)
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
                os.path.join(folder, "%05d.jpg" % i), "JPEG", quality=int(rng.integers(75, 96)))
    out = os.path.join(tmp, "tinted", "1.0.0")
    grist.convert(root, out, format="imagefolder")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="a TFDS version folder of JPEGs ('image', 'label'; train and validation)")
    ap.add_argument("--make", type=int, metavar="N", help="first make a small dataset of N images per split")
    ap.add_argument("--size", type=int, default=224, help="output side of the crops (224)")
    ap.add_argument("--steps", type=int, default=200, help="training steps (200)")
    ap.add_argument("--batch-size", type=int, default=64, help="images per batch (64)")
    ap.add_argument("--lr", type=float, default=0.05, help="learning rate (0.05)")
    ap.add_argument("--classes", type=int, help="label count (default: label.labels.txt's lines, else 1000)")
    ap.add_argument("--threads", type=int, help="decode threads (default: the CPUs allowed)")
    args = ap.parse_args()
    if bool(args.data) == bool(args.make):
        ap.error("give --data DIR or --make N")
    if args.size % 8:
        ap.error("--size must be a multiple of 8 (the model pools 8x8)")

    import jax
    import jax.numpy as jnp

    tmp = tempfile.mkdtemp(prefix="grist-imagenet-example-") if args.make else None
    try:
        data = make_dataset(tmp, args.make) if args.make else args.data
        train_src = grist.tfds.data_source(data, split="train", threads=args.threads)
        eval_src = grist.tfds.data_source(data, split="validation", threads=args.threads)
        classes = args.classes
        labels = os.path.join(data, "label.labels.txt")  # the ClassLabel's names, as TFDS writes them
        if not classes and os.path.exists(labels):
            with open(labels) as f:
                classes = sum(1 for line in f if line.strip())
        classes = classes or 1000
        skip = [leaf.key for leaf in train_src.leaves if leaf.key not in ("image", "label")]
        train = grist.Loader(
            train_src, args.batch_size, seed=0, epochs=None, drop_remainder=True, threads=args.threads, skip=skip,
            transforms={"image": grist.vision.RandomResizedCrop(args.size, flip=0.5, mean=MEAN, std=STD)})
        evaluation = grist.Loader(
            eval_src, args.batch_size, shuffle=False, epochs=1, threads=args.threads, skip=skip,
            transforms={"image": grist.vision.CenterCrop(args.size, resize=args.size * 256 // 224,
                                                         mean=MEAN, std=STD)})

        def logits_of(p, x):
            b, s = x.shape[0], x.shape[1] // 8
            pooled = x.reshape(b, 8, s, 8, s, 3).mean(axis=(2, 4)).reshape(b, -1)
            return pooled @ p["w"] + p["b"]

        def loss_fn(p, x, y):
            return -jnp.mean(jax.nn.log_softmax(logits_of(p, x))[jnp.arange(y.shape[0]), y])

        @jax.jit
        def train_step(p, x, y):
            loss, g = jax.value_and_grad(loss_fn)(p, x, y)
            return jax.tree_util.tree_map(lambda a, d: a - args.lr * d, p, g), loss

        @jax.jit
        def correct(p, x, y):
            return jnp.sum(jnp.argmax(logits_of(p, x), -1) == y)

        params = {"w": jnp.zeros((8 * 8 * 3, classes), jnp.float32), "b": jnp.zeros(classes, jnp.float32)}
        device = jax.devices()[0]
        losses, shapes = [], {}
        batches = grist.jax.device_put(train, device)
        for step, batch in enumerate(batches):
            if step >= args.steps:
                break
            shapes["train"] = [list(batch["image"].shape), str(batch["image"].dtype)]
            params, loss = train_step(params, batch["image"], batch["label"])
            losses.append(float(loss))
        batches.close()
        train.close()
        right = seen = 0
        batches = grist.jax.device_put(evaluation, device)
        for batch in batches:
            shapes["eval"] = [list(batch["image"].shape), str(batch["image"].dtype)]
            right += int(correct(params, batch["image"], batch["label"]))
            seen += batch["label"].shape[0]
        batches.close()
        evaluation.close()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    k = max(1, min(10, len(losses) // 4))
    print(json.dumps({"shapes": shapes, "steps": len(losses), "first_loss": float(np.mean(losses[:k])),
                      "last_loss": float(np.mean(losses[-k:])), "eval_images": seen,
                      "eval_accuracy": right / max(1, seen)}))


if __name__ == "__main__":
    main()
