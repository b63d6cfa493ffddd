"""grist.beam: ArrayRecord sink and source for Apache Beam pipelines (`pip install grist[beam]`).

WriteToArrayRecord(file_path_prefix, ...) writes a PCollection of bytes into ArrayRecord
shards with grist's C writer, through Beam's file-sink protocol: each bundle writes a
temporary, and only the finalize step renames the temporaries of the bundles that succeeded
to their final names, so a failed or retried bundle leaves neither a partial file nor a
duplicate at a final name. ReadFromArrayRecord(file_pattern) reads the records of every
matching file as a BoundedSource whose positions are chunk indices: runners split a file
into ranges of whole chunks at the start, and again while it is read (dynamic rebalancing).

Both run on any runner (DirectRunner, Flink, Spark, Dataflow). The files a worker reads must
be local to it (a local disk, NFS, or a bucket mounted with gcsfuse or similar); the shards
the sink writes may go anywhere Beam's FileSystems reach (gs://, s3://, ...): a shard bound
elsewhere is written to a local temporary and copied there when it is complete.

This module imports apache_beam; `import grist` alone never does.
"""

import os
import shutil
import tempfile
import weakref

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

__all__ = ["WriteToArrayRecord", "ReadFromArrayRecord"]

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
    grist's error, which names the file and byte offset. validate=True checks at pipeline
    construction that the pattern matches a file.
    """

    def __init__(self, file_pattern, *, validate=True):
        super().__init__()
        self._source = _ArrayRecordSource(file_pattern, validate=validate)

    def expand(self, pbegin):
        return pbegin | iobase.Read(self._source)
