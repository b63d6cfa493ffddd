"""grist: ArrayRecord data loading at the speed of the disk.

Reader and Writer for ArrayRecord files, ArrayRecordDataSource (a drop-in for Grain's
``grain.sources.ArrayRecordDataSource``), and Loader: shuffled, sharded batches assembled by
the C engine in pinned memory and handed to Python without a copy.
"""

import collections as _collections
import concurrent.futures as _futures
import glob as _glob
import logging as _logging
import os as _os
import textwrap as _textwrap
import threading as _threading
import weakref as _weakref
from typing import TYPE_CHECKING

# The library's diagnostics (a fallback it took, a setting it could not use) arrive on the
# logger "grist" (python/src/module.c). Like the library, the package prints nothing by
# itself: they show once the application configures logging (logging.basicConfig(), ...).
_logging.getLogger("grist").addHandler(_logging.NullHandler())
from . import _grist  # noqa: E402  (after the handler: importing it may log)
from ._grist import Batch, Error
from . import tfds  # noqa: E402,F401  (grist.tfds)
from . import text  # noqa: E402,F401  (grist.text)
from . import vision  # noqa: E402,F401  (grist.vision)
from ._tfds_meta import is_url as _is_url  # noqa: E402  (the one test for a URL path)

__version__ = _grist.__version__

__all__ = ["__version__", "Reader", "Writer", "ArrayRecordDataSource", "Loader", "Batch", "Error", "convert",
           "set_remote_options"]

_GLOB_CHARS = frozenset("*?[")


def set_remote_options(**options: "int | str") -> None:
    """Set the remote backend's options for readers and loaders opened from now on.

    Keywords (see grist/remote.h): connect_timeout_ms, timeout_ms, retries, backoff_ms,
    backoff_max_ms, coalesce (bytes), split (bytes), inflight (the cap on GETs in flight),
    inflight_min (GETs always allowed; between the two the budget follows rtt x bandwidth),
    redirects (HTTP redirects followed per request, 5), part (the multipart upload part size of
    writes to s3:// and gs://, whole MiB, 16MiB), upload_inflight (parts uploading at once, 4),
    direct (1: GETs of plain http:// endpoints are received by grist's own HTTP/1.1 straight
    into the read buffers, the default; 0: every GET by libcurl, docs/remote.md):
    ints, or strs such as coalesce="1MiB" (sizes take K, M, G, T or KiB..TiB). The C library
    parses and bounds them (the same text as the CLI's --remote); no keywords restores the
    defaults.
    """
    if not options:
        _grist.set_remote_options(None)
        return
    items = []
    for k, v in options.items():
        # an int is its decimal text, a str goes as written (sizes: "1MiB"): the C grammar
        # reads and bounds both, with the message --remote gives
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise TypeError("set_remote_options: %s must be an int or a str, not %s" % (k, type(v).__name__))
        if isinstance(v, str) and ("," in v or ":" in v):
            raise ValueError("remote option %s: '%s' is not a value (no ',' or ':')" % (k, v))
        items.append("%s:%s" % (k, v))
    _grist.set_remote_options(",".join(items))


if TYPE_CHECKING:  # names for the annotations only
    import os
    from typing import Callable, Sequence, Union

    _Paths = Union[str, bytes, "os.PathLike[str]", Sequence[Union[str, bytes, "os.PathLike[str]"]]]
    # Loader(paths=...): one dataset, or with weights= a list of them
    _Datasets = Union[_Paths, Sequence[_Paths]]


def _expand(paths):
    """A path, a glob pattern or a sequence of them -> a list of file names, in order.

    A name that exists is taken as it is; a pattern expands to its matches sorted, and a
    pattern that matches nothing is an error (a typo should not become an empty dataset).
    """
    if isinstance(paths, (str, bytes, _os.PathLike)):
        paths = [paths]
    out = []
    for p in paths:
        p = _os.fsdecode(_os.fspath(p))
        if _is_url(p):
            # URLs go to the C library as they are; an s3:// or gs:// glob is listed there
            if p.startswith(("s3://", "gs://")) and _GLOB_CHARS.intersection(p):
                matches = _grist.remote_glob(p)
                if not matches:
                    raise ValueError(f"grist: no object matches {p!r}")
                out.extend(matches)
            else:
                out.append(p)
        elif not _os.path.exists(p) and _GLOB_CHARS.intersection(p):
            matches = sorted(_glob.glob(p))
            if not matches:
                raise ValueError(f"grist: no file matches {p!r}")
            out.extend(matches)
        else:
            out.append(p)
    if not out:
        raise ValueError("grist: no files given")
    return out


