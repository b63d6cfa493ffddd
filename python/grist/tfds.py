"""grist.tfds: TFDS datasets read by grist, decoded in C.

    src = grist.tfds.data_source("mnist", split="train")    # as tfds.data_source
    src[0]                    # {'image': uint8 (28, 28, 1), 'label': 7}: TFDS's own dict
    grain.MapDataset.source(src).shuffle(seed=0).batch(128)  # a Grain source
    for batch in grist.Loader(src, 128, seed=42):             # dict batches from the C engine
        batch["image"]        # uint8 (128, 28, 28, 1), batch["label"] int64 (128,)

The source reads the prepared dataset's dataset_info.json and features.json itself (no
TensorFlow, no TFDS import), and parses each record's tf.train.Example and decodes its
PNG/JPEG images in C (grist/features.h) on grist's threads with the GIL released.

data_dir may be an s3://, gs:// or http(s):// URL (grist/remote.h): the metadata is read
and the version found by the C library, and the shards are read as URLs by the same
remote backend as grist.Reader and grist.Loader.
"""

import errno as _errno
import os as _os
import threading as _threading

import numpy as _np

from . import _grist
from . import _tfds_meta as _meta
from ._parquet import ConversionError, from_parquet  # noqa: F401  (Parquet in: grist.tfds.from_parquet)

__all__ = ["data_source", "DataSource", "from_parquet", "ConversionError"]

_NP_TO_GRIST = {
    _np.dtype(_np.uint8): _grist.DTYPE_UINT8, _np.dtype(_np.int8): _grist.DTYPE_INT8,
    _np.dtype(_np.uint16): _grist.DTYPE_UINT16, _np.dtype(_np.int16): _grist.DTYPE_INT16,
    _np.dtype(_np.uint32): _grist.DTYPE_UINT32, _np.dtype(_np.int32): _grist.DTYPE_INT32,
    _np.dtype(_np.uint64): _grist.DTYPE_UINT64, _np.dtype(_np.int64): _grist.DTYPE_INT64,
    _np.dtype(_np.float16): _grist.DTYPE_FLOAT16, _np.dtype(_np.float32): _grist.DTYPE_FLOAT32,
    _np.dtype(_np.float64): _grist.DTYPE_FLOAT64, _np.dtype(_np.bool_): _grist.DTYPE_BOOL,
}
_WIRE = {_meta.INT64: _grist.WIRE_INT64, _meta.FLOAT: _grist.WIRE_FLOAT, _meta.BYTES: _grist.WIRE_BYTES}

# Random access decodes images of unknown height and width into rows this large at most
# (the C stage needs a bound per row; memory is only touched as far as an image needs).
IMAGE_MAX_HW = (8192, 8192)


