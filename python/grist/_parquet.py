"""Parquet files into a prepared TFDS dataset (ArrayRecord shards of tf.train.Example records).

from_parquet() reads the files with pyarrow one record batch at a time (never the whole table),
maps the Arrow schema to TFDS features, encodes each row as TFDS encodes the same features,
and writes shards, features.json and dataset_info.json as TFDS names and lays them out, so
tfds.builder_from_directory(out_dir) and grist's readers both open the result.
"""

import errno
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time

import numpy as np

from . import _tfds_meta as _meta
from ._grist import Writer, encode_examples

__all__ = ["from_parquet", "ConversionError"]

_TFDS = "tensorflow_datasets.core.features."
_READ_ROWS = 4096  # rows per record batch read from a file: bounds memory whatever the row groups


class ConversionError(ValueError):
    """A row that does not fit its feature, or a file whose schema does not fit the first's;
    the message names the file, the row (counted from 0 in that file) and the column."""


# ---- the features: one _Column per Parquet column ----

_INT_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
_FLOAT_TYPES = {"halffloat": "float16", "float": "float32", "double": "float64"}


def _tensor_json(dtype, shape, cls="tensor_feature.Tensor"):
    dims = {"dimensions": [str(d) for d in shape]} if shape else {}
    return {"pythonClassName": _TFDS + cls, "tensor": {"dtype": dtype, "encoding": "none", "shape": dims}}


