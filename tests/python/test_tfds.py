"""grist.tfds against TFDS: the datasets in tests/data/tfds were written by TFDS, and
expected/*.pkl.gz holds what tfds.data_source returns for them (tools/make_tfds_golden.py).
GRIST_TEST_TFDS=1 also compares with tfds.data_source live (needs TensorFlow, ~20 s)."""
import gzip
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest

from conftest import ROOT
from gristcli import varint  # protobuf's varint, tests/interop

grist = pytest.importorskip("grist")
tfds_mod = pytest.importorskip("grist.tfds")
from grist import _tfds_meta  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data", "tfds")
NAMES = ["grist_mnist", "grist_features"]


@pytest.fixture(scope="module", params=NAMES)
def name(request):
    return request.param


def expected(name):
    with gzip.open(os.path.join(DATA, "expected", name + ".pkl.gz")) as f:
        return pickle.load(f)


EXPECTED = {n: expected(n) for n in NAMES}


def assert_same(got, want, where=""):
    """Equal as TFDS gives it: keys and nesting, Python types, numpy dtypes, shapes, values."""
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{where}/{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), f"{where}: {len(got)} != {len(want)} items"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape, \
            f"{where}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
        np.testing.assert_array_equal(got, want, err_msg=where)
    elif isinstance(want, np.generic):
        assert got.dtype == want.dtype and got == want, f"{where}: {got!r} != {want!r}"
    elif isinstance(want, float) and want != want:
        assert got != got, where
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


# ---- metadata: names, splits ----

def test_split_instructions_match_tfds(name):
    """TFDS's own file instructions for every recorded split expression: same files, skips, takes."""
    vdir = _tfds_meta.find_version_dir(name, DATA)
    _, splits = _tfds_meta.read_dataset_info(vdir)
    for spec, want in EXPECTED[name]["instructions"].items():
        got = [(os.path.basename(p), s, t, n)
               for p, s, t, n in _tfds_meta.file_instructions(_tfds_meta.parse_split(spec, splits), splits)]
        assert got == [tuple(w) for w in want], spec
        assert len(grist.tfds.data_source(name, spec, data_dir=DATA)) == EXPECTED[name]["lengths"][spec], spec


def test_name_lookup(tmp_path, monkeypatch):
    vdir = os.path.join(DATA, "grist_mnist", "1.0.0")
    assert grist.tfds.data_source("grist_mnist", data_dir=DATA).version_dir == vdir
    assert grist.tfds.data_source("grist_mnist:1.0.0", data_dir=DATA).version_dir == vdir
    assert len(grist.tfds.data_source(vdir, "test")) == 103
    monkeypatch.setenv("TFDS_DATA_DIR", DATA)
    assert grist.tfds.data_source("grist_mnist").version_dir == vdir
    # The newest prepared version wins; an unprepared one is not a version.
    root = tmp_path / "grist_mnist"
    shutil.copytree(vdir, root / "1.0.0")
    shutil.copytree(vdir, root / "1.10.0")
    (root / "1.9.0").mkdir()
    assert grist.tfds.data_source("grist_mnist", data_dir=tmp_path).version_dir.endswith("1.10.0")
    with pytest.raises(FileNotFoundError, match="not prepared"):
        grist.tfds.data_source("grist_mnist:2.0.0", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="not prepared"):
        grist.tfds.data_source("nosuch", data_dir=tmp_path)
    for bad in ("train[", "train[:10%", "nosplit", "train[1:2:3]", "train[5%]", "all[:5]", "train[:400]"):
        with pytest.raises(ValueError):
            grist.tfds.data_source("grist_mnist", bad, data_dir=DATA)


# ---- every record against TFDS's decode ----

def test_every_record_equals_tfds(name):
    for split, records in EXPECTED[name]["splits"].items():
        src = grist.tfds.data_source(name, split, data_dir=DATA)
        assert len(src) == len(records)
        for i, want in enumerate(records):
            assert_same(src[i], want, f"{name} {split}[{i}]")
        got = src.__getitems__(range(len(src)))
        for i, want in enumerate(records):
            assert_same(got[i], want, f"{name} {split} getitems[{i}]")