def convert(inputs: "_Paths", output: "str | os.PathLike[str]", *, format: "str | None" = None,
            options: str = "", shards: "int | None" = None, check: bool = True,
            progress: "Callable[[dict], object] | None" = None, features: "str | None" = None,
            max_side: "int | None" = None, jpeg_quality: "int | None" = None) -> "list[str]":
    """Convert TFRecord, text lines, folders or ArrayRecord files into ArrayRecord: `grist convert`.

    format="csv" with features="age:int64,score:float32,name:text,tags:text[]" writes one
    tf.train.Example per CSV row (the header names the columns); format="imagefolder" reads
    ROOT/<split>/<label>/<image> (inputs=ROOT) into a TFDS dataset folder at output
    (e.g. "data/flowers/1.0.0") that tfds.builder_from_directory opens; see grist/convert.h.

    inputs is a path, a glob pattern or a list of them, read in order (a folder is one record
    per regular file under it, in bytewise order of relative path). format is "tfrecord"
    (plain or GZIP), "lines" (plain or GZIP text, one record per line), "dir" or
    "arrayrecord"; None (the default) tells each input's by its file type and first bytes.
    options are the official writer options ("group_size:64,zstd:3,max_parallelism:4"; the
    default "" means the official defaults). shards=N writes N files, output-00000-of-0000N
    ..., contiguous runs whose counts differ by at most one (None, the default: one file).
    check=True (the default) checks every TFRecord CRC; check=False skips the data CRCs
    (lengths are still checked). features (None by default) is the CSV spec above.
    max_side=N (imagefolder; None by default: images as read) resizes an image whose longer
    side is over N pixels to N (Pillow's antialiased bilinear) and re-encodes it as JPEG of
    jpeg_quality (1..100; None by default, meaning 90), as `grist convert --max-side N
    --jpeg-quality Q` does; smaller and 4-channel images are written as read.

    progress, when given, is called about ten times a second with a dict: records, bytes
    (written so far), input_bytes_done, input_bytes_total (0 when unknown), seconds, input
    (index of the input being read), counting (the counting pass of shards) and done (the
    last call, once every output is in place).

    The output is byte-identical to `grist convert` with the same arguments. The GIL is
    released while converting. All or nothing: an error, an exception raised by progress or
    Ctrl-C (KeyboardInterrupt) stops the conversion and leaves nothing at the output names;
    that exception is raised. An output that is an input (the same file by any name, or a name
    inside an input folder) is refused with ValueError before anything is written. Bad input
    raises grist.Error naming the file and byte offset or record.

    Returns the list of files written.
    """
    return _grist.convert(_expand(inputs), _os.fspath(output), format, options, shards, check, progress, features,
                          max_side or 0, jpeg_quality or 0)


class Reader(_grist.Reader):
    """Reader(paths, threads=None, verify=None): random and batched access to an ArrayRecord dataset.

    paths is a path, a glob pattern or a list of them; the files are one dataset, their
    records concatenated in order. len(r), r[i] -> bytes, r.read(indices) -> list[bytes]
    (each chunk read and decoded once, every read of the call in one batched io_uring
    submission; threads=N instead splits the chunks of one call over N threads, worth it
    for large batches on idle cores), r.info() -> list[dict], r.close(), `with`.
    Thread-safe: calls from several threads take turns, with the GIL released while reading.
    verify is the Loader's option of that name: "all" (None, the default) checks every hash
    the format has; "headers" skips the data hash of each chunk (docs/tuning.md).
    """

    def __init__(self, paths: "_Paths", threads: "int | None" = None, verify: "str | None" = None) -> None:
        self.paths = _expand(paths)
        super().__init__(self.paths, threads, verify)


class Writer(_grist.Writer):
    """Writer(path, options=""): write an ArrayRecord file.

    options is the official writer's option text, e.g. "group_size:1,zstd:3". Records go to a
    hidden temporary file; nothing exists at path until close() succeeds. Leaving a `with`
    block by an exception drops the file. path may be an s3:// or gs:// URL: the records go
    up by multipart upload (parts of the remote option part, upload_inflight at once; see
    set_remote_options()), completed by close() and aborted by abort(), by an error, or by
    leaving the `with` block by an exception: nothing is left at the key then.
    file_bytes() is the file's size once close() succeeded.
    """

    def __init__(self, path: "str | os.PathLike[str]", options: str = "") -> None:
        super().__init__(path, options)