class _Column:
    """How one column becomes one feature. kind: "int", "float", "bytes", "text", "image",
    "class_label". shape: the feature's shape (-1 for a variable dimension); fixed: the
    dimensions of a fixed_size_list nest; ragged: a variable list on the outside."""

    def __init__(self, name, arrow_type, declared):
        import pyarrow as pa

        self.name = name
        self.arrow_type = arrow_type
        t, self.ragged, self.fixed = arrow_type, False, []
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            self.ragged, t = True, t.value_type
        while pa.types.is_fixed_size_list(t):
            self.fixed.append(t.list_size)
            t = t.value_type
        base = str(t)
        if base == "bool":
            self.kind, self.dtype = "int", "bool"
        elif base in _INT_TYPES:
            self.kind, self.dtype = "int", base
        elif base in _FLOAT_TYPES:
            self.kind, self.dtype = "float", _FLOAT_TYPES[base]
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            self.kind, self.dtype = "text", "string"
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            self.kind, self.dtype = "bytes", "string"
        else:
            raise ConversionError(f"column {name!r}: Arrow type {arrow_type} has no TFDS feature "
                                  "(ints, floats, bool, string, binary and lists of them are converted)")
        self.shape = ([-1] if self.ragged else []) + self.fixed
        if self.kind == "text" and self.shape:
            self.kind = "bytes"  # a list of strings is a string Tensor; Text is a scalar feature
        self.image_format, self.image_shape, self.num_classes = None, None, None
        self.declared_format = None
        # max_side (from_parquet, WriteToTFDS): images shrunk as `grist convert --max-side`
        self.max_side, self.jpeg_quality, self.resized, self.bytes_in, self.bytes_out = None, 90, 0, 0, 0
        if declared is not None:
            self._declare(declared)

    def _declare(self, spec):
        what, _, arg = spec.partition(":")
        where = f"features[{self.name!r}] = {spec!r}"
        if what == "image":
            if self.kind != "bytes" or self.shape:
                raise ConversionError(f"{where}: an image column holds binary values, not {self.arrow_type}")
            if arg not in ("", "png", "jpeg"):
                raise ConversionError(f"{where}: the image format is png or jpeg")
            self.kind, self.image_format = "image", arg or None
            self.declared_format = self.image_format
        elif what == "class_label":
            if self.kind != "int" or self.dtype == "bool" or self.shape:
                raise ConversionError(f"{where}: a class_label column holds integers, not {self.arrow_type}")
            if not arg.isdigit() or int(arg) < 1:
                raise ConversionError(f"{where}: give the number of classes, e.g. 'class_label:10'")
            self.kind, self.num_classes = "class_label", int(arg)
        elif what == "shape":
            dims = [int(d) for d in arg.split(",")] if re.fullmatch(r"\d+(,\d+)*", arg) else None
            if not dims or not self.ragged or self.kind in ("text",):
                raise ConversionError(f"{where}: 'shape:N[,M...]' fixes the shape of a variable-length "
                                      "list column")
            if dims[1:] != self.fixed:
                raise ConversionError(f"{where}: the inner dimensions of the column are {self.fixed}")
            self.shape, self.declared_rows = dims, dims[0]
        else:
            raise ConversionError(f"{where}: not one of 'image', 'image:png', 'image:jpeg', "
                                  "'class_label:N', 'shape:N[,M...]'")

    def feature_json(self):
        if self.kind == "image":
            image = {"dtype": "uint8", "encodingFormat": self.image_format or "png",
                     "shape": {"dimensions": [str(d) for d in self.image_shape]}}
            if self.max_side and not self.declared_format:
                # PNG and JPEG mixed (the shrunk ones are JPEG): none named, as ImageFolder's
                # Image() writes it, so readers tell each image by its bytes
                del image["encodingFormat"]
            return {"image": image, "pythonClassName": _TFDS + "image_feature.Image"}
        if self.kind == "class_label":
            return {"classLabel": {"numClasses": str(self.num_classes)},
                    "pythonClassName": _TFDS + "class_label_feature.ClassLabel"}
        if self.kind == "text":
            return {"pythonClassName": _TFDS + "text_feature.Text", "text": {}}
        return _tensor_json(self.dtype, self.shape)

    # -- one record batch of this column -> each row's feature entry --

    def encoded(self, arr, where):
        """@arr (a pyarrow Array, one record batch of the column) as a column of
        encode_examples(): (key, kind, values, row bounds[, offsets]); @where(row) names a row."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        counts = None
        values = arr
        up = []  # per level below the rows: maps a value's index to its parent's index
        if self.ragged:
            _check_nulls(values, where, self.name, up)
            counts = pc.list_value_length(values).to_numpy(zero_copy_only=False).astype(np.int64)
            values = values.flatten()
            ends = np.cumsum(counts)
            up.append(lambda i, ends=ends: int(np.searchsorted(ends, i, side="right")))
            if getattr(self, "declared_rows", None) is not None:
                bad = np.flatnonzero(counts != self.declared_rows)
                if len(bad):
                    r = int(bad[0])
                    raise ConversionError(f"{where(r)}, column {self.name!r}: a list of {counts[r]} values, "
                                          f"not {self.declared_rows} (features= says shape:"
                                          f"{','.join(map(str, self.shape))})")
        for size in self.fixed:
            _check_nulls(values, where, self.name, up)
            values = values.flatten()
            up.append(lambda i, size=size: i // size)
        _check_nulls(values, where, self.name, up)
        per_row = int(np.prod(self.fixed)) if self.fixed else 1
        if counts is None:
            bounds = np.arange(len(arr) + 1, dtype=np.int64) * per_row
        else:
            bounds = np.concatenate([[0], np.cumsum(counts * per_row)])
        if self.kind in ("int", "class_label"):
            v = values.to_numpy(zero_copy_only=False)
            if v.dtype == np.uint64:
                # TFDS bit-casts uint64 to int64 when it writes, but its reader does not cast
                # back and fails on a negative value: refuse what it could not read.
                bad = np.flatnonzero(v >= np.uint64(2**63))
                if len(bad):
                    r = int(np.searchsorted(bounds, bad[0], side="right") - 1)
                    raise ConversionError(f"{where(r)}, column {self.name!r}: uint64 value {v[bad[0]]} is 2^63 "
                                          "or more, which TFDS's reader cannot read back")
            v = np.ascontiguousarray(v, dtype=np.int64)
            if self.kind == "class_label":
                bad = np.flatnonzero((v < 0) | (v >= self.num_classes))
                if len(bad):
                    r = int(np.searchsorted(bounds, bad[0], side="right") - 1)
                    raise ConversionError(f"{where(r)}, column {self.name!r}: label {v[bad[0]]} is not in "
                                          f"0..{self.num_classes - 1} (class_label:{self.num_classes})")
            return (self.name, "int64", v, bounds)
        if self.kind == "float":
            # float16 widens exactly; float64 rounds to nearest, as protobuf's FloatList holds
            return (self.name, "float", np.ascontiguousarray(values.to_numpy(zero_copy_only=False), "<f4"), bounds)
        data, offsets = _binary_buffers(values)
        if self.kind == "image" and self.max_side:
            data, offsets = self._shrink(data, offsets)
        if self.kind == "image":
            view = memoryview(data)
            for i in range(len(offsets) - 1):
                r = int(np.searchsorted(bounds, i, side="right") - 1)
                self._check_image(bytes(view[offsets[i]:offsets[i + 1]]), where(r))
        return (self.name, "bytes", data, bounds, offsets)

    def _shrink(self, data, offsets):
        """Each image whose longer side passes max_side resized to it and re-encoded as JPEG of
        jpeg_quality: the imagefolder converter's own code (src/convert/image_shrink.c), through
        the extension; the others as read. Returns the new (data, offsets)."""
        from ._grist import _image_shrink

        view, out, ends = memoryview(data), [], [0]
        for i in range(len(offsets) - 1):
            img = view[int(offsets[i]):int(offsets[i + 1])]
            small = _image_shrink(img, self.max_side, self.jpeg_quality) if len(img) else None
            self.bytes_in += len(img)
            if small is not None:
                self.resized += 1
                img = small
            self.bytes_out += len(img)
            out.append(bytes(img))
            ends.append(ends[-1] + len(img))
        return b"".join(out), np.array(ends, np.uint64)

    def _check_image(self, data, where):
        """Decode the image fully (an undecodable one is an error here, not at training time) and
        fold its shape into the feature's: the first image's, (None, None, C) once they differ."""
        from PIL import Image

        fmt = "png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "jpeg" if data[:3] == b"\xff\xd8\xff" else None
        try:
            if fmt is None:
                raise ValueError("neither PNG nor JPEG data")
            # with max_side, undeclared: resized images are JPEG, the others as read (TFDS's
            # decoder takes either, whatever encodingFormat says)
            if self.image_format and fmt != self.image_format and (self.declared_format or not self.max_side):
                raise ValueError(f"{fmt.upper()} data where {self.image_format.upper()} was declared")
            with Image.open(io.BytesIO(data)) as im:
                im.load()
                channels = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}.get(im.mode)
                if channels is None:
                    raise ValueError(f"pixel mode {im.mode} (8-bit gray, gray+alpha, RGB or RGBA are converted)")
                shape = [im.height, im.width, channels]
        except Exception as e:  # noqa: BLE001 (PIL raises many kinds for bad data)
            raise ConversionError(f"{where}, column {self.name!r}: undecodable image: {e}") from None
        if self.image_format is None:
            self.image_format = fmt
        if self.image_shape is None:
            self.image_shape = shape
        elif self.image_shape[2] != channels:
            raise ConversionError(f"{where}, column {self.name!r}: an image of {channels} channels where the "
                                  f"first had {self.image_shape[2]}")
        elif self.image_shape[:2] != shape[:2]:
            self.image_shape = [-1, -1, channels]


def _binary_buffers(arr):
    """A binary or string Arrow array as (data, uint64 offsets of each value in data), no copy of
    the data: Arrow's own buffers, offsets taken from its slice."""
    import pyarrow as pa

    bufs = arr.buffers()
    data = bufs[-1] if bufs[-1] is not None else b""
    if pa.types.is_fixed_size_binary(arr.type):
        width = arr.type.byte_width
        return data, (np.arange(len(arr) + 1, dtype=np.uint64) + arr.offset) * np.uint64(width)
    wide = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    offsets = np.frombuffer(bufs[1], np.int64 if wide else np.int32)[arr.offset:arr.offset + len(arr) + 1]
    return data, offsets.astype(np.uint64)