def _cpus_allowed():
    """The CPUs this process may run on (its affinity mask: taskset, a container's cpuset), as
    the C loader counts them for its default threads; os.cpu_count() is the machine's."""
    try:
        return len(_os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return _os.cpu_count() or 1


def _c_dtype(leaf):
    """The column's dtype in C: strings travel as uint8 bytes."""
    return _np.dtype(_np.uint8) if leaf.kind == _meta.BYTES else leaf.dtype


def _strings(leaf):
    """A list of strings per record (a string Tensor of shape (N,) or (None,), a Sequence of
    Text): GRIST_DECODE_STRINGS; a scalar string is one value (GRIST_DECODE_BYTES)."""
    return leaf.kind == _meta.BYTES and leaf.shape != ()


def _c_shape(leaf):
    """The column's shape in C, -1 where it varies: a string is (-1,) bytes."""
    if leaf.kind == _meta.BYTES:
        if len(leaf.shape) > 1:
            raise ValueError(f"grist.tfds: feature {leaf.key!r} is a string tensor of shape {leaf.shape}; "
                             "grist.tfds decodes strings of shape (), (N,) and (None,)")
        if _strings(leaf):  # a count of strings
            return tuple(-1 if d is None else d for d in leaf.shape)
        return (-1,)  # one string: its bytes
    return tuple(-1 if d is None else d for d in leaf.shape)


def _column(leaf, varlen=None, max_shape=None, pad_value=0.0):
    """One grist._grist.Features column for @leaf: (key, wire, dtype, shape, decode, varlen, max, pad)."""
    shape = _c_shape(leaf)
    if leaf.kind == "image":
        decode = {"png": _grist.DECODE_PNG, "jpeg": _grist.DECODE_JPEG}.get(leaf.encoding, _grist.DECODE_IMAGE)
    elif leaf.kind == _meta.BYTES:
        decode = _grist.DECODE_STRINGS if _strings(leaf) else _grist.DECODE_BYTES
    else:
        decode = _grist.DECODE_VALUES
    if varlen is None:  # strings vary in bytes whatever their count
        ragged = -1 in shape or decode == _grist.DECODE_STRINGS
        varlen = _grist.VARLEN_RAGGED if ragged else _grist.VARLEN_NONE
    if decode == _grist.DECODE_STRINGS and varlen != _grist.VARLEN_RAGGED:
        raise ValueError(f"grist.Loader: feature {leaf.key!r} holds a list of strings, which cannot be "
                         "padded into a batch (random access decodes it)")
    if varlen == _grist.VARLEN_RAGGED and leaf.kind == "image" and max_shape is None and -1 in shape:
        max_shape = tuple(IMAGE_MAX_HW[i] if d == -1 else d for i, d in enumerate(shape))
    wire = _grist.WIRE_BYTES if leaf.kind == "image" else _WIRE[leaf.kind]
    return (leaf.key, wire, _NP_TO_GRIST[_c_dtype(leaf)], shape, decode, varlen,
            None if max_shape is None else tuple(max_shape), float(pad_value))


def _nest(paths):
    """A function (flat values in leaf order) -> the nested dict TFDS returns."""
    if all(len(p) == 1 for p in paths):
        keys = [p[0] for p in paths]
        return lambda values: dict(zip(keys, values))

    def build(values):
        out = {}
        for path, v in zip(paths, values):
            d = out
            for k in path[:-1]:
                d = d.setdefault(k, {})
            d[path[-1]] = v
        return out
    return build


def _spans(sizes):
    """(start, end) of each of consecutive pieces of the given @sizes, in order."""
    ends = _np.cumsum(sizes).tolist()
    return zip([0] + ends[:-1], ends)


def _converter(leaf):
    """(many, one) for @leaf: many(values, dims, lens, n) -> the n records' values as TFDS
    gives them, one(values, dims, lens) -> the one record's; @values, @dims and @lens as
    Features.fetch gives them (dims None unless the shape varies, lens None unless the
    feature is a list of strings)."""
    cdt = _c_dtype(leaf)
    shape = tuple(leaf.shape)
    if leaf.kind == _meta.BYTES and _strings(leaf):
        def many(values, dims, lens, n):
            mv = memoryview(values)
            strings = [bytes(mv[a:b]) for a, b in _spans(_np.frombuffer(lens, _np.uint64))]
            per = [strings[a:b] for a, b in _spans(_np.frombuffer(dims, _np.int64))]
            if leaf.seq:  # a Sequence(Text): TFDS maps Text over it, a list of bytes
                return per
            out = []
            for p in per:  # a string Tensor: an object array of bytes
                a = _np.empty(len(p), dtype=object)
                a[:] = p
                out.append(a)
            return out
        return many, lambda values, dims, lens: many(values, dims, lens, 1)[0]
    if leaf.kind == _meta.BYTES:
        def many(values, dims, lens, n):
            mv = memoryview(values)
            return [bytes(mv[a:b]) for a, b in _spans(_np.frombuffer(dims, _np.int64))]
        return many, lambda values, dims, lens: bytes(values)
    if leaf.fixed:
        if shape == ():  # int / float / bool, as TFDS's .item()
            if cdt == _np.int64:  # a label: no numpy array for one int (src[i]'s per-record cost)
                one = lambda values, dims, lens: int.from_bytes(values, "little", signed=True)  # noqa: E731
            else:
                one = lambda values, dims, lens: _np.frombuffer(values, cdt).item()  # noqa: E731
            return (lambda values, dims, lens, n: _np.frombuffer(values, cdt).tolist(), one)
        return (lambda values, dims, lens, n: list(_np.frombuffer(values, cdt).reshape((n,) + shape)),
                lambda values, dims, lens: _np.frombuffer(values, cdt).reshape(shape))

    def many(values, dims, lens, n):
        dims = _np.frombuffer(dims, _np.int64).reshape(n, -1)
        flat = _np.frombuffer(values, cdt)
        parts = [flat[a:b].reshape(d) for (a, b), d in zip(_spans(_np.prod(dims, axis=1)), dims.tolist())]
        return [list(p) for p in parts] if leaf.seq else parts  # TFDS maps over a Sequence

    def one(values, dims, lens):
        v = _np.frombuffer(values, cdt).reshape(_np.frombuffer(dims, _np.int64).tolist())
        return list(v) if leaf.seq else v
    return many, one


class DataSource:
    """DataSource(version_dir, split="train", *, threads=None): a TFDS split read by grist,
    Grain's RandomAccessDataSource protocol. data_source() opens one by name; this is the class.

    version_dir is the dataset's version folder (local or a URL); split a TFDS split spec
    ("train", the default; "test[:10%]", "train+test", ...); threads the decode threads of
    __getitems__ (None, the default: the CPUs allowed).

    len(src); src[i] -> the dict tfds.data_source(...)[i] returns; src.__getitems__(indices)
    -> list of them, decoded on grist's threads without the GIL. Picklable (the pickle holds
    the folder and split; a copy opens the files on first use) and safe from several threads.
    Attributes: name, version_dir, split, files (the split's shard files in TFDS's order),
    leaves (the flattened features).
    """

    def __init__(self, version_dir, split="train", *, threads=None):
        version_dir = _os.fspath(version_dir)
        if not _meta.is_url(version_dir):
            version_dir = _os.path.abspath(version_dir)
        self._init(version_dir, str(split), threads)
        self._open()

    def _init(self, version_dir, split, threads):
        self.version_dir, self.split, self._threads = version_dir, split, threads
        self.name, self.splits = _meta.read_dataset_info(version_dir)
        self.leaves = _meta.read_features(version_dir)
        self._parts = _meta.parse_split(split, self.splits)
        self._instr = _meta.file_instructions(self._parts, self.splits)
        # The files the instructions touch, each once, in reading order; each instruction's
        # records are a run of global indices over those files.
        self.files, starts, self._runs = [], {}, []
        total = 0
        for path, skip, take, n in self._instr:
            if path not in starts:
                starts[path] = total
                self.files.append(path)
                total += n
            self._runs.append((starts[path] + skip, take))
        self._len = sum(take for _, take in self._runs)
        # the whole of self.files in order (a whole split): record i is index i
        self._identity = self._runs == [(0, self._len)]
        self._nest = _nest([leaf.path for leaf in self.leaves])
        convs = [_converter(leaf) for leaf in self.leaves]
        self._many, self._one = [c[0] for c in convs], [c[1] for c in convs]
        self._columns = [_column(leaf) for leaf in self.leaves]  # unsupported features fail here
        self._lock = _threading.Lock()
        self._features = None
        self._max_record_bytes = 0

    def _open(self):
        """Open the files and build the decoder (a bad shard or spec fails here)."""
        remote = _meta.is_url(self.version_dir)
        for path, _, take, n in self._instr:
            if not remote and not _os.path.exists(path):
                raise FileNotFoundError(f"grist.tfds: {self.name} split {self.split!r}: shard {path} is missing")
        if self.files:
            try:
                r = _grist.Reader(self.files)
            except _grist.Error as e:
                # a missing shard object: the C message names its URL and the 404
                if remote and e.errno == _errno.ENOENT:
                    raise FileNotFoundError(_errno.ENOENT, f"grist.tfds: {self.name} split {self.split!r}: "
                                            f"a shard is missing: {e.strerror}") from None
                raise
            info = r.info()
            r.close()
            want = {path: n for path, _, _, n in self._instr}
            # the Loader's bound on one ragged row (the footer's largest decoded chunk)
            self._max_record_bytes = max(fi["max_record_bytes"] for fi in info)
            for fi in info:
                if fi["records"] != want[fi["path"]]:
                    raise _grist.Error(5, f"grist.tfds: {fi['path']}: {fi['records']} records, but "
                                          f"dataset_info.json says {want[fi['path']]}")
            self._decoder()

    def _decoder(self):
        f = self._features
        if f is None:
            with self._lock:
                if self._features is None:
                    threads = self._threads
                    if threads is None:
                        threads = max(0, min(8, _cpus_allowed()) - 1)
                    self._features = _grist.Features(self._columns, self.files, threads)
                f = self._features
        return f

    def _global(self, i):
        """Record i of the split -> its index over self.files."""
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(f"grist.tfds: index out of range for {self._len} records")
        for start, take in self._runs:
            if i < take:
                return start + i
            i -= take
        raise AssertionError("unreachable")

    def __len__(self):
        return self._len

    def __getitem__(self, i):
        # Grain calls this once per record: the common case (an int of a whole split, the
        # decoder made) takes no method call besides fetch.
        if type(i) is not int:
            if not isinstance(i, (int, _np.integer)):
                raise TypeError(f"grist.tfds: indices must be integers, not {type(i).__name__}")
            i = int(i)
        if self._identity and 0 <= i < self._len:
            g = i
        else:
            g = self._global(i)
        f = self._features
        if f is None:
            f = self._decoder()
        cols = f.fetch((g,))
        return self._nest([one(v, d, ln) for one, (v, d, ln) in zip(self._one, cols)])

    def __getitems__(self, indices):
        g = [self._global(int(i)) for i in indices]
        if not g:
            return []
        cols = self._decoder().fetch(g)
        n = len(g)
        per_leaf = [many(v, d, ln, n) for many, (v, d, ln) in zip(self._many, cols)]
        nest = self._nest
        return [nest(vals) for vals in zip(*per_leaf)]

    def __iter__(self):
        for start in range(0, self._len, 256):
            yield from self.__getitems__(range(start, min(start + 256, self._len)))

    def __repr__(self):
        return f"grist.tfds.DataSource({self.version_dir!r}, split={self.split!r})"

    def __getstate__(self):
        return {"version_dir": self.version_dir, "split": self.split, "threads": self._threads}

    def __setstate__(self, state):
        self._init(state["version_dir"], state["split"], state["threads"])

    @property
    def whole_splits(self):
        """True when the split expression takes whole splits (the Loader reads those)."""
        return all(frm == 0 and to == self.splits[name].num_examples for name, frm, to in self._parts) and \
            len({name for name, _, _ in self._parts}) == len(self._parts)

    # ---- the Loader's side: a decoder whose rows are the batch's columns ----

    def _loader_features(self, pad=None, skip=None, datasets=None, ragged=None, transforms=None, boxes=False,
                         seed=0, on_error="raise"):
        """(Features, columns, leaves) for a Loader: every feature a column of fixed size,
        but those in @ragged.

        @pad maps a feature key ('image', 'meta/source') to the shape its values are padded
        to; its real shape goes to '<name>_shape' beside it. @skip names features left out
        (not parsed at all). @ragged names features whose first dimension varies (a Text,
        a (None,) or (None, 3) Tensor, a Sequence of scalars): they are stored in the row
        with their length, and the Loader reads the batch as ragged rows. A feature whose
        shape varies and is in none of them is an error naming it. @transforms maps an image
        feature's key to a grist.vision transform: its column is the transform's fixed output
        (keyed by @seed), with '<name>_box' beside it when @boxes. @on_error "skip" makes the
        loader drop (and count) a record whose feature does not decode, instead of failing.
        """
        if on_error not in ("raise", "skip"):
            raise ValueError(f"grist.Loader: on_error must be 'raise' or 'skip', not {on_error!r}")
        oe = _grist.ON_ERROR_SKIP if on_error == "skip" else _grist.ON_ERROR_FAIL
        pad, skip, ragged = dict(pad or {}), set(skip or ()), list(ragged or ())
        transforms = dict(transforms or {})
        if len(set(ragged)) != len(ragged) or set(ragged) & (set(pad) | skip) or set(transforms) & (
                set(pad) | skip | set(ragged)):
            raise ValueError("grist.Loader: a feature is named twice in pad, skip, ragged and transforms")
        unknown = (set(pad) | skip | set(ragged) | set(transforms)) - {leaf.key for leaf in self.leaves}
        if unknown:
            raise ValueError(f"grist.Loader: pad, skip or ragged names no feature of {self.name}: "
                             f"{sorted(unknown)}")
        leaves = [leaf for leaf in self.leaves if leaf.key not in skip]
        if not leaves:
            raise ValueError("grist.Loader: skip leaves no feature")
        cols = []
        for leaf in leaves:
            shape = _c_shape(leaf)
            if leaf.key in transforms:
                t = transforms[leaf.key]
                if not hasattr(t, "_spec"):
                    raise TypeError(f"grist.Loader: transforms[{leaf.key!r}] is not a grist.vision transform")
                if leaf.kind != "image":
                    raise ValueError(f"grist.Loader: feature {leaf.key!r} is not an image: no transform applies")
                cols.append(_column(leaf, _grist.VARLEN_NONE) + (t._spec(), int(seed), bool(boxes), oe))
                continue
            elif leaf.key in pad:
                max_shape = pad[leaf.key]
                max_shape = (max_shape,) if isinstance(max_shape, int) else tuple(max_shape)
                if len(max_shape) != len(shape):
                    raise ValueError(f"grist.Loader: pad[{leaf.key!r}] has {len(max_shape)} dimensions; "
                                     f"the feature has {len(shape)} {leaf.shape}")
                cols.append(_column(leaf, _grist.VARLEN_PAD, max_shape))
            elif leaf.key in ragged:
                if _strings(leaf) or -1 in shape[1:] or leaf.kind == "image":
                    raise ValueError(f"grist.Loader: feature {leaf.key!r} ({leaf.kind} of shape {leaf.shape}) "
                                     "cannot be ragged: only features whose first dimension alone varies "
                                     "(not images, not lists of strings) are; pad or skip it")
                if shape[:1] != (-1,):
                    raise ValueError(f"grist.Loader: feature {leaf.key!r} has the fixed shape {leaf.shape}: "
                                     "it needs no ragged=")
                cols.append(_column(leaf, _grist.VARLEN_RAGGED))
            elif _strings(leaf):
                raise ValueError(f"grist.Loader: feature {leaf.key!r} holds a list of strings, which cannot "
                                 f"be batched; leave it out (skip=[{leaf.key!r}])")
            elif -1 in shape:
                what = "a string" if leaf.kind == _meta.BYTES else f"shape {leaf.shape}"
                raise ValueError(f"grist.Loader: feature {leaf.key!r} ({what}) varies in shape between "
                                 f"records; pad it (pad={{{leaf.key!r}: max shape}}), make it ragged "
                                 f"(ragged=[{leaf.key!r}]) or leave it out (skip=[{leaf.key!r}]) to batch it")
            else:
                cols.append(_column(leaf))
        cols = [c if len(c) > 8 else c + (None, 0, False, oe) for c in cols]
        paths = {leaf.path for leaf in self.leaves}
        for leaf in leaves:
            if leaf.key in pad and leaf.path[:-1] + (leaf.path[-1] + "_shape",) in paths:
                raise ValueError(f"grist.Loader: feature {leaf.key!r}_shape exists: cannot pad {leaf.key!r}")
            if boxes and leaf.key in transforms and leaf.path[:-1] + (leaf.path[-1] + "_box",) in paths:
                raise ValueError(f"grist.Loader: feature {leaf.key!r}_box exists: boxes=True cannot add it")
        if datasets is not None:  # a mixture: messages name each dataset's files
            return _grist.Features(cols, threads=0, datasets=datasets), cols, leaves
        return _grist.Features(cols, self.files, 0), cols, leaves


def data_source(name, split="train", *, data_dir=None, threads=None):
    """grist.tfds.data_source(name, split="train", *, data_dir=None) -> DataSource.

    @name is a TFDS dataset name ("mnist", "mnist:3.0.1", "ds/config:1.0.0") looked up as
    TFDS does: in @data_dir, else $TFDS_DATA_DIR, else ~/tensorflow_datasets, the newest
    prepared version when none is given; or the path of a prepared version folder.
    @data_dir (or @name, a version folder) may be an s3://, gs://, http:// or https:// URL,
    with credentials and endpoint from the environment as for grist.Reader (grist/remote.h);
    s3:// and gs:// are listed to find the newest version, http(s):// needs it named. A
    missing dataset, version, metadata file or shard is FileNotFoundError naming the URL;
    refused credentials or an unreachable server, grist.Error with the URL and HTTP status. @split
    takes TFDS's syntax ("train", "test[:10%]", "train[100:200]", "train+test", "all").
    @threads: decode threads beside the caller's for __getitems__ (default: the CPUs it may run on - 1, at most 7).
    A feature grist cannot decode is a ValueError naming it, here.
    """
    return DataSource(_meta.find_version_dir(name, data_dir), split, threads=threads)
