"""What a prepared TFDS dataset says about itself: where it is, its splits, its features.

Pure Python over dataset_info.json and features.json (no TensorFlow, no TFDS): finding a
dataset by name as TFDS does, TFDS's split expressions with its rounding, and the feature
tree that grist.tfds decodes in C and hands back as TFDS's own dicts.

A data_dir (or a version folder) may be an s3://, gs:// or http(s):// URL: the C library
lists it (ListObjectsV2) and reads the two JSON files (grist_remote_get()) with the same
credentials, retries and errors as the shards; http has no listing, so there the version
must be named (the shards' names come from dataset_info.json either way).
"""

import errno
import json
import os
import re

import numpy as np

from . import _grist

_URL_PREFIXES = ("s3://", "gs://", "http://", "https://")
# A metadata file fetched from a URL is at most this large (dataset_info.json lists every
# shard's length: a few MB for the largest TFDS datasets).
METADATA_MAX_BYTES = 64 << 20
# TFDS's default filepathTemplate (core/naming.py): the names grist writes and reads by default.
DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"


def is_url(path):
    return isinstance(path, str) and path.lower().startswith(_URL_PREFIXES)


def join(base, *parts):
    """os.path.join for a folder or a URL prefix (whose separator is always '/')."""
    if is_url(base):
        return "/".join([base.rstrip("/")] + [p.strip("/") for p in parts])
    return os.path.join(base, *parts)


def _remote_error(e, what=""):
    """grist.Error from the C library (its message names the URL, HTTP status and service
    code) -> the same errno with grist.tfds's context; a missing object is FileNotFoundError."""
    msg = f"grist.tfds: {what}{e.strerror}"
    if e.errno == errno.ENOENT:
        return FileNotFoundError(errno.ENOENT, msg)
    return _grist.Error(e.errno, msg)

# ---- finding the version folder ----

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def _default_data_dir():
    return os.environ.get("TFDS_DATA_DIR") or os.path.join(os.path.expanduser("~"), "tensorflow_datasets")


def _is_version_dir(path):
    return os.path.isfile(os.path.join(path, "dataset_info.json")) and \
        os.path.isfile(os.path.join(path, "features.json"))


def find_version_dir(name, data_dir=None):
    """The folder of a prepared dataset: @name is a version folder's path, or a TFDS name
    ("mnist", "mnist:3.0.1", "ds/config", "ds/config:1.2.0") looked up in data_dir, else
    $TFDS_DATA_DIR, else ~/tensorflow_datasets; without a version, the newest prepared one."""
    name = os.fspath(name)
    if is_url(name):  # a version folder's URL: its metadata is read (and checked) next
        return name.rstrip("/")
    if os.path.isdir(name) and _is_version_dir(name):
        return os.path.abspath(name)
    if os.sep in name and os.path.exists(name):
        raise ValueError(f"grist.tfds: {name!r} is not a prepared dataset's version folder "
                         "(it needs dataset_info.json and features.json)")
    base = os.fspath(data_dir) if data_dir is not None else _default_data_dir()
    ds, _, version = name.partition(":")
    if not ds or not re.fullmatch(r"[\w\-]+(/[\w\-.]+)?", ds):
        raise ValueError(f"grist.tfds: {name!r} is neither a dataset name ('mnist', 'mnist:3.0.1') "
                         "nor a version folder")
    if is_url(base):
        return _find_remote_version(name, base.rstrip("/"), ds, version)
    root = os.path.join(base, *ds.split("/"))
    if version:
        if not _VERSION_RE.match(version):
            raise ValueError(f"grist.tfds: bad version {version!r} in {name!r} (want X.Y.Z)")
        path = os.path.join(root, version)
        if not _is_version_dir(path):
            raise FileNotFoundError(f"grist.tfds: dataset {name!r} is not prepared in {base} "
                                    f"(no {path}/dataset_info.json)")
        return path
    versions = []
    if os.path.isdir(root):
        for v in os.listdir(root):
            m = _VERSION_RE.match(v)
            if m and _is_version_dir(os.path.join(root, v)):
                versions.append((tuple(int(x) for x in m.groups()), v))
    if not versions:
        raise FileNotFoundError(f"grist.tfds: dataset {name!r} is not prepared in {base} "
                                f"(no version folder under {root})")
    return os.path.join(root, max(versions)[1])


