#!/usr/bin/env python3
"""vision_scale_jobs.py JOBS_IN JOBS_OUT [N] [SIDE]: a jobs.bin of larger photos for vision_ab.sh.

The first N (48) jobs' JPEGs of JOBS_IN (a jobs.bin that bench/py/vision_pipeline.py --keep
leaves), scaled by Pillow (LANCZOS) to SIDE (3000) pixels on the long side, JPEG quality 90,
each with the box the transform draws for it (grist.vision.RandomResizedCrop(224, flip=0.5,
ImageNet's mean and std).params() at JOBS_IN's epoch and seed, record index i), in the layout
of vision_pipeline.py's write_jobs. Where the crops pass the L2 (docs/tuning.md, session 35).
Needs Pillow and the grist package.
"""
import io
import struct
import sys

import grist.vision
from PIL import Image

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 48
    side = int(sys.argv[4]) if len(sys.argv) > 4 else 3000
    with open(src, "rb") as f:
        if f.read(8) != b"GVJOBS1\n":
            sys.exit(f"{src}: not a jobs.bin")
        count, epoch, seed = struct.unpack("<IQQ", f.read(20))
        images = []
        for _ in range(min(n, count)):
            _, _, _, _, _, _, length = struct.unpack("<Q5iI", f.read(32))
            images.append(f.read(length))
    t = grist.vision.RandomResizedCrop(224, flip=0.5, mean=MEAN, std=STD)
    with open(dst, "wb") as out:
        out.write(b"GVJOBS1\n" + struct.pack("<IQQ", len(images), epoch, seed))
        for i, data in enumerate(images):
            im = Image.open(io.BytesIO(data)).convert("RGB")
            s = side / max(im.size)
            im = im.resize((int(im.size[0] * s), int(im.size[1] * s)), Image.LANCZOS)
            buf = io.BytesIO()
            im.save(buf, "JPEG", quality=90)
            w, h = im.size
            b = t.params(h, w, seed=seed, epoch=epoch, index=i, feature="image")
            out.write(struct.pack("<Q5iI", i, b.top, b.left, b.height, b.width, b.flipped, len(buf.getvalue())))
            out.write(buf.getvalue())


if __name__ == "__main__":
    main()