def test_jpeg_tolerance_is_measured():
    """JPEG is compared exactly above: the tolerance PIL and OpenCV show on these files is 0."""
    assert EXPECTED["grist_features"]["jpeg_pil_vs_cv2"] == {"jpeg": 0, "jpeg_gray": 0, "jpeg_var": 0}


def test_getitems_order_negative_and_bounds():
    src = grist.tfds.data_source("grist_mnist", "train", data_dir=DATA)
    want = EXPECTED["grist_mnist"]["splits"]["train"]
    idx = [304, 0, 151, 3, 3, -1]
    for i, got in zip(idx, src.__getitems__(idx)):
        assert_same(got, want[i])
    assert_same(src[-305], want[0])
    for bad in (305, -306):
        with pytest.raises(IndexError):
            src[bad]
    assert src.__getitems__([]) == []


def test_sliced_split_records():
    """Slices and unions pick TFDS's records: compared with the whole splits' decodes."""
    full = {s: EXPECTED["grist_mnist"]["splits"][s] for s in ("train", "test")}
    for spec in ("train[:10%]", "train[100:200]", "train[-7%:-2%]", "train[:1%]+test[50%:]", "test[99:]"):
        want = []
        for part, frm, to in _tfds_meta.parse_split(spec, _tfds_meta.read_dataset_info(
                os.path.join(DATA, "grist_mnist", "1.0.0"))[1]):
            want.extend(full[part][frm:to])
        src = grist.tfds.data_source("grist_mnist", spec, data_dir=DATA)
        assert len(src) == len(want)
        for i, w in enumerate(want):
            assert_same(src[i], w, f"{spec}[{i}]")
    assert_same(grist.tfds.data_source("grist_mnist", "train[:10%]", data_dir=DATA)[29],
                EXPECTED["grist_mnist"]["splits"]["train[:10%]"][29])


def test_threads_do_not_change_records():
    want = EXPECTED["grist_features"]["splits"]["train"]
    for threads in (0, 1, 3):
        src = grist.tfds.data_source("grist_features", "train", data_dir=DATA, threads=threads)
        for i, got in enumerate(src.__getitems__(range(len(src)))):
            assert_same(got, want[i])


