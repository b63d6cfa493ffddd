#!/usr/bin/env python3
"""Feature dicts into a prepared TFDS dataset in a Beam pipeline: grist.beam.WriteToTFDS
beside TFDS's own encoding (FeaturesDict.encode_example + its ExampleSerializer, TensorFlow's
protobuf) in front of grist's WriteToArrayRecord.

The pipeline is Create(range(--rows)) | Map(row) | WRITER on the in-process DirectRunner;
a row is an int, a float, a short text, a float32 (2, 3) tensor, a list of 0-7 int32, a
--image-size square RGB PNG and a class label. WRITER is "grist" (WriteToTFDS: features.json
and dataset_info.json included), "tfds" (records only: TFDS's encoder, then the same sink) or
"none" (rows made and dropped: what Beam and making rows cost). Each runs as a whole process,
--rounds times, alternating which goes first; prints medians and ratios.

    bench/py/beam_tfds.py --rows 20000 --rounds 5
"""
import argparse
import io
import os
import shutil
import sys

from benchutil import alternate, report_alternating

WRITERS = ("grist", "tfds", "none")
FEATURES = {"id": "int64", "score": "float32", "caption": "text", "patch": "float32[2,3]",
            "tokens": "int32[None]", "image": "image:png", "label": "class_label:10"}


def make_row(i, images):
    import numpy as np
    return {"id": i, "score": i / 7, "caption": "caption of row %d" % i,
            "patch": np.full((2, 3), i, np.float32), "tokens": list(range(i % 8)),
            "image": images[i % len(images)], "label": i % 10}


def pngs(size, n=16):
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(buf, "PNG")
        out.append(buf.getvalue())
    return out


def run_pipeline(args):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    import grist.beam

    images = pngs(args.image_size)
    with beam.Pipeline(options=PipelineOptions(flags=[])) as p:
        rows = p | beam.Create(range(args.rows)) | beam.Map(make_row, images)
        if args.writer == "grist":
            _ = rows | grist.beam.WriteToTFDS(os.path.join(args.out, "bench", "1.0.0"), features=FEATURES,
                                              num_shards=args.shards)
        elif args.writer == "tfds":
            _ = (rows | beam.ParDo(_TFDSEncode())
                 | grist.beam.WriteToArrayRecord(os.path.join(args.out, "bench-train.array_record"),
                                                 num_shards=args.shards, options="group_size:1,zstd:3"))
        else:
            _ = rows | beam.Map(len) | beam.combiners.Count.Globally()


class _TFDSEncode:
    """TFDS's own path from a feature dict to a serialized tf.train.Example (what its Beam
    writer does per example)."""

    def __new__(cls):
        import apache_beam as beam

        class Encode(beam.DoFn):
            def setup(self):
                import numpy as np
                import tensorflow_datasets as tfds
                from tensorflow_datasets.core import example_serializer
                f = tfds.features
                self.fd = f.FeaturesDict({"id": np.int64, "score": np.float32, "caption": f.Text(),
                                          "patch": f.Tensor(shape=(2, 3), dtype=np.float32),
                                          "tokens": f.Tensor(shape=(None,), dtype=np.int32),
                                          "image": f.Image(shape=(None, None, 3), encoding_format="png"),
                                          "label": f.ClassLabel(num_classes=10)})
                self.ser = example_serializer.ExampleSerializer(self.fd.get_serialized_info())

            def process(self, row):
                yield self.ser.serialize_example(self.fd.encode_example(row))
        return Encode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/grist-beam-tfds-bench")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--writer", choices=WRITERS, help="run this one pipeline once")
    args = ap.parse_args()
    if args.writer:
        shutil.rmtree(args.out, ignore_errors=True)
        os.makedirs(args.out)
        run_pipeline(args)
        return
    base = [sys.executable, os.path.abspath(__file__), "--out", args.out, "--rows", str(args.rows),
            "--image-size", str(args.image_size), "--shards", str(args.shards)]
    times = alternate({w: base + ["--writer", w] for w in WRITERS}, args.rounds)
    print(f"{args.rows} rows ({args.image_size}x{args.image_size} PNGs), {args.shards} shards, in-process "
          f"DirectRunner; median of {args.rounds} alternating runs, whole process:")
    report_alternating(times, WRITERS, 5, "tfds", "writer")


if __name__ == "__main__":
    main()