class ArrayRecordDataSource:
    """ArrayRecordDataSource(paths, verify="all"): a drop-in for grain.sources.ArrayRecordDataSource
    (Grain's RandomAccessDataSource).

    paths is a path, a glob pattern or a list of them: one dataset, the files' records
    concatenated in order.

    len(src), src[i] -> bytes, src.__getitems__(indices) -> list[bytes]. Picklable: the
    pickle holds the file names only, and a copy (in a Grain worker process) opens the
    files on first use. Safe from several threads: each thread that reads gets its own
    reader (and with it its own io_uring ring for __getitems__), so Grain's read threads
    never wait for each other.

    verify="headers" skips the data hash of each chunk, as the Loader's option of that name
    does (docs/tuning.md: for data already checked with `grist verify`); "all", the default,
    checks every hash the format has.
    """

    def __init__(self, paths, verify="all"):
        self._paths = _expand(paths)
        self._verify = verify
        self._setup()
        self._len = len(self._get_reader())  # opens the files now: a bad path fails here

    def _setup(self):
        self._lock = _threading.Lock()
        self._local = _threading.local()
        self._readers = []

    def _get_reader(self):
        r = getattr(self._local, "reader", None)
        if r is None:
            r = _grist.Reader(self._paths, None, self._verify)
            with self._lock:
                self._readers.append(r)
            self._local.reader = r
        return r

    def __len__(self):
        return self._len

    def __getitem__(self, index):
        return self._get_reader()[index]

    def __getitems__(self, indices):
        return self._get_reader().read(indices)

    def __repr__(self):
        if self._verify == "all":
            return f"grist.ArrayRecordDataSource({self._paths!r})"
        return f"grist.ArrayRecordDataSource({self._paths!r}, verify={self._verify!r})"

    def __getstate__(self):
        return {"paths": self._paths, "len": self._len, "verify": self._verify}

    def __setstate__(self, state):
        self._paths = state["paths"]
        self._len = state["len"]
        self._verify = state.get("verify", "all")
        self._setup()

    def close(self):
        """Close every thread's reader; a later read opens the files again."""
        with self._lock:
            readers, self._readers = self._readers, []
            self._local = _threading.local()
        for r in readers:
            r.close()


class _Columns:
    """A grist.tfds source's batch from the engine -> the plain dict of numpy arrays.

    Each feature is a column of the slot's fixed-size rows: a strided numpy view with a
    leading batch axis, no copy (the views keep the slot lent, as batch.data does). A padded
    feature also gives '<name>_shape': each record's real shape, int64 (rows, ndim).
    """

    def __init__(self, leaves, features, ragged=()):
        from .tfds import _c_dtype, _nest

        if ragged:
            self._ragged_init(leaves, features, set(ragged), _c_dtype, _nest)
            return
        self._gather = None
        row = features.row_bytes
        layout = []
        paths = []
        for leaf, c in zip(leaves, features.columns()):
            # a transformed image's column has the transform's dtype, not the feature's
            dtype = _c_dtype(leaf) if leaf.kind != "image" or c["dtype"] not in _VISION_DTYPES else \
                _np_dtype(_VISION_DTYPES[c["dtype"]])
            shape = tuple(c["row_shape"])
            strides, step = [], dtype.itemsize
            for d in reversed(shape):
                strides.append(step)
                step *= d
            layout.append((dtype, shape, c["offset"], (row,) + tuple(reversed(strides))))
            paths.append(leaf.path)
            if c["dims_offset"] >= 0:
                layout.append((_np_int64(), (len(shape),), c["dims_offset"], (row, 8)))
                paths.append(leaf.path[:-1] + (leaf.path[-1] + "_shape",))
            if c["box_offset"] >= 0:  # a transform's box: top, left, height, width, flipped
                import numpy as np

                layout.append((np.dtype(np.int32), (5,), c["box_offset"], (row, 4)))
                paths.append(leaf.path[:-1] + (leaf.path[-1] + "_box",))
        self._layout, self._nest = layout, _nest(paths)

    def _ragged_init(self, leaves, features, ragged, c_dtype, nest):
        """Rows of varying length (a batch with offsets): each column is copied out of the
        slot by the C stage's gather (grist_features_gather), a ragged one as (values,
        row_lengths)."""
        self._features, self._gather = features, []
        paths = []
        for leaf, c in zip(leaves, features.columns()):
            kind = "ragged" if leaf.key in ragged else "pad" if c["dims_offset"] >= 0 else "fixed"
            self._gather.append((kind, c_dtype(leaf), tuple(c["row_shape"])))
            paths.append(leaf.path)
            if kind == "pad":
                paths.append(leaf.path[:-1] + (leaf.path[-1] + "_shape",))
        self._nest = nest(paths)

    def _gathered(self, batch):
        import numpy as np

        n = batch.num_records
        out = []
        for (kind, dtype, shape), (values, dims, _) in zip(self._gather, self._features.gather(batch.data, n,
                                                                                             batch.offsets)):
            if kind == "ragged":
                dims = np.frombuffer(dims, np.int64).reshape(n, len(shape))
                out.append((np.frombuffer(values, dtype).reshape((-1,) + shape[1:]), dims[:, 0].copy()))
                continue
            out.append(np.frombuffer(values, dtype).reshape((n,) + shape))
            if kind == "pad":
                out.append(np.frombuffer(dims, np.int64).reshape(n, len(shape)))
        return self._nest(out)

    def __call__(self, batch):
        import numpy as np

        if self._gather is not None:
            return self._gathered(batch)
        data = batch.data
        n = data.shape[0]
        return self._nest([np.ndarray((n,) + shape, dtype, buffer=data, offset=off, strides=strides)
                           for dtype, shape, off, strides in self._layout])