def test_random_access_in_groups_of_rows(name):
    """A request whose rows' bound exceeds the group bound is decoded group by group and
    the groups' arrays joined: here many groups of two records (a private bound of 2.5 rows),
    every array the same bytes as the default's (one group for MNIST; one record a group for
    grist_features, whose images of unknown size bound a row above 256 MiB), and every
    record as TFDS decodes it. The rows' memory is reserved, not touched."""
    src = grist.tfds.data_source(name, "train", data_dir=DATA, threads=0)
    want = EXPECTED[name]["splits"]["train"]
    every = list(range(len(src)))
    ref = src._decoder().fetch(every)
    bound = max(src._decoder().row_bound(fi["max_record_bytes"]) for fi in grist.Reader(src.files).info())
    for threads in (0, 2):
        grouped = grist._grist.Features(src._columns, src.files, threads, _group_bytes=bound * 5 // 2)
        assert grouped.fetch(every) == ref
        src._features = grouped
        for i, got in enumerate(src.__getitems__(every)):
            assert_same(got, want[i], f"{name}[{i}]")
    with pytest.raises(ValueError, match="_group_bytes"):
        grist._grist.Features(src._columns, src.files, 0, _group_bytes=0)


def test_pickle_and_threads():
    src = grist.tfds.data_source("grist_features", "train+test[:3]", data_dir=DATA)
    copy = pickle.loads(pickle.dumps(src))
    want = EXPECTED["grist_features"]["splits"]["train+test[:3]"]
    assert len(copy) == len(want)
    errors = []

    def work(k):
        try:
            for i in range(k, len(want), 4):
                assert_same(copy[i], want[i])
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


def test_under_grain():
    grain = pytest.importorskip("grain")
    src = grist.tfds.data_source("grist_mnist", "train", data_dir=DATA)
    want = EXPECTED["grist_mnist"]["splits"]["train"]

    def pipeline(source):
        return grain.MapDataset.source(source).seed(42).shuffle().map(
            lambda r: {"image": r["image"].astype(np.float32) / 255.0, "label": r["label"]}).batch(32)

    got, ref = list(pipeline(src)), list(pipeline(want))
    assert len(got) == len(ref) == 10
    for g, r in zip(got, ref):
        assert_same(g, r)


# ---- dict batches from the Loader ----

def take(loader):
    """Every batch, copied out of its slot (a batch's arrays keep the slot lent)."""
    def copy(x):
        return {k: copy(v) for k, v in x.items()} if isinstance(x, dict) else np.array(x)
    return [copy(d) for d in loader]


def indices(loader):
    return [b.indices.tolist() for b in loader]


def test_loader_dicts_match_bytes_loader():
    src = grist.tfds.data_source("grist_mnist", "train", data_dir=DATA)
    want = EXPECTED["grist_mnist"]["splits"]["train"]
    for opts in (dict(seed=42), dict(seed=3, epochs=2, drop_remainder=True), dict(shuffle=False),
                 dict(seed=5, shard_index=1, shard_count=3), dict(seed=9, granularity="chunk")):
        opts.setdefault("epochs", 1)
        dicts = take(grist.Loader(src, 32, **opts))
        ref = indices(grist.Loader(src.files, 32, **opts))
        assert len(dicts) == len(ref) > 0
        for d, idx in zip(dicts, ref):
            assert set(d) == {"image", "label"}
            assert d["image"].dtype == np.uint8 and d["image"].shape == (len(idx), 28, 28, 1)
            assert d["label"].dtype == np.int64 and d["label"].shape == (len(idx),)
            np.testing.assert_array_equal(d["image"], np.stack([want[i]["image"] for i in idx]))
            np.testing.assert_array_equal(d["label"], [want[i]["label"] for i in idx])


def test_assembly_bytes_holds_with_a_map():
    """assembly_bytes= (libgrist's option) is kept as set, even with the features' map, whose
    default sizing keeps at least prefetch + 2 x threads slots: below one batch, one slot
    decodes while the caller holds another (stats' slot_maps; fixed rows, so no slot grows),
    where the default mapped one for about every batch at 4 threads. Same batches either way."""
    src = grist.tfds.data_source("grist_mnist", "train", data_dir=DATA)
    kw = dict(seed=1, epochs=2, threads=4)
    want = take(grist.Loader(src, 16, **kw))
    with grist.Loader(src, 16, assembly_bytes=1, **kw) as loader:
        got = take(loader)
        maps = loader.stats()["slot_maps"]
    assert len(got) == len(want) == 39 and 1 <= maps <= 3, maps
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a["image"], b["image"])
        np.testing.assert_array_equal(a["label"], b["label"])
    with pytest.raises(ValueError, match="assembly_bytes"):
        grist.Loader(src, 16, assembly_bytes=0)


def test_loader_whole_split_union_and_checkpoint():
    src = grist.tfds.data_source("grist_mnist", "train+test", data_dir=DATA)
    full = take(grist.Loader(src, 50, seed=1, epochs=1))
    assert sum(len(d["label"]) for d in full) == 408
    loader = grist.Loader(src, 50, seed=1, epochs=1)
    head = take(next(loader) for _ in range(3))
    state = loader.get_state()
    rest = take(grist.Loader(src, 50, seed=1, epochs=1, state=state))
    for a, b in zip(head + rest, full):
        np.testing.assert_array_equal(a["image"], b["image"])
        np.testing.assert_array_equal(a["label"], b["label"])
    with pytest.raises(ValueError, match="slices a split"):
        grist.Loader(grist.tfds.data_source("grist_mnist", "train[:10%]", data_dir=DATA), 8)


