"""tf.data as a side of vision_pipeline.py (--peers tf): the Cloud TPU / Model Garden input.

A TFRecord copy of the same Example records (written on the first, untimed call) ->
map(parse, sample_distorted_bounding_box(min_object_covered=0.1) + decode_and_crop_jpeg,
resize bilinear antialias=True, random flip, normalize to float32;
num_parallel_calls=AUTOTUNE) -> batch -> prefetch, on a private pool of --threads threads
(TF's intra- and inter-op pools set to as many). Bench-only: pip install tensorflow-cpu; CI
never installs it. Importing this module imports TensorFlow: do it before any Example is
parsed, since TF's Example protos and the tfrecord package's register the same names.
"""
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIZE = 224
_cache = {}


def _prepare(args, vdir, records):
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    path = os.path.join(vdir, "..", "..", "train.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for rec in records:
            w.write(bytes(rec))
    _cache["path"] = path


def side_tf(args, vdir, records):
    """One timed run of --batches batches of --batch (args.batches; else one epoch of the
    records): {"images": n, "seconds": wall, "cpu": the process's CPU seconds}."""
    if "path" not in _cache:
        _prepare(args, vdir, records)
    c0, t0 = time.process_time(), time.perf_counter()
    mean, std = tf.constant(MEAN, tf.float32), tf.constant(STD, tf.float32)
    whole = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, shape=[1, 1, 4])
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

    def fn(rec):
        ex = tf.io.parse_single_example(rec, spec)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.io.extract_jpeg_shape(ex["image"]), whole, min_object_covered=0.1, aspect_ratio_range=(3 / 4, 4 / 3),
            area_range=(0.08, 1.0), max_attempts=10, use_image_if_no_bounding_boxes=True)
        y, x, _ = tf.unstack(begin)
        h, w, _ = tf.unstack(size)
        im = tf.image.decode_and_crop_jpeg(ex["image"], tf.stack([y, x, h, w]), channels=3)
        im = tf.image.resize(im, (SIZE, SIZE), method="bilinear", antialias=True)
        im = tf.image.random_flip_left_right(im)
        return (im / 255.0 - mean) / std, ex["label"]

    ds = (tf.data.TFRecordDataset(_cache["path"]).repeat().shuffle(1024, seed=0)
          .map(fn, num_parallel_calls=tf.data.AUTOTUNE).batch(args.batch, drop_remainder=True)
          .prefetch(tf.data.AUTOTUNE))
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = args.threads
    ds = ds.with_options(opts)
    batches = getattr(args, "batches", None) or len(records) // args.batch
    n = 0
    for images, labels in ds.take(batches):
        assert tuple(images.shape) == (args.batch, SIZE, SIZE, 3) and images.dtype == tf.float32
        n += int(labels.shape[0])
    return {"images": n, "seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}
