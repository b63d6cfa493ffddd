#!/usr/bin/env python3
"""What grist.vision's decode="fast" costs in fidelity and saves in time, on JPEGs you give it.

For each JPEG: PSNR of fast mode's output against exact mode's over 200 records
(RandomResizedCrop(224), CenterCrop(224, resize=256), RandomResizedCrop(112)), then CPU time
per image of each mode as the median of --pairs alternating pairs, on the file as it is and
re-encoded at 2048 pixels wide (where DCT scaling can apply). docs/vision.md quotes a run.

    bench/py/vision_fast.py photo.jpg [more.jpg ...] [--pairs 7]
"""
import argparse
import io
import time

import numpy as np

import grist.vision


def psnr(a, b):
    mse = ((a.astype(np.float64) - b) ** 2).mean()
    return 10 * np.log10(255 ** 2 / max(mse, 1e-12))


TRANSFORMS = (("RandomResizedCrop(224)", lambda d: grist.vision.RandomResizedCrop(224, decode=d)),
              ("CenterCrop(224, resize=256)", lambda d: grist.vision.CenterCrop(224, decode=d)),
              ("RandomResizedCrop(112)", lambda d: grist.vision.RandomResizedCrop(112, decode=d)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jpegs", nargs="+")
    ap.add_argument("--pairs", type=int, default=7)
    args = ap.parse_args()
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
                times = {"exact": [], "fast": []}
                for _ in range(args.pairs):
                    for mode in ("exact", "fast"):
                        t = make(mode)
                        t0 = time.process_time()
                        for i in range(40):
                            t.apply(data, index=i)
                        times[mode].append((time.process_time() - t0) / 40 * 1e3)
                e, f = np.median(times["exact"]), np.median(times["fast"])
                print("%s %s, %s: exact %.2f ms, fast %.2f ms of CPU per image (%.2fx)" % (path, label, name, e, f,
                                                                                           e / f))


if __name__ == "__main__":
    main()
