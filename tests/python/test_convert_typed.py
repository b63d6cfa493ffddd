"""grist.convert() into tf.train.Example records, checked by the peers that read them:
an ImageFolder tree (PNG and JPEG made with PIL) read back by TFDS's own
builder_from_directory(...).as_data_source(split), record by record; CSV rows parsed back
with protobuf (tfrecord's example_pb2) against what Python's csv module reads; bad input."""
import csv
import io
import os

import numpy as np
import pytest

from conftest import grist

Image = pytest.importorskip("PIL.Image")

LABELS = {"train": ["cat", "dog", "emu"], "test": ["ant", "dog"]}


def make_image_folder(root):
    """Small images of two sizes per split, PNG and JPEG (some with upper-case names); returns
    {split: [(relative path, label name), ...]}."""
    rng = np.random.default_rng(5)
    made = {}
    for split, labels in LABELS.items():
        made[split] = []
        for label in labels:
            os.makedirs(os.path.join(root, split, label))
            for i in range(3):
                px = rng.integers(0, 256, (6 + i, 9 - i, 3), dtype=np.uint8)
                name, fmt = [("p%d.png" % i, "PNG"), ("j%d.JPG" % i, "JPEG"), ("q%d.jpeg" % i, "JPEG")][i]
                Image.fromarray(px).save(os.path.join(root, split, label, name), format=fmt, quality=90)
                made[split].append((f"{split}/{label}/{name}", label))
        with open(os.path.join(root, split, labels[0], "notes.txt"), "w") as f:
            f.write("not an image")
    return made


def test_imagefolder_read_by_tfds(tmp_path, cli):
    tfds = pytest.importorskip("tensorflow_datasets")
    root = str(tmp_path / "root")
    made = make_image_folder(root)
    out = str(tmp_path / "data" / "shapes" / "1.0.0")
    assert grist.convert(root, out, format="imagefolder", shards=2) == [out]
    all_labels = sorted(set(LABELS["train"]) | set(LABELS["test"]))
    builder = tfds.builder_from_directory(out)
    assert builder.info.features["label"].names == all_labels
    assert builder.info.splits["train"].shard_lengths == [5, 4]
    for split, files in made.items():
        src = builder.as_data_source(split)
        expect = sorted(files)  # label folders, then names, bytewise
        assert len(src) == len(expect)
        for i, (rel, label) in enumerate(expect):
            r = src[i]
            assert r["image/filename"] == rel.encode()
            assert r["label"] == all_labels.index(label)
            with open(os.path.join(root, rel), "rb") as f:
                want = np.asarray(Image.open(io.BytesIO(f.read())))
            got = r["image"]
            assert got.shape == want.shape and got.dtype == np.uint8
            if rel.endswith(".png"):
                assert np.array_equal(got, want), rel
            else:  # TFDS decodes with OpenCV when present: PIL and OpenCV differ by a level at most
                assert np.abs(got.astype(int) - want.astype(int)).max() <= 1, rel
    # grist's own reader of TFDS datasets gives the same records as TFDS
    gtfds = pytest.importorskip("grist.tfds")
    for split in made:
        ours, theirs = gtfds.data_source(out, split=split), builder.as_data_source(split)
        assert len(ours) == len(theirs)
        for i in range(len(ours)):
            a, b = ours[i], theirs[i]
            assert a.keys() == b.keys()
            assert a["label"] == b["label"] and a["image/filename"] == b["image/filename"]
            assert a["image"].shape == b["image"].shape
            assert np.abs(a["image"].astype(int) - b["image"].astype(int)).max() <= 1
    # the CLI writes the same bytes (the walk is sorted, nothing depends on the machine)
    out2 = str(tmp_path / "cli" / "shapes" / "1.0.0")
    cli("convert", "--from", "imagefolder", "--shards", "2", root, out2)
    assert sorted(os.listdir(out)) == sorted(os.listdir(out2))
    for name in os.listdir(out):
        with open(os.path.join(out, name), "rb") as a, open(os.path.join(out2, name), "rb") as b:
            assert a.read() == b.read(), name


