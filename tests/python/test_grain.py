"""grist.ArrayRecordDataSource as a drop-in for Grain's: the same records through Grain's own pipelines."""
import os
import pickle
import subprocess
import sys
import threading

import pytest

from conftest import HERE, grist

grain = pytest.importorskip("grain")
pytest.importorskip("array_record.python.array_record_module")


def test_protocol_matches_grains_source(files):
    ours, theirs = grist.ArrayRecordDataSource(files), grain.sources.ArrayRecordDataSource(files)
    assert len(ours) == len(theirs) == 2001
    for i in (0, 1, 999, 1000, 1700, 2000):
        assert ours[i] == theirs[i]
    assert ours[-1] == theirs[2000]
    idx = [2000, 5, 1699, 5, 0, 1234]
    assert ours.__getitems__(idx) == list(theirs.__getitems__(idx))
    assert "ArrayRecordDataSource" in repr(ours)


def test_pickles_and_reopens(files, all_records):
    src = grist.ArrayRecordDataSource(files)
    copy = pickle.loads(pickle.dumps(src))
    assert copy._readers == []  # opened lazily, in the process that uses it
    assert len(copy) == 2001 and copy[1500] == all_records[1500] and len(copy._readers) == 1


def test_threads(files, all_records):
    src = pickle.loads(pickle.dumps(grist.ArrayRecordDataSource(files)))
    bad = []

    def work(k):
        for j in range(200):
            i = (k * 31 + j * 17) % 2001
            if src[i] != all_records[i] or src.__getitems__([i, 0]) != [all_records[i], all_records[0]]:
                bad.append(i)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not bad
    assert len(src._readers) == 8  # one reader per reading thread
    src.close()
    assert src[5] == all_records[5]


@pytest.mark.parametrize("seed,batch", [(0, 32), (42, 7)])
def test_map_dataset_pipeline_same_as_grains(files, seed, batch):
    def run(source):
        ds = grain.MapDataset.source(source).shuffle(seed=seed).batch(batch)
        return [[bytes(r) for r in b] for b in ds]
    ours = run(grist.ArrayRecordDataSource(files))
    assert ours == run(grain.sources.ArrayRecordDataSource(files))
    assert sum(len(b) for b in ours) == 2001


def test_dataloader_with_worker_processes(files):
    script = os.path.join(HERE, "grain_dataloader_main.py")

    def run(kind, workers):
        p = subprocess.run([sys.executable, script, kind, str(workers), "5"] + files,
                           capture_output=True, timeout=300, text=True)
        assert p.returncode == 0, p.stderr[-3000:]
        return p.stdout.split()
    ours = run("grist", 2)
    assert len(ours) == 2001
    assert ours == run("grain", 0)
