"""grist.Loader(pack=...): packed rows equal `grist load --pack --print-packed` and its --digest."""
import errno
import json
import random

import numpy as np
import pytest

from conftest import grist

DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def token_records(n, width, max_len, seed):
    """@n token sequences: every 11th empty, a quarter longer than the row lengths used here."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len + 1, size=n)
    lengths[::4] = max_len
    lengths[3::11] = 0
    return [rng.integers(0, 1 << (8 * width), size=int(k), dtype=np.uint64).tolist() for k in lengths]


def write_tokens(path, width, records, options="group_size:8,zstd:1"):
    with grist.Writer(str(path), options) as w:
        for r in records:
            w.write(np.asarray(r, dtype=DTYPES[width]).astype("<u%d" % width).tobytes())
    return str(path)


@pytest.fixture(scope="module")
def token_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tokens")
    return {w: write_tokens(d / ("t%d.ar" % (8 * w)), w, token_records(n, w, ml, seed=w), opts)
            for w, n, ml, opts in ((1, 150, 90, "group_size:1,snappy"), (2, 700, 300, "group_size:8,zstd:1"),
                                   (4, 200, 150, "group_size:4"))}


def cli_rows(cli, path, spec, width, bs, opts):
    """`grist load --pack SPEC --print-packed --digest` -> (rows as dicts, per-batch digests)."""
    out = cli("load", path, "--pack", spec, "--token-bytes", width, "--batch-size", bs, "--print-packed",
              "--digest", *opts)
    rows, digests = [], []
    for line in out.splitlines():
        if line.startswith("{"):
            rows.append(json.loads(line))
        else:
            digests.append(line)
    return rows, digests


def py_rows(batches, width, length, xxh):
    rows, digests = [], []
    for b in batches:
        with b:
            data, seg, pos = b.data, b.segment_ids, b.positions
            assert data.dtype == DTYPES[width] and data.shape == (b.num_records, length)
            assert seg.dtype == np.int32 and pos.dtype == np.int32 and seg.shape == pos.shape == data.shape
            assert b.indices is None and b.datasets is None and b.offsets is None
            # the C digest: the token block, then the segment ids, then the positions
            digests.append("%016x" % xxh(data.tobytes() + seg.astype("<u4").tobytes() + pos.astype("<u4").tobytes()))
            for t, s, p in zip(data.tolist(), seg.tolist(), pos.tolist()):
                rows.append({"tokens": t, "segment_ids": s, "positions": p})
    return rows, digests


def pack_kwargs(mode, length, bins, width):
    kw = dict(pack=mode, pack_length=length, token_bytes=width)
    if bins is not None:
        kw["pack_bins"] = bins
    return kw


def spec(mode, length, bins):
    return "%s:%d%s" % (mode, length, ":%d" % bins if bins is not None else "")


CASES = [  # (width, mode, L, BINS, batch size, loader keywords, CLI options)
    (2, "first-fit", 64, 8, 5, dict(seed=3, epochs=2), ["--seed", 3, "--epochs", 2]),
    (2, "first-fit", 128, None, 4, dict(seed=1, epochs=1), ["--seed", 1, "--epochs", 1]),
    (1, "first-fit", 32, 3, 7, dict(shuffle=False, epochs=1, drop_remainder=True),
     ["--no-shuffle", "--epochs", 1, "--drop-remainder"]),
    (4, "first-fit", 100, 16, 8, dict(seed=5, epochs=1, shard_index=1, shard_count=2),
     ["--seed", 5, "--epochs", 1, "--shard", "1/2"]),
    (2, "concat-split", 64, None, 6, dict(seed=3, epochs=2), ["--seed", 3, "--epochs", 2]),
    (1, "concat-split", 17, None, 3, dict(shuffle=False, epochs=1), ["--no-shuffle", "--epochs", 1]),
    (4, "concat-split", 256, None, 2, dict(seed=9, epochs=1, engine="ref"), ["--seed", 9, "--epochs", 1]),
]


@pytest.mark.parametrize("width,mode,length,bins,bs,kwargs,opts", CASES)
def test_packed_rows_same_as_cli(token_files, cli, xxh, width, mode, length, bins, bs, kwargs, opts):
    path = token_files[width]
    loader = grist.Loader(path, bs, **kwargs, **pack_kwargs(mode, length, bins, width))
    got = py_rows(loader, width, length, xxh)
    want = cli_rows(cli, path, spec(mode, length, bins), width, bs, opts)
    assert got == want
    assert len(got[0]) > 20
    st = loader.stats()
    assert st["pack_capacity"] == len(got[0]) * length
    assert 0 < st["pack_tokens"] <= st["pack_capacity"]


@pytest.mark.parametrize("mode,bins", [("first-fit", 8), ("concat-split", None)])
def test_resume_continues_with_the_next_rows(token_files, mode, bins):
    path, kw = token_files[2], dict(seed=4, epochs=2, **pack_kwargs(mode, 64, bins, 2))

    def rows(b):
        with b:
            return (b.sequence, b.data.tolist(), b.segment_ids.tolist(), b.positions.tolist())
    whole = [rows(b) for b in grist.Loader(path, 3, **kw)]
    for cut in (1, 7, 20):  # 3 rows a batch, 8 bins: several cuts fall inside a round
        loader = grist.Loader(path, 3, prefetch=6, **kw)
        first = [rows(b) for _, b in zip(range(cut), loader)]
        state = loader.get_state()
        loader.close()
        rest = [rows(b) for b in grist.Loader(path, 3, state=state, **kw)]
        assert first + rest == whole


def test_dlpack_follows_the_token_dtype(token_files):
    for width in (1, 2, 4):
        b = next(grist.Loader(token_files[width], 4, seed=1, **pack_kwargs("first-fit", 48, 4, width)))
        a = np.from_dlpack(b)
        assert a.dtype == DTYPES[width] and a.shape == (4, 48)
        assert a.__array_interface__["data"][0] == b.data.__array_interface__["data"][0]
        assert np.array_equal(a, b.data)
        seg = b.segment_ids
        b.release()  # the ids still hold the slot
        assert seg.shape == (4, 48) and seg[0, 0] == 1


def test_unpacked_batches_have_no_segments(token_files):
    b = next(grist.Loader(token_files[2], 4, seed=1))
    assert b.segment_ids is None and b.positions is None and b.data.dtype == np.uint8


def test_bad_pack_arguments(token_files):
    path = token_files[2]
    bad = [dict(pack="first-fitt", pack_length=8, token_bytes=2),
           dict(pack="first-fit", token_bytes=2),             # no row length
           dict(pack="first-fit", pack_length=8),             # no token width
           dict(pack="first-fit", pack_length=8, token_bytes=3),
           dict(pack="first-fit", pack_length=0, token_bytes=2),
           dict(pack="first-fit", pack_length=(1 << 24) + 1, token_bytes=2),
           dict(pack="first-fit", pack_length=8, pack_bins=0, token_bytes=2),
           dict(pack="first-fit", pack_length=8, pack_bins=(1 << 20) + 1, token_bytes=2),
           dict(pack="concat-split", pack_length=8, pack_bins=4, token_bytes=2),
           dict(pack_length=8),                               # sizes without pack=
           dict(token_bytes=2),
           dict(pack="first-fit", pack_length=8, token_bytes=2, layout="padded", record_bytes=16)]
    for kw in bad:
        with pytest.raises(ValueError):
            grist.Loader(path, 4, **kw)
    with pytest.raises(ValueError):  # an int is read as its text, as the CLI reads it
        grist.Loader(path, 4, pack=1, pack_length=8, token_bytes=2)
    with pytest.raises(TypeError):
        grist.Loader(path, 4, pack=1.5, pack_length=8, token_bytes=2)


def test_record_not_whole_tokens_raises(tmp_path):
    path = str(tmp_path / "odd.ar")
    with grist.Writer(path, "group_size:4") as w:
        for i in range(40):
            w.write(b"\x01\x00" * (i % 5) + (b"\x07" if i == 29 else b""))
    with pytest.raises(grist.Error) as e:
        for b in grist.Loader(path, 2, shuffle=False, epochs=1, pack="concat-split", pack_length=8, token_bytes=2):
            b.release()
    assert e.value.errno != 0 and "odd.ar" in str(e.value) and "record 29" in str(e.value)
    assert e.value.errno != errno.EINVAL
