#!/usr/bin/env python3
"""Vision training input side by side: RandomResizedCrop(224) + flip + normalize to float32.

The dataset is generated, ImageNet-like, from real photographs (never noise): scikit-image's
sample photos (`pip install scikit-image`, bench-only) plus any JPEG/PNG given with --photos,
each drawn as a random region resized to a shorter side of 200-800 pixels (median 375,
mostly 4:3, so about 500x375), saved as JPEG of quality 75-95, mostly 4:2:0 (10% 4:4:4,
5% 4:2:2), 5% progressive, 1% grayscale and 0.5% CMYK (at least one of each), in
ImageFolder layout and converted into a TFDS dataset with `grist.convert(format=
"imagefolder")`. The grayscale and CMYK images are put into the shard afterwards (the
imagefolder converter wants one channel count and TurboJPEG's decoder refuses CMYK; the
loader's transform takes both).

Sides, run in one process on the same records, the order rotated each round; the figure
of each is the median of its rounds (--pairs):
- grist: grist.Loader over grist.tfds.data_source, transforms={"image":
  RandomResizedCrop(224, flip=0.5, mean, std)}, on --threads decode threads;
- grain_pillow: Grain, ArrayRecordDataSource of the same shards -> .map(parse the Example,
  Pillow decode, torchvision's get_params in Python, crop+resize in one Image.resize(box=),
  flip, normalize) -> .batch -> to_iter_dataset(ReadOptions(num_threads=--threads));
- grist_pillow: grist.Loader over the shards' record bytes, the same Pillow code in
  batch_map on --threads map threads;
- codec_bound: one thread doing only the libjpeg region decodes (grist's, through the
  private _vision_jpeg_region hook) of the crops the grist loader takes (RandomResizedCrop.
  params() of each record), its rate times --threads: what the decoder alone would allow.
Records are parsed with protobuf (`pip install tfrecord` for its example_pb2, bench-only).
tf.data is not a side here: TensorFlow is not installed on the machine this was written on
(see docs/vision.md). Images/s is wall time over --batches batches of --batch; per core is
that over --threads; per CPU-second is images over the process's CPU time (every thread),
the fairer figure on a machine shared with other jobs.

    bench/py/vision_pipeline.py --images 2000 --batch 64 --batches 20 --threads 2 --pairs 5
    bench/py/vision_pipeline.py --images 300 --batch 32 --batches 6 --pairs 3   # a quick look
"""
import argparse
import io
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIZE = 224


# ---- tf.train.Example, through protobuf (the tfrecord package's example_pb2: no TensorFlow) ----

def _example(record):
    if "tensorflow" in sys.modules:  # its protos and tfrecord's share names: only one set may load
        from tensorflow.core.example import example_pb2
    else:
        from tfrecord import example_pb2
    ex = example_pb2.Example()
    ex.ParseFromString(bytes(record))
    return ex


def image_bytes(record):
    """The 'image' feature's bytes of an Example record."""
    return _example(record).features.feature["image"].bytes_list.value[0]


def file_name(record):
    return _example(record).features.feature["image/filename"].bytes_list.value[0].decode()


def replace_image(record, data):
    """@record with its 'image' feature's bytes replaced by @data (the other features kept)."""
    ex = _example(record)
    ex.features.feature["image"].bytes_list.value[0] = data
    return ex.SerializeToString(deterministic=True)


# ---- the dataset ----

def photo_sources(extra):
    """PIL images of real photographs: scikit-image's samples and @extra files."""
    from PIL import Image
    paths = list(extra)
    try:
        import skimage
        d = os.path.join(os.path.dirname(skimage.__file__), "data")
        for name in ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "retina.jpg", "ihc.png",
                     "motorcycle_left.png", "hubble_deep_field.jpg", "camera.png", "moon.png", "coins.png",
                     "grass.png", "gravel.png", "brick.png"):
            if os.path.exists(os.path.join(d, name)):
                paths.append(os.path.join(d, name))
    except ImportError:
        pass
    if not paths:
        raise SystemExit("no photographs: pip install scikit-image (bench-only), or give --photos FILE...")
    return [Image.open(p).convert("RGB") for p in paths]