def _check_nulls(arr, where, name, up):
    """A null has no tf.train.Example encoding: an error naming the first row that holds one.
    @up maps an index of @arr level by level back to its row (innermost level last)."""
    if arr.null_count == 0:
        return
    import pyarrow.compute as pc

    i = int(np.flatnonzero(pc.is_null(arr).to_numpy(zero_copy_only=False))[0])
    for parent in reversed(up):
        i = parent(i)
    raise ConversionError(f"{where(i)}, column {name!r}: a null value (TFDS features have no nulls)")


# ---- the dataset's files ----

def _name_and_version(out_dir):
    """TFDS lays datasets out as <name>/<version>: take both from out_dir when it looks so."""
    base = os.path.basename(os.path.normpath(out_dir))
    if re.fullmatch(r"\d+\.\d+\.\d+", base):
        return os.path.basename(os.path.dirname(os.path.normpath(out_dir))), base
    return base, "1.0.0"


def _leaves(fields, prefix=""):
    """(name, Arrow type) of every leaf column, a struct's fields named parent/child: TFDS
    flattens a nested FeaturesDict into Example keys the same way."""
    import pyarrow as pa

    for f in fields:
        name = prefix + f.name
        if "/" in f.name:
            raise ConversionError(f"column {name!r}: '/' joins nested keys in TFDS; rename the column")
        if pa.types.is_struct(f.type):
            yield from _leaves(list(f.type), name + "/")
        else:
            yield name, f.type


