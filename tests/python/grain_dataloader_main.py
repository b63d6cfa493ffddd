"""Run by test_grain.py in a fresh process: grain.DataLoader with worker processes over a source.

    python3 grain_dataloader_main.py grist|grain WORKERS SEED FILE...

Prints the delivered records as hex, one per line. Grain's workers get the source by pickling,
which is why this is a script with a main-module guard.
"""
import sys


def main():
    from absl import flags

    flags.FLAGS(sys.argv[:1], known_only=True)  # Grain's workers read absl flags
    import grain
    import grist

    kind, workers, seed, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    if kind == "grist":
        source = grist.ArrayRecordDataSource(files)
    else:
        source = grain.sources.ArrayRecordDataSource(files)
    sampler = grain.samplers.IndexSampler(num_records=len(source), shard_options=grain.sharding.NoSharding(),
                                          shuffle=True, num_epochs=1, seed=seed)
    loader = grain.DataLoader(data_source=source, sampler=sampler, worker_count=workers)
    out = sys.stdout
    for rec in loader:
        out.write(bytes(rec).hex() + "\n")
    out.flush()


if __name__ == "__main__":
    main()