def make_image(rng, photos, i, n):
    """(JPEG bytes, kind) of image @i of @n: a region of a photo, sized and encoded as described above."""
    from PIL import Image
    src = photos[rng.randrange(len(photos))]
    short = int(min(800, max(200, round(rng.lognormvariate(math.log(375), 0.3)))))
    r = rng.random()
    aspect = 4 / 3 if r < 0.75 else 3 / 4 if r < 0.9 else rng.uniform(0.6, 1.8)
    w, h = (round(short * aspect), short) if aspect >= 1 else (short, round(short / aspect))
    # the largest region of that aspect in the photo, shrunk at random, at a random place
    rw, rh = (src.width, src.width * h / w) if src.width / src.height <= w / h else (src.height * w / h, src.height)
    k = rng.uniform(0.5, 1.0)
    rw, rh = rw * k, rh * k
    x, y = rng.uniform(0, src.width - rw), rng.uniform(0, src.height - rh)
    im = src.resize((w, h), Image.BICUBIC, box=(x, y, x + rw, y + rh))
    kind = "rgb"
    ngray, ncmyk = max(1, n // 100), max(1, n // 200)
    if i < ngray:
        im, kind = im.convert("L"), "gray"
    elif i < ngray + ncmyk:
        im, kind = im.convert("CMYK"), "cmyk"
    r = rng.random()
    sub = "4:2:0" if r < 0.85 else "4:4:4" if r < 0.95 else "4:2:2"
    prog = rng.random() < 0.05
    out = io.BytesIO()
    kw = {} if kind != "rgb" else {"subsampling": sub}
    im.save(out, "JPEG", quality=rng.randint(75, 95), progressive=prog, **kw)
    return out.getvalue(), kind


def make_dataset(tmp, n, photos, seed):
    """A TFDS dataset folder of @n generated photos in 10 classes; returns its version folder."""
    import grist
    from grist import _grist  # noqa: F401  (the extension must load before we spend time)
    rng = random.Random(seed)
    root = os.path.join(tmp, "folder")
    special = {}
    for i in range(n):
        data, kind = make_image(rng, photos, i, n)
        label = "class%02d" % (i % 10)
        os.makedirs(os.path.join(root, "train", label), exist_ok=True)
        name = "img%06d.jpg" % i
        rel = "train/%s/%s" % (label, name)
        if kind != "rgb":  # written as RGB now, put back into the shard below
            special[rel] = data
            from PIL import Image
            im = Image.open(io.BytesIO(data)).convert("RGB")
            data = io.BytesIO()
            im.save(data, "JPEG", quality=90)
            data = data.getvalue()
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    out = os.path.join(tmp, "photos", "1.0.0")
    grist.convert(root, out, format="imagefolder")
    shard = [os.path.join(out, f) for f in os.listdir(out) if "train.array_record" in f]
    assert len(shard) == 1, shard
    src = grist.ArrayRecordDataSource(shard)
    records = [src[i] for i in range(len(src))]
    src.close()
    for i, rec in enumerate(records):
        if file_name(rec) in special:
            records[i] = replace_image(rec, special[file_name(rec)])
    w = grist.Writer(shard[0] + ".new", "group_size:1,zstd:3")
    for rec in records:
        w.write(rec)
    w.close()
    os.replace(shard[0] + ".new", shard[0])
    return out, records


# ---- the Pillow transform (torchvision's RandomResizedCrop, flip, ToTensor, Normalize) ----

def get_params(rng, h, w, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params on Python's random."""
    area = h * w
    logr = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*scale)
        ar = math.exp(rng.uniform(*logr))
        cw, ch = int(round(math.sqrt(target * ar))), int(round(math.sqrt(target / ar)))
        if 0 < cw <= w and 0 < ch <= h:
            return rng.randint(0, h - ch), rng.randint(0, w - cw), ch, cw
    in_ratio = w / h
    if in_ratio < ratio[0]:
        cw, ch = w, int(round(w / ratio[0]))
    elif in_ratio > ratio[1]:
        ch, cw = h, int(round(h * ratio[1]))
    else:
        cw, ch = w, h
    return (h - ch) // 2, (w - cw) // 2, ch, cw


_MEAN = np.array(MEAN, np.float32) * 255
_SCALE = 1 / (np.array(STD, np.float32) * 255)


def pillow_transform(data, rng):
    from PIL import Image
    im = Image.open(io.BytesIO(data))
    im = im.convert("RGB")
    t, l, h, w = get_params(rng, im.height, im.width)
    im = im.resize((SIZE, SIZE), Image.BILINEAR, box=(l, t, l + w, t + h))
    if rng.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    return (np.asarray(im, np.float32) - _MEAN) * _SCALE


# ---- the sides: each reads --batches batches; returns images read ----

def side_grist(args, vdir, records):
    import grist
    import grist.tfds
    import grist.vision
    t = grist.vision.RandomResizedCrop(SIZE, flip=0.5, mean=MEAN, std=STD)
    loader = grist.Loader(grist.tfds.data_source(vdir, split="train"), args.batch, seed=0, threads=args.threads,
                          transforms={"image": t}, skip=["image/filename"], epochs=None)
    n = 0
    for k, batch in enumerate(loader):
        assert batch["image"].shape == (args.batch, SIZE, SIZE, 3) and batch["image"].dtype == np.float32
        n += len(batch["label"])
        if k + 1 == args.batches:
            break
    loader.close()
    return n


def side_grain_pillow(args, vdir, records):
    import grain
    import grist

    files = sorted(os.path.join(vdir, f) for f in os.listdir(vdir) if "array_record" in f)
    src = grist.ArrayRecordDataSource(files)

    def fn(rec):
        rng = random.Random(hash(bytes(rec[-64:])))
        return {"image": pillow_transform(image_bytes(rec), rng)}

    ds = (grain.MapDataset.source(src).shuffle(seed=0).repeat().map(fn).batch(args.batch)
          .to_iter_dataset(grain.ReadOptions(num_threads=args.threads, prefetch_buffer_size=2)))
    n = 0
    it = iter(ds)
    for _ in range(args.batches):
        b = next(it)
        assert b["image"].shape == (args.batch, SIZE, SIZE, 3)
        n += len(b["image"])
    src.close()
    return n


def side_grist_pillow(args, vdir, records):
    import grist
    files = sorted(os.path.join(vdir, f) for f in os.listdir(vdir) if "array_record" in f)

    def fn(batch):
        recs = batch.records()
        rng = random.Random(hash(recs[0][-64:]))
        return np.stack([pillow_transform(image_bytes(r), rng) for r in recs])

    loader = grist.Loader(files, args.batch, seed=0, threads=args.threads, batch_map=fn,
                          map_threads=args.threads, epochs=None)
    n = 0
    for k, images in enumerate(loader):
        assert images.shape == (args.batch, SIZE, SIZE, 3)
        n += len(images)
        if k + 1 == args.batches:
            break
    loader.close()
    return n


def side_codec_bound(args, vdir, records, _cache={}):
    """Seconds of one thread's region decodes of the grist loader's crops, scaled to images."""
    import grist.vision
    from grist import _grist
    from PIL import Image
    if "jobs" not in _cache:
        t = grist.vision.RandomResizedCrop(SIZE, flip=0.5, mean=MEAN, std=STD)
        jobs = []
        for i, rec in enumerate(records[:args.batch * args.batches]):
            data = bytes(image_bytes(rec))
            w, h = Image.open(io.BytesIO(data)).size
            b = t.params(h, w, seed=0, epoch=0, index=i, feature="image")
            jobs.append((data, b.top, b.left, b.height, b.width))
        _cache["jobs"] = jobs
    jobs = _cache["jobs"]
    for data, top, left, h, w in jobs:
        _grist._vision_jpeg_region(data, top, left, h, w)
    return len(jobs)


def side_tf(args, vdir, records):
    """tf.data (bench/py/vision_tf.py), with --peers tf."""
    import vision_tf
    return vision_tf.side_tf(args, vdir, records)["images"]


SIDES = {"grist": side_grist, "grain_pillow": side_grain_pillow, "grist_pillow": side_grist_pillow,
         "codec_bound": side_codec_bound}
PEERS = {"tf": side_tf}  # sides whose peer is not always installed: --peers


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000, help="images in the generated dataset (2000)")
    ap.add_argument("--batch", type=int, default=64, help="images per batch (64)")
    ap.add_argument("--batches", type=int, default=20, help="batches per timed run (20)")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                    help="decode / map threads of every side (the CPUs this process may use)")
    ap.add_argument("--pairs", type=int, default=5, help="rounds of every side, order rotated; medians (5)")
    ap.add_argument("--sides", default=",".join(SIDES), help="which sides (%(default)s)")
    ap.add_argument("--peers", default=None,
                    help="more sides, comma-separated: tf (tf.data; default: tf when tensorflow is installed)")
    ap.add_argument("--photos", nargs="*", default=[], help="more photographs to draw from")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated dataset (0)")
    ap.add_argument("--keep", help="make the dataset in this folder and keep it (default: a temporary one)")
    args = ap.parse_args()
    if args.batch * args.batches > args.images:
        raise SystemExit("--batch x --batches must not exceed --images (the codec bound times one pass)")
    sides = args.sides.split(",")
    if args.peers is None:
        import importlib.util
        args.peers = "tf" if importlib.util.find_spec("tensorflow") else ""
    sides += [p for p in args.peers.split(",") if p]
    SIDES.update(PEERS)
    if "tf" in sides:  # before any Example is parsed (see _example)
        import vision_tf  # noqa: F401  (imports TensorFlow)
    tmp = args.keep or tempfile.mkdtemp(prefix="grist-vision-bench-")
    try:
        t0 = time.perf_counter()
        vdir, records = make_dataset(tmp, args.images, photo_sources(args.photos), args.seed)
        size = sum(len(image_bytes(r)) for r in records)
        print("dataset: %d images, %.1f KB of JPEG each on average, made in %.1f s (%s)" % (
            len(records), size / len(records) / 1e3, time.perf_counter() - t0, vdir))
        if "codec_bound" in sides:
            side_codec_bound(args, vdir, records)  # the crops drawn and the files read once, untimed
        if "tf" in sides:
            side_tf(args, vdir, records)  # the TFRecord copy written and the graph traced once, untimed
        times = {s: [] for s in sides}
        cpu = {s: [] for s in sides}
        for r in range(args.pairs):
            for s in sides[r % len(sides):] + sides[:r % len(sides)]:
                c0, t0 = time.process_time(), time.perf_counter()
                n = SIDES[s](args, vdir, records)
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                times[s].append(n / dt * (args.threads if s == "codec_bound" else 1))
                cpu[s].append(n / dc)
        print("images/s (median of %d rounds, %d threads, batch %d x %d batches; load average %.1f):" % (
            args.pairs, args.threads, args.batch, args.batches, os.getloadavg()[0]))
        med = {s: statistics.median(v) for s, v in times.items()}
        for s in sides:
            print("  %-13s %8.1f images/s  %7.1f per core  %7.1f per CPU-second   (rounds: %s)" % (
                s, med[s], med[s] / args.threads, statistics.median(cpu[s]), ", ".join("%.0f" % v for v in times[s])))
        if "grist" in med:
            for s in sides:
                if s != "grist":
                    print("  grist / %s: %.2fx" % (s, med["grist"] / med[s]))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