def test_loader_columns_dlpack_and_lifetime():
    jax = pytest.importorskip("jax")
    src = grist.tfds.data_source("grist_mnist", "test", data_dir=DATA)
    loader = grist.Loader(src, 16, seed=0, epochs=1, prefetch=2)
    d = next(loader)
    for k, col in d.items():
        assert np.array_equal(np.from_dlpack(col), col), k
        assert np.array_equal(np.asarray(jax.device_put(col)), col), k
    keep = d["image"].copy()
    del d
    for _ in range(4):  # more than prefetch: the first batch's slot came back
        next(loader)
    assert keep.shape == (16, 28, 28, 1)


def test_loader_varying_shapes_need_pad():
    src = grist.tfds.data_source("grist_features", "train", data_dir=DATA)
    with pytest.raises(ValueError, match="caption"):
        grist.Loader(src, 8)
    pad = {"png_gray_var": (19, 23, 1), "jpeg_var": (29, 29, 3), "ids": (5,), "points": (3, 2),
           "uid": (16,), "caption": (32,), "meta/source": (8,), "tokens": (6,)}
    skip = ["names", "pair", "words"]
    with pytest.raises(ValueError, match="'names'.*skip"):
        grist.Loader(src, 8, pad=pad)
    with pytest.raises(ValueError, match="ids"):
        grist.Loader(src, 8, pad={k: v for k, v in pad.items() if k != "ids"}, skip=skip)
    want = EXPECTED["grist_features"]["splits"]["train"]
    ref = indices(grist.Loader(src.files, 8, seed=4, epochs=1))
    got = take(grist.Loader(src, 8, seed=4, epochs=1, pad=pad, skip=skip))
    assert len(got) == len(ref)
    for d, idx in zip(got, ref):
        for j, i in enumerate(idx):
            w = want[i]
            np.testing.assert_array_equal(d["png"][j], w["png"])
            np.testing.assert_array_equal(d["mat"][j], w["mat"])
            assert d["label"][j] == w["label"] and d["flag"][j] == w["flag"]
            assert d["meta"]["year"][j] == w["meta"]["year"]
            assert d["meta"]["inner"]["score"][j] == np.float32(w["meta"]["inner"]["score"])
            h, wd, _ = d["jpeg_var_shape"][j]
            np.testing.assert_array_equal(d["jpeg_var"][j][:h, :wd], w["jpeg_var"])
            n = d["caption_shape"][j][0]
            assert d["caption"][j][:n].tobytes() == w["caption"]
            n = d["tokens_shape"][j][0]
            assert d["tokens"][j][:n].tolist() == [int(t) for t in w["tokens"]]
            n = d["ids_shape"][j][0]
            np.testing.assert_array_equal(d["ids"][j][:n], w["ids"])
            assert not d["ids"][j][n:].any()
            np.testing.assert_array_equal(d["depth"][j], w["depth"])
            assert "names" not in d


RAGGED = ["ids", "points", "uid", "caption", "meta/source", "tokens"]


def test_loader_ragged_matches_tfds():
    """ragged=[keys]: (values, row_lengths) per key, every record of the split as TFDS
    decodes it, in the bytes loader's order; the fixed and padded columns beside them too."""
    src = grist.tfds.data_source("grist_features", "train", data_dir=DATA)
    want = EXPECTED["grist_features"]["splits"]["train"]
    pad = {"png_gray_var": (19, 23, 1), "jpeg_var": (29, 29, 3)}
    skip = ["names", "pair", "words"]
    for opts in (dict(seed=4), dict(seed=7, drop_remainder=True, shard_index=1, shard_count=2)):
        ref = indices(grist.Loader(src.files, 5, epochs=1, **opts))
        got = list(grist.Loader(src, 5, epochs=1, pad=pad, skip=skip, ragged=RAGGED, **opts))
        assert len(got) == len(ref) and sum(map(len, ref)) > 0
        for d, idx in zip(got, ref):
            n = len(idx)
            for key in RAGGED:
                values, lengths = d["meta"]["source"] if key == "meta/source" else d[key]
                assert lengths.dtype == np.int64 and lengths.shape == (n,)
                assert values.shape[0] == lengths.sum()
                ends = np.cumsum(lengths)
                for j, i in enumerate(idx):
                    w = want[i]["meta"]["source"] if key == "meta/source" else want[i][key]
                    v = values[ends[j] - lengths[j]:ends[j]]
                    if isinstance(w, bytes):
                        assert values.dtype == np.uint8 and v.tobytes() == w, (key, i)
                    elif isinstance(w, list):  # a Sequence: TFDS's list of scalars
                        assert v.tolist() == [x.item() if isinstance(x, np.generic) else x for x in w], (key, i)
                    else:
                        assert v.dtype == w.dtype and v.shape == w.shape, (key, i)
                        np.testing.assert_array_equal(v, w)
            for j, i in enumerate(idx):
                np.testing.assert_array_equal(d["png"][j], want[i]["png"])
                assert d["label"][j] == want[i]["label"]
                h, wd, _ = d["jpeg_var_shape"][j]
                np.testing.assert_array_equal(d["jpeg_var"][j][:h, :wd], want[i]["jpeg_var"])


