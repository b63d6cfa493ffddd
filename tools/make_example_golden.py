#!/usr/bin/env python3
"""Write the golden tf.train.Example records and images in tests/data/features/.

Every record is serialized by a peer, never by grist:
  - mnist-NN.pb: MNIST-like records (a 28x28x1 PNG digit and a label) serialized by
    TFDS's own FeaturesDict.serialize_example, as TFDS writes its shards;
  - typed-N.pb: one record per TFDS feature type (Image png/jpeg, ClassLabel, Tensor of
    every dtype with fixed and None dims, Tensor with encoding=bytes, Scalar, Text,
    nested FeaturesDict, Sequence), serialized by TFDS;
  - video-N.pb: sequences of images (Video of PNG frames, Sequence(Image) of a fixed
    length, Sequence of JPEG images of any size), serialized and decoded by TFDS;
  - texts-N.pb: lists of strings (Sequence(Text), a string Tensor of shape (2,), a
    Sequence of a dict holding Text), serialized by TFDS;
  - wire-*.pb: records that exercise protobuf's parsing rules (unpacked values, packed
    and unpacked mixed, a key given twice, a Feature's value given twice, a oneof that
    changes kind, unknown fields at every level, Features given twice, a key field
    given twice), made from pieces serialized by protobuf and joined the way protobuf
    defines merging, or hand-written where protobuf cannot write it (unpacked lists).

RECORD.det (mnist and typed records): the same Example as protobuf's
SerializeToString(deterministic=True) writes it, for the encoder's byte-for-byte test.

MANIFEST.txt says what each record holds, as the oracles read it:
  wire RECORD KEY int64|float|bytes N V...   protobuf's ParseFromString (tf.train.Example):
                                             int64 decimal, float the 8 hex digits of its
                                             bits, bytes hex ('-' for empty)
  tfds RECORD KEY DTYPE NDIM D... HEX        TFDS's deserialize_example_np decode: the
                                             array's little-endian bytes
  strings RECORD KEY N HEX...                ... of a list of strings (hex, '-' for empty)
  image FILE H W C RAW [uint16]              the pixels as PIL decodes them (RAW, HWC; 16-bit
                                             color as OpenCV decodes it, PIL cannot)
  image FILE unsupported                     an image grist refuses (1-bit)
  cast RECORD KEY DTYPE N HEX                the record's values (one float_list or int64_list)
                                             cast to DTYPE by numpy's astype, as TFDS casts them
  jpeg_tolerance N                           the largest difference between PIL's and
                                             OpenCV's decode of the JPEGs here
  absent RECORD KEY                          a key the record does not hold

Usage: tools/make_example_golden.py [--out DIR]   (needs tensorflow, tensorflow-datasets,
numpy, Pillow, opencv-python; about 20 s)
"""
import argparse
import io
import os
import struct

import numpy as np
from PIL import Image, ImageDraw


def hexb(b):
    return b.hex() if b else "-"


def wire_lines(name, data, example_pb2):
    """The values of every feature of @data as protobuf parses them."""
    ex = example_pb2.Example()
    ex.ParseFromString(data)
    out = []
    for key in sorted(ex.features.feature):
        f = ex.features.feature[key]
        kind = f.WhichOneof("kind")
        if kind == "int64_list":
            vals = [str(v) for v in f.int64_list.value]
            out.append(f"wire {name} {key} int64 {len(vals)} {' '.join(vals)}".rstrip())
        elif kind == "float_list":
            vals = [struct.pack("<f", v).hex() for v in f.float_list.value]
            out.append(f"wire {name} {key} float {len(vals)} {' '.join(vals)}".rstrip())
        elif kind == "bytes_list":
            vals = [hexb(v) for v in f.bytes_list.value]
            out.append(f"wire {name} {key} bytes {len(vals)} {' '.join(vals)}".rstrip())
        else:
            out.append(f"wire {name} {key} none 0")
    return out