def _find_remote_version(name, base, ds, version):
    """find_version_dir() under a URL: one listing of the dataset's folder on s3:// and gs://
    (which tells a missing dataset, a missing version and a version without its metadata
    apart); on http(s), which cannot list, the named version's URL."""
    root = join(base, *ds.split("/"))
    if version and not _VERSION_RE.match(version):
        raise ValueError(f"grist.tfds: bad version {version!r} in {name!r} (want X.Y.Z)")
    if not base.lower().startswith(("s3://", "gs://")):
        if not version:
            raise ValueError(f"grist.tfds: {base} is an http(s) URL, which has no listing to find the "
                             f"newest version of {ds!r} in: name it ('{ds}:1.0.0') or give the version "
                             "folder's URL")
        return join(root, version)
    if set("*?[\\").intersection(root):
        raise ValueError(f"grist.tfds: {root}: a data_dir URL with * ? [ or \\ cannot be listed")
    try:
        urls = _grist.remote_glob(root + "/*/*")
    except _grist.Error as e:
        raise _remote_error(e, f"listing {root}/: ") from None
    found = {}  # version -> names of the files directly in its folder
    for u in urls:
        v, _, f = u[len(root) + 1:].partition("/")
        if _VERSION_RE.match(v):
            found.setdefault(v, set()).add(f)
    complete = sorted((tuple(int(x) for x in v.split(".")), v) for v, files in found.items()
                      if {"dataset_info.json", "features.json"} <= files)
    if version:
        if version not in found:
            raise FileNotFoundError(errno.ENOENT, f"grist.tfds: dataset {name!r} is not prepared in {base} "
                                    f"(nothing under {root}/{version}/; versions there: "
                                    f"{sorted(found) or 'none'})")
        missing = sorted({"dataset_info.json", "features.json"} - found[version])
        if missing:
            raise FileNotFoundError(errno.ENOENT, f"grist.tfds: {root}/{version}/ has no "
                                    f"{' or '.join(missing)}: not a prepared dataset's version folder")
        return join(root, version)
    if not complete:
        raise FileNotFoundError(errno.ENOENT, f"grist.tfds: dataset {name!r} is not prepared in {base} "
                                f"(no version folder with dataset_info.json and features.json under {root}/)")
    return join(root, complete[-1][1])


# ---- dataset_info.json: splits and their shards ----

class SplitInfo:
    __slots__ = ("name", "files", "shard_lengths")

    def __init__(self, name, files, shard_lengths):
        self.name, self.files, self.shard_lengths = name, files, shard_lengths

    @property
    def num_examples(self):
        return sum(self.shard_lengths)


def _shard_name(template, dataset, split, file_format, i, n):
    # TFDS's template keys (core/naming.py); SHARD_X_OF_Y is 5 digits each.
    return (template.replace("{DATASET}", dataset).replace("{SPLIT}", split)
            .replace("{FILEFORMAT}", file_format)
            .replace("{SHARD_X_OF_Y}", f"{i:05d}-of-{n:05d}")
            .replace("{SHARD_INDEX}", f"{i:05d}").replace("{NUM_SHARDS}", f"{n:05d}"))


def _read_json(path):
    if is_url(path):
        try:
            data = _grist.remote_get(path, METADATA_MAX_BYTES)
        except _grist.Error as e:
            raise _remote_error(e, "the dataset's metadata: ") from None
        try:
            return json.loads(data)
        except ValueError as e:
            raise ValueError(f"grist.tfds: cannot read {path}: {e}") from None
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"grist.tfds: cannot read {path}: {e}") from None


