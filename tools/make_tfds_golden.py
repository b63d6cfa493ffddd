#!/usr/bin/env python3
"""Write small TFDS datasets with TFDS itself, and what TFDS's own reader returns for them.

    tools/make_tfds_golden.py [OUT]          # OUT defaults to tests/data/tfds
    tools/make_tfds_golden.py --mnist-records 60000 --no-expected OUT   # the bench's dataset

Each dataset is prepared by a tfds.core.GeneratorBasedBuilder with file_format="array_record",
so the shards, dataset_info.json and features.json are exactly what TFDS writes:

  grist_mnist     MNIST-like: image (28, 28, 1) PNG, label ClassLabel(10); train and test splits
                  in 2 shards each.
  grist_features  every feature type grist.tfds reads: PNG and JPEG images of fixed and None
                  dims, a ClassLabel with names, Tensors of several dtypes with fixed and None
                  dims, bool/float/int Scalars, Text, a string Tensor, a nested FeaturesDict
                  and a Sequence of scalars.

Beside each prepared dataset, OUT/expected/<name>.pkl.gz holds, per split, every record as
tfds.data_source(name, split)[i] returns it, and per split expression TFDS's own file
instructions (file, skip, take), so the default tests compare grist with TFDS's decoding and
split arithmetic without TensorFlow. Records and images come from a fixed seed; the shards are
reproducible up to TFDS's own version.
"""

import argparse
import os
import gzip
import pickle
import shutil
import sys
import tempfile

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow_datasets as tfds  # noqa: E402

# Counts that make percent slices round both ways (10% of 305 is 30.5: Python rounds to 30).
MNIST_TRAIN = 305
MNIST_TEST = 103
FEATURES_TRAIN = 60
FEATURES_TEST = 20

# Split expressions whose file instructions and records are recorded: percent slices that
# round both ways, negative and open ends, unions, and a slice of a union member.
SPLITS = {
    "grist_mnist": ["train", "test", "train[:10%]", "train[10%:20%]", "train[100:200]", "train+test",
                    "train[-10:]", "test[:33%]", "test[33%:67%]", "train[:1%]+test[50%:]", "train[-7%:-2%]",
                    "all", "train[:0]", "train[5:5]", "test[99:]", "train[30%:]", "train[:-1%]", "test[10.5%:]",
                    "train[1shard]", "train[:1shard]", "test[-1shard:]", "train[:10%]+train[-10%:]"],
    "grist_features": ["train", "test", "train[:25%]", "train+test[:3]", "test[-3:]"],
}


