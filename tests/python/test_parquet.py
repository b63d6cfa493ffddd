"""grist's Parquet -> TFDS converter: every column kind converted, read back by TFDS itself and by
grist.Reader + protobuf parsing, every value compared with pyarrow's; bad rows; atomic output."""
import io
import json
import os

import numpy as np
import pytest

from conftest import grist

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
PIL = pytest.importorskip("PIL.Image")

from grist._parquet import ConversionError, from_parquet  # noqa: E402


def example_pb2():
    try:
        from tfrecord import example_pb2
    except ImportError:
        example_pb2 = pytest.importorskip("tensorflow_datasets.core.example_parser.tf_example_pb2")
    return example_pb2


def png(a):
    b = io.BytesIO()
    PIL.fromarray(a if a.shape[2] > 1 else a[..., 0]).save(b, format="PNG")
    return b.getvalue()


def jpeg(a):
    b = io.BytesIO()
    PIL.fromarray(a).save(b, format="JPEG", quality=90)
    return b.getvalue()


def decode(data):
    a = np.asarray(PIL.open(io.BytesIO(data)))
    return a if a.ndim == 3 else a[..., None]


def table(n=61, seed=0, image_shape=lambda i: (4, 5, 3)):
    """Every column kind the converter maps (float64 values float32 can hold: TFDS stores floats
    as float32)."""
    rng = np.random.default_rng(seed)
    u8 = lambda *s: rng.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    return pa.table({
        "i64": pa.array(rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)),
        "i32": pa.array(rng.integers(-2**31, 2**31, n).astype(np.int32)),
        "u8": pa.array(u8(n)),
        "u64": pa.array(rng.integers(0, 2**63, n, dtype=np.uint64)),
        "f32": pa.array(rng.normal(size=n).astype(np.float32)),
        "f64": pa.array(rng.normal(size=n).astype(np.float32).astype(np.float64)),
        "flag": pa.array(rng.integers(0, 2, n).astype(bool)),
        "text": pa.array(["row %d \u00e9\u9ce5" % i if i % 5 else "" for i in range(n)]),
        "blob": pa.array([u8(i % 7).tobytes() for i in range(n)], pa.binary()),
        "vec": pa.array(list(rng.normal(size=(n, 3)).astype(np.float32)), pa.list_(pa.float32(), 3)),
        "mat": pa.array([[list(map(int, r)) for r in rng.integers(-9, 9, (2, 3))] for _ in range(n)],
                        pa.list_(pa.list_(pa.int32(), 3), 2)),
        "ids": pa.array([list(map(int, rng.integers(-2**40, 2**40, i % 4))) for i in range(n)], pa.list_(pa.int64())),
        "points": pa.array([list(rng.normal(size=(i % 3, 2)).astype(np.float32)) for i in range(n)],
                           pa.list_(pa.list_(pa.float32(), 2))),
        "tags": pa.array([["t%d" % j for j in range(i % 3)] for i in range(n)], pa.list_(pa.string())),
        "image": pa.array([png(u8(*image_shape(i))) for i in range(n)], pa.binary()),
        "photo": pa.array([jpeg(u8(8, 8, 3)) for i in range(n)], pa.binary()),
        "label": pa.array(rng.integers(0, 5, n)),
    })


FEATURES = {"image": "image", "photo": "image:jpeg", "label": "class_label:5"}


def write_files(tmp_path, t, cuts=(0, 25, 40), row_group_size=7):
    """The table as several Parquet files (rows in order across them), small row groups."""
    paths, bounds = [], list(cuts) + [t.num_rows]
    for k in range(len(cuts)):
        p = str(tmp_path / f"part-{k}.parquet")
        pq.write_table(t.slice(bounds[k], bounds[k + 1] - bounds[k]), p, row_group_size=row_group_size)
        paths.append(p)
    return paths


def expected(t):
    """Each row as TFDS returns it, made from pyarrow's values."""
    rows = t.to_pylist()
    out = []
    for r in rows:
        out.append({
            "i64": r["i64"], "i32": r["i32"], "u8": r["u8"], "u64": r["u64"],
            "f32": np.float32(r["f32"]), "f64": r["f64"], "flag": r["flag"],
            "text": r["text"].encode(), "blob": r["blob"],
            "vec": np.array(r["vec"], np.float32), "mat": np.array(r["mat"], np.int32),
            "ids": np.array(r["ids"], np.int64), "points": np.array(r["points"], np.float32).reshape(-1, 2),
            "tags": np.array([s.encode() for s in r["tags"]], object),
            "image": decode(r["image"]), "photo": decode(r["photo"]), "label": r["label"],
        })
    return out


