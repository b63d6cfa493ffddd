#!/usr/bin/env python3
"""Read records in a Beam pipeline: grist.beam.ReadFromArrayRecord or beam.io.ReadFromTFRecord.

The pipeline is SOURCE(PATTERN) | Map(len) | Count on the in-process DirectRunner; run each
as a whole process, alternating, to compare. The official array_record package has no Beam
source, so the yardstick is Beam's own TFRecord source over the same records (the input of
bench/py/beam_sink.py and the shards it wrote):

    bench/py/beam_sink.py --sink grist --out /tmp/grist-beam-bench/ar
    bench/py/beam_source.py arrayrecord '/tmp/grist-beam-bench/ar/*'
    bench/py/beam_source.py tfrecord /tmp/grist-beam-bench/input.tfrecord
"""
import argparse


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("format", choices=["arrayrecord", "tfrecord"])
    ap.add_argument("pattern")
    args = ap.parse_args()
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    with beam.Pipeline(options=PipelineOptions(flags=[])) as p:
        if args.format == "arrayrecord":
            import grist.beam
            recs = p | grist.beam.ReadFromArrayRecord(args.pattern)
        else:
            recs = p | beam.io.ReadFromTFRecord(args.pattern)
        _ = recs | beam.Map(len) | beam.combiners.Count.Globally()


if __name__ == "__main__":
    main()
