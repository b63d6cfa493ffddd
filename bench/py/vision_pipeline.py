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
  RandomResizedCrop(224, flip=0.5, mean, std)}, on --threads decode threads. Each round reads
  --warmup epochs untimed (the loader's start: threads, slots faulted in and grown), then
  times --epochs whole epochs; the start-up (first batch, first epoch) is printed apart;
- grist_fast (not run by default): the same with decode="fast";
- grain_pillow: Grain, ArrayRecordDataSource of the same shards -> .map(parse the Example,
  Pillow decode, torchvision's get_params in Python, crop+resize in one Image.resize(box=),
  flip, normalize) -> .batch -> to_iter_dataset(ReadOptions(num_threads=--threads));
  --pillow-batches batches a round;
- grist_pillow: grist.Loader over the shards' record bytes, the same Pillow code in
  batch_map on --threads map threads;
- the C sides, bench/bench_vision.c (build/release/bench/bench_vision), on the boxes the
  grist side's timed epoch takes (RandomResizedCrop.params() of each record; bench_vision
  checks them against grist_vision_apply's own):
  - codec_bound: one thread doing only grist's libjpeg region decodes of those boxes, exact
    mode's settings, in place in the thread's buffer; its rate times --threads;
  - ffcv_c: FFCV's method on --threads threads (TurboJPEG full decode with FASTDCT, the box
    cut out, INTER_AREA to 224, flip, normalize); since its INTER_AREA is grist's (double,
    no SIMD), also "ffcv bound": FFCV's full decode plus OpenCV's own cv2.resize on the same
    crops, with no flip or normalize, per CPU-second;
  - grist_c: grist_vision_apply() on --threads threads: the transform without the loader.
  With grist and a C side, the CPU per image of the grist side is split into decode,
  resize, output (flip, normalize, float32) and the rest (read, parse, batch, Python) from
  one-thread runs of the decode alone, decode + resize, and the whole transform.
Records are parsed with protobuf (`pip install tfrecord` for its example_pb2, bench-only).
tf.data is a side (`--peers tf`, bench/py/vision_tf.py) when TensorFlow imports; CI never
installs it. Images/s is wall time; per core is that over --threads; per CPU-second
is images over the process's CPU time (every thread): the fairer figure on a machine shared
with other jobs. --dataset reads a TFDS dataset folder instead of making one (e.g. the
generated one after `grist convert --from imagefolder --max-side 512`).

    ninja -C build/release && bench/py/vision_pipeline.py --keep /tmp/vision-ds --pairs 5
    bench/py/vision_pipeline.py --dataset DS512/photos/1.0.0 --sides grist,grist_fast --pairs 5
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


def read_records(out):
    """The records of the dataset at @out (its one train shard)."""
    import grist
    shard = [os.path.join(out, f) for f in os.listdir(out) if "train.array_record" in f]
    assert len(shard) == 1, shard
    src = grist.ArrayRecordDataSource(shard)
    records = [bytes(src[i]) for i in range(len(src))]
    src.close()
    return shard[0], records


def make_dataset(tmp, n, photos, seed):
    """A TFDS dataset folder of @n generated photos in 10 classes; returns its version folder."""
    import grist
    from grist import _grist  # noqa: F401  (the extension must load before we spend time)
    out = os.path.join(tmp, "photos", "1.0.0")
    if os.path.isdir(out):  # --keep's folder of an earlier run
        shard, records = read_records(out)
        if len(records) == n:
            return out, records
        raise SystemExit("%s holds %d images, not --images %d" % (out, len(records), n))
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
    grist.convert(root, out, format="imagefolder")
    shard, records = read_records(out)
    for i, rec in enumerate(records):
        if file_name(rec) in special:
            records[i] = replace_image(rec, special[file_name(rec)])
    w = grist.Writer(shard + ".new", "group_size:1,zstd:3")
    for rec in records:
        w.write(rec)
    w.close()
    os.replace(shard + ".new", shard)
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


# ---- the sides ----