def _leaf_array(batch, name, where):
    """The values of leaf column parent/child/... of a record batch; a null struct is an error."""
    parts = name.split("/")
    arr = batch.column(parts[0])
    for depth, part in enumerate(parts[1:], 1):
        _check_nulls(arr, where, "/".join(parts[:depth]), [])
        arr = arr.field(part)
    return arr


def _features_json(columns):
    """features.json: a FeaturesDict, nested where the columns were structs."""
    def node(tree):
        return {"featuresDict": {"features": {k: node(v) if isinstance(v, dict) else v.feature_json()
                                              for k, v in tree.items()}},
                "pythonClassName": _TFDS + "features_dict.FeaturesDict"}
    tree = {}
    for c in columns:
        *parents, leaf = c.name.split("/")
        t = tree
        for p in parents:
            t = t.setdefault(p, {})
        t[leaf] = c
    return node(tree)


def _dump(obj, path, indent):
    with open(path, "w") as f:
        json.dump(obj, f, indent=indent, sort_keys=True)


def from_parquet(paths, out_dir, *, split="train", features=None, shards=1, options="group_size:1,zstd:3",
                 progress=False, max_side=None, jpeg_quality=None):
    """from_parquet(paths, out_dir, *, split="train", features=None, shards=1,
    options="group_size:1,zstd:3", progress=False, max_side=None, jpeg_quality=None): convert
    Parquet files into a prepared TFDS dataset in out_dir (a version folder).

    split names the split written ("train" by default); shards the files written (1 by
    default); options the ArrayRecord writer options ("group_size:1,zstd:3", TFDS's own, by
    default); features (None by default: every column as the schema says) declares columns.

    paths: a path, a glob or a list of them, read in order; their rows keep that order, and
    the same input always gives the same bytes. out_dir: the dataset's version folder, e.g.
    data/my_dataset/1.0.0 (the name and version are taken from it; another folder name gives
    version 1.0.0). Writes <name>-<split>.array_record-0000k-of-0000N (shards contiguous runs
    of rows whose counts differ by at most one, written with the ArrayRecord options given,
    TFDS's own by default), features.json and dataset_info.json. Converting another split
    into an existing dataset adds that split (its features must be the same).

    Features follow the Arrow schema: int/float/bool columns become scalar Tensors, strings
    Text, binary a string Tensor, fixed_size_list Tensors of that shape, variable lists Tensors
    of shape (None, ...). features={"col": spec} declares: "image", "image:png" or
    "image:jpeg" (a binary column of encoded images; each is decoded to check it, and the
    feature's shape is the first image's, or (None, None, C) when they differ),
    "class_label:N" (an int column of labels 0..N-1), "shape:N" or "shape:N,M" (a variable
    list column whose rows must all hold N values, or N rows of M).

    A row that does not fit (a null, a bad image, a label out of range, a list of the wrong
    length) or a file whose schema differs from the first's raises ConversionError naming
    the file, row and column; nothing is left at out_dir then. progress=True prints rows done
    and rows/s to stderr (False, the default: silent). Returns {"rows": n, "shards": [file names], "out_dir": out_dir}.

    max_side=N (None by default: images as read) shrinks the dataset as `grist convert --from
    imagefolder --max-side N --jpeg-quality Q` does, with the same code: an image of an image
    column whose longer side is over N pixels is resized to N (Pillow's antialiased bilinear,
    the shorter side rounded) and re-encoded as JPEG of jpeg_quality (1..100; None by
    default, meaning 90); smaller, RGBA, gray+alpha and 16-bit images are written as read.
    The result then also holds "images_resized", "image_bytes_in" and "image_bytes_out" (the
    image columns' bytes before and after), to say how much smaller the dataset got. An
    image column declared "image:png" cannot take the re-encoded JPEGs (declare "image").

    out_dir may be an s3:// or gs:// URL: each shard is uploaded as it is written (grist.Writer
    to a URL), then features.json, then dataset_info.json last, so TFDS and grist see the
    dataset (or the new split) only once all of it is there; on an error the shards this call
    uploaded are deleted again.
    """
    import pyarrow.parquet as pq

    from . import _expand  # here: grist/__init__ imports grist.tfds, which imports this module

    files = _expand(paths)
    features = dict(features or {})
    if not re.fullmatch(r"[A-Za-z0-9_]+", split):
        raise ValueError(f"from_parquet: split {split!r} must be letters, digits and '_'")
    if not isinstance(shards, int) or shards < 1:
        raise ValueError("from_parquet: shards must be an integer >= 1")
    name, version = _name_and_version(out_dir)
    _check_shrink("from_parquet", max_side, jpeg_quality)

    metas = [pq.ParquetFile(f) for f in files]
    schema = metas[0].schema_arrow
    leaves = list(_leaves(schema))
    unknown = set(features) - {name for name, _ in leaves}
    if unknown:
        raise ConversionError(f"{files[0]}: features= names columns the file does not have: {sorted(unknown)}")
    columns = [_Column(name, t, features.get(name)) for name, t in leaves]
    _set_shrink("from_parquet", columns, max_side, jpeg_quality)
    for path, pf in zip(files[1:], metas[1:]):
        if not pf.schema_arrow.equals(schema):
            raise ConversionError(f"{path}: its schema differs from {files[0]}'s:\n{pf.schema_arrow}\n"
                                  f"instead of\n{schema}")
    total = sum(pf.metadata.num_rows for pf in metas)
    quota = [total // shards + (k < total % shards) for k in range(shards)]

    if "://" in out_dir:
        return _shrink_report(columns, _to_object_storage(files, metas, columns, out_dir.rstrip("/"), name, version,
                                                          split, quota, options, progress, total))
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(os.path.normpath(out_dir)) + ".tmp-", dir=parent)
    try:
        names = _write_shards(files, metas, columns, tmp, name, split, quota, options, progress, total)
        _dump(_features_json(columns), os.path.join(tmp, "features.json"), 4)
        _publish(tmp, out_dir, name, version, split, names, quota)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _shrink_report(columns, {"rows": total, "shards": names, "out_dir": out_dir})


