"""grist.beam: ArrayRecord sink and source for Apache Beam pipelines (`pip install grist-loader[beam]`).

WriteToArrayRecord(file_path_prefix, ...) writes a PCollection of bytes into ArrayRecord
shards with grist's C writer, through Beam's file-sink protocol: each bundle writes a
temporary, and only the finalize step renames the temporaries of the bundles that succeeded
to their final names, so a failed or retried bundle leaves neither a partial file nor a
duplicate at a final name. WriteToTFDS(out_dir, features=...) writes a PCollection of feature dicts as a prepared TFDS
dataset (the same sink, the rows encoded as tf.train.Example by grist's C encoder, then
features.json and dataset_info.json). ReadFromArrayRecord(file_pattern) reads the records of every
matching file as a BoundedSource whose positions are chunk indices: runners split a file
into ranges of whole chunks at the start, and again while it is read (dynamic rebalancing).

Both run on any runner (DirectRunner, Flink, Spark, Dataflow). The files a worker reads must
be local to it (a local disk, NFS, or a bucket mounted with gcsfuse or similar); the shards
the sink writes may go anywhere Beam's FileSystems reach (gs://, s3://, ...): a shard bound
elsewhere is written to a local temporary and copied there when it is complete.

This module imports apache_beam; `import grist` alone never does.
"""

import copy
import os
import re
import shutil
import tempfile
import uuid
import weakref

import numpy as np

import apache_beam as beam
from apache_beam import coders
from apache_beam.io import filebasedsink, iobase
from apache_beam.io.concat_source import ConcatSource
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem
from apache_beam.io.range_trackers import OffsetRangeTracker
from apache_beam.metrics import Metrics
from apache_beam.transforms.display import DisplayDataItem

import grist

__all__ = ["WriteToArrayRecord", "ReadFromArrayRecord", "WriteToTFDS"]

# WriteToTFDS encodes this many feature dicts of a bundle in one call of the C encoder.
_ENCODE_ROWS = 512
# A read() asks grist for about this much stored data, or this many records, at a time:
# enough to keep one batched io_uring submission busy, little enough to bound memory.
_READ_BYTES = 4 << 20
_READ_RECORDS = 4096
# The size of the pieces in which a finished shard is copied to a non-local file system.
_COPY_BYTES = 8 << 20


def _is_local(path):
    return isinstance(FileSystems.get_filesystem(path), LocalFileSystem)


class _RemoteShard:
    """A shard bound for a non-local file system: written by grist to a local temporary and
    copied to @path (one of Beam's temporary names) only once it is complete; Beam renames it
    to its final name only if the bundle succeeds."""

    def __init__(self, path, options):
        self._path = path
        d = tempfile.mkdtemp(prefix="grist-beam-")
        self._local = os.path.join(d, "shard")
        try:
            w = grist.Writer(self._local, options)
        except BaseException:
            os.rmdir(d)
            raise
        self._writer = w
        self.write = w.write
        # A bundle that fails drops its writer without close(): the local copy goes then.
        self._cleanup = weakref.finalize(self, _drop_local, w, d)

    def close(self):
        try:
            self._writer.close()
            with open(self._local, "rb") as src, \
                    FileSystems.create(self._path, "application/octet-stream",
                                       CompressionTypes.UNCOMPRESSED) as dst:
                shutil.copyfileobj(src, dst, _COPY_BYTES)
        finally:
            self._cleanup()


def _drop_local(writer, folder):
    writer.abort()
    shutil.rmtree(folder, ignore_errors=True)