def test_loader_ragged_errors():
    src = grist.tfds.data_source("grist_features", "train", data_dir=DATA)
    skip = ["names", "pair", "words", "png_gray_var", "jpeg_var"]
    other = [k for k in RAGGED if k != "ids"]
    with pytest.raises(ValueError, match="'ids'.*ragged="):  # the hint names ragged=
        grist.Loader(src, 8, skip=skip, ragged=other)
    with pytest.raises(ValueError, match="'jpeg_var'.*cannot be ragged"):
        grist.Loader(src, 8, skip=skip[:3], ragged=RAGGED + ["jpeg_var"])
    with pytest.raises(ValueError, match="'mat'.*fixed shape"):
        grist.Loader(src, 8, skip=skip, ragged=RAGGED + ["mat"])
    with pytest.raises(ValueError, match="named twice"):
        grist.Loader(src, 8, skip=skip + ["ids"], ragged=RAGGED)
    with pytest.raises(ValueError, match="no feature"):
        grist.Loader(src, 8, skip=skip, ragged=RAGGED + ["nope"])
    with pytest.raises(ValueError, match="map_out_max"):
        grist.Loader(src.files, 8, map_out_max=64)
    # a row past map_out_max: an error naming the feature, never a cut row
    for room in (64, 1600):  # less than the fixed part; less than some record's values
        with pytest.raises(grist.Error, match="record .*map_out_max"):
            list(grist.Loader(src, 8, epochs=1, skip=skip, ragged=RAGGED, map_out_max=room))


# ---- batch_map ----

def normalize(b):
    return {"image": b["image"].astype(np.float32) / 255.0, "label": b["label"]}


