#!/usr/bin/env python3
"""What grist.vision's decode="fast" costs in fidelity and saves in time, on JPEGs you give it.

For each JPEG: PSNR of fast mode's output against exact mode's over 200 records
(RandomResizedCrop(224), CenterCrop(224, resize=256), RandomResizedCrop(112)), then CPU time
per image of each mode as the median of --pairs alternating pairs, on the file as it is and
re-encoded at 2048 pixels wide (where DCT scaling can apply). docs/vision.md quotes a run.

    bench/py/vision_fast.py photo.jpg [more.jpg ...] [--pairs 7]

With --dataset, the same over a dataset's images instead (a TFDS version folder with one
train shard, e.g. the benchmark's photo set after `grist convert --from imagefolder
--max-side 512`, bench/py/vision_pipeline.py): each image once, record index i, PSNR median
and 5th percentile per transform, then CPU time per image of each mode over every image, as
the median of --pairs alternating pairs and the median of the pairs' ratios. The transforms'
own CPU only (one thread, no loader): docs/tuning.md has the loader's side of it.

    bench/py/vision_fast.py --dataset DS512/photos/1.0.0 [--pairs 7]

--big-jobs OUT (with --dataset) instead writes a jobs file for bench_jpeg_settings (the format
of bench/bench_vision.c) of every 8th image re-encoded 2048 pixels wide (quality 90), with
RandomResizedCrop(224)'s boxes at that size: where the M/8 scales below 1/2 apply.
"""
import argparse
import io
import os
import sys
import time

import numpy as np

import grist.vision


def psnr(a, b):
    mse = ((a.astype(np.float64) - b) ** 2).mean()
    return 10 * np.log10(255 ** 2 / max(mse, 1e-12))


TRANSFORMS = (("RandomResizedCrop(224)", lambda d: grist.vision.RandomResizedCrop(224, decode=d)),
              ("CenterCrop(224, resize=256)", lambda d: grist.vision.CenterCrop(224, decode=d)),
              ("RandomResizedCrop(112)", lambda d: grist.vision.RandomResizedCrop(112, decode=d)))


def timed_pairs(make, images, pairs):
    """Per mode, the CPU ms per image of each of @pairs alternating passes over @images."""
    times = {"exact": [], "fast": []}
    for _ in range(pairs):
        for mode in ("exact", "fast"):
            t = make(mode)
            t0 = time.process_time()
            for i, data in images:
                t.apply(data, index=i)
            times[mode].append((time.process_time() - t0) / len(images) * 1e3)
    return times


def on_files(args):
    from PIL import Image

    for path in args.jpegs:
        src = open(path, "rb").read()
        for name, make in TRANSFORMS:
            exact, fast = make("exact"), make("fast")
            ps = [psnr(exact.apply(src, index=i)[0], fast.apply(src, index=i)[0]) for i in range(200)]
            print("%s %s: PSNR median %.1f dB, 5th percentile %.1f dB" % (path, name, np.median(ps),
                                                                         np.percentile(ps, 5)))
        im = Image.open(io.BytesIO(src)).convert("RGB")
        big = io.BytesIO()
        im.resize((2048, round(2048 * im.height / im.width)), Image.BICUBIC).save(big, "JPEG", quality=90)
        for label, data in (("as is", src), ("at 2048 wide", big.getvalue())):
            for name, make in TRANSFORMS[:2]:
                times = timed_pairs(make, [(i, data) for i in range(40)], args.pairs)
                e, f = np.median(times["exact"]), np.median(times["fast"])
                print("%s %s, %s: exact %.2f ms, fast %.2f ms of CPU per image (%.2fx)" % (path, label, name, e, f,
                                                                                           e / f))


def on_dataset(args):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from vision_pipeline import image_bytes, read_records  # the benchmark's own record reading

    images = [(i, bytes(image_bytes(r))) for i, r in enumerate(read_records(args.dataset)[1])]
    print("%s: %d images, %.1f KB each on average" % (args.dataset, len(images),
                                                     sum(len(d) for _, d in images) / len(images) / 1e3))
    for name, make in TRANSFORMS:
        exact, fast = make("exact"), make("fast")
        ps = []
        for i, data in images:
            (e, be), (f, bf) = exact.apply(data, index=i), fast.apply(data, index=i)
            assert be == bf, (i, be, bf)  # fast mode reports exact mode's box
            ps.append(psnr(e, f))
        print("%s: PSNR median %.1f dB, 5th percentile %.1f dB, minimum %.1f dB" % (
            name, np.median(ps), np.percentile(ps, 5), min(ps)))
    for name, make in TRANSFORMS[:2]:
        times = timed_pairs(make, images, args.pairs)
        e, f = np.median(times["exact"]), np.median(times["fast"])
        ratios = [a / b for a, b in zip(times["exact"], times["fast"])]
        print("%s: exact %.3f ms, fast %.3f ms of CPU per image (%.2fx; pairs' ratios median %.2fx, %s); "
              "load average %.1f" % (name, e, f, e / f, np.median(ratios), ", ".join("%.2f" % r for r in ratios),
                                     os.getloadavg()[0]))


def write_big_jobs(args):
    import struct
    from PIL import Image
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from vision_pipeline import image_bytes, read_records

    t = grist.vision.RandomResizedCrop(224, flip=0.5)
    out = []
    for i, rec in enumerate(read_records(args.dataset)[1]):
        if i % 8:
            continue
        im = Image.open(io.BytesIO(bytes(image_bytes(rec)))).convert("RGB")
        big = io.BytesIO()
        im = im.resize((2048, round(2048 * im.height / im.width)), Image.BICUBIC)
        im.save(big, "JPEG", quality=90)
        b = t.params(im.height, im.width, index=i)
        out.append(struct.pack("<Q5iI", i, b.top, b.left, b.height, b.width, b.flipped, len(big.getvalue()))
                   + big.getvalue())
    with open(args.big_jobs, "wb") as f:
        f.write(b"GVJOBS1\n" + struct.pack("<IQQ", len(out), 0, 0) + b"".join(out))
    print("%s: %d jobs" % (args.big_jobs, len(out)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jpegs", nargs="*")
    ap.add_argument("--dataset", help="a TFDS version folder (one train shard): its images instead of files")
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--big-jobs", help="with --dataset: write bench_jpeg_settings' jobs at 2048 wide here")
    args = ap.parse_args()
    if bool(args.jpegs) == bool(args.dataset):
        ap.error("give JPEG files or --dataset, not both")
    if args.big_jobs and args.dataset:
        write_big_jobs(args)
    elif args.dataset:
        on_dataset(args)
    else:
        on_files(args)


if __name__ == "__main__":
    main()