class _ArrayRecordSink(filebasedsink.FileBasedSink):
    """Beam's file sink with grist.Writer as the file: Beam names, shards and renames."""

    def __init__(self, file_path_prefix, num_shards, options, shard_name_template, file_name_suffix):
        super().__init__(file_path_prefix, coder=coders.BytesCoder(), file_name_suffix=file_name_suffix,
                         num_shards=num_shards, shard_name_template=shard_name_template,
                         mime_type="application/octet-stream",
                         compression_type=CompressionTypes.UNCOMPRESSED)
        self.options = options

    def open(self, temp_path):
        # grist.Writer itself writes a hidden temporary next to temp_path and renames it
        # there on close(): a bundle that dies leaves no file Beam could take as finished.
        if _is_local(temp_path):
            return grist.Writer(temp_path, self.options)
        return _RemoteShard(temp_path, self.options)

    def write_record(self, file_handle, value):
        # Records are bytes already: no coder between Beam and the writer.
        file_handle.write(value)

    def close(self, file_handle):
        file_handle.close()

    def display_data(self):
        dd = super().display_data()
        dd["options"] = DisplayDataItem(self.options, label="ArrayRecord writer options")
        return dd


def _check_options(options):
    """Fail at pipeline construction, not on a worker, when the writer options are wrong."""
    with tempfile.TemporaryDirectory(prefix="grist-beam-") as d:
        grist.Writer(os.path.join(d, "check"), options).abort()


class WriteToArrayRecord(beam.PTransform):
    """WriteToArrayRecord(file_path_prefix, *, num_shards=0, options="group_size:1",
    shard_name_template="-SSSSS-of-NNNNN", file_name_suffix="")

    Writes a PCollection of bytes (one record each) to ArrayRecord files named
    file_path_prefix + shard_name_template + file_name_suffix, with S and N replaced by the
    zero-padded shard number and count, as Beam's file sinks name them (TFDS's names:
    prefix ".../mnist-train.array_record" gives mnist-train.array_record-00000-of-00004).
    num_shards=0 lets the runner decide (one shard per bundle). options is the official
    writer's option text; "max_parallelism:N" compresses N chunks of a shard at once on
    threads of grist's writer. Each shard is committed by Beam's finalize step only, once
    every bundle succeeded. The result is the PCollection of the file names written.
    """

    def __init__(self, file_path_prefix, *, num_shards=0, options="group_size:1",
                 shard_name_template=filebasedsink.DEFAULT_SHARD_NAME_TEMPLATE, file_name_suffix=""):
        super().__init__()
        if not isinstance(num_shards, int) or num_shards < 0:
            raise ValueError(f"grist.beam.WriteToArrayRecord: num_shards must be an int >= 0, not {num_shards!r}")
        _check_options(options)
        self._sink = _ArrayRecordSink(file_path_prefix, num_shards, options, shard_name_template, file_name_suffix)

    def expand(self, pcoll):
        """Beam's PTransform.expand: the PCollection of bytes written; returns the files' names."""
        return pcoll | iobase.Write(self._sink)