def test_batch_map_order_threads_and_state():
    src = grist.tfds.data_source("grist_mnist", "train", data_dir=DATA)
    plain = take(grist.Loader(src, 16, seed=42, epochs=2, drop_remainder=True))
    threads = set()

    def fn(b):
        threads.add(threading.get_ident())
        return normalize(b)
    loader = grist.Loader(src, 16, seed=42, epochs=2, drop_remainder=True, batch_map=fn, map_threads=3)
    got = []
    for k, out in enumerate(loader):
        got.append(out)
        if k == 6:
            state = loader.get_state()
    assert len(got) == len(plain) == 2 * (305 // 16)
    for g, p in zip(got, plain):
        np.testing.assert_array_equal(g["image"], p["image"].astype(np.float32) / 255.0)
        np.testing.assert_array_equal(g["label"], p["label"])
    assert threading.get_ident() not in threads and threads
    # The checkpoint counts results received, not batches read ahead.
    rest = list(grist.Loader(src, 16, seed=42, epochs=2, drop_remainder=True, state=state, batch_map=normalize))
    assert len(rest) == len(got) - 7
    for g, r in zip(got[7:], rest):
        np.testing.assert_array_equal(g["label"], r["label"])


def test_batch_map_bytes_and_errors(files):
    ref = [b.records() for b in grist.Loader(files, 64, seed=1, epochs=1)]
    got = list(grist.Loader(files, 64, seed=1, epochs=1, batch_map=lambda b: b.records(), map_threads=2))
    assert got == ref

    def boom(b):
        if b.sequence == 3:
            raise RuntimeError("boom at 3")
        return b.sequence
    loader = grist.Loader(files, 64, seed=1, epochs=1, batch_map=boom)
    assert [next(loader) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(RuntimeError, match="boom at 3"):
        next(loader)
    loader.close()
    with pytest.raises(ValueError, match="map_threads"):
        grist.Loader(files, 64, map_threads=2)


# ---- bad data ----

def _ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def example(features):
    """A serialized tf.train.Example from {key: ('int64'|'float'|'bytes', [values])}."""
    body = b""
    for key, (kind, values) in features.items():
        if kind == "bytes":
            lst = b"".join(_ld(1, v) for v in values)
            feat = _ld(1, lst)
        elif kind == "float":
            feat = _ld(2, _ld(1, struct.pack(f"<{len(values)}f", *values)))
        else:
            feat = _ld(3, _ld(1, b"".join(varint(v & (2**64 - 1)) for v in values)))
        body += _ld(1, _ld(1, key.encode()) + _ld(2, feat))
    return _ld(1, body)


@pytest.fixture
def mnist_copy(tmp_path):
    dst = tmp_path / "grist_mnist" / "1.0.0"
    shutil.copytree(os.path.join(DATA, "grist_mnist", "1.0.0"), dst)
    return dst


def rewrite_shard(path, edit):
    """Rewrite one shard (group_size:1,zstd:3, as TFDS writes) with edit(records)."""
    r = grist.Reader(str(path))
    records = edit([r[i] for i in range(len(r))])
    r.close()
    os.unlink(path)
    with grist.Writer(str(path), "group_size:1,zstd:3") as w:
        for rec in records:
            w.write(rec)


def test_handmade_example_matches_tfds_record():
    """The test's own Example writer gives records the decoder reads like TFDS's."""
    src = grist.tfds.data_source("grist_mnist", "train", data_dir=DATA)
    rec = grist.Reader(src.files)[0]
    want = src[0]
    import io  # noqa: F401
    png = rec[rec.index(b"\x89PNG"):]
    png = png[:png.index(b"IEND") + 8]
    got = src._decoder().decode([example({"image": ("bytes", [png]), "label": ("int64", [want["label"]])})])
    assert bytes(got[1][0]) == struct.pack("<q", want["label"])
    assert bytes(got[0][0]) == want["image"].tobytes()


def test_bad_records_name_file_record_feature(mnist_copy):
    shard = mnist_copy / "grist_mnist-test.array_record-00001-of-00002"
    good = grist.Reader(str(shard))[0]
    png = good[good.index(b"\x89PNG"):]
    png = png[:png.index(b"IEND") + 8]
    bad = {
        3: example({"image": ("bytes", [png])}),                                   # no label
        5: example({"image": ("bytes", [png[:40]]), "label": ("int64", [1])}),     # truncated PNG
        7: example({"image": ("bytes", [png]), "label": ("float", [1.0])}),        # wrong list kind
        9: b"\x0a\xff\xff\xff\x0f garbage",                                        # not an Example
    }
    rewrite_shard(shard, lambda recs: [bad.get(i, r) for i, r in enumerate(recs)])
    src = grist.tfds.data_source(str(mnist_copy), "test")
    first = 52  # the shard's records start after the first shard's 52
    for i, what in ((3, "label"), (5, "image"), (7, "label"), (9, "")):
        with pytest.raises(grist.Error) as e:
            src[first + i]
        msg = str(e.value)
        assert "grist_mnist-test.array_record-00001-of-00002" in msg and f"record {i}" in msg, msg
        assert what in msg, msg
    assert_same(src[first + 4], EXPECTED["grist_mnist"]["splits"]["test"][first + 4])
    # The Loader stops with the same error instead of a zero-filled row.
    with pytest.raises(grist.Error, match="record"):
        list(grist.Loader(src, 16, epochs=1))


def _damaged_images(jpeg, png):
    """Each kind of damage to a JPEG and a PNG: cut in the header, cut in the data, a
    reserved marker / unknown critical chunk, bad Huffman / deflate data, empty."""
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    sos = jpeg.index(b"\xff\xda")
    scan = sos + 2 + int.from_bytes(jpeg[sos + 2:sos + 4], "big")
    idat = png.index(b"IDAT") - 4
    n = int.from_bytes(png[idat:idat + 4], "big")
    body = png[idat + 8:idat + 8 + n]
    return [
        ("jpeg cut in its header", jpeg[:jpeg.index(b"\xff\xc4") + 7]),
        ("jpeg cut in its data", jpeg[:len(jpeg) * 2 // 3]),
        ("jpeg with a reserved marker", jpeg[:3] + b"\x02" + jpeg[4:]),
        ("jpeg with bad Huffman data", jpeg[:scan] + b"\xff\x00" * 24 + jpeg[scan + 48:]),
        ("png cut in its header", png[:20]),
        ("png cut in its data", png[:len(png) * 2 // 3]),
        ("png with an unknown critical chunk", png[:33] + chunk(b"ABCD", b"") + png[33:]),
        ("png with bad deflate data", png[:idat] + chunk(b"IDAT", body[:2] + b"\xff" + body[3:]) + png[idat + 12 + n:]),
        ("empty", b""),
    ]


def test_good_images_after_bad_ones_on_one_thread(mnist_copy):
    """Issue 35: one bad JPEG poisoned its thread's TurboJPEG handle, so every later JPEG
    on that thread failed too. On a source with one decode thread, each damaged image
    fails naming its record, and the good JPEGs and PNGs around it decode as before."""
    from PIL import Image
    import io

    shard = mnist_copy / "grist_mnist-test.array_record-00001-of-00002"
    first = 52  # the shard's records start after the first shard's 52
    want = EXPECTED["grist_mnist"]["splits"]["test"]
    buf = io.BytesIO()
    Image.fromarray(want[first]["image"][:, :, 0]).save(buf, "JPEG", quality=90)
    jpeg = buf.getvalue()
    good = grist.Reader(str(shard))[0]
    png = good[good.index(b"\x89PNG"):]
    png = png[:png.index(b"IEND") + 8]
    bad = _damaged_images(jpeg, png)

    def edit(recs):
        out = list(recs)
        out[0] = example({"image": ("bytes", [jpeg]), "label": ("int64", [want[first]["label"]])})
        for i, (_, img) in enumerate(bad):
            out[2 + i] = example({"image": ("bytes", [img]), "label": ("int64", [1])})
        return out
    rewrite_shard(shard, edit)
    src = grist.tfds.data_source(str(mnist_copy), "test", threads=1)
    jpeg_pixels = src[first]["image"]
    np.testing.assert_array_equal(jpeg_pixels, np.asarray(Image.open(io.BytesIO(jpeg)))[:, :, None])
    png_row = first + 1
    assert_same(src[png_row], want[png_row])
    for i, (what, _) in enumerate(bad):
        with pytest.raises(grist.Error, match=f"record {2 + i}\\b"):
            src[first + 2 + i]
        for _ in range(2):  # one at a time, then together on the decode thread beside the caller
            np.testing.assert_array_equal(src[first]["image"], jpeg_pixels, err_msg=f"the JPEG after {what}")
            assert_same(src[png_row], want[png_row], f"the PNG after {what}")
        got = src.__getitems__([first, png_row] * 4)
        for k in range(0, 8, 2):
            np.testing.assert_array_equal(got[k]["image"], jpeg_pixels, err_msg=f"the JPEGs after {what}")
            assert_same(got[k + 1], want[png_row], f"the PNGs after {what}")


def test_wrong_features_json(mnist_copy):
    path = mnist_copy / "features.json"
    text = path.read_text()
    path.write_text(text.replace("class_label_feature.ClassLabel", "video_feature.Video"))
    with pytest.raises(ValueError, match="'label'.*Video"):
        grist.tfds.data_source(str(mnist_copy))
    path.write_text(text.replace('"28",\n                            "28"', '"32",\n                            "28"'))
    src = grist.tfds.data_source(str(mnist_copy))
    with pytest.raises(grist.Error, match="image"):
        src[0]
    path.write_text("{not json")
    with pytest.raises(ValueError, match="features.json"):
        grist.tfds.data_source(str(mnist_copy))


def test_truncated_or_missing_shard(mnist_copy):
    shard = mnist_copy / "grist_mnist-train.array_record-00001-of-00002"
    data = shard.read_bytes()
    shard.write_bytes(data[:len(data) // 2])
    with pytest.raises(grist.Error):
        grist.tfds.data_source(str(mnist_copy), "train")
    assert len(grist.tfds.data_source(str(mnist_copy), "test")) == 103
    shard.unlink()
    with pytest.raises(FileNotFoundError, match="00001-of-00002"):
        grist.tfds.data_source(str(mnist_copy), "train")
    info = mnist_copy / "dataset_info.json"
    info.write_text(info.read_text().replace('"51"', '"50"'))
    with pytest.raises(grist.Error, match="dataset_info.json says"):
        grist.tfds.data_source(str(mnist_copy), "test")


# ---- live: tfds.data_source itself ----

@pytest.mark.skipif(os.environ.get("GRIST_TEST_TFDS") != "1", reason="GRIST_TEST_TFDS=1 runs TFDS itself")
def test_live_against_tfds_data_source():
    tfds = pytest.importorskip("tensorflow_datasets")
    for name in NAMES:
        for split in ("train", "test[:10%]", "train[7:19]+test[-5%:]"):
            ref = tfds.data_source(name, split=split, data_dir=DATA)
            src = grist.tfds.data_source(name, split, data_dir=DATA)
            assert len(src) == len(ref)
            for i in range(len(ref)):
                assert_same(src[i], ref[i], f"{name} {split}[{i}]")


def test_example_trains():
    pytest.importorskip("jax")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "tfds_jax.py"), "--name", "grist_mnist",
                        "--data-dir", DATA, "--steps", "60", "--batch-size", "32"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["steps"] == 60 and out["last_loss"] < 0.7 * out["first_loss"]


def test_getitems_releases_the_gil():
    """Reading and decoding run without the GIL (test_gil.py's probe)."""
    from test_gil import runs_during
    src = grist.tfds.data_source("grist_features", "train", data_dir=DATA, threads=0)
    assert runs_during(lambda: src.__getitems__(range(60)))


def test_loader_mixes_tfds_sources(mnist_copy):
    train = grist.tfds.data_source("grist_mnist", "train", data_dir=DATA)
    test = grist.tfds.data_source("grist_mnist", "test", data_dir=DATA)
    want = [EXPECTED["grist_mnist"]["splits"]["train"], EXPECTED["grist_mnist"]["splits"]["test"]]
    opts = dict(seed=2, epochs=1, weights=[3, 1])
    got = take(grist.Loader([train, test], 40, **opts))
    ref = [(b.datasets.tolist(), b.indices.tolist()) for b in grist.Loader([train.files, test.files], 40, **opts)]
    assert len(got) == len(ref) > 0
    for d, (ds, idx) in zip(got, ref):
        assert set(ds) == {0, 1}
        np.testing.assert_array_equal(d["label"], [want[k][i]["label"] for k, i in zip(ds, idx)])
        np.testing.assert_array_equal(d["image"], np.stack([want[k][i]["image"] for k, i in zip(ds, idx)]))
    path = mnist_copy / "features.json"
    path.write_text(path.read_text().replace('"28",\n                            "28"', '"32",\n                            "28"'))
    other = grist.tfds.data_source(str(mnist_copy), "train")
    with pytest.raises(ValueError, match="same features"):
        grist.Loader([train, other], 8, weights=[1, 1])