def same(a, b):
    if isinstance(b, np.ndarray):
        a = np.asarray(a)
        return a.shape == b.shape and (a.tolist() == b.tolist())
    if isinstance(b, float):
        return float(a) == b
    return a == b


def records(out):
    info = json.load(open(os.path.join(out, "dataset_info.json")))
    name = info["name"]
    paths = []
    for s in info["splits"]:
        n = len(s["shardLengths"])
        paths += [os.path.join(out, f"{name}-{s['name']}.array_record-{k:05d}-of-{n:05d}") for k in range(n)]
    return grist.Reader(paths)


def parse(raw):
    """A record as {key: list of values} with protobuf's own parser."""
    ex = example_pb2().Example.FromString(raw)
    out = {}
    for k, f in ex.features.feature.items():
        kind = f.WhichOneof("kind")
        out[k] = list(getattr(f, kind).value) if kind else []
    return out


def test_every_column_kind_read_back_by_grist_and_protobuf(tmp_path):
    t = table()
    out = str(tmp_path / "ds" / "my_table" / "1.0.0")
    res = from_parquet(write_files(tmp_path, t), out, features=FEATURES, shards=3)
    assert res["rows"] == 61
    assert sorted(os.listdir(out)) == sorted(["dataset_info.json", "features.json"] + res["shards"])
    assert res["shards"] == [f"my_table-train.array_record-0000{k}-of-00003" for k in range(3)]
    info = json.load(open(os.path.join(out, "dataset_info.json")))
    assert info["name"] == "my_table" and info["version"] == "1.0.0" and info["fileFormat"] == "array_record"
    assert info["splits"][0]["shardLengths"] == ["21", "20", "20"]
    feats = json.load(open(os.path.join(out, "features.json")))["featuresDict"]["features"]
    assert feats["image"]["image"] == {"dtype": "uint8", "encodingFormat": "png",
                                       "shape": {"dimensions": ["4", "5", "3"]}}
    assert feats["photo"]["image"]["encodingFormat"] == "jpeg"
    assert feats["label"]["classLabel"] == {"numClasses": "5"}
    assert feats["text"]["pythonClassName"].endswith("text_feature.Text")
    assert feats["mat"]["tensor"] == {"dtype": "int32", "encoding": "none", "shape": {"dimensions": ["2", "3"]}}
    assert feats["points"]["tensor"]["shape"] == {"dimensions": ["-1", "2"]}
    assert feats["u64"]["tensor"]["dtype"] == "uint64" and feats["flag"]["tensor"]["dtype"] == "bool"
    assert feats["tags"]["tensor"] == {"dtype": "string", "encoding": "none", "shape": {"dimensions": ["-1"]}}

    r = records(out)
    assert len(r) == 61
    rows = t.to_pylist()
    for i in range(61):
        raw = r[i]
        got, want = parse(raw), rows[i]
        assert got["i64"] == [want["i64"]] and got["i32"] == [want["i32"]] and got["u8"] == [want["u8"]]
        assert got["u64"] == [want["u64"]]
        assert np.array(got["f32"], np.float32).tolist() == [np.float32(want["f32"]).item()]
        assert got["f64"] == [want["f64"]] and got["flag"] == [int(want["flag"])]
        assert got["text"] == [want["text"].encode()] and got["blob"] == [want["blob"]]
        assert np.array(got["vec"], np.float32).tolist() == np.array(want["vec"], np.float32).tolist()
        assert got["mat"] == [x for row in want["mat"] for x in row] and got["ids"] == want["ids"]
        assert np.array(got["points"], np.float32).tolist() == \
            np.array(want["points"], np.float32).reshape(-1).tolist()
        assert got["tags"] == [s.encode() for s in want["tags"]]
        assert got["image"] == [want["image"]] and got["photo"] == [want["photo"]]
        assert got["label"] == [want["label"]]
        # features sorted by key (protobuf's deterministic order for this map), each written once
        keys = [k for k in parse_keys(raw)]
        assert keys == sorted(keys, key=str.encode) and len(keys) == 17


def parse_keys(raw):
    """The feature keys in the order the record holds them (a minimal walk of the wire format)."""
    def varint(b, i):
        n = s = 0
        while True:
            c = b[i]
            n |= (c & 0x7F) << s
            i += 1
            s += 7
            if c < 0x80:
                return n, i
    n, i = varint(raw, 1)
    body = raw[i:i + n]
    i = 0
    while i < len(body):
        n, i = varint(body, i + 1)
        entry = body[i:i + n]
        kn, j = varint(entry, 1)
        yield entry[j:j + kn].decode()
        i += n