def read_dataset_info(vdir):
    """(name, {split name: SplitInfo}) from vdir/dataset_info.json; the splits in file order."""
    path = join(vdir, "dataset_info.json")
    info = _read_json(path)
    if not isinstance(info, dict):
        raise ValueError(f"grist.tfds: {path}: not a JSON object")
    fmt = info.get("fileFormat", "tfrecord")
    if fmt != "array_record":
        raise ValueError(f"grist.tfds: {path}: fileFormat is {fmt!r}; grist reads 'array_record' datasets "
                         "(prepare it with file_format='array_record')")
    dataset = info.get("name")
    splits = {}
    for s in info.get("splits") or []:
        try:
            name = s["name"]
            lengths = [int(x) for x in s.get("shardLengths", [])]
            template = s.get("filepathTemplate", DEFAULT_TEMPLATE)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"grist.tfds: {path}: bad split entry {s!r}: {e}") from None
        if any(n < 0 for n in lengths):
            raise ValueError(f"grist.tfds: {path}: split {name!r} has a negative shard length")
        n = len(lengths)
        files = [join(vdir, _shard_name(template, dataset, name, fmt, i, n)) for i in range(n)]
        splits[name] = SplitInfo(name, files, lengths)
    if not splits:
        raise ValueError(f"grist.tfds: {path}: no splits")
    return dataset, splits


# ---- split expressions, as tfds.core.splits parses them ----

_SUB_SPEC_RE = re.compile(r"^(?P<split_name>[\w-]+)(\[(?P<split_selector>[\d\w%:.-]+)\])?$")
_SLICE_RE = re.compile(r"^((?P<val>-?[\d_.]+)(?P<unit>(?:%|shard))?)?$")


def _relative(spec, err):
    m = _SUB_SPEC_RE.match(spec)
    if not m:
        raise ValueError(err)
    name, sel = m.group("split_name"), m.group("split_selector")
    if name == "all":
        if sel:
            raise ValueError(f"grist.tfds: 'all' takes no slice ({spec!r})")
        return [("all",)]
    if sel is None:
        return [(name, None, None, "abs")]
    slices = [_SLICE_RE.match(x) for x in sel.split(":")]
    if not all(slices) or not any(x.group(0) for x in slices):
        raise ValueError(err)
    if len(slices) == 1:
        frm, unit = slices[0]["val"], slices[0]["unit"] or "abs"
        if unit != "shard":
            raise ValueError(f"grist.tfds: absolute or percent splits need slice syntax ({spec!r})")
        to = int(frm) + 1
    elif len(slices) == 2:
        frm, to = slices[0]["val"], slices[1]["val"]
        unit = slices[0]["unit"] or slices[1]["unit"] or "abs"
    else:
        raise ValueError(err)
    conv = float if unit == "%" else int
    return [(name, None if frm is None else conv(frm), None if to is None else conv(to), unit)]


def _absolute(rel, splits):
    name, frm, to, unit = rel
    if name not in splits:
        raise ValueError(f"grist.tfds: unknown split {name!r}; the dataset has {list(splits)}")
    n = splits[name].num_examples
    if unit == "%":
        # TFDS's 'closest' rounding: Python's round(), which rounds halves to even.
        frm = 0 if frm is None else int(round(frm * n / 100.0))
        to = n if to is None else int(round(to * n / 100.0))
    elif unit == "shard":
        lengths = splits[name].shard_lengths
        frm = 0 if frm is None else sum(lengths[:frm])
        if to is not None and to <= 0:
            to = len(lengths) + to
        to = n if to is None else sum(lengths[:to])
    else:
        frm = 0 if frm is None else frm
        to = n if to is None else to
    if abs(frm) > n or abs(to) > n:
        raise ValueError(f"grist.tfds: slice [{frm}:{to}] of split {name!r} is out of its {n} records")
    if frm < 0:
        frm += n
    if to < 0:
        to += n
    return name, frm, max(frm, to)


