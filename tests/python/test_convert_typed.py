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