def _check_shrink(who, max_side, jpeg_quality):
    """max_side and jpeg_quality as `grist convert` checks them."""
    if max_side is not None and (not isinstance(max_side, int) or not 1 <= max_side <= 65535):
        raise ValueError(f"{who}: max_side must be an int of 1..65535 pixels, not {max_side!r}")
    if jpeg_quality is not None:
        if max_side is None:
            raise ValueError(f"{who}: jpeg_quality only with max_side (images are otherwise written as read)")
        if not isinstance(jpeg_quality, int) or not 1 <= jpeg_quality <= 100:
            raise ValueError(f"{who}: jpeg_quality must be an int of 1..100, not {jpeg_quality!r}")


def _set_shrink(who, columns, max_side, jpeg_quality):
    """Give every image column of @columns the max_side and jpeg_quality (checked)."""
    _check_shrink(who, max_side, jpeg_quality)
    if max_side is None:
        return
    images = [c for c in columns if c.kind == "image"]
    if not images:
        raise ValueError(f"{who}: max_side shrinks image columns, and there is none (declare one: "
                         "features={'col': 'image'})")
    for c in images:
        c.max_side, c.jpeg_quality = max_side, jpeg_quality or 90


def _shrink_report(columns, result):
    images = [c for c in columns if c.kind == "image" and c.max_side]
    if images:
        result["images_resized"] = sum(c.resized for c in images)
        result["image_bytes_in"] = sum(c.bytes_in for c in images)
        result["image_bytes_out"] = sum(c.bytes_out for c in images)
    return result