def test_imagefolder_bad_image_leaves_nothing(tmp_path):
    root = str(tmp_path / "root")
    make_image_folder(root)
    bad = os.path.join(root, "test", "dog", "p0.png")
    with open(bad, "r+b") as f:
        f.truncate(os.path.getsize(bad) - 40)
    out = str(tmp_path / "out")
    with pytest.raises(grist.Error, match="test/dog/p0.png: not an image that decodes"):
        grist.convert(root, out, format="imagefolder")
    assert sorted(os.listdir(tmp_path)) == ["root"]



def test_imagefolder_max_side_reencodes_larger_images(tmp_path, cli):
    """--max-side 512: an image with a side over 512 is resized (long side 512, the short one
    rounded), re-encoded as a JPEG Pillow decodes, within a JPEG's error of Pillow's own
    resize; smaller images and RGBA PNGs keep their bytes; the CLI says how much smaller.
    A dataset has one channel count, so RGB, gray and RGBA are three datasets."""
    example_pb2 = pytest.importorskip("tfrecord.example_pb2")
    yy, xx = np.mgrid[0:900, 0:1200]
    smooth = np.stack([(xx * 255 // 1199), (yy * 255 // 899), ((xx + yy) * 255 // 2098)], -1).astype(np.uint8)
    datasets = {
        "rgb": {"big.jpg": (Image.fromarray(smooth[:600, :1000]), "JPEG"),     # landscape, JPEG
                "tall.png": (Image.fromarray(smooth[:900, :301]), "PNG"),      # portrait, PNG
                "small.jpg": (Image.fromarray(smooth[:375, :500]), "JPEG"),    # within 512: as read
                "edge.png": (Image.fromarray(smooth[:512, :512]), "PNG")},     # exactly 512: as read
        "gray": {"gray.jpg": (Image.fromarray(smooth[:700, :650, 0]), "JPEG"),
                 "gray_small.png": (Image.fromarray(smooth[:200, :300, 1]), "PNG")},
        "rgba": {"alpha.png": (Image.fromarray(np.dstack([smooth[:600, :700], smooth[:600, :700, :1]])), "PNG")},
    }
    resized = {"rgb": 2, "gray": 1, "rgba": 0}
    for kind, made in datasets.items():
        root = tmp_path / kind / "root"
        os.makedirs(root / "train" / "a")
        for name, (im, fmt) in made.items():
            im.save(root / "train" / "a" / name, format=fmt, quality=92)
        out = tmp_path / kind / "d" / "1.0.0"
        said = cli("convert", "--from", "imagefolder", "--max-side", "512", "--jpeg-quality", "90", root, out)
        shard = [f for f in os.listdir(out) if ".array_record" in f]
        src = grist.ArrayRecordDataSource([str(out / shard[0])])
        got = {}
        for i in range(len(src)):
            ex = example_pb2.Example()
            ex.ParseFromString(src[i])
            f = ex.features.feature
            got[os.path.basename(f["image/filename"].bytes_list.value[0].decode())] = f["image"].bytes_list.value[0]
        src.close()
        assert sorted(got) == sorted(made)
        size_in = size_out = 0
        for name, (im, fmt) in made.items():
            with open(root / "train" / "a" / name, "rb") as f:
                orig = f.read()
            size_in, size_out = size_in + len(orig), size_out + len(got[name])
            w, h = im.size
            if max(w, h) <= 512 or im.mode == "RGBA":
                assert got[name] == orig, name
                continue
            new = Image.open(io.BytesIO(got[name]))
            assert new.format == "JPEG" and new.mode == im.mode, name
            want_size = (512, int(h * 512 / w + 0.5)) if w >= h else (int(w * 512 / h + 0.5), 512)
            assert new.size == want_size, name
            want = np.asarray(im.resize(want_size, Image.BILINEAR, reducing_gap=None), np.float64)
            # a JPEG of quality 90 of a smooth image: a level or two on average from Pillow's resize
            assert np.abs(np.asarray(new, np.float64) - want).mean() < 2.0, name
        assert "%d of %d images re-encoded at most 512 pixels a side" % (resized[kind], len(made)) in said, said
        assert "%.1f%% smaller" % (100 * (1 - size_out / size_in)) in said, said
    # the same through Python; jpeg_quality without max_side, and max_side for another format, are refused
    root, out = tmp_path / "rgb" / "root", tmp_path / "rgb" / "d" / "1.0.0"
    out2 = tmp_path / "py" / "1.0.0"
    grist.convert(str(root), str(out2), format="imagefolder", max_side=512, jpeg_quality=90)
    for a in sorted(os.listdir(out)):
        if ".array_record" in a:
            b = [n for n in os.listdir(out2) if ".array_record" in n and n.split("-", 1)[1] == a.split("-", 1)[1]]
            assert (out2 / b[0]).read_bytes() == (out / a).read_bytes()
    with pytest.raises(ValueError, match="jpeg_quality: only with max_side"):
        grist.convert(str(root), str(tmp_path / "x" / "1.0.0"), format="imagefolder", jpeg_quality=80)
    with pytest.raises(ValueError, match="imagefolder format only"):
        grist.convert(str(root / "train"), str(tmp_path / "y"), format="dir", max_side=64)

ROWS = [
    ["id", "score", "name", "tags", "ignored", "vec"],
    ["1", "0.1", "plain", "a b", "x", "1 2 3"],
    ["-5", "1e-3", 'with "quotes", commas\nand a newline', "", "y", ""],
    ["9223372036854775807", "-0", "ünïcødé", "one", "z", "-1"],
    ["0", "3.4028235e38", "", "  spaced   out  ", "", "0.5 0.25"],
]
SPEC = "id:int64,score:float32,name:text,tags:text[],vec:float32[]"


def test_csv_records_parse_as_protobuf(tmp_path):
    example_pb2 = pytest.importorskip("tfrecord.example_pb2")
    path = str(tmp_path / "rows.csv")
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\r\n").writerows(ROWS)
    out = str(tmp_path / "rows.ar")
    grist.convert(path, out, format="csv", features=SPEC)
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, rows = rows[0], rows[1:]
    r = grist.Reader(out)
    assert len(r) == len(rows)
    for i, row in enumerate(rows):
        cell = dict(zip(header, row))
        ex = example_pb2.Example()
        ex.ParseFromString(r[i])
        assert ex.SerializeToString(deterministic=True) == r[i]
        f = ex.features.feature
        assert sorted(f.keys()) == ["id", "name", "score", "tags", "vec"]
        assert list(f["id"].int64_list.value) == [int(cell["id"])]
        assert np.float32(f["score"].float_list.value[0]) == np.float32(float(cell["score"]))
        assert list(f["name"].bytes_list.value) == [cell["name"].encode()]
        assert list(f["tags"].bytes_list.value) == [t.encode() for t in cell["tags"].split()]
        assert np.array_equal(np.array(f["vec"].float_list.value, np.float32),
                              np.array([float(v) for v in cell["vec"].split()], np.float32))


@pytest.mark.parametrize("text,spec,message", [
    ("a,b\n1,2\n1,two\n", "a:int64,b:int64", "bad.csv: line 3, column 'b': 'two' is not an int64"),
    ("a,b\n1,2,3\n", "a:int64", "bad.csv: line 2: 3 fields, the header has 2"),
    ('a,b\n1,"open\n', "a:int64", "line 2: a quoted field is not closed"),
    ("a,b\n1,2\n", "c:text", "the header has no column 'c'"),
])
def test_csv_bad_input(tmp_path, text, spec, message):
    path = str(tmp_path / "bad.csv")
    with open(path, "w") as f:
        f.write(text)
    with pytest.raises((grist.Error, ValueError), match=message):
        grist.convert(path, str(tmp_path / "out.ar"), format="csv", features=spec)
    assert os.listdir(tmp_path) == ["bad.csv"]


def test_csv_spec_refused_before_reading(tmp_path):
    with pytest.raises(ValueError, match="unknown type 'int8'"):
        grist.convert(str(tmp_path / "missing.csv"), str(tmp_path / "o"), format="csv", features="a:int8")
    with pytest.raises(ValueError, match="for the csv format"):
        grist.convert(str(tmp_path / "missing.txt"), str(tmp_path / "o"), format="lines", features="a:int64")