def _digit(rng, label):
    """A 28x28 grayscale image: a noisy stroke pattern that depends on the label."""
    img = np.zeros((28, 28), np.uint8)
    yy, xx = np.mgrid[0:28, 0:28]
    cy, cx = 14 + rng.integers(-3, 4), 14 + rng.integers(-3, 4)
    r = 5 + label % 5
    ring = np.abs(np.hypot(yy - cy, xx - cx) - r) < 1.5 + (label // 5)
    img[ring] = rng.integers(128, 256, ring.sum())
    return img[..., None]


class GristMnist(tfds.core.GeneratorBasedBuilder):
    """MNIST-shaped records for grist's tests and bench."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "grist test data"}
    num_train = MNIST_TRAIN
    num_test = MNIST_TEST

    def _info(self):
        return tfds.core.DatasetInfo(builder=self,
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(28, 28, 1)),
                "label": tfds.features.ClassLabel(num_classes=10),
            }),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(0, self.num_train),
                "test": self._generate_examples(1, self.num_test)}

    def _generate_examples(self, seed, n):
        rng = np.random.default_rng(seed)
        for i in range(n):
            label = int(rng.integers(0, 10))
            yield i, {"image": _digit(rng, label), "label": label}


class GristFeatures(tfds.core.GeneratorBasedBuilder):
    """One feature of each kind grist.tfds reads."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "grist test data"}

    def _info(self):
        f = tfds.features
        return tfds.core.DatasetInfo(builder=self, features=f.FeaturesDict({
            "png": f.Image(shape=(12, 10, 3), encoding_format="png"),
            "png_gray_var": f.Image(shape=(None, None, 1), encoding_format="png"),
            "png_rgba": f.Image(shape=(6, 5, 4), encoding_format="png"),
            "jpeg": f.Image(shape=(16, 16, 3), encoding_format="jpeg"),
            "jpeg_var": f.Image(shape=(None, None, 3), encoding_format="jpeg"),
            "jpeg_gray": f.Image(shape=(8, 8, 1), encoding_format="jpeg"),
            "depth": f.Image(shape=(4, 5, 1), dtype=np.uint16, encoding_format="png"),
            "label": f.ClassLabel(names=["cat", "dog", "bird"]),
            "vec": f.Tensor(shape=(4,), dtype=np.float32),
            "mat": f.Tensor(shape=(2, 3), dtype=np.int32),
            "f64": f.Tensor(shape=(2,), dtype=np.float64),
            "u8": f.Tensor(shape=(3,), dtype=np.uint8),
            "i16": f.Tensor(shape=(2,), dtype=np.int16),
            "ids": f.Tensor(shape=(None,), dtype=np.int64),
            "points": f.Tensor(shape=(None, 2), dtype=np.float32),
            "uid": f.Tensor(shape=(), dtype=np.str_),
            "names": f.Tensor(shape=(None,), dtype=np.str_),
            "pair": f.Tensor(shape=(2,), dtype=np.str_),
            "caption": f.Text(),
            "flag": f.Scalar(dtype=np.bool_),
            "weight": f.Scalar(dtype=np.float32),
            "count": f.Scalar(dtype=np.int32),
            "big": f.Scalar(dtype=np.int64),
            "meta": f.FeaturesDict({
                "source": f.Text(),
                "year": f.Scalar(dtype=np.int32),
                "inner": f.FeaturesDict({"score": f.Scalar(dtype=np.float32)}),
            }),
            "tokens": f.Sequence(f.Scalar(dtype=np.int64)),
            "words": f.Sequence(f.Text()),
        }))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(2, FEATURES_TRAIN),
                "test": self._generate_examples(3, FEATURES_TEST)}

    def _generate_examples(self, seed, n):
        rng = np.random.default_rng(seed)
        u8 = lambda *shape: rng.integers(0, 256, shape, dtype=np.uint8)  # noqa: E731
        for i in range(n):
            # Images with smooth content (JPEG's realistic case) plus noise.
            h, w = int(rng.integers(1, 20)), int(rng.integers(1, 24))
            grad = (np.add.outer(np.arange(16), np.arange(16)) * 8).astype(np.uint8)
            jpeg = np.stack([grad, grad.T, 255 - grad], -1) // 2 + u8(16, 16, 3) // 2
            nids = int(rng.integers(0, 6))
            npts = int(rng.integers(0, 4))
            ntok = int(rng.integers(0, 7))
            yield i, {
                "png": u8(12, 10, 3),
                "png_gray_var": u8(h, w, 1),
                "png_rgba": u8(6, 5, 4),
                "jpeg": jpeg,
                "jpeg_var": u8(int(rng.integers(1, 30)), int(rng.integers(1, 30)), 3),
                "jpeg_gray": u8(8, 8, 1),
                "depth": rng.integers(0, 2**16, (4, 5, 1), dtype=np.uint16),
                "label": int(rng.integers(0, 3)),
                "vec": rng.standard_normal(4).astype(np.float32),
                "mat": rng.integers(-2**31, 2**31, (2, 3)).astype(np.int32),
                "f64": rng.standard_normal(2),
                "u8": u8(3),
                "i16": rng.integers(-2**15, 2**15, 2).astype(np.int16),
                "ids": rng.integers(-2**62, 2**62, nids),
                "points": rng.standard_normal((npts, 2)).astype(np.float32),
                "uid": f"uid-{seed}-{i:04d}",
                "names": [f"n{k}" * k for k in range(i % 4)],
                "pair": [f"left{i}", "" if i % 2 else "right"],
                "caption": ["a cat", "ein Hund \u00fcber", "", "\u9ce5"][i % 4] + "!" * (i % 3),
                "flag": bool(i % 3 == 0),
                "weight": float(rng.standard_normal()),
                "count": int(rng.integers(-2**31, 2**31)),
                "big": int(rng.integers(-2**63, 2**63 - 1)),
                "meta": {"source": f"gen{seed}", "year": 1990 + i,
                         "inner": {"score": float(i) / 7}},
                "tokens": [int(t) for t in rng.integers(0, 50000, ntok)],
                "words": ["w\u00e9rd"[: k + 1] for k in range(i % 5)],
            }