def side_grist(args, vdir, records, decode=None):
    """{images, seconds, cpu} of the timed epochs after --warmup ones, and the start-up apart."""
    import grist
    import grist.tfds
    import grist.vision
    t = grist.vision.RandomResizedCrop(SIZE, flip=0.5, mean=MEAN, std=STD, decode=decode or args.decode)
    per_epoch = args.images // args.batch
    c0, t0 = time.process_time(), time.perf_counter()
    loader = grist.Loader(grist.tfds.data_source(vdir, split="train"), args.batch, seed=0, threads=args.threads,
                          transforms={"image": t}, skip=["image/filename"], epochs=None)
    n, marks = 0, {}
    for k, batch in enumerate(loader):
        assert batch["image"].shape == (args.batch, SIZE, SIZE, 3) and batch["image"].dtype == np.float32
        if k == 0:
            marks["first"] = (time.perf_counter(), time.process_time())
        if k + 1 == args.warmup * per_epoch:
            marks["warm"] = (time.perf_counter(), time.process_time())
        if k + 1 > args.warmup * per_epoch:
            n += len(batch["label"])
        if k + 1 == (args.warmup + args.epochs) * per_epoch:
            break
    t1, c1 = time.perf_counter(), time.process_time()
    loader.close()
    tw, cw = marks.get("warm", (t0, c0))
    return {"images": n, "seconds": t1 - tw, "cpu": c1 - cw, "first_batch": marks["first"][0] - t0,
            "first_epoch": (per_epoch - 1) * args.batch / (marks["warm"][0] - marks["first"][0])
            if args.warmup == 1 else None}