def _to_object_storage(files, metas, columns, out_dir, name, version, split, quota, options, progress, total):
    """from_parquet into an s3:// or gs:// folder: the shards, features.json, dataset_info.json
    last; an existing dataset there gains the split as locally (its other splits kept, the
    split's old shards that the new ones do not replace deleted after the new metadata).
    Object storage has no rename: a shard of the same name as one of the split's old shards
    replaces it in place, so a failure part-way through re-converting a split leaves that
    split to be converted again (the other splits stay readable)."""
    from . import _grist

    if not out_dir.startswith(("s3://", "gs://")):
        raise ValueError(f"from_parquet: {out_dir}: only s3:// and gs:// URLs can be written")
    try:
        old_info = json.loads(_grist.remote_get(out_dir + "/dataset_info.json", _meta.METADATA_MAX_BYTES))
        old_features = json.loads(_grist.remote_get(out_dir + "/features.json", _meta.METADATA_MAX_BYTES))
    except _grist.Error as e:  # no dataset there yet: a new one
        if e.errno != errno.ENOENT:
            raise
        old_info = old_features = None
    committed, sizes = [], []
    try:
        names = _write_shards(files, metas, columns, out_dir, name, split, quota, options, progress, total,
                              committed, sizes)
        features = _features_json(columns)  # after the rows: an image feature's shape is the images'
        info = _dataset_info(old_info, old_features, features, name, version,
                             [_split_info(split, quota, sum(sizes))],
                             "Converted from Parquet by grist.tfds.from_parquet.", out_dir)
        _grist.remote_put(out_dir + "/features.json", _dumps(features, 4))
        _grist.remote_put(out_dir + "/dataset_info.json", _dumps(info, 2))
    except BaseException:
        for url in committed:
            try:
                _grist.remote_delete(url)
            except Exception:  # the first failure is the one to report
                pass
        raise
    prefix = f"{out_dir}/{name}-{split}.array_record-"
    for old in _grist.remote_glob(prefix + "*"):
        if old[len(out_dir) + 1:] not in names:
            _grist.remote_delete(old)
    return {"rows": total, "shards": names, "out_dir": out_dir}


def _dumps(obj, indent):
    """_dump()'s bytes, for an upload."""
    return json.dumps(obj, indent=indent, sort_keys=True).encode()