BUILDERS = {"grist_mnist": GristMnist, "grist_features": GristFeatures}


def _records(src):
    return [src[i] for i in range(len(src))]


def _jpeg_pil_vs_cv2(builder, src):
    """The largest difference between PIL's and OpenCV's decodes of the same JPEG features: the
    tolerance a JPEG decode is held to (TFDS itself decodes with either)."""
    import io

    from PIL import Image as PILImage
    from tensorflow_datasets.core.example_parser import tf_example_pb2

    worst = {}
    for i in range(len(src)):
        ex = tf_example_pb2.Example.FromString(src.data_source[i])
        for key, feat in builder.info.features.items():
            if isinstance(feat, tfds.features.Image) and feat.encoding_format == "jpeg":
                data = ex.features.feature[key].bytes_list.value[0]
                pil = np.asarray(PILImage.open(io.BytesIO(data))).reshape(src[i][key].shape)
                d = int(np.abs(pil.astype(int) - src[i][key].astype(int)).max())
                worst[key] = max(worst.get(key, 0), d)
    return worst


def _expected(name, data_dir):
    builder = tfds.builder_from_directory(os.path.join(data_dir, name, "1.0.0"))
    out = {"splits": {}, "instructions": {}, "lengths": {}}
    for split in SPLITS[name]:
        instructions = builder.info.splits[split].file_instructions
        if not instructions:  # tfds.data_source refuses a split that selects nothing
            out["lengths"][split] = 0
            out["instructions"][split] = []
            continue
        src = tfds.data_source(name, split=split, data_dir=data_dir)
        out["lengths"][split] = len(src)
        if split in ("train", "test", "train[:10%]", "train+test[:3]", "test[-3:]"):
            out["splits"][split] = _records(src)
            if split == "train" and name == "grist_features":
                out["jpeg_pil_vs_cv2"] = _jpeg_pil_vs_cv2(builder, src)
        # TFDS's own arithmetic: the files and the records taken from each.
        out["instructions"][split] = [
            (os.path.basename(fi.filename), fi.skip, fi.take, fi.examples_in_shard)
            for fi in instructions]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "tfds"))
    ap.add_argument("--mnist-records", type=int, help="train records of grist_mnist (the bench's 60000)")
    ap.add_argument("--no-expected", action="store_true", help="write the datasets only")
    ap.add_argument("--only", choices=sorted(SPLITS), help="one dataset")
    args = ap.parse_args()
    if args.mnist_records:
        GristMnist.num_train = args.mnist_records
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    names = [args.only] if args.only else list(SPLITS)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            builder = BUILDERS[name](data_dir=tmp, file_format="array_record")
            builder.download_and_prepare(
                download_config=tfds.download.DownloadConfig(num_shards=2, manual_dir=tmp))
            dst = os.path.join(out, name)
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(os.path.join(tmp, name), dst)
            if not args.no_expected:
                os.makedirs(os.path.join(out, "expected"), exist_ok=True)
                with gzip.GzipFile(os.path.join(out, "expected", name + ".pkl.gz"), "wb", mtime=0) as f:
                    pickle.dump(_expected(name, out), f, protocol=4)
            print(f"{name}: {dst}", file=sys.stderr)


if __name__ == "__main__":
    main()