def test_tfds_reads_it_and_values_equal_pyarrows(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    t = table(n=30, image_shape=lambda i: (3 + i % 4, 5, 3))  # images of several sizes
    out = str(tmp_path / "tab" / "2.1.0")
    from_parquet(write_files(tmp_path, t, cuts=(0, 11)), out, features=FEATURES, shards=2)
    feats = json.load(open(os.path.join(out, "features.json")))["featuresDict"]["features"]
    assert feats["image"]["image"]["shape"] == {"dimensions": ["-1", "-1", "3"]}
    src = tfds.builder_from_directory(out).as_data_source("train")
    want = expected(t)
    assert len(src) == 30
    for i in range(30):
        got = src[i]
        assert set(got) == set(want[i])
        for k, v in want[i].items():
            if k == "photo":  # JPEG: TFDS decodes with OpenCV when it is installed, PIL here
                assert got[k].shape == v.shape and np.abs(got[k].astype(int) - v).mean() < 2, i
                continue
            assert same(got[k], v), (i, k, got[k], v)


def test_grist_tfds_source_reads_it(tmp_path):
    import grist.tfds
    # grist.tfds reads every kind here but lists of strings ("tags")
    t = table(n=12).drop_columns(["tags"])
    out = str(tmp_path / "tab" / "1.0.0")
    grist.tfds.from_parquet(write_files(tmp_path, t, cuts=(0,)), out, features=FEATURES)
    src = grist.tfds.data_source(out, "train")
    want = expected(t.append_column("tags", pa.array([[]] * 12, pa.list_(pa.string()))))
    for i in range(12):
        assert set(src[i]) == set(want[i]) - {"tags"}
        for k, v in src[i].items():
            assert same(v, want[i][k]), (i, k)


def test_same_input_same_bytes_and_splits_add_up(tmp_path, capsys):
    t = table(n=40)
    files = write_files(tmp_path, t)
    a, b = str(tmp_path / "a" / "d" / "1.0.0"), str(tmp_path / "b" / "d" / "1.0.0")
    from_parquet(files, a, features=FEATURES, shards=2, progress=True)
    assert "40/40 rows" in capsys.readouterr().err
    from_parquet(files, b, features=FEATURES, shards=2)
    for name in sorted(os.listdir(a)):
        assert open(os.path.join(a, name), "rb").read() == open(os.path.join(b, name), "rb").read(), name
    # A second split into the same dataset; more shards than rows leaves empty shards.
    from_parquet(files[:1], a, split="test", features=FEATURES, shards=30)
    info = json.load(open(os.path.join(a, "dataset_info.json")))
    assert [s["name"] for s in info["splits"]] == ["train", "test"]
    assert info["splits"][1]["shardLengths"] == ["1"] * 25 + ["0"] * 5
    assert len(records(a)) == 40 + 25


@pytest.mark.parametrize("case", ["null", "bad_image", "jpeg_as_png", "label", "length", "schema", "channels",
                                  "u64"])
def test_bad_rows_name_file_row_column_and_leave_nothing(tmp_path, case):
    t = table(n=30)
    features = dict(FEATURES)
    row, files_cut = 13, (0, 10, 20)  # row 13 is row 3 of the second file
    file_k, row_in_file = 1, 3
    col = {"null": "ids", "bad_image": "image", "jpeg_as_png": "image", "label": "label", "length": "ids",
           "schema": None, "channels": "image", "u64": "u64"}[case]

    def replace(name, value, typ=None):
        vals = t.column(name).to_pylist()
        vals[row] = value
        return t.set_column(t.schema.get_field_index(name), name, pa.array(vals, typ or t.schema.field(name).type))
    if case == "null":
        t = replace("ids", [1, None, 3])
    elif case == "bad_image":
        t = replace("image", png(np.zeros((4, 5, 3), np.uint8))[:40])  # truncated
    elif case == "jpeg_as_png":
        features["image"] = "image:png"
        t = replace("image", jpeg(np.zeros((4, 5, 3), np.uint8)))
    elif case == "label":
        t = replace("label", 5)
    elif case == "length":
        features["ids"] = "shape:3"
        t = t.set_column(t.schema.get_field_index("ids"), "ids",
                         pa.array([[1, 2, 3]] * 30, pa.list_(pa.int64())))
        t = replace("ids", [1, 2])
    elif case == "u64":
        t = replace("u64", 2**63)
    elif case == "channels":
        t = replace("image", png(np.zeros((4, 5, 4), np.uint8)))
    files = write_files(tmp_path, t, cuts=files_cut)
    if case == "schema":
        pq.write_table(t.slice(10, 10).drop_columns(["blob"]), files[1])
    out = tmp_path / "out" / "ds" / "1.0.0"
    with pytest.raises(ConversionError) as e:
        from_parquet(files, str(out), features=features, shards=2)
    msg = str(e.value)
    assert files[file_k] in msg, msg
    if col:
        assert f"row {row_in_file}," in msg and repr(col) in msg, msg
    parent = tmp_path / "out" / "ds"
    assert not out.exists() and (not parent.exists() or os.listdir(parent) == [])  # no shard, no temporary


def test_declaration_errors(tmp_path):
    files = write_files(tmp_path, table(n=5), cuts=(0,))
    for features, text in [({"nope": "image"}, "nope"), ({"i64": "image"}, "binary"),
                           ({"blob": "class_label:3"}, "integers"), ({"label": "class_label:x"}, "number"),
                           ({"vec": "shape:3"}, "variable-length"), ({"blob": "picture"}, "not one of")]:
        with pytest.raises(ConversionError, match=text):
            from_parquet(files, str(tmp_path / "o"), features=features)
    t = pa.table({"when": pa.array([1, 2], pa.timestamp("s"))})
    pq.write_table(t, str(tmp_path / "ts.parquet"))
    with pytest.raises(ConversionError, match="'when'.*timestamp"):
        from_parquet(str(tmp_path / "ts.parquet"), str(tmp_path / "o"))
    assert not (tmp_path / "o").exists()


def test_encode_examples_checks_its_columns():
    from grist._grist import encode_examples
    rows = np.array([0, 1, 3], np.int64)
    recs = encode_examples([("b", "int64", np.array([7, -1, 2**62], np.int64), rows),
                            ("a", "bytes", b"xyz", np.array([0, 2, 3], np.int64), np.array([0, 0, 1, 3], np.uint64)),
                            ("c", "float", np.array([0.5], np.float32), np.array([0, 0, 1], np.int64))], 2)
    assert [parse(r) for r in recs] == [{"a": [b"", b"x"], "b": [7], "c": []},
                                        {"a": [b"yz"], "b": [-1, 2**62], "c": [0.5]}]
    assert [list(parse_keys(r)) for r in recs] == [["a", "b", "c"]] * 2
    bad = [([("k", "int64", np.zeros(2, np.int64), np.array([0, 2, 1], np.int64))], "decrease"),
           ([("k", "int64", np.zeros(2, np.int64), np.array([0, 3, 3], np.int64))], "pass the end"),
           ([("k", "int64", np.zeros(2, np.int32), np.array([0, 1, 2], np.int64))], "8-byte"),
           ([("k", "bytes", b"ab", np.array([0, 1, 1], np.int64), np.array([0, 3], np.uint64))], "offsets"),
           ([("k\0x", "float", np.zeros(2, np.float32), np.array([0, 1, 2], np.int64))], "NUL"),
           ([("k", "text", np.zeros(2, np.float32), np.array([0, 1, 2], np.int64))], "kind"),
           ([("", "float", np.zeros(2, np.float32), np.array([0, 1, 2], np.int64))], "key")]
    for cols, text in bad:
        with pytest.raises(ValueError, match=text):
            encode_examples(cols, 2)


def test_struct_columns_become_nested_features(tmp_path):
    meta = pa.array([{"source": "s%d" % i, "year": 1990 + i, "inner": {"score": i / 4, "img": png(
        np.full((2, 3, 1), i, np.uint8))}} for i in range(9)],
        pa.struct([("source", pa.string()), ("year", pa.int32()),
                   ("inner", pa.struct([("score", pa.float32()), ("img", pa.binary())]))]))
    t = pa.table({"id": pa.array(range(9)), "meta": meta})
    files = write_files(tmp_path, t, cuts=(0, 4))
    out = str(tmp_path / "nest" / "1.0.0")
    from_parquet(files, out, features={"meta/inner/img": "image"})
    feats = json.load(open(os.path.join(out, "features.json")))["featuresDict"]["features"]
    inner = feats["meta"]["featuresDict"]["features"]["inner"]["featuresDict"]["features"]
    assert inner["img"]["image"]["shape"] == {"dimensions": ["2", "3", "1"]}
    assert sorted(parse(records(out)[5])) == ["id", "meta/inner/img", "meta/inner/score", "meta/source",
                                             "meta/year"]
    tfds = pytest.importorskip("tensorflow_datasets")
    src = tfds.builder_from_directory(out).as_data_source("train")
    got = src[7]
    assert got["id"] == 7 and got["meta"]["source"] == b"s7" and got["meta"]["year"] == 1997
    assert got["meta"]["inner"]["score"] == 1.75 and got["meta"]["inner"]["img"].tolist() == \
        np.full((2, 3, 1), 7, np.uint8).tolist()
    # A null struct is a null value of that column.
    vals = meta.to_pylist()
    vals[6] = None
    t = pa.table({"id": pa.array(range(9)), "meta": pa.array(vals, meta.type)})
    with pytest.raises(ConversionError, match=r"part-1.parquet: row 2, column 'meta'"):
        from_parquet(write_files(tmp_path, t, cuts=(0, 4)), str(tmp_path / "o2"))


def _records(out):
    """{file name or row index: the image bytes} of every record of a dataset folder."""
    got = {}
    for f in sorted(os.listdir(out)):
        if ".array_record" in f:
            src = grist.ArrayRecordDataSource([os.path.join(out, f)])
            for i in range(len(src)):
                feats = example_pb2().Example.FromString(src[i]).features.feature
                key = (feats["image/filename"].bytes_list.value[0].decode() if "image/filename" in feats
                       else feats["name"].bytes_list.value[0].decode())
                got[os.path.basename(key)] = feats["image"].bytes_list.value[0]
            src.close()
    return got


def test_max_side_shrinks_images_as_convert_does(tmp_path):
    """from_parquet(max_side=, jpeg_quality=) runs `grist convert --max-side`'s own code: the
    re-encoded images are byte for byte those of the imagefolder converter, the small ones
    are kept as read, and the result says how much smaller the images got."""
    yy, xx = np.mgrid[0:900, 0:1200]
    smooth = np.stack([(xx * 255 // 1199), (yy * 255 // 899), ((xx + yy) * 255 // 2098)], -1).astype(np.uint8)
    made = {"big.jpg": jpeg(smooth[:600, :1000]), "tall.png": png(smooth[:900, :301]),
            "small.jpg": jpeg(smooth[:375, :500]), "edge.png": png(smooth[:512, :512])}
    root = tmp_path / "root" / "train" / "a"
    os.makedirs(root)
    for name, data in made.items():
        (root / name).write_bytes(data)
    ref = tmp_path / "folder" / "1.0.0"
    grist.convert(str(tmp_path / "root"), str(ref), format="imagefolder", max_side=512, jpeg_quality=85)
    want = _records(str(ref))
    names = sorted(made)
    path = str(tmp_path / "images.parquet")
    pq.write_table(pa.table({"name": names, "image": pa.array([made[n] for n in names], pa.binary())}), path)
    out = str(tmp_path / "pq" / "1.0.0")
    res = from_parquet(path, out, features={"image": "image"}, max_side=512, jpeg_quality=85)
    got = _records(out)
    assert got == want
    assert got["small.jpg"] == made["small.jpg"] and got["edge.png"] == made["edge.png"]
    assert PIL.open(io.BytesIO(got["tall.png"])).size == (171, 512)
    assert res["images_resized"] == 2
    assert res["image_bytes_in"] == sum(map(len, made.values()))
    assert res["image_bytes_out"] == sum(map(len, got.values())) < res["image_bytes_in"]
    feats = json.load(open(os.path.join(out, "features.json")))["featuresDict"]["features"]
    assert feats["image"]["image"]["shape"]["dimensions"] == ["-1", "-1", "3"]
    assert "encodingFormat" not in feats["image"]["image"]  # PNG and JPEG mixed: told by the bytes
    src = grist.tfds.data_source(out, "train")
    assert {src[i]["image"].shape for i in range(len(src))} == {(512, 512, 3), (512, 171, 3), (307, 512, 3),
                                                                 (375, 500, 3)}
    with pytest.raises(ValueError, match="jpeg_quality only with max_side"):
        from_parquet(path, str(tmp_path / "x" / "1.0.0"), features={"image": "image"}, jpeg_quality=80)
    with pytest.raises(ValueError, match="there is none"):
        from_parquet(path, str(tmp_path / "y" / "1.0.0"), max_side=64)
    with pytest.raises(ValueError, match="max_side must be"):
        from_parquet(path, str(tmp_path / "z" / "1.0.0"), features={"image": "image"}, max_side=0)
    with pytest.raises(ConversionError, match="JPEG data where PNG was declared"):
        from_parquet(path, str(tmp_path / "w" / "1.0.0"), features={"image": "image:png"}, max_side=64)