def _pillow_run(args, batches):
    c0, t0 = time.process_time(), time.perf_counter()
    n = batches()
    return {"images": n, "seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}


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

    def batches():
        n = 0
        it = iter(ds)
        for _ in range(args.pillow_batches):
            b = next(it)
            assert b["image"].shape == (args.batch, SIZE, SIZE, 3)
            n += len(b["image"])
        return n
    out = _pillow_run(args, batches)
    src.close()
    return out


def side_grist_pillow(args, vdir, records):
    import grist
    files = sorted(os.path.join(vdir, f) for f in os.listdir(vdir) if "array_record" in f)

    def fn(batch):
        recs = batch.records()
        rng = random.Random(hash(recs[0][-64:]))
        return np.stack([pillow_transform(image_bytes(r), rng) for r in recs])

    def batches():
        loader = grist.Loader(files, args.batch, seed=0, threads=args.threads, batch_map=fn,
                              map_threads=args.threads, epochs=None)
        n = 0
        for k, images in enumerate(loader):
            assert images.shape == (args.batch, SIZE, SIZE, 3)
            n += len(images)
            if k + 1 == args.pillow_batches:
                break
        loader.close()
        return n
    return _pillow_run(args, batches)


def write_jobs(args, records, path):
    """The C sides' jobs (bench/bench_vision.c): each record's JPEG and the box the grist side's
    timed epoch gives it (epoch --warmup: RandomResizedCrop.params(), the loader's own boxes)."""
    import struct
    import grist.vision
    from PIL import Image
    t = grist.vision.RandomResizedCrop(SIZE, flip=0.5, mean=MEAN, std=STD)
    with open(path, "wb") as f:
        f.write(b"GVJOBS1\n" + struct.pack("<IQQ", len(records), args.warmup, 0))
        for i, rec in enumerate(records):
            data = bytes(image_bytes(rec))
            w, h = Image.open(io.BytesIO(data)).size
            b = t.params(h, w, seed=0, epoch=args.warmup, index=i, feature="image")
            f.write(struct.pack("<Q5iI", i, b.top, b.left, b.height, b.width, b.flipped, len(data)) + data)


def cv2_area_ms(jobs_records, args):
    """CPU ms per image of OpenCV's own cv2.resize(INTER_AREA) (one thread) on the C sides' crops:
    what FFCV's resize costs, where bench_vision's ffcv side runs grist's slower double-precision one.
    None without OpenCV (pip install opencv-python-headless)."""
    try:
        import cv2
    except ImportError:
        return None
    import grist.vision
    cv2.setNumThreads(1)
    t = grist.vision.RandomResizedCrop(SIZE, flip=0.5, mean=MEAN, std=STD)
    spent = 0.0
    for i, rec in enumerate(jobs_records):
        img = cv2.imdecode(np.frombuffer(bytes(image_bytes(rec)), np.uint8), cv2.IMREAD_COLOR)
        if img is None:  # a CMYK JPEG OpenCV reads otherwise: not counted
            continue
        b = t.params(img.shape[0], img.shape[1], seed=0, epoch=args.warmup, index=i, feature="image")
        crop = img[b.top:b.top + b.height, b.left:b.left + b.width]
        c0 = time.thread_time()  # this thread's CPU time: the machine may be shared
        cv2.resize(crop, (SIZE, SIZE), interpolation=cv2.INTER_AREA)
        spent += time.thread_time() - c0
    return spent / len(jobs_records) * 1e3


C_SIDES = {"codec_bound": "codec", "ffcv_c": "ffcv", "grist_c": "grist"}
SHARES = ("codec", "decode_resize", "grist1")  # one thread each: the CPU shares
FFCV_PARTS = ("ffcv_decode",)  # one thread: FFCV's full decode alone


def run_c(args, jobs, sides):
    """One round of bench_vision's @sides: {side: {"wall": images/s, "cpu": images per CPU-second}}."""
    import subprocess
    out = subprocess.run([args.bench_vision, jobs, "--threads", str(args.threads), "--rounds", "1",
                          "--reps", str(args.epochs), "--sides", ",".join(sides), "--decode", args.decode],
                         check=True, capture_output=True, text=True).stdout
    got = {}
    for line in out.splitlines():
        kv = dict(w.split("=", 1) for w in line.split())
        got[kv["side"]] = {"wall": float(kv["wall"]), "cpu": float(kv["cpu"])}
    return got


def side_grist_fast(args, vdir, records):
    return side_grist(args, vdir, records, "fast")


SIDES = {"grist": side_grist, "grist_fast": side_grist_fast, "grain_pillow": side_grain_pillow, "grist_pillow": side_grist_pillow,
         "codec_bound": None, "ffcv_c": None, "grist_c": None}


def find_bench_vision():
    here = os.path.dirname(os.path.abspath(__file__))
    for d in ("build/release", "build"):
        p = os.path.join(here, "..", "..", d, "bench", "bench_vision")
        if os.path.exists(p):
            return os.path.normpath(p)
    return None


def side_tf(args, vdir, records):
    """tf.data (bench/py/vision_tf.py), with --peers tf: {"images", "seconds", "cpu"}."""
    import vision_tf
    return vision_tf.side_tf(args, vdir, records)


PEERS = {"tf": side_tf}  # sides whose peer is not always installed: --peers


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=1280, help="images in the generated dataset (1280)")
    ap.add_argument("--batch", type=int, default=64, help="images per batch (64); must divide --images")
    ap.add_argument("--warmup", type=int, default=1, help="grist: epochs read before the timing starts (1)")
    ap.add_argument("--epochs", type=int, default=1, help="grist and the C sides: epochs timed (1)")
    ap.add_argument("--pillow-batches", type=int, default=10, help="batches per timed run of the Pillow sides (10)")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                    help="decode / map threads of every side (the CPUs this process may use)")
    ap.add_argument("--pairs", type=int, default=5, help="rounds of every side, order rotated; medians (5)")
    ap.add_argument("--sides", default=",".join(s for s in SIDES if s != "grist_fast"),
                    help="which sides (%(default)s; also grist_fast: the grist side with decode='fast')")
    ap.add_argument("--decode", default="exact", choices=("exact", "fast"), help="grist's decode= (exact)")
    ap.add_argument("--bench-vision", default=find_bench_vision(),
                    help="the bench_vision program (default: build/release/bench/bench_vision of this tree)")
    ap.add_argument("--peers", default=None,
                    help="more sides, comma-separated: tf (tf.data; default: tf when tensorflow is installed)")
    ap.add_argument("--photos", nargs="*", default=[], help="more photographs to draw from")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated dataset (0)")
    ap.add_argument("--keep", help="make the dataset in this folder and keep it, or take the one an earlier run "
                    "kept there (default: a temporary folder)")
    ap.add_argument("--dataset", help="a TFDS dataset folder (the version folder) to read instead of making one, "
                    "e.g. one `grist convert --from imagefolder --max-side 512` wrote")
    args = ap.parse_args()
    if args.images % args.batch:
        raise SystemExit("--batch must divide --images (the grist side times whole epochs)")
    sides = args.sides.split(",")
    if args.peers is None:
        import importlib.util
        args.peers = "tf" if importlib.util.find_spec("tensorflow") else ""
    sides += [p for p in args.peers.split(",") if p]
    SIDES.update(PEERS)
    if "tf" in sides:  # before any Example is parsed (see _example)
        import vision_tf  # noqa: F401  (imports TensorFlow)
    c_sides = [s for s in sides if SIDES.get(s, 0) is None]
    if c_sides and not args.bench_vision:
        raise SystemExit("no bench_vision program: build it (ninja -C build/release) or give --bench-vision")
    tmp = args.keep or tempfile.mkdtemp(prefix="grist-vision-bench-")
    try:
        t0 = time.perf_counter()
        if args.dataset:
            vdir, (_, records) = args.dataset, read_records(args.dataset)
            if len(records) != args.images:
                raise SystemExit("%s holds %d images: give --images %d" % (vdir, len(records), len(records)))
        else:
            vdir, records = make_dataset(tmp, args.images, photo_sources(args.photos), args.seed)
        size = sum(len(image_bytes(r)) for r in records)
        print("dataset: %d images, %.1f KB of JPEG each on average, made or read in %.1f s (%s)" % (
            len(records), size / len(records) / 1e3, time.perf_counter() - t0, vdir))
        if "tf" in sides:
            side_tf(args, vdir, records)  # the TFRecord copy written and the graph traced once, untimed
        jobs = os.path.join(tmp, "jobs.bin")
        if c_sides:
            write_jobs(args, records, jobs)
        res = {s: [] for s in sides + (list(SHARES) if "grist" in sides and c_sides else [])
               + (list(FFCV_PARTS) if "ffcv_c" in sides else [])}
        cv2_ms = []
        starts = []
        for r in range(args.pairs):
            order = sides[r % len(sides):] + sides[:r % len(sides)]
            for s in order:
                if SIDES[s] is not None:
                    o = SIDES[s](args, vdir, records)
                    res[s].append({"wall": o["images"] / o["seconds"], "cpu": o["images"] / o["cpu"]})
                    if s == "grist":
                        starts.append(o)
                elif s == next(x for x in order if SIDES[x] is None):  # the C sides, one run per round
                    names = [C_SIDES[x] for x in order if SIDES[x] is None]
                    names += [x for x in SHARES + FFCV_PARTS if x in res]
                    got = run_c(args, jobs, names)
                    ms = cv2_area_ms(records, args) if "ffcv_c" in res else None
                    if ms is not None:
                        cv2_ms.append(ms)
                    for x in order:
                        if SIDES[x] is None:
                            one = got[C_SIDES[x]]
                            # the codec bound: one thread's rate, times the threads
                            k = args.threads if x == "codec_bound" else 1
                            res[x].append({"wall": one["wall"] * k, "cpu": one["cpu"]})
                    for x in SHARES + FFCV_PARTS:
                        if x in res:
                            res[x].append(got[x])
        load = os.getloadavg()
        print("images/s, medians of %d rounds (order rotated), %d threads, batch %d, decode=%s; grist: epoch %d "
              "timed after %d warm-up; load average %.1f %.1f %.1f:" % (
                  args.pairs, args.threads, args.batch, args.decode, args.warmup, args.warmup, *load))
        med = {s: {k: statistics.median(v[k] for v in res[s]) for k in ("wall", "cpu")} for s in res}
        for s in sides:
            print("  %-13s %8.1f images/s  %7.1f per core  %7.1f per CPU-second   (rounds: %s)" % (
                s, med[s]["wall"], med[s]["wall"] / args.threads, med[s]["cpu"],
                ", ".join("%.0f" % v["wall"] for v in res[s])))
        if "grist" in med:
            for s in sides:
                if s != "grist":
                    print("  grist / %s: %.2fx in images/s, %.2fx per CPU-second" % (
                        s, med["grist"]["wall"] / med[s]["wall"], med["grist"]["cpu"] / med[s]["cpu"]))
            if "grist_fast" in med:
                print("  grist_fast / grist: %.2fx in images/s, %.2fx per CPU-second; per round (alternating): %s" % (
                    med["grist_fast"]["wall"] / med["grist"]["wall"], med["grist_fast"]["cpu"] / med["grist"]["cpu"],
                    ", ".join("%.2f" % (f["cpu"] / e["cpu"]) for f, e in zip(res["grist_fast"], res["grist"]))))
            if cv2_ms and "ffcv_decode" in med:
                # FFCV with OpenCV's resize and no output stage at all: a bound in its favour
                ms = 1e3 / med["ffcv_decode"]["cpu"] + statistics.median(cv2_ms)
                print("  ffcv bound (its full decode %.3f ms + cv2.resize INTER_AREA %.3f ms, no flip or normalize): "
                      "%.1f per CPU-second; grist / that: %.2fx per CPU-second" % (
                          1e3 / med["ffcv_decode"]["cpu"], statistics.median(cv2_ms), 1e3 / ms,
                          med["grist"]["cpu"] * ms / 1e3))
            st = starts[len(starts) // 2]
            print("  grist start-up (round %d of %d): first batch after %.2f s, first epoch %s images/s" % (
                len(starts) // 2 + 1, len(starts), st["first_batch"],
                "%.0f" % st["first_epoch"] if st["first_epoch"] else "-"))
        if all(x in med for x in SHARES) and "grist" in med:
            # CPU per image: one thread's decode, decode + resize, whole transform; the loader's
            per = {x: 1e3 / med[x]["cpu"] for x in SHARES}
            total = 1e3 / med["grist"]["cpu"]
            parts = (("decode", per["codec"]), ("resize", per["decode_resize"] - per["codec"]),
                     ("output (flip, normalize, float32)", per["grist1"] - per["decode_resize"]),
                     ("the rest (read, parse, batch, Python)", total - per["grist1"]))
            print("  grist CPU per image: %.3f ms; %s" % (total, "; ".join(
                "%s %.3f ms (%.0f%%)" % (name, v, 100 * v / total) for name, v in parts)))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