class _FileSource(iobase.BoundedSource):
    """The records of one ArrayRecord file; positions are chunk indices, each a split point."""

    def __init__(self, path, num_records, num_chunks, group_size, file_size):
        self.path = path
        self.num_records = num_records
        self.num_chunks = num_chunks
        self.group_size = group_size
        self.file_size = file_size

    def _bytes(self, chunks):
        return self.file_size * chunks // max(1, self.num_chunks)

    def estimate_size(self):
        return self.file_size

    def split(self, desired_bundle_size, start_position=None, stop_position=None):
        start = 0 if start_position is None else start_position
        stop = self.num_chunks if stop_position is None else stop_position
        step = max(1, desired_bundle_size * max(1, self.num_chunks) // max(1, self.file_size))
        for a in range(start, stop, step):
            b = min(stop, a + step)
            yield iobase.SourceBundle(self._bytes(b - a), self, a, b)

    def get_range_tracker(self, start_position, stop_position):
        start = 0 if start_position is None else start_position
        stop = self.num_chunks if stop_position is None else stop_position
        t = OffsetRangeTracker(start, stop)
        # Every chunk is a split point, so the runner knows how far a range can still be cut.
        t.set_split_points_unclaimed_callback(
            lambda stop_pos: max(0, stop_pos - max(start, t.last_record_start) - 1))
        return t

    def read(self, range_tracker):
        Metrics.counter("grist.beam", "ranges_read").inc()
        g, n = self.group_size, self.num_records
        per_read = max(1, min(_READ_RECORDS // max(1, g), _READ_BYTES * self.num_chunks // max(1, self.file_size)))
        c = range_tracker.start_position()
        with grist.Reader(self.path) as r:
            # stop_position() shrinks when the runner splits this range while we read it.
            while c < range_tracker.stop_position():
                end = min(range_tracker.stop_position(), c + per_read)
                records = r.read(range(c * g, min(end * g, n)))
                for k in range(c, end):
                    # A chunk is ours only once claimed: read ahead of a split is dropped.
                    if not range_tracker.try_claim(k):
                        return
                    yield from records[(k - c) * g:(k - c + 1) * g]
                c = end

    def default_output_coder(self):
        return coders.BytesCoder()

    def display_data(self):
        return {"file": DisplayDataItem(self.path, label="ArrayRecord file")}


class _ArrayRecordSource(iobase.BoundedSource):
    """Every file matching a pattern, split per file into ranges of chunks."""

    def __init__(self, file_pattern, validate=True):
        self.file_pattern = file_pattern
        self._files = None  # [_FileSource], found on first use (on a worker)
        if validate:
            self._match()

    def _match(self):
        result = FileSystems.match([self.file_pattern])[0]
        paths = sorted(m.path for m in result.metadata_list)
        if not paths:
            raise ValueError(f"grist.beam.ReadFromArrayRecord: no file matches {self.file_pattern!r}")
        for p in paths:
            if not _is_local(p):
                raise ValueError(f"grist.beam.ReadFromArrayRecord: {p}: grist reads local files only "
                                 "(mount the bucket, e.g. with gcsfuse)")
        return paths

    def _file_sources(self):
        if self._files is None:
            files = []
            for p in self._match():  # one at a time: a dataset of many shards never holds many fds
                with grist.Reader(p) as r:
                    i = r.info()[0]
                files.append(_FileSource(i["path"], i["records"], i["chunks"], i["group_size"], i["file_size"]))
            self._files = files
        return self._files

    def estimate_size(self):
        result = FileSystems.match([self.file_pattern])[0]
        return sum(m.size_in_bytes for m in result.metadata_list)

    def split(self, desired_bundle_size, start_position=None, stop_position=None):
        for f in self._file_sources():
            yield from f.split(desired_bundle_size)

    def _concat(self):
        return ConcatSource([f for f in self._file_sources() if f.num_chunks])

    def get_range_tracker(self, start_position, stop_position):
        return self._concat().get_range_tracker(start_position, stop_position)

    def read(self, range_tracker):
        return self._concat().read(range_tracker)

    def default_output_coder(self):
        return coders.BytesCoder()

    def display_data(self):
        return {"file_pattern": DisplayDataItem(self.file_pattern, label="File pattern")}


class ReadFromArrayRecord(beam.PTransform):
    """ReadFromArrayRecord(file_pattern, *, validate=True): a PCollection of the records
    (bytes) of every ArrayRecord file matching file_pattern.

    Each file is read in ranges of whole chunks that runners size to their workers and split
    further while they run (the chunk is the unit of reading and decoding, so no chunk is
    read twice). Every chunk's hash is checked; a corrupt file fails the pipeline with
    grist's error, which names the file and byte offset. file_pattern is a path or a glob
    the workers see locally. validate=True (the default) checks at pipeline construction that
    the pattern matches a file.
    """

    def __init__(self, file_pattern, *, validate=True):
        super().__init__()
        self._source = _ArrayRecordSource(file_pattern, validate=validate)

    def expand(self, pbegin):
        """Beam's PTransform.expand: the records of the matching files, read as a bounded source."""
        return pbegin | iobase.Read(self._source)


# ---- WriteToTFDS: feature dicts -> a prepared TFDS dataset ----
#
# The features are grist.tfds.from_parquet's (_parquet._Column): a feature is described as the
# Arrow type from_parquet would meet in a Parquet file, each bundle's dicts are gathered into
# Arrow arrays of those types, and from there on the encoding (checks, tf.train.Example by the
# C encoder), features.json and dataset_info.json are from_parquet's own code.

_NUMERIC = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64")
_SPEC = re.compile(r"(?P<what>[a-z_0-9]+)(?::(?P<arg>[a-z0-9]+))?(?:\[(?P<dims>[^\]]*)\])?")


def _tfds_spec(name, f):
    """A tfds.features leaf as the text form of a feature."""
    cls = type(f).__name__
    if cls == "Text":
        return "text"
    if cls == "ClassLabel":
        return f"class_label:{f.num_classes}"
    shape = ",".join("None" if d is None else str(d) for d in f.shape)
    if cls == "Image":
        fmt = getattr(f, "encoding_format", None)
        return f"image{':' + fmt if fmt else ''}[{shape}]"
    if cls in ("Tensor", "Scalar"):
        dt = np.dtype(f.np_dtype)
        base = "bytes" if dt.kind in "OSU" else dt.name
        return f"{base}[{shape}]" if shape else base
    raise ValueError(f"grist.beam.WriteToTFDS: feature {name!r}: tfds.features.{cls} is not written "
                     "(Tensor, Scalar, Text, Image and ClassLabel are)")


def _feature_column(name, spec):
    """One feature's _parquet._Column from its description: a tfds.features leaf, or text:
    "int64", "float32[2,3]", "int32[None]", "float32[None,3]", "bytes", "bytes[None]", "text",
    "image", "image:png", "image:jpeg[None,None,1]", "class_label:N"."""
    import pyarrow as pa

    from ._parquet import ConversionError, _Column

    where = f"grist.beam.WriteToTFDS: feature {name!r}"
    if not isinstance(spec, str):
        spec = _tfds_spec(name, spec)
    m = _SPEC.fullmatch(spec.replace(" ", ""))
    what, arg = (m["what"], m["arg"]) if m else (None, None)
    try:
        dims = [None if d in ("None", "-1") else int(d) for d in m["dims"].split(",") if d] if m and m["dims"] else []
    except ValueError:
        m = None
    plain = what in _NUMERIC + ("bytes", "text")
    if m is None or not (plain and arg is None or what in ("image", "class_label")):
        raise ConversionError(f"{where}: {spec!r} is not a feature (a dtype such as 'int64' or "
                              "'float32[2,3]', 'bytes', 'text', 'image[:png|:jpeg][H,W,C]', 'class_label:N')")
    if any(d is None for d in dims[1:]) and what != "image":
        raise ConversionError(f"{where}: {spec!r}: only the first dimension may be None")
    if what == "image":
        if len(dims) not in (0, 3) or dims and dims[2] is None:
            raise ConversionError(f"{where}: {spec!r}: an image's shape is [H,W,C], C given")
        col = _Column(name, pa.binary(), "image" + (":" + arg if arg else ""))
        # The shape is declared, not found from the images: bundles see different images and
        # features.json is written before any of them. TFDS's default is (None, None, 3).
        col.image_shape = [-1 if d is None else d for d in dims] if dims else [-1, -1, 3]
        return col
    if what == "class_label":
        if dims:
            raise ConversionError(f"{where}: {spec!r}: a class label is a scalar")
        return _Column(name, pa.int64(), spec)
    if what == "text" and dims:
        raise ConversionError(f"{where}: {spec!r}: text is a scalar (a list of strings is 'bytes[None]')")
    t = {"bytes": pa.binary(), "text": pa.string()}.get(what) or pa.from_numpy_dtype(np.dtype(what))
    for d in reversed(dims[1:]):
        t = pa.list_(t, d)
    if dims:
        t = pa.list_(t) if dims[0] is None else pa.list_(t, dims[0])
    return _Column(name, t, None)


def _feature_columns(features, prefix=""):
    """The leaves of @features, a nested one named parent/child (the key TFDS flattens it to)."""
    if not hasattr(features, "items"):
        raise ValueError("grist.beam.WriteToTFDS: features= is a dict of feature name -> description "
                         "or a tfds.features.FeaturesDict")
    cols = []
    for name, spec in features.items():
        if "/" in name:
            raise ValueError(f"grist.beam.WriteToTFDS: feature {prefix + name!r}: '/' joins nested keys in "
                             "TFDS; nest a dict instead")
        if isinstance(spec, dict) or type(spec).__name__ == "FeaturesDict":
            cols += _feature_columns(spec, prefix + name + "/")
        else:
            cols.append(_feature_column(prefix + name, spec))
    return cols


def _flat(row, prefix=""):
    """A nested element as one dict keyed parent/child."""
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(_flat(v, prefix + k + "/"))
        else:
            out[prefix + k] = v
    return out


def _bytes_value(v, where, name):
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytes, bytearray, memoryview, np.bytes_)):
        return bytes(v)
    raise _error(where, name, f"{type(v).__name__} where bytes or str were expected")


def _error(where, name, what):
    from ._parquet import ConversionError
    return ConversionError(f"{where}, feature {name!r}: {what}")


def _arrow_column(col, values, where):
    """The values one feature takes in a bundle's dicts as an Arrow array of @col's type,
    checked against its dtype and shape; @where(r) names element r."""
    import pyarrow as pa

    if col.kind in ("text", "image") or (col.kind == "bytes" and not col.shape):
        return pa.array([_bytes_value(v, where(r), col.name) for r, v in enumerate(values)], pa.binary())
    dtype = None if col.kind == "bytes" else np.dtype(col.dtype)
    if dtype is not None and not col.ragged:
        # The whole bundle at once when every value is a number or array of the feature's
        # shape; anything else goes value by value below, which names the element at fault.
        a = _fixed_batch(values, dtype, col.shape)
        if a is not None:
            arr = pa.array(a.reshape(-1))
            for size in reversed(col.fixed):
                arr = pa.FixedSizeListArray.from_arrays(arr, size)
            return arr
    flat, firsts = [], []
    for r, v in enumerate(values):
        try:
            a = np.asarray(v, dtype=object if dtype is None else None)
        except Exception as e:  # noqa: BLE001 (numpy raises many kinds for ragged nests)
            raise _error(where(r), col.name, f"not an array: {e}") from None
        if len(a.shape) != len(col.shape) or any(e != -1 and e != d for e, d in zip(col.shape, a.shape)):
            want = "(" + ", ".join("None" if d == -1 else str(d) for d in col.shape) + ("," if len(col.shape) == 1 else "") + ")"
            raise _error(where(r), col.name, f"a value of shape {a.shape} where the feature's is {want}")
        if dtype is None:
            flat.extend(_bytes_value(x, where(r), col.name) for x in a.reshape(-1))
        else:
            ok = a.dtype.kind in ("b" if dtype.kind == "b" else "biu" if dtype.kind in "iu" else "biuf")
            if (not ok or a.dtype == object) and a.size:  # [] is float64 to numpy, and fits any
                raise _error(where(r), col.name, f"{a.dtype} values where the feature holds {dtype}")
            b = a.astype(dtype).reshape(-1)
            if dtype.kind in "iu" and not np.array_equal(b, a.reshape(-1)):
                raise _error(where(r), col.name, f"a value out of {dtype}'s range")
            flat.append(b)
        firsts.append(a.shape[0] if a.shape else 1)
    if dtype is None:
        arr = pa.array(flat, pa.binary())
    else:
        arr = pa.array(np.concatenate(flat) if flat else np.zeros(0, dtype))
    for size in reversed(col.fixed):
        arr = pa.FixedSizeListArray.from_arrays(arr, size)
    if col.ragged:
        offsets = np.concatenate([[0], np.cumsum(firsts)]).astype(np.int32)
        arr = pa.ListArray.from_arrays(pa.array(offsets), arr)
    return arr


def _fixed_batch(values, dtype, shape):
    """@values as one array of @dtype and shape (len(values), *shape), or None if they are
    not all of that shape and of a kind that casts exactly."""
    try:
        a = np.asarray(values)
    except Exception:  # noqa: BLE001 (ragged nests)
        return None
    if a.shape != (len(values), *shape) or a.dtype.kind not in ("b" if dtype.kind == "b" else
                                                                "biu" if dtype.kind in "iu" else "biuf"):
        return None
    b = a.astype(dtype)
    if dtype.kind in "iu" and a.dtype != dtype and not np.array_equal(b, a):
        return None
    return b


def _encode_rows(columns, rows, first):
    """tf.train.Example records of @rows (feature dicts), in one call of the C encoder; @first
    is the index of rows[0] in its shard (for messages)."""
    from ._grist import encode_examples

    def where(r):
        return f"grist.beam.WriteToTFDS: element {first + r} of a shard"
    names = [c.name for c in columns]
    for r, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TypeError(f"{where(r)}: a {type(row).__name__} where a dict of features was expected")
    if any("/" in n for n in names):
        rows = [_flat(row) for row in rows]
    for r, row in enumerate(rows):
        if len(row) != len(names) or any(n not in row for n in names):
            missing = sorted(set(names) - set(row))
            extra = sorted(set(row) - set(names))
            raise _error(where(r), (missing or extra)[0],
                         f"missing (features {missing} are missing)" if missing else
                         f"not one of the features (the element has keys {extra} that features= does not)")
    encoded = []
    for c in columns:
        declared = c.image_shape
        encoded.append(c.encoded(_arrow_column(c, [row[c.name] for row in rows], where), where))
        if c.kind == "image" and c.image_shape != declared:
            raise _error(f"grist.beam.WriteToTFDS: elements {first}..{first + len(rows) - 1} of a shard", c.name,
                         f"an image of another height or width than the declared {declared}")
    return encode_examples(encoded, len(rows))


class _ExampleShard:
    """A shard of a WriteToTFDS split: feature dicts gathered and encoded in batches."""

    def __init__(self, shard, columns):
        self._shard = shard
        self._columns = copy.deepcopy(columns)  # _Column keeps per-file state (image format)
        self._rows = []
        self._done = 0

    def write(self, row):
        self._rows.append(row)
        if len(self._rows) >= _ENCODE_ROWS:
            self._flush()

    def _flush(self):
        if self._rows:
            for record in _encode_rows(self._columns, self._rows, self._done):
                self._shard.write(record)
            self._done += len(self._rows)
            self._rows = []

    def close(self):
        self._flush()
        self._shard.close()


class _TFDSSink(_ArrayRecordSink):
    def __init__(self, file_path_prefix, num_shards, options, columns):
        super().__init__(file_path_prefix, num_shards, options, filebasedsink.DEFAULT_SHARD_NAME_TEMPLATE, "")
        self.columns = columns

    def open(self, temp_path):
        return _ExampleShard(super().open(temp_path), self.columns)


class _Publish(beam.DoFn):
    """Once every split's shards are final in their staging folders: count each shard's
    records (from its footer), then move split after split into out_dir with from_parquet's
    _publish (shards, features.json, dataset_info.json last)."""

    def __init__(self, out_dir, name, version, staging, features_json):
        self.out_dir, self.name, self.version = out_dir, name, version
        self.staging, self.features_json = staging, features_json

    def process(self, unused, **shards):
        from ._parquet import _dump, _publish
        for split, paths in sorted(shards.items()):
            tmp = self.staging[split]
            paths = sorted(paths)
            names = [os.path.basename(p) for p in paths]
            lengths = []
            for p in paths:
                with grist.Reader(p) as r:
                    lengths.append(r.info()[0]["records"])
            _dump(self.features_json, os.path.join(tmp, "features.json"), 4)
            _publish(tmp, self.out_dir, self.name, self.version, split, names, lengths,
                     "Written by grist.beam.WriteToTFDS.")
            shutil.rmtree(tmp, ignore_errors=True)
            Metrics.counter("grist.beam", "tfds_records").inc(sum(lengths))
            yield from (os.path.join(self.out_dir, n) for n in names)


class WriteToTFDS(beam.PTransform):
    """WriteToTFDS(out_dir, *, features, split="train", num_shards=0,
    options="group_size:1,zstd:3", max_side=None, jpeg_quality=None)

    Writes feature dicts as a prepared TFDS dataset in out_dir (its version folder, e.g.
    data/my_dataset/1.0.0: the name and version are taken from it as from_parquet takes them):
    shards <name>-<split>.array_record-0000k-of-0000N of tf.train.Example records, features.json
    and dataset_info.json with each shard's record count. Apply it to a PCollection (the split
    named split=) or to a dict {split: PCollection} (every split, one dataset_info.json
    written once); a dataset already in out_dir keeps its other splits (same features).

    features: a dict {name: description} or a tfds.features.FeaturesDict, nested or not (an
    element then nests dicts alike). A description is a tfds.features Tensor/Scalar/Text/Image/ClassLabel
    or its text: "int64", "float32[2,3]", "int32[None]" (variable length), "bytes", "bytes[None]",
    "text", "image" (encoded PNG/JPEG bytes, shape (None, None, 3)), "image:png[28,28,1]",
    "class_label:10". An element is a dict with exactly these keys: numbers, numpy arrays or
    nested lists of the feature's shape, str or bytes. An element that does not fit fails the
    pipeline with grist.tfds.ConversionError naming the feature.

    Shards are written in a staging folder beside out_dir and moved in only after every bundle
    of every split succeeded, dataset_info.json last: out_dir holds the old dataset or the new
    one. out_dir is local (or mounted). The result is the PCollection of the shard paths.

    num_shards: shards per split (0, the default, lets the runner decide: a shard per bundle);
    options: the ArrayRecord writer options of each shard ("group_size:1,zstd:3", TFDS's own,
    by default).

    max_side=N (None, the default: images as read) and jpeg_quality (1..100; None: 90) shrink
    the image features as `grist convert --max-side N --jpeg-quality Q` and from_parquet do,
    with the same code: an image whose longer side passes N is resized to N and re-encoded as
    JPEG; smaller, RGBA, gray+alpha and 16-bit ones are kept. Declare such images without a
    fixed height and width ("image", or "image[None,None,3]"), and not "image:png".
    """

    def __init__(self, out_dir, *, features, split="train", num_shards=0, options="group_size:1,zstd:3",
                 max_side=None, jpeg_quality=None):
        super().__init__()
        from ._parquet import _features_json, _name_and_version, _set_shrink

        if not isinstance(num_shards, int) or num_shards < 0:
            raise ValueError(f"grist.beam.WriteToTFDS: num_shards must be an int >= 0, not {num_shards!r}")
        if not _is_local(out_dir):
            raise ValueError(f"grist.beam.WriteToTFDS: {out_dir}: out_dir must be local (or mounted)")
        _check_options(options)
        self._out_dir = os.path.abspath(out_dir)
        self._split, self._num_shards, self._options = split, num_shards, options
        self._name, self._version = _name_and_version(self._out_dir)
        self._columns = _feature_columns(features)
        _set_shrink("grist.beam.WriteToTFDS", self._columns, max_side, jpeg_quality)
        self._features_json = _features_json(self._columns)

    def expand(self, pcolls):
        """Beam's PTransform.expand: one PCollection (the split named split=) or a dict of them
        by split, written and published; returns the shard paths."""
        splits = pcolls if isinstance(pcolls, dict) else {self._split: pcolls}
        for split in splits:
            if not isinstance(split, str) or not re.fullmatch(r"[A-Za-z0-9_]+", split):
                raise ValueError(f"grist.beam.WriteToTFDS: split {split!r} must be letters, digits and '_'")
        parent, base = os.path.split(self._out_dir)
        run = uuid.uuid4().hex
        staging = {s: os.path.join(parent, f".{base}.tmp-{run}-{s}") for s in splits}
        written = {}
        for split, pcoll in splits.items():
            prefix = os.path.join(staging[split], f"{self._name}-{split}.array_record")
            sink = _TFDSSink(prefix, self._num_shards, self._options, self._columns)
            written[split] = pcoll | f"Write {split}" >> iobase.Write(sink)
        pipeline = next(iter(splits.values())).pipeline
        return (pipeline | "Once" >> beam.Create([None])
                | "Publish" >> beam.ParDo(_Publish(self._out_dir, self._name, self._version, staging,
                                                   self._features_json),
                                          **{s: beam.pvalue.AsList(w) for s, w in written.items()}))