# grist_dtype values a transformed image's column can have (grist/features.h)
_VISION_DTYPES = {1: "uint8", 9: "float16", 10: "float32", 13: "bfloat16"}


def _np_dtype(name):
    from .vision import _np_dtype as vision_dtype
    return vision_dtype(name)


def _np_int64():
    import numpy as np
    return np.dtype(np.int64)


def _detach(x, data):
    """@x with every numpy array that views @data (a batch slot) copied out of it: a batch_map
    result then holds no slot, however long the loop keeps it (the tutorial's normalize
    passes the label column through)."""
    import numpy as np

    if isinstance(x, np.ndarray):
        return x.copy() if np.may_share_memory(x, data) else x
    if type(x) is dict:
        return {k: _detach(v, data) for k, v in x.items()}
    if type(x) in (list, tuple):
        return type(x)(_detach(v, data) for v in x)
    return x


class _Ahead:
    """Runs fn on each item of a pull function on @threads threads, @depth items ahead of the
    consumer, and hands the results back in order, each with the checkpoint taken when its
    item was pulled (so get_state() counts what the caller has received, not what was read)."""

    def __init__(self, pull, fn, threads, depth, state):
        self._pull, self._fn, self._depth = pull, fn, depth
        self._pool = _futures.ThreadPoolExecutor(threads, thread_name_prefix="grist-batch-map")
        self._queue = _collections.deque()
        self._ended = False
        self.state = state

    def next(self):
        while not self._ended and len(self._queue) < self._depth:
            try:
                item, state = self._pull()
            except StopIteration:
                self._ended = True
                break
            self._queue.append((self._pool.submit(self._fn, item), state))
            del item  # the worker holds the batch now; its slot goes back once fn is done
        if not self._queue:
            raise StopIteration
        fut, state = self._queue.popleft()
        result = fut.result()
        self.state = state
        return result

    def close(self):
        for fut, _ in self._queue:
            fut.cancel()
        self._queue.clear()
        self._pool.shutdown(wait=True)