def _write_shards(files, metas, columns, tmp, name, split, quota, options, progress, total, committed=None,
                  sizes=None):
    """Write the shards into the folder (or URL folder) @tmp; the URLs of those closed go into
    @committed and their sizes into @sizes, when given. Returns the shard names."""
    def close(w, k):
        w.close()
        if committed is not None:
            committed.append(os.path.join(tmp, names[k]))
            sizes.append(w.file_bytes())

    names = [_meta._shard_name(_meta.DEFAULT_TEMPLATE, name, split, "array_record", k, len(quota))
             for k in range(len(quota))]
    shard, left, done, t0 = 0, quota[0], 0, time.perf_counter()
    writer = Writer(os.path.join(tmp, names[0]), options)
    try:
        for path, pf in zip(files, metas):
            first = 0
            for batch in pf.iter_batches(batch_size=_READ_ROWS, use_threads=False):
                def where(r, first=first, path=path):
                    return f"{path}: row {first + r}"
                records = encode_examples([c.encoded(_leaf_array(batch, c.name, where), where) for c in columns],
                                          batch.num_rows)
                for record in records:
                    while left == 0:
                        close(writer, shard)
                        shard += 1
                        left = quota[shard]
                        writer = Writer(os.path.join(tmp, names[shard]), options)
                    writer.write(record)
                    left -= 1
                first += batch.num_rows
                done += batch.num_rows
                if progress:
                    rate = done / max(time.perf_counter() - t0, 1e-9)
                    print(f"\rgrist from_parquet: {done}/{total} rows, {rate:,.0f} rows/s", end="",
                          file=sys.stderr, flush=True)
        while shard < len(quota) - 1:  # shards after the last row (more shards than rows)
            close(writer, shard)
            shard += 1
            writer = Writer(os.path.join(tmp, names[shard]), options)
        close(writer, shard)
    except BaseException:
        writer.__exit__(*sys.exc_info())  # drops the unfinished shard
        raise
    if progress:
        print(file=sys.stderr)
    return names


def _split_info(split, lengths, num_bytes):
    """A split's entry in dataset_info.json: TFDS's file name template and each shard's count."""
    return {"filepathTemplate": _meta.DEFAULT_TEMPLATE, "name": split,
            "numBytes": str(num_bytes), "shardLengths": [str(q) for q in lengths]}


def _dataset_info(old_info, old_features, features, name, version, splits, description, where):
    """dataset_info.json's content: @old_info (None for a new dataset) with @splits (split
    entries) replacing those of the same names. An existing dataset's features.json
    (@old_features) must be @features: a split of other features would not be readable."""
    if old_info is None:
        old_info = {"description": description, "fileFormat": "array_record", "name": name, "splits": [],
                    "version": version}
    elif old_features != features:
        raise ConversionError(f"{where}: holds a dataset whose features differ from these")
    new = {s["name"] for s in splits}
    info = dict(old_info)
    info["splits"] = [s for s in old_info.get("splits", []) if s.get("name") not in new] + list(splits)
    return info


def _publish(tmp, out_dir, name, version, split, names, quota,
             description="Converted from Parquet by grist.tfds.from_parquet."):
    """Move the finished files into out_dir: the whole folder at once when it is new; else the
    split's files, then dataset_info.json last (a reader sees the old split or the new one)."""
    info_path = os.path.join(out_dir, "dataset_info.json")
    old_info = old_features = None
    existing = os.path.exists(info_path)
    if existing:
        with open(info_path) as f:
            old_info = json.load(f)
        with open(os.path.join(out_dir, "features.json")) as f:
            old_features = json.load(f)
    with open(os.path.join(tmp, "features.json")) as f:
        features = json.load(f)
    split_info = _split_info(split, quota, sum(os.path.getsize(os.path.join(tmp, n)) for n in names))
    info = _dataset_info(old_info, old_features, features, name, version, [split_info], description, out_dir)
    _dump(info, os.path.join(tmp, "dataset_info.json"), 2)
    if not os.path.exists(out_dir):
        os.rename(tmp, out_dir)
        return
    if not existing and os.listdir(out_dir):
        raise ConversionError(f"{out_dir}: exists and holds files but no dataset_info.json")
    prefix = f"{name}-{split}.array_record-"
    for old_shard in os.listdir(out_dir):
        if old_shard.startswith(prefix) and old_shard not in names:
            os.remove(os.path.join(out_dir, old_shard))
    for n in names + ["features.json", "dataset_info.json"]:
        os.replace(os.path.join(tmp, n), os.path.join(out_dir, n))
    shutil.rmtree(tmp, ignore_errors=True)