def tfds_lines(name, decoded, prefix=""):
    out = []
    for key in sorted(decoded):
        v = decoded[key]
        if isinstance(v, dict):
            out += tfds_lines(name, v, prefix + key + "/")
            continue
        if isinstance(v, bytes):
            out.append(f"tfds {name} {prefix}{key} bytes 1 {len(v)} {hexb(v)}")
            continue
        if (isinstance(v, list) and v and all(isinstance(x, bytes) for x in v)) or \
                (isinstance(v, np.ndarray) and v.dtype == object):
            out.append(f"strings {name} {prefix}{key} {len(v)} {' '.join(hexb(x) for x in v)}".rstrip())
            continue
        a = np.asarray(v)
        if a.dtype == object:
            raise SystemExit(f"{key}: unexpected object array")
        dims = " ".join(str(d) for d in a.shape)
        out.append(f"tfds {name} {prefix}{key} {a.dtype.name} {a.ndim} {dims} {hexb(a.tobytes())}".replace("  ", " "))
    return out


def digit(rng):
    """A 28x28 gray image with a few strokes, like an MNIST digit (compresses as they do)."""
    im = Image.new("L", (28, 28), 0)
    d = ImageDraw.Draw(im)
    for _ in range(rng.integers(2, 5)):
        x0, y0, x1, y1 = (int(v) for v in rng.integers(4, 24, 4))
        d.line((x0, y0, x1, y1), fill=int(rng.integers(150, 256)), width=int(rng.integers(2, 4)))
    return np.asarray(im)[:, :, None]


def png_bytes(img, **kw):
    b = io.BytesIO()
    img.save(b, format="PNG", **kw)
    return b.getvalue()


def jpeg_bytes(img, **kw):
    b = io.BytesIO()
    img.save(b, format="JPEG", **kw)
    return b.getvalue()


def pil_pixels(data, mode=None):
    im = Image.open(io.BytesIO(data))
    if mode:
        im = im.convert(mode)
    a = np.asarray(im)
    return a if a.ndim == 3 else a[:, :, None]


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def ld(field, body):
    """A length-delimited field."""
    return varint(field << 3 | 2) + varint(len(body)) + body


def interlaced_png(rgb):
    """An Adam7-interlaced 8-bit RGB PNG (PIL and OpenCV write none; PIL reads them)."""
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    h, w, _ = rgb.shape
    raw = bytearray()
    for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
                           (0, 1, 1, 2)):
        sub = rgb[y0::dy, x0::dx]
        if sub.shape[0] and sub.shape[1]:
            for row in sub:
                raw += b"\0" + row.tobytes()
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(raw))) +
            chunk(b"IEND", b""))