class Loader(_grist.Loader):
    """Loader(paths, batch_size, *, seed=0, epochs=None, shuffle=True, shard_index=0,
    shard_count=1, drop_remainder=False, layout="ragged", record_bytes=None, pad_value=0,
    granularity="record", window=None, weights=None, engine="uring", io="auto",
    threads=None, queue_depth=None, prefetch=None, read_ahead=None, max_batch_bytes=None,
    assembly_bytes=None, state=None, pack=None, pack_length=None, pack_bins=None, pack_bos=None, token_bytes=None,
    batch_map=None, map_threads=None, pad=None, skip=None, ragged=None, map_out_max=None, text=None,
    outputs=None, pack_bos_features=None, ...)

    Iterates grist.Batch objects: the same batches, in the same order, as `grist load` with
    the same settings. Every option keyword is an option of libgrist's table (`grist load
    --options` lists them with their bounds) and is parsed by it: an int, a bool or a str
    (sizes may say "4M"), refused with the same message as `grist load` (ValueError); None
    means the default. epochs=None (or 0) is unbounded. With weights, paths is a list of
    datasets, each a path, a glob pattern or a list of them, mixed by weight. layout is
    "ragged" (records back to back, with offsets), "fixed" or "padded" (rows of
    record_bytes). With pack="first-fit", "best-fit" or "concat-split" (and pack_length=L,
    token_bytes=1|2|4, pack_bins of first-fit and best-fit defaulting to batch_size) records
    are token sequences packed into rows of L tokens, as Grain's FirstFitPackIterDataset /
    BestFitPackIterDataset / ConcatThenSplitIterDataset do (pack_piece=P: each record cut
    into sequences of P tokens first): batch_size counts rows, batch.data is (rows, L) of
    uint8/uint16/uint32 and batch.segment_ids and batch.positions are int32 (rows, L).
    pack_bos=ID (concat-split only; default None: off) makes the first token of every segment of
    a row ID, as Grain's ConcatThenSplitIterDataset(bos_handling=REPLACE_FIRST_TOKEN_WITH_BOS,
    bos_features=the tokens) does: where a row begins inside a sequence, its token there is
    replaced; segment ids and positions are unchanged.

    len(loader) is the number of batches it yields (after shards, epochs and
    drop_remainder; a resumed loader counts from its state); an unbounded or packing
    loader has no len() (TypeError), as an iterator of unknown length. get_state() -> bytes
    is a checkpoint; Loader(..., state=s) continues with exactly the next batch. For several
    hosts: shard_index=jax.process_index(), shard_count=jax.process_count(). The GIL is
    released while waiting for a batch.

    prefetch is also the most batches the caller may hold at once; a `for` loop holds the
    previous batch while it asks for the next, so the loader lends one slot more than
    prefetch. A loader does not survive os.fork(): iterating it in a child process (a
    multiprocessing worker started by fork) raises grist.Error (errno ENOTRECOVERABLE)
    instead of waiting forever; create the loader in the child, e.g. from the parent's
    get_state().

    paths may also be a grist.tfds source of whole splits: the batches are then plain dicts
    of numpy arrays, nested as the dataset's features, each with a leading batch axis
    ({"image": uint8 (B, 28, 28, 1), "label": int64 (B,)} for MNIST), decoded by the engine's
    threads straight into the batch slot (views of it, as batch.data is). The records of
    batch k are those the bytes Loader over src.files gives in batch k with the same options.
    A feature whose shape varies is an error unless pad={key: max shape} pads it (its real
    shape is then '<name>_shape', int64 (B, ndim)) or skip=[keys] leaves it out (lists of
    strings cannot be batched: skip them). ragged=[keys] batches features whose first
    dimension varies (a Text, a (None,) or (None, 3) Tensor, a Sequence of scalars) without
    padding: batch[key] is then the pair (values, row_lengths), values holding the batch's
    records' values back to back along the first axis (dtype as the feature, shape (sum of
    row_lengths,) + the fixed dimensions; a Text's bytes as uint8) and row_lengths int64 (B,),
    each record's first dimension (tf.RaggedTensor.from_row_lengths(values, row_lengths)
    rebuilds the feature). With ragged=, every column is copied out of the slot, and
    map_out_max (bytes) bounds one record's row: by default the row of the longest record
    the files' footers allow (grist_features_row_bound of their largest decoded chunk); a
    smaller bound fails a record past it with an error naming it. layout and record_bytes
    are the source's. transforms={key: t} (default None) runs a grist.vision transform
    (RandomResizedCrop, CenterCrop, Resize) on image feature key as it is decoded, on the
    decode threads, so batch[key] has t.shape and t.dtype whatever each image's size; its
    draws are keyed by (seed, epoch, record index, key). boxes=True (default False) adds
    batch['<key>_box'], int32 (B, 5): top, left, height, width in source pixels, flipped.
    transforms= does not combine with ragged= yet. on_error="skip" (default "raise") drops a
    record whose feature does not decode (a corrupt or truncated image, one past max_pixels,
    one that does not match the spec) instead of stopping; later records fill the batch, and
    stats()["skipped"] counts them, ["skipped_records"] lists the first 16 as (index within
    its dataset, reason).
    With weights, paths may be a list of grist.tfds sources with the same features.

    text=grist.text.TextSpec(tokenizer, ...): every record (paths: ArrayRecord files, a mixture, or
    grist.tfds sources, read as their files) is a text, tokenized on the engine's threads:
    [BOS] + ids + [EOS], cut to the spec's max_length, or with mode="chunk" cut into pieces of
    it that are packed one by one (docs/text.md). With pack= (pack_length=L
    required; token_bytes is 4) the token sequences are packed as above and each batch is a dict
    of int32 (rows, L) arrays with Grain's packer keys "inputs", "inputs_segment_ids" and
    "inputs_positions"; without pack= each text is padded to max_length with the spec's pad_id.
    outputs="maxtext" (default None: those keys) gives MaxText's six int32 (batch_size, L) arrays
    instead: inputs, targets (shifted left, pad_id at the end), inputs_segmentation,
    targets_segmentation (shifted left, 0 at the end and where targets == pad_id),
    inputs_position and targets_position; a short final batch is filled with pad_id rows, as
    MaxText's batch_and_pad. pack="concat-split" is MaxText's concat_then_split; pack_bos=True
    there replaces the first token of every segment with the spec's bos_id (Grain's BOS
    replacement on inputs and targets). MaxText itself passes Grain no bos_features, so its
    batches are those without pack_bos (docs/text.md). pack_bos_features (with pack_bos; default
    None: the packer's one stream, i.e. ("inputs", "targets") with outputs="maxtext") names the
    features Grain's bos_features would: ("inputs",) replaces in inputs alone and MaxText's shift
    takes targets from the tokens as they were; ("targets",) the other way round. Without
    outputs="maxtext" only ("inputs",) is accepted (the one token array: the same as leaving it
    out). map_out_max bounds one record's tokens in bytes (default 4 x max_length; with
    mode="chunk" 4 MiB). A record that is not UTF-8, lacks the spec's feature or has more tokens
    than map_out_max stops the loader with grist.Error naming it; with on_error="skip" it is dropped
    instead and counted in stats()["skipped"] and ["skipped_records"], as for a tfds source.

    batch_map=fn: fn(batch) runs on map_threads background threads (default 1), ahead of the
    loop, and the loop receives its results in order; get_state() counts the results received.
    numpy arrays in the result (in dicts, lists, tuples) that view the batch are copied out of
    it, so results hold no slot; batches waiting for fn count against prefetch.
    """

    def __init__(self, paths, batch_size, *, batch_map=None, map_threads=None, pad=None, skip=None, ragged=None,
                 map_out_max=None, transforms=None, boxes=False, on_error="raise", text=None, outputs=None,
                 pack_bos_features=None, **options):
        self._columns = None
        self._ahead = None
        self._features = None
        self._text_map = None
        if text is not None:
            paths, options = self._text_options(paths, batch_size, text, outputs, map_out_max, on_error, options,
                                                pack_bos_features)
            map_out_max, on_error = None, "raise"
        elif outputs is not None:
            raise ValueError("grist.Loader: outputs= applies with text=")
        elif pack_bos_features is not None:
            raise ValueError("grist.Loader: pack_bos_features= applies with text=")
        mixed = options.get("weights") is not None and not isinstance(paths, (str, bytes, _os.PathLike))
        srcs = list(paths) if mixed else [paths]
        if any(hasattr(s, "_loader_features") for s in srcs):  # grist.tfds sources
            if not all(hasattr(s, "_loader_features") for s in srcs):
                raise ValueError("grist.Loader: mix grist.tfds sources with grist.tfds sources only")
            for k in ("layout", "record_bytes", "pack"):
                if options.get(k) is not None:
                    raise ValueError(f"grist.Loader: {k}= does not apply to a grist.tfds source")
            for src in srcs:
                if not src.whole_splits:
                    raise ValueError(f"grist.Loader: split {src.split!r} slices a split; the Loader reads whole "
                                     "splits (use shard_index/shard_count to divide one)")
            src = srcs[0]
            if transforms and ragged:
                raise ValueError("grist.Loader: transforms= and ragged= do not go together yet")
            if boxes and not transforms:
                raise ValueError("grist.Loader: boxes=True needs transforms=")
            tf = (transforms, boxes, options.get("seed") or 0, on_error)
            features, cols, leaves = src._loader_features(pad, skip, [s.files for s in srcs] if mixed else None,
                                                          ragged, *tf)
            for other in srcs[1:]:
                if other._loader_features(pad, skip, None, ragged, *tf)[1] != cols:
                    raise ValueError(f"grist.Loader: {other!r} has other features than {src!r}: mixed "
                                     "grist.tfds sources need the same features")
            if ragged:
                # Rows as long as each record's values: the engine reserves map_out_max bytes
                # for one record's row while it decodes it (the C stage fails a record whose
                # row does not fit with EMSGSIZE, naming the file, record and feature).
                if map_out_max is None:  # the row of the longest record the footers allow
                    map_out_max = features.row_bound(max(s._max_record_bytes for s in srcs))
                elif int(map_out_max) <= 0:
                    raise ValueError("grist.Loader: map_out_max must be > 0")
                options.update(layout="ragged", _map=features.map(int(map_out_max)))
            else:
                if map_out_max is not None:
                    raise ValueError("grist.Loader: map_out_max= applies with ragged=")
                options.update(layout="fixed", record_bytes=features.row_bytes, _map=features.map())
            self._columns = _Columns(leaves, features, ragged or ())
            self._features = features
            paths = [s.files for s in srcs] if mixed else src.files
        elif pad is not None or skip is not None or ragged is not None or map_out_max is not None or transforms \
                or boxes or on_error != "raise":
            raise ValueError("grist.Loader: pad=, skip=, ragged=, map_out_max=, transforms=, boxes= and on_error= "
                             "apply to a grist.tfds source")
        if options.get("weights") is not None:
            if isinstance(paths, (str, bytes, _os.PathLike)):
                raise ValueError("grist.Loader: with weights, paths is a list of datasets")
            paths = [_expand(p) for p in paths]
        else:
            paths = _expand(paths)
        if map_threads is not None and batch_map is None:
            raise ValueError("grist.Loader: map_threads= needs batch_map=")
        super().__init__(paths, batch_size, **options)
        if batch_map is not None:
            if not callable(batch_map):
                raise TypeError("grist.Loader: batch_map must be callable")
            # One thread by default: on 2 cores a second one costs more in GIL hand-offs
            # than it overlaps (bench/README.md).
            threads = 1 if map_threads is None else int(map_threads)
            if threads < 1:
                raise ValueError("grist.Loader: map_threads must be >= 1")
            columns = self._columns

            def fn(batch):  # on a worker: the dict is built there too
                data = batch.data
                out = _detach(batch_map(columns(batch) if columns is not None else batch), data)
                del data
                if out is not batch:
                    # The slot goes back now (or once views fn kept are gone), before the
                    # result is handed over: never later than the loop sees it.
                    batch.release()
                return out
            # Leave one batch for the caller to hold within the hold limit the library
            # resolved (self.prefetch: a result that is the Batch itself still holds its slot).
            me = _weakref.ref(self)  # no cycle: the loader's engine stops when it is dropped

            def pull():
                loader = me()
                if loader is None:
                    raise StopIteration
                return _grist.Loader.__next__(loader), _grist.Loader.get_state(loader)
            self._ahead = _Ahead(pull, fn, threads, max(1, min(2 * threads, self.prefetch - 1)),
                                 _grist.Loader.get_state(self))

    def _text_options(self, paths, batch_size, spec, outputs, map_out_max, on_error, options, bos_features=None):
        """text=TextSpec: the records become int32 tokens on the engine's threads (grist_text_map),
        then Grain's packer keys or, with outputs="maxtext", MaxText's six arrays (grist.text)."""
        from . import text as _text
        if not isinstance(spec, _text.TextSpec):
            raise TypeError("grist.Loader: text= must be a grist.text.TextSpec")
        if outputs not in (None, "maxtext"):
            raise ValueError("grist.Loader: outputs must be None or 'maxtext', not %r" % (outputs,))
        if on_error not in ("raise", "skip"):
            raise ValueError(f"grist.Loader: on_error must be 'raise' or 'skip', not {on_error!r}")
        for k in ("layout", "record_bytes", "token_bytes", "pack_piece"):
            if options.get(k) is not None:
                raise ValueError(f"grist.Loader: {k}= is set by text=")
        mixed = options.get("weights") is not None and not isinstance(paths, (str, bytes, _os.PathLike))
        srcs = list(paths) if mixed else [paths]
        if any(hasattr(s, "_loader_features") for s in srcs):  # grist.tfds sources: their files
            srcs = [s.files for s in srcs]
            paths = srcs if mixed else srcs[0]
        if options.get("pack_bos") is True:  # the spec's BOS id, as MaxText hands Grain the tokenizer's
            if not spec.add_bos:
                raise ValueError("grist.Loader: pack_bos=True takes the TextSpec's BOS id; it has add_bos=False "
                                 "(give the id itself)")
            options["pack_bos"] = spec.bos_id
        bos = _bos_where(spec, outputs, options, bos_features)
        if bos and options.get("pack") == "concat-split":  # (any other pack= the table refuses with pack_bos)
            # the packer leaves the tokens as they are; _batch_arrays replaces in the features named
            bos_id = options.pop("pack_bos")
            if isinstance(bos_id, str) and bos_id.isdigit():  # the table takes its ints as strings too
                bos_id = int(bos_id)
            if isinstance(bos_id, bool) or not isinstance(bos_id, int) or not 0 <= bos_id <= 0xFFFFFFFF:
                raise ValueError("grist.Loader: pack_bos= is a token id in 0..4294967295, not %r" % (bos_id,))
            bos = (bos_id - (1 << 32) if bos_id >= 1 << 31 else bos_id, bos)  # as the int32 arrays hold it
        else:
            bos = 0
        if options.get("pack") is not None:
            length = options.get("pack_length")
            if length is None:
                raise ValueError("grist.Loader: text= with pack= needs pack_length=")
            options["token_bytes"] = 4
            if spec.mode == "chunk":  # TokenizeAndChunk: the packer cuts each text's ids into pieces
                options["pack_piece"] = spec.max_length
        else:
            if spec.mode == "chunk":
                raise ValueError("grist.Loader: TextSpec(mode='chunk') needs pack= (each piece is packed)")
            length = spec.max_length
            if outputs is not None and not length:
                raise ValueError("grist.Loader: outputs='maxtext' without pack= needs TextSpec(max_length=)")
        if map_out_max is None:  # one record's tokens, 4 bytes each
            map_out_max = 4 * (spec.max_length if spec.max_length and spec.mode == "trim" else 1 << 20)
        # with on_error="skip" a map of this loader's own, so stats() counts its skips alone; with
        # pack_bos_features one whose stage replaces BOS in that feature: the map's id, the
        # checkpoint's fingerprint of the stage, changes with it as with anything it does
        self._text_map = spec._loader_map(on_error == "skip", bos or None)
        options.update(layout="ragged", _map=self._text_map.map(int(map_out_max)))
        args = (spec, outputs, int(batch_size), int(length or 0), options.get("pack") is not None,
                self._text_map.bos_features)
        # each batch becomes its dict of arrays where a tfds source's columns would be built
        self._columns = lambda b: _text._batch_arrays(b, *args)
        return paths, options

    def __next__(self):
        if self._ahead is not None:
            return self._ahead.next()
        b = _grist.Loader.__next__(self)
        return b if self._columns is None else self._columns(b)

    def get_state(self):
        """get_state() -> bytes: the checkpoint after the last batch returned; Loader(...,
        state=s) continues with exactly the next batch."""
        if self._ahead is not None:
            return self._ahead.state
        return super().get_state()

    def stats(self):
        """stats() -> dict: the loader's counters (see grist.Loader); over a grist.tfds source also
        "skipped" (records on_error="skip" dropped) and "skipped_records" (the first 16, as
        (index within its dataset, reason)); with text= the same for the texts it dropped."""
        st = super().stats()
        skips = self._features or self._text_map
        if skips is not None:
            count, first = skips.skipped()
            st["skipped"] = count
            st["skipped_records"] = [(index, reason) for _, index, reason in first]
        return st

    def close(self):
        """close(): stop the loader; batches still alive stay valid until they are released."""
        if self._ahead is not None:
            self._ahead.close()
        super().close()

    def __exit__(self, *exc):
        self.close()


