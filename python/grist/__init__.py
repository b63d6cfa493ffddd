"""grist: ArrayRecord data loading at the speed of the disk.

Reader and Writer for ArrayRecord files, ArrayRecordDataSource (a drop-in for Grain's
``grain.sources.ArrayRecordDataSource``), and Loader: shuffled, sharded batches assembled by
the C engine in pinned memory and handed to Python without a copy.
"""

import glob as _glob
import os as _os
import threading as _threading
from typing import TYPE_CHECKING

from . import _grist
from ._grist import Batch, Error

__version__ = _grist.__version__

__all__ = ["__version__", "Reader", "Writer", "ArrayRecordDataSource", "Loader", "Batch", "Error", "convert"]

_GLOB_CHARS = frozenset("*?[")

if TYPE_CHECKING:  # names for the annotations only
    import os
    from typing import Callable, Sequence, Union

    _Paths = Union[str, bytes, "os.PathLike[str]", Sequence[Union[str, bytes, "os.PathLike[str]"]]]


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
        if not _os.path.exists(p) and _GLOB_CHARS.intersection(p):
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
            progress: "Callable[[dict], object] | None" = None) -> "list[str]":
    """Convert TFRecord, text lines, folders or ArrayRecord files into ArrayRecord: `grist convert`.

    inputs is a path, a glob pattern or a list of them, read in order (a folder is one record
    per regular file under it, in bytewise order of relative path). format is "tfrecord"
    (plain or GZIP), "lines" (plain or GZIP text, one record per line), "dir" or
    "arrayrecord"; None tells each input's by its file type and first bytes. options are the
    official writer options ("group_size:64,zstd:3,max_parallelism:4"). shards=N writes N
    files, output-00000-of-0000N ..., contiguous runs whose counts differ by at most one.
    check=False skips TFRecord data CRCs (lengths are still checked).

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
    return _grist.convert(_expand(inputs), _os.fspath(output), format, options, shards, check, progress)


class Reader(_grist.Reader):
    """Reader(paths, threads=None): random and batched access to an ArrayRecord dataset.

    paths is a path, a glob pattern or a list of them; the files are one dataset, their
    records concatenated in order. len(r), r[i] -> bytes, r.read(indices) -> list[bytes]
    (each chunk read and decoded once, every read of the call in one batched io_uring
    submission; threads=N instead splits the chunks of one call over N threads, worth it
    for large batches on idle cores), r.info() -> list[dict], r.close(), `with`.
    Thread-safe: calls from several threads take turns, with the GIL released while reading.
    """

    def __init__(self, paths, threads=None):
        self.paths = _expand(paths)
        super().__init__(self.paths, threads)


class Writer(_grist.Writer):
    """Writer(path, options=""): write an ArrayRecord file.

    options is the official writer's option text, e.g. "group_size:1,zstd:3". Records go to a
    hidden temporary file; nothing exists at path until close() succeeds. Leaving a `with`
    block by an exception drops the file.
    """

    def __init__(self, path, options=""):
        super().__init__(path, options)


class ArrayRecordDataSource:
    """A drop-in for grain.sources.ArrayRecordDataSource (Grain's RandomAccessDataSource).

    len(src), src[i] -> bytes, src.__getitems__(indices) -> list[bytes]. Picklable: the
    pickle holds the file names only, and a copy (in a Grain worker process) opens the
    files on first use. Safe from several threads: each thread that reads gets its own
    reader (and with it its own io_uring ring for __getitems__), so Grain's read threads
    never wait for each other.
    """

    def __init__(self, paths):
        self._paths = _expand(paths)
        self._setup()
        self._len = len(self._get_reader())  # opens the files now: a bad path fails here

    def _setup(self):
        self._lock = _threading.Lock()
        self._local = _threading.local()
        self._readers = []

    def _get_reader(self):
        r = getattr(self._local, "reader", None)
        if r is None:
            r = _grist.Reader(self._paths)
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
        return f"grist.ArrayRecordDataSource({self._paths!r})"

    def __getstate__(self):
        return {"paths": self._paths, "len": self._len}

    def __setstate__(self, state):
        self._paths = state["paths"]
        self._len = state["len"]
        self._setup()

    def close(self):
        """Close every thread's reader; a later read opens the files again."""
        with self._lock:
            readers, self._readers = self._readers, []
            self._local = _threading.local()
        for r in readers:
            r.close()


class Loader(_grist.Loader):
    """Loader(paths, batch_size, *, seed=0, epochs=None, shuffle=True, shard_index=0,
    shard_count=1, drop_remainder=False, layout="ragged", record_bytes=None, pad_value=0,
    granularity="record", window=None, weights=None, engine="uring", io="auto",
    threads=None, queue_depth=None, prefetch=None, state=None, pack=None, pack_length=None,
    pack_bins=None, token_bytes=None)

    Iterates grist.Batch objects: the same batches, in the same order, as `grist load` with
    the same settings. epochs=None is unbounded. With weights, paths is a list of datasets,
    each a path, a glob pattern or a list of them, mixed by weight. layout is "ragged"
    (records back to back, with offsets), "fixed" or "padded" (rows of record_bytes).
    With pack="first-fit" or "concat-split" (and pack_length=L, token_bytes=1|2|4, first-fit's
    pack_bins defaulting to batch_size) records are token sequences packed into rows of L
    tokens, as Grain's FirstFitPackIterDataset / ConcatThenSplitIterDataset do: batch_size
    counts rows, batch.data is (rows, L) of uint8/uint16/uint32 and batch.segment_ids and
    batch.positions are int32 (rows, L). get_state() -> bytes is a checkpoint;
    Loader(..., state=s) continues with exactly the next batch. For several hosts: shard_index=jax.process_index(),
    shard_count=jax.process_count(). The GIL is released while waiting for a batch.
    """

    def __init__(self, paths, batch_size, **options):
        if options.get("weights") is not None:
            if isinstance(paths, (str, bytes, _os.PathLike)):
                raise ValueError("grist.Loader: with weights, paths is a list of datasets")
            paths = [_expand(p) for p in paths]
        else:
            paths = _expand(paths)
        super().__init__(paths, batch_size, **options)
