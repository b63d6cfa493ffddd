#!/usr/bin/env python3
"""One Beam pipeline, TFRecord in, ArrayRecord out, with grist's sink or the official one.

The pipeline is ReadFromTFRecord(INPUT) | SINK(num_shards=--shards) on the DirectRunner.
SINK is grist.beam.WriteToArrayRecord (--options, by default "group_size:1", the official
sink's fixed options), array_record.beam.arrayrecordio.WriteToArrayRecord (the official package's only
Beam sink), or "none" (the records are dropped: what reading and Beam cost without a sink).

Without --sink, makes INPUT (--records serialized tf.train.Examples of about --record-size
bytes, written by the pip package tfrecord) unless it exists, then runs each sink as a whole
process, --rounds times, alternating which goes first, and prints each one's median wall
time and the ratios. With --sink, runs that one pipeline once (what the rounds time).

    bench/py/beam_sink.py --records 100000 --record-size 1000 --rounds 5
    bench/py/beam_sink.py --mode multi_processing --workers 2 --rounds 5
"""
import argparse
import glob
import os
import random
import shutil
import sys

from benchutil import alternate, report_alternating

SINKS = ("grist", "official", "none")


def make_input(path, n, size, seed=1):
    from tfrecord.writer import TFRecordWriter
    rng = random.Random(seed)
    w = TFRecordWriter(path + ".tmp")
    for i in range(n):
        w.write({"data": (rng.randbytes(rng.randrange(size // 2, size * 3 // 2)), "byte"),
                 "label": (i, "int")})
    w.close()
    os.rename(path + ".tmp", path)


def run_pipeline(args):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    prefix = os.path.join(args.out, "bench.array_record")
    opts = PipelineOptions(flags=[], direct_num_workers=args.workers, direct_running_mode=args.mode)
    with beam.Pipeline(options=opts) as p:
        recs = p | beam.io.ReadFromTFRecord(args.input)
        if args.sink == "grist":
            import grist.beam
            _ = recs | grist.beam.WriteToArrayRecord(prefix, num_shards=args.shards, options=args.options)
        elif args.sink == "official":
            from apache_beam.coders import coders
            from array_record.beam.arrayrecordio import WriteToArrayRecord
            _ = recs | WriteToArrayRecord(prefix, num_shards=args.shards, coder=coders.BytesCoder())
        else:
            _ = recs | beam.Map(len) | beam.combiners.Count.Globally()
    if args.sink != "none":
        files = glob.glob(prefix + "-*")
        assert len(files) == args.shards, files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default="/tmp/grist-beam-bench/input.tfrecord")
    ap.add_argument("--out", default="/tmp/grist-beam-bench/out")
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--record-size", type=int, default=1000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--mode", default="in_memory", choices=["in_memory", "multi_threading", "multi_processing"])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--options", default="group_size:1",
                    help="grist's writer options (group_size:1, the official sink's fixed options)")
    ap.add_argument("--sink", choices=SINKS, help="run this one pipeline once")
    args = ap.parse_args()

    if args.sink:
        shutil.rmtree(args.out, ignore_errors=True)
        os.makedirs(args.out)
        run_pipeline(args)
        return

    os.makedirs(os.path.dirname(args.input) or ".", exist_ok=True)
    if not os.path.exists(args.input):
        make_input(args.input, args.records, args.record_size)
    size = os.path.getsize(args.input)
    base = [sys.executable, os.path.abspath(__file__), "--input", args.input, "--out", args.out,
            "--shards", str(args.shards), "--mode", args.mode, "--workers", str(args.workers),
            "--options", args.options]
    times = alternate({s: base + ["--sink", s] for s in SINKS}, args.rounds)
    print(f"input {args.input}: {size / 1e6:.1f} MB; {args.shards} shards; DirectRunner {args.mode}, "
          f"{args.workers} worker(s); median of {args.rounds} alternating runs, whole process:")
    report_alternating(times, SINKS, 9, "official", "sink")


if __name__ == "__main__":
    main()