def _bos_where(spec, outputs, options, features):
    """pack_bos_features= -> 0 where the packer's own replacement is Grain's (it replaces the one
    stream inputs and targets both come from), else _maxtext's bos_where bits (1 inputs, 2 targets)."""
    if features is None:
        return 0
    if isinstance(features, str):
        raise TypeError("grist.Loader: pack_bos_features= is a collection of feature names, not a str")
    names = set(features)
    if not names or not names <= {"inputs", "targets"}:
        raise ValueError("grist.Loader: pack_bos_features= names 'inputs', 'targets' or both, not %r"
                         % (tuple(features),))
    if options.get("pack_bos") is None:
        raise ValueError("grist.Loader: pack_bos_features= needs pack_bos=")
    if outputs is None:  # Grain's packer keys: "inputs" is the only token feature
        if names != {"inputs"}:
            raise ValueError("grist.Loader: pack_bos_features= without outputs='maxtext' can only be "
                             "('inputs',), the one token array")
        return 0
    if names == {"inputs", "targets"}:
        return 0
    # Grain writes an empty sequence's BOS into the last row's padding, a cell the packer's
    # rows do not mark; only a trimmed text with neither BOS nor EOS added can be empty
    if spec.mode == "trim" and not spec.add_bos and not spec.add_eos:
        raise ValueError("grist.Loader: pack_bos_features=%r needs a TextSpec with add_bos or add_eos (an "
                         "empty text's BOS would fall in the padding)" % (tuple(sorted(names)),))
    return (1 if "inputs" in names else 0) | (2 if "targets" in names else 0)


def _options_doc():
    """The Loader docstring's list of libgrist's options, written from the table itself, so help()
    says what `grist load --options` says and cannot drift from what the library parses."""
    lines = ["", "Options: every entry of libgrist's table is a keyword (and a `grist load` flag, the",
             "name with dashes); the values it accepts, and what leaving it out (None) means:", ""]
    for o in _grist.loader_options():
        if o["type"] in ("number", "size"):
            accepts = "%s %d..%d" % ("an int" if o["type"] == "number" else "a size (bytes; \"4M\")",
                                     o["min"], o["max"])
        elif o["type"] == "bool":
            accepts = "True or False"
        else:
            accepts = "one of " + o["choices"] if o["type"] == "choice" else o["choices"]
        default = "default " + o["default"] if o["default"] else "no default"
        entry = "%s: %s; %s; %s." % (o["name"], o["help"], accepts, default)
        lines += _textwrap.wrap(entry, 92, initial_indent="  ", subsequent_indent="        ")
    return "\n".join(lines)


# the class docstring's lines after the first are indented by 4, as these are
if Loader.__doc__:  # None under python -OO
    Loader.__doc__ = Loader.__doc__.rstrip() + "\n" + _textwrap.indent(_options_doc(), "    ") + "\n"