def parse_split(spec, splits):
    """A TFDS split expression -> [(split name, from, to)], absolute, in reading order."""
    spec = str(spec)
    err = (f"grist.tfds: unrecognized split {spec!r} (TFDS syntax: 'train', 'test[:10%]', "
           "'train[100:200]', 'train+test')")
    out = []
    for sub in re.split(r"\s*\+\s*", spec):
        for rel in _relative(sub, err):
            if rel == ("all",):
                out.extend((s, 0, splits[s].num_examples) for s in splits)
            else:
                out.append(_absolute(rel, splits))
    return out


def file_instructions(parts, splits):
    """[(path, skip, take, records in file)] for the (split, from, to) parts, as TFDS reads them."""
    out = []
    for name, frm, to in parts:
        start = 0
        for path, n in zip(splits[name].files, splits[name].shard_lengths):
            lo, hi = max(frm, start), min(to, start + n)
            if hi > lo:
                out.append((path, lo - start, hi - lo, n))
            start += n
    return out


# ---- features.json: the feature tree ----

_CLASS = "tensorflow_datasets.core.features."
_SUPPORTED = {
    _CLASS + "features_dict.FeaturesDict": "dict",
    _CLASS + "image_feature.Image": "image",
    _CLASS + "class_label_feature.ClassLabel": "class_label",
    _CLASS + "tensor_feature.Tensor": "tensor",
    _CLASS + "scalar.Scalar": "tensor",
    _CLASS + "bounding_boxes.BBoxFeature": "tensor",
    _CLASS + "text_feature.Text": "text",
    _CLASS + "sequence_feature.Sequence": "sequence",
}

_DTYPES = {"bool": np.bool_, "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
           "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
           "float16": np.float16, "bfloat16": None, "float32": np.float32, "float64": np.float64,
           "string": np.object_, "str": np.object_}

# The list each dtype travels in inside a tf.train.Example (TFDS's _to_tf_example_spec).
INT64, FLOAT, BYTES = "int64", "float", "bytes"


class Leaf:
    """One key of the flattened tf.train.Example and how TFDS hands it back.

    path:  the keys from the top of the dict; key = '/'.join(path), as TFDS flattens it.
    kind:  'image', or the list kind: INT64, FLOAT, BYTES.
    dtype: numpy dtype TFDS returns (np.object_ for bytes); shape: TFDS's, None unknown.
    seq:   inside a Sequence: the leading axis is the sequence, TFDS returns a list.
    """

    __slots__ = ("path", "key", "kind", "dtype", "shape", "encoding", "seq", "cls")

    def __init__(self, path, kind, dtype, shape, cls, encoding=None, seq=False):
        self.path, self.key = tuple(path), "/".join(path)
        self.kind, self.dtype, self.shape = kind, np.dtype(dtype), tuple(shape)
        self.encoding, self.seq, self.cls = encoding, seq, cls

    @property
    def fixed(self):
        """True when every record has the same shape."""
        return all(d is not None for d in self.shape)

    def __repr__(self):
        return f"Leaf({self.key!r}, {self.kind}, {self.dtype}, {self.shape}{', seq' if self.seq else ''})"


def _dims(body, where):
    try:
        return tuple(None if int(d) == -1 else int(d) for d in (body.get("shape") or {}).get("dimensions", []))
    except (TypeError, ValueError):
        raise ValueError(f"grist.tfds: features.json: bad shape for feature {where!r}") from None


def _dtype(name, where):
    dt = _DTYPES.get(name)
    if dt is None:
        raise ValueError(f"grist.tfds: feature {where!r} has dtype {name!r}, which grist does not read")
    return dt


