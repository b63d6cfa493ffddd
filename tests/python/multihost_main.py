"""Run by test_multihost.py as one of several processes: one host of a multi-host job.

    python3 multihost_main.py PROCESS_ID NUM_PROCESSES PORT FILE

With JAX installed, the process joins a jax.distributed job on localhost:PORT and shards by
jax.process_index() / jax.process_count(), as the README documents; without it, by the
arguments. Prints a JSON list of the dataset indices it was delivered, in order (2 epochs).
"""
import json
import sys


def main():
    pid, nproc, port, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    try:
        import jax
    except ImportError:
        index, count = pid, nproc
    else:
        jax.distributed.initialize(coordinator_address="localhost:" + port, num_processes=nproc, process_id=pid)
        index, count = jax.process_index(), jax.process_count()
    import grist

    got = []
    for batch in grist.Loader(path, 32, seed=17, epochs=2, shard_index=index, shard_count=count):
        got += batch.indices.tolist()
        batch.release()
    print(json.dumps({"index": index, "count": count, "indices": got}))


if __name__ == "__main__":
    main()