def entry(key, feature):
    return ld(1, ld(1, key.encode()) + ld(2, feature))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "features"))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import cv2
    import tensorflow_datasets as tfds
    from tensorflow.core.example import example_pb2

    F = tfds.features
    manifest = []
    rng = np.random.default_rng(20261125)

    def write(name, data):
        with open(os.path.join(out, name), "wb") as fh:
            fh.write(data)

    def write_det(name, data):
        ex = example_pb2.Example()
        ex.ParseFromString(data)
        write(name.replace(".pb", ".det"), ex.SerializeToString(deterministic=True))

    # --- MNIST-like records, serialized by TFDS
    mnist = F.FeaturesDict({"image": F.Image(shape=(28, 28, 1)), "label": F.ClassLabel(num_classes=10)})
    for i in range(32):
        name = f"mnist-{i:02d}.pb"
        data = mnist.serialize_example({"image": digit(rng), "label": int(rng.integers(0, 10))})
        write(name, data)
        write_det(name, data)
        manifest += wire_lines(name, data, example_pb2)
        manifest += tfds_lines(name, mnist.deserialize_example_np(data))

    # --- one record per TFDS feature type, serialized and decoded by TFDS
    typed = F.FeaturesDict({
        "image": F.Image(shape=(28, 28, 1)),
        "label": F.ClassLabel(num_classes=10),
        "vec": F.Tensor(shape=(4,), dtype=np.float32),
        "mat": F.Tensor(shape=(2, 3), dtype=np.int32),
        "ids": F.Tensor(shape=(None,), dtype=np.int64),
        "uid": F.Tensor(shape=(), dtype=np.str_),
        "caption": F.Text(),
        "flag": F.Scalar(dtype=np.bool_),
        "weight": F.Scalar(dtype=np.float32),
        "meta": {"source": F.Text(), "year": F.Scalar(dtype=np.int32)},
        "tokens": F.Sequence(F.Scalar(dtype=np.int64)),
        "pairs": F.Tensor(shape=(None, 2), dtype=np.uint8),
        "half": F.Tensor(shape=(3,), dtype=np.float16),
        "f64": F.Tensor(shape=(2,), dtype=np.float64),
        "u16": F.Tensor(shape=(2,), dtype=np.uint16),
        "i8": F.Tensor(shape=(3,), dtype=np.int8),
        "u64": F.Tensor(shape=(2,), dtype=np.uint64),
        "rawt": F.Tensor(shape=(2, 2), dtype=np.int16, encoding="bytes"),
        "photo": F.Image(shape=(None, None, 3), encoding_format="jpeg"),
    })
    for i, n in enumerate([3, 0, 5]):
        ex = {
            "image": digit(rng), "label": i + 1,
            "vec": np.array([1.5, -2, 3.25, 1e-3 * (i + 1)], np.float32),
            "mat": np.array([[1, -2, 3], [2**31 - 1, -2**31, i]], np.int32),
            "ids": np.array([5, -7, 1 << 40, -(1 << 62), 0][:n], np.int64),
            "uid": f"u-{i}", "caption": ["héllo", "", "a longer caption, with UTF-8: ☃"][i],
            "flag": i % 2 == 0, "weight": 0.1 * (i + 1),
            "meta": {"source": "web" if i else "", "year": 2020 + i},
            "tokens": list(range(n)), "pairs": np.arange(2 * n, dtype=np.uint8).reshape(n, 2),
            "half": np.array([0.1, 65504, -1e-5], np.float16),
            "f64": np.array([1 / 3, 1e300 if i == 0 else -2.5]),
            "u16": np.array([1, 65535], np.uint16), "i8": np.array([-128, 127, i], np.int8),
            "u64": np.array([1, 2**40 + i], np.uint64),  # TFDS's numpy decode fails on values >= 2^63
            "rawt": np.array([[1, -1], [300, -300 - i]], np.int16),
            "photo": rng.integers(0, 256, (10 + i, 12, 3), dtype=np.uint8),
        }
        name = f"typed-{i}.pb"
        data = typed.serialize_example(ex)
        write(name, data)
        write_det(name, data)
        manifest += wire_lines(name, data, example_pb2)
        manifest += tfds_lines(name, typed.deserialize_example_np(data))

    # --- sequences of images, serialized and decoded by TFDS
    video = F.FeaturesDict({"video": F.Video(shape=(None, 8, 10, 3), encoding_format="png"),
                            "clip": F.Sequence(F.Image(shape=(6, 6, 1)), length=2),
                            "frames": F.Sequence(F.Image(shape=(None, None, 3), encoding_format="jpeg"))})
    for i, (t, hw) in enumerate([(3, (9, 7)), (1, (16, 5)), (2, (4, 4))]):
        ex = {"video": rng.integers(0, 256, (t, 8, 10, 3), dtype=np.uint8),
              "clip": [rng.integers(0, 256, (6, 6, 1), dtype=np.uint8) for _ in range(2)],
              "frames": [rng.integers(0, 256, hw + (3,), dtype=np.uint8) for _ in range(t)]}
        name = f"video-{i}.pb"
        data = video.serialize_example(ex)
        write(name, data)
        manifest += wire_lines(name, data, example_pb2)
        manifest += tfds_lines(name, {k: np.stack(v) for k, v in video.deserialize_example_np(data).items()})

    # --- lists of strings, serialized and decoded by TFDS
    texts = F.FeaturesDict({"tags": F.Sequence(F.Text()), "names": F.Tensor(shape=(2,), dtype=np.str_),
                            "answers": F.Sequence({"text": F.Text(), "start": F.Scalar(dtype=np.int32)})})
    for i, ex in enumerate([
        {"tags": ["a", "", "héllo"], "names": ["x", "yz"], "answers": [{"text": "t1", "start": 3},
                                                                       {"text": "", "start": 0}]},
        {"tags": [], "names": ["", "long " * 20], "answers": []},
        {"tags": ["only"], "names": ["p", "q"], "answers": [{"text": "☃", "start": -1}]},
    ]):
        name = f"texts-{i}.pb"
        data = texts.serialize_example(ex)
        write(name, data)
        manifest += wire_lines(name, data, example_pb2)
        manifest += tfds_lines(name, texts.deserialize_example_np(data))

    # --- protobuf's parsing rules
    def pb(feats):
        ex = example_pb2.Example()
        for k, (kind, vals) in feats.items():
            getattr(ex.features.feature[k], kind).value.extend(vals)
        return ex.SerializeToString()

    unpacked_i = b"".join(varint(1 << 3 | 0) + varint(v) for v in [7, -1, 1 << 50])
    unpacked_f = b"".join(b"\x0d" + struct.pack("<f", v) for v in [0.5, -3.0])
    mixed_i = ld(1, varint(1) + varint(2)) + b"\x08" + varint(3) + ld(1, varint(4))
    wires = {
        "wire-unpacked.pb": ld(1, entry("a", ld(3, unpacked_i)) + entry("b", ld(2, unpacked_f))),
        "wire-mixed.pb": ld(1, entry("a", ld(3, mixed_i)) + entry("b", ld(2, ld(1, struct.pack("<2f", 1, 2)) +
                                                                        b"\x0d" + struct.pack("<f", 9)))),
        # Example.features twice: the maps merge; "a" twice: the last entry wins
        "wire-merge.pb": pb({"a": ("int64_list", [1]), "b": ("bytes_list", [b"x"])}) +
        pb({"a": ("int64_list", [2, 3]), "c": ("float_list", [1.25])}),
        # one entry whose value field comes twice: the Features merge (lists concatenate)
        "wire-value-twice.pb": ld(1, ld(1, ld(1, b"a") + ld(2, ld(3, ld(1, varint(1) + varint(2)))) +
                                          ld(2, ld(3, ld(1, varint(3)))))),
        # the oneof switches kind: the last one set wins, the earlier values are gone
        "wire-oneof.pb": ld(1, entry("a", ld(3, ld(1, varint(5))) + ld(2, ld(1, struct.pack("<f", 2.5))))),
        # unknown fields in Example, Features, Feature and the list (varint, fixed64, length-delimited)
        "wire-unknown.pb": b"\x10\x05" + ld(1, b"\x19" + bytes(8) + ld(1, ld(1, b"a") + ld(2, b"\x20\x01" + ld(
            3, b"\x10\x02" + ld(1, varint(42)) + ld(7, b"zz"))))) + ld(9, b"tail"),
        # an unknown field inside a map entry: protobuf's Python parser (upb, what TFDS reads
        # with) keeps the whole entry as unknown data, so the key is absent
        "wire-unknown-entry.pb": ld(1, entry("b", ld(3, ld(1, varint(1)))) +
                                    ld(1, ld(1, b"a") + b"\x1d" + bytes(4) + ld(2, ld(3, ld(1, varint(42)))))),
        # the key field twice in one entry: the last names it
        "wire-key-twice.pb": ld(1, ld(1, ld(1, b"zzz") + ld(2, ld(3, ld(1, varint(8)))) + ld(1, b"a"))),
        # keys in reverse order, negative and large values, an empty list, an empty Feature
        "wire-order.pb": ld(1, entry("z", ld(3, ld(1, b"".join(varint(v) for v in [-1, -(1 << 63), (1 << 63) - 1])))) +
                            entry("m", ld(1, b"")) + entry("e", b"") + entry("a", ld(2, b""))),
    }
    for name, data in wires.items():
        write(name, data)
        manifest += wire_lines(name, data, example_pb2)
        ex = example_pb2.Example()
        ex.ParseFromString(data)
        manifest += [f"absent {name} {k}" for k in "ab" if k not in ex.features.feature]

    # --- narrowing and float16 rounding, against numpy's astype
    specials = np.array([0, 1, -1, 0.1, 1 / 3, 65504, 65505, 65519, 65520, 1e6, -1e6, 6e-5, 6.1e-5, 5.96e-8, 2.98e-8,
                         2.99e-8, 1e-9, 2049, 2051, 4097, -0.0, np.inf, -np.inf, np.nan, 1.00048828125,
                         1.0009765625, 1.00146484375], np.float32)
    ints = np.array([0, 1, -1, 127, 128, 255, 256, -128, -129, 32767, 32768, 65535, 65536, 2**31 - 1, 2**31,
                     2**32 - 1, 2**32, -2**31 - 1, 2**62, -2**63], np.int64)
    cast = pb({"f": ("float_list", specials.tolist()), "i": ("int64_list", ints.tolist())})
    write("cast.pb", cast)
    with np.errstate(all="ignore"):
        for dt in ("float16", "float32", "float64"):
            manifest.append(f"cast cast.pb f {dt} {len(specials)} {specials.astype(dt).tobytes().hex()}")
        for dt in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool"):
            manifest.append(f"cast cast.pb i {dt} {len(ints)} {ints.astype(dt).tobytes().hex()}")

    # --- images: PIL writes and decodes them; OpenCV checks the JPEG tolerance
    def image_case(name, data, mode=None):
        write(name, data)
        px = pil_pixels(data, mode)
        raw = name + ".raw"
        write(raw, px.tobytes())
        h, w, c = px.shape
        manifest.append(f"image {name} {h} {w} {c} {raw}")
        return px

    rgb = rng.integers(0, 256, (23, 37, 3), dtype=np.uint8)
    rgb[:, :10] = 90  # a flat area, so the images are not all noise
    gray = rgb[:, :, 0].copy()
    rgba = np.dstack([rgb, rng.integers(0, 256, (23, 37), dtype=np.uint8)])
    image_case("gray.png", png_bytes(Image.fromarray(gray, "L")))
    image_case("ga.png", png_bytes(Image.fromarray(np.dstack([gray, gray[::-1]]), "LA")))
    image_case("rgb.png", png_bytes(Image.fromarray(rgb, "RGB")))
    image_case("rgba.png", png_bytes(Image.fromarray(rgba, "RGBA")))
    image_case("rgb-cv2.png", cv2.imencode(".png", rgb[:, :, ::-1])[1].tobytes())
    image_case("interlaced.png", interlaced_png(rgb))
    pal = Image.fromarray(rgb, "RGB").quantize(colors=16)
    image_case("palette.png", png_bytes(pal), "RGB")
    pal_t = pal.copy()
    pal_t.info["transparency"] = 3
    image_case("palette-trns.png", png_bytes(pal_t, transparency=3), "RGBA")
    jpegs = {
        "gray.jpg": jpeg_bytes(Image.fromarray(gray, "L"), quality=90),
        "rgb420.jpg": jpeg_bytes(Image.fromarray(rgb, "RGB"), quality=85, subsampling=2),
        "rgb444.jpg": jpeg_bytes(Image.fromarray(rgb, "RGB"), quality=95, subsampling=0),
        "progressive.jpg": jpeg_bytes(Image.fromarray(rgb, "RGB"), quality=80, progressive=True),
    }
    tol = 0
    for name, data in jpegs.items():
        px = image_case(name, data)
        cv = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
        cv = cv[:, :, None] if cv.ndim == 2 else cv[:, :, ::-1]
        tol = max(tol, int(np.abs(cv.astype(int) - px.astype(int)).max()))
    manifest.append(f"jpeg_tolerance {tol}")
    # 16-bit PNGs (TFDS's Image(dtype=uint16)): PIL reads 16-bit gray, OpenCV (TFDS's decoder) 16-bit color
    gray16 = gray.astype(np.uint16) * 257 + np.arange(37, dtype=np.uint16)
    g16 = cv2.imencode(".png", gray16)[1].tobytes()
    write("gray16.png", g16)
    write("gray16.png.raw", np.asarray(Image.open(io.BytesIO(g16))).astype(np.uint16).tobytes())
    manifest.append("image gray16.png 23 37 1 gray16.png.raw uint16")
    rgb16 = rgb.astype(np.uint16) * 251 + 3
    c16 = cv2.imencode(".png", rgb16[:, :, ::-1])[1].tobytes()
    write("rgb16.png", c16)
    write("rgb16.png.raw", cv2.imdecode(np.frombuffer(c16, np.uint8), cv2.IMREAD_UNCHANGED)[:, :, ::-1].tobytes())
    manifest.append("image rgb16.png 23 37 3 rgb16.png.raw uint16")
    write("bilevel.png", png_bytes(Image.fromarray(gray > 128)))
    manifest.append("image bilevel.png unsupported")

    with open(os.path.join(out, "MANIFEST.txt"), "w") as fh:
        fh.write("# made by tools/make_example_golden.py; see its docstring for the format\n")
        fh.write("\n".join(manifest) + "\n")
    print(f"wrote {len(os.listdir(out))} files to {out}")


if __name__ == "__main__":
    main()