def _leaves(node, path, out, seq):
    where = "/".join(path) or "<top>"
    if not isinstance(node, dict):
        raise ValueError(f"grist.tfds: features.json: feature {where!r} is not an object")
    cls = node.get("pythonClassName", "")
    kind = _SUPPORTED.get(cls)
    if kind is None:
        raise ValueError(f"grist.tfds: feature {where!r} is a {cls or 'feature without a class'}, "
                         "which grist.tfds does not decode (it reads FeaturesDict, Image, ClassLabel, "
                         "Tensor, Scalar, Text and Sequence)")
    if kind == "dict":
        feats = (node.get("featuresDict") or {}).get("features")
        if not isinstance(feats, dict):
            raise ValueError(f"grist.tfds: features.json: FeaturesDict {where!r} has no features")
        for k in sorted(feats):  # TFDS flattens dicts in sorted key order
            _leaves(feats[k], path + [k], out, seq)
        return
    if kind == "sequence":
        body = node.get("sequence") or {}
        if seq:
            raise ValueError(f"grist.tfds: feature {where!r} is a Sequence of Sequences, which grist.tfds "
                             "does not decode")
        if "feature" not in body:
            raise ValueError(f"grist.tfds: features.json: Sequence {where!r} has no feature")
        length = int(body.get("length", -1))
        first = len(out)
        _leaves(body["feature"], path, out, True)
        for leaf in out[first:]:
            if leaf.kind == "image":
                raise ValueError(f"grist.tfds: feature {leaf.key!r} is a Sequence of Images, which "
                                 "grist.tfds does not decode")
            leaf.shape = (None if length < 0 else length,) + leaf.shape
        return
    if kind == "image":
        body = node.get("image") or {}
        shape = _dims(body, where)
        dtype = body.get("dtype", "uint8")
        # no encodingFormat (ImageFolder's Image()): TFDS decodes PNG or JPEG, told by the bytes
        enc = body.get("encodingFormat") or "any"
        if (dtype, enc) not in (("uint8", "png"), ("uint8", "jpeg"), ("uint8", "any"), ("uint16", "png")) or \
                len(shape) != 3 or shape[2] is None:
            raise ValueError(f"grist.tfds: image feature {where!r} ({dtype}, {enc}, shape {shape}) is not "
                             "one grist.tfds decodes (uint8 PNG or JPEG, uint16 PNG, a known channel count)")
        out.append(Leaf(path, "image", np.dtype(dtype), shape, cls, encoding=enc, seq=seq))
        return
    if kind == "class_label":
        out.append(Leaf(path, INT64, np.int64, (), cls, seq=seq))
        return
    if kind == "text":
        out.append(Leaf(path, BYTES, np.object_, (), cls, seq=seq))
        return
    body = node.get("tensor") or {}
    enc = body.get("encoding", "none")
    if enc not in ("none", None, ""):
        raise ValueError(f"grist.tfds: tensor feature {where!r} has encoding {enc!r}; grist.tfds decodes "
                         "encoding 'none' only")
    shape = _dims(body, where)
    dtype = _dtype(body.get("dtype", ""), where)
    if sum(d is None for d in shape) > 1:
        raise ValueError(f"grist.tfds: tensor feature {where!r} has more than one unknown dimension {shape}; "
                         "grist.tfds does not decode those")
    lst = BYTES if dtype == np.object_ else FLOAT if np.issubdtype(dtype, np.floating) else INT64
    out.append(Leaf(path, lst, dtype, shape, cls, seq=seq))


def read_features(vdir):
    """The flat list of Leaf from vdir/features.json, in TFDS's flattening order."""
    path = join(vdir, "features.json")
    top = _read_json(path)
    out = []
    try:
        _leaves(top, [], out, False)
    except ValueError as e:
        raise ValueError(f"{e} [{path}]") from None
    if not out:
        raise ValueError(f"grist.tfds: {path}: no features")
    return out
