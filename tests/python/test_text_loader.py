"""grist.Loader(text=TextSpec(...)): MaxText's batches, byte for byte, against Grain running MaxText's steps.

The oracle pipeline is built from the peers themselves: the Python tokenizer (sentencepiece,
tiktoken) encodes each record grist delivers, in grist's order for the seed, then MaxText's
TokenizeAndTrim ([BOS] + ids + [EOS], cut to max_length), Grain's FirstFitPackIterDataset
(shuffle_bins=False) with MaxText's length_struct, Grain's batch_and_pad(pad_value=pad_id),
and MaxText's ShiftData (input_pipeline_utils.shift_and_refine, transcribed below because
MaxText itself needs TensorFlow). The unpacked path follows MaxText's PadOrTrimToMaxLength.
"""
import functools

import numpy as np
import pytest

from conftest import grist
from test_text import MULTILINGUAL, PATTERNS, corpus, files, load_ranks, thin  # noqa: F401  (files: the fixture)

tiktoken = pytest.importorskip("tiktoken")
spm = pytest.importorskip("sentencepiece")
grain = pytest.importorskip("grain")
ge = pytest.importorskip("grain.experimental")
from grist.text import TextSpec, Tokenizer  # noqa: E402


def texts():
    """A third of the corpus (all of it under GRIST_TEXT_FULL=1), multilingual text, short and special-token texts."""
    return thin(corpus(), 3) + MULTILINGUAL + ["", "x", "it's <|endoftext|> <s>"]


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """An ArrayRecord file of tf.train.Examples with a 'text' bytes feature (grist's encoder)."""
    ts = [t.encode() for t in texts()]
    lens = np.array([0] + [len(t) for t in ts], dtype=np.uint64).cumsum().astype(np.uint64)
    recs = grist._grist.encode_examples([("text", "bytes", b"".join(ts), np.arange(len(ts) + 1, dtype=np.int64),
                                          lens)], len(ts))
    path = str(tmp_path_factory.mktemp("text") / "examples.ar")
    with grist.Writer(path, "group_size:4,zstd:1") as w:
        for r in recs:
            w.write(r)
    return path


def grist_order(path, batch_size, **kw):
    """The record indices grist delivers, in order, for these loader keywords."""
    out = []
    with grist.Loader(path, batch_size, **kw) as loader:
        for b in loader:
            out += b.indices.tolist()
            b.release()
    return out


# MaxText's ShiftData (src/maxtext/input_pipeline/input_pipeline_utils.py), as written there.
def shift_left(x, pad_id, axis=1):
    pad_widths = [(0, 0)] * len(x.shape)
    pad_widths[axis] = (0, 1)
    slices = [slice(None)] * len(x.shape)
    slices[axis] = slice(1, None)
    padded = np.pad(x, pad_widths, mode="constant", constant_values=x.dtype.type(pad_id))
    return padded[tuple(slices)]


def shift_and_refine(x, ignored_ids, axis=1):
    x["targets"] = shift_left(x["targets"], ignored_ids[0], axis=axis)
    x["targets_segmentation"] = shift_left(x["targets_segmentation"], 0, axis=axis)
    for ignore_id in ignored_ids:
        x["targets_segmentation"] = np.where(x["targets"] != ignore_id, x["targets_segmentation"], 0)
    return x


def pad_or_trim(element, max_length, pad_id):
    """MaxText's PadOrTrimToMaxLength.map for text columns."""
    for col in list(element):
        element[f"{col}_segmentation"] = (element[col] != pad_id).astype(np.int32)
        element[f"{col}_position"] = np.arange(element[col].shape[0], dtype=np.int32)
    for k in element:
        x = element[k]
        element[k] = np.pad(x, [(0, max(max_length - x.shape[0], 0))], constant_values=pad_id)[:max_length]
    return element


def maxtext_batches(encode, order, bos, eos, pad_id, length, batch_size, packed=True, by_text=False):
    """MaxText's steps on Grain over texts()[i] for i in @order (@by_text: @order holds the texts themselves)."""
    all_texts = texts()
    elems = []
    for i in order:
        ids = np.asarray(([bos] if bos is not None else []) + list(encode(i if by_text else all_texts[i])) +
                         ([eos] if eos is not None else []), dtype=np.int32)[:length]
        elems.append({"inputs": ids, "targets": ids.copy()})
    ds = grain.MapDataset.source(elems).to_iter_dataset()
    if packed:
        ds = ge.FirstFitPackIterDataset(ds, length_struct={"inputs": length, "targets": length},
                                        num_packing_bins=batch_size, shuffle_bins=False)
        ren = {"_segment_ids": "_segmentation", "_positions": "_position"}

        def rekey(e):
            out = {}
            for k, v in e.items():
                for a, b in ren.items():
                    if k.endswith(a):
                        k = k[:-len(a)] + b
                out[k] = v
            return out
        ds = ds.map(rekey)
    else:
        ds = ds.map(functools.partial(pad_or_trim, max_length=length, pad_id=pad_id))
    ds = ds.batch(batch_size, batch_fn=functools.partial(ge.batch_and_pad, batch_size=batch_size, pad_value=pad_id))
    ds = ds.map(functools.partial(shift_and_refine, ignored_ids=[pad_id]))
    return list(ds)


def assert_same(ours, theirs):
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    for n, (a, b) in enumerate(zip(ours, theirs)):
        assert sorted(a) == sorted(b)
        for k in a:
            assert a[k].dtype == np.int32 and a[k].shape == b[k].shape, (n, k, a[k].shape, b[k].shape)
            assert np.array_equal(a[k], b[k].astype(np.int32)), (n, k)


def run(path, spec, batch_size, **kw):
    with grist.Loader(path, batch_size, text=spec, outputs="maxtext", **kw) as loader:
        return list(loader)


@pytest.mark.parametrize("threads", [1, 2])
def test_maxtext_sentencepiece(files, examples, threads):
    """mistral v1 (SentencePiece BPE, no pad id: pad -1), first-fit packed, as MaxText's default."""
    tok = Tokenizer(files["mistral-v1.model"])
    sp = spm.SentencePieceProcessor(model_file=files["mistral-v1.model"])
    spec = TextSpec(tok, max_length=96)
    assert spec.pad_id == -1 and spec.bos_id == 1 and spec.eos_id == 2
    ours = run(examples, spec, 4, seed=5, epochs=1, pack="first-fit", pack_length=96, threads=threads)
    theirs = maxtext_batches(sp.encode, grist_order(examples, 4, seed=5, epochs=1), 1, 2, -1, 96, 4)
    assert_same(ours, theirs)
    print("sentencepiece, %d threads: %d batches equal MaxText's" % (threads, len(ours)))


def test_maxtext_tiktoken_and_resume(files, examples):
    """GPT-2 ranks with the Llama 3 pattern (MaxText's tiktoken wrapper), BOS/EOS given, pad 0; then resume mid-epoch."""
    tok = Tokenizer(files["gpt2.tiktoken"], pattern="llama3")
    enc = tiktoken.Encoding("l3", pat_str=PATTERNS["llama3"], mergeable_ranks=load_ranks(files["gpt2.tiktoken"]),
                            special_tokens={})
    spec = TextSpec(tok, bos_id=50000, eos_id=50001, pad_id=0, max_length=64)
    kw = dict(seed=9, epochs=1, pack="first-fit", pack_length=64)
    ours = run(examples, spec, 3, **kw)
    theirs = maxtext_batches(lambda t: enc.encode(t, disallowed_special=()), grist_order(examples, 3, seed=9, epochs=1),
                             50000, 50001, 0, 64, 3)
    assert_same(ours, theirs)
    with grist.Loader(examples, 3, text=spec, outputs="maxtext", **kw) as loader:
        first = [next(loader) for _ in range(4)]
        state = loader.get_state()
    with grist.Loader(examples, 3, text=spec, outputs="maxtext", state=state, **kw) as loader:
        rest = list(loader)
    assert_same(first + rest, theirs)
    # another tokenizer setting is another map: its checkpoint is refused
    other = TextSpec(tok, bos_id=50000, eos_id=50001, pad_id=0, max_length=32)
    with pytest.raises(grist.Error, match="does not match"):
        grist.Loader(examples, 3, text=other, outputs="maxtext", state=state, **kw)


def test_unpacked_and_default_keys(files, examples):
    tok = Tokenizer(files["mistral-v1.model"])
    sp = spm.SentencePieceProcessor(model_file=files["mistral-v1.model"])
    spec = TextSpec(tok, max_length=48)
    ours = run(examples, spec, 5, seed=2, epochs=1)
    theirs = maxtext_batches(sp.encode, grist_order(examples, 5, seed=2, epochs=1), 1, 2, -1, 48, 5, packed=False)
    assert_same(ours, theirs)
    # without outputs=: Grain's packer keys with k = "inputs"
    with grist.Loader(examples, 4, seed=5, epochs=1, text=spec, pack="first-fit", pack_length=48) as loader:
        b = next(loader)
    assert sorted(b) == ["inputs", "inputs_positions", "inputs_segment_ids"] and b["inputs"].shape == (4, 48)


def test_bad_records(files, tmp_path):
    tok = Tokenizer(files["mistral-v1.model"])
    bad = str(tmp_path / "bad.ar")
    good = grist._grist.encode_examples([("text", "bytes", b"ok", np.array([0, 1]), np.array([0, 2], np.uint64))], 1)
    badutf = grist._grist.encode_examples([("text", "bytes", b"a\xff", np.array([0, 1]),
                                            np.array([0, 2], np.uint64))], 1)
    with grist.Writer(bad, "group_size:1") as w:
        w.write(good[0])
        w.write(badutf[0])
    with pytest.raises(grist.Error, match=r"record 1: byte 1: invalid UTF-8"):
        list(grist.Loader(bad, 2, shuffle=False, epochs=1, text=TextSpec(tok, max_length=8)))
    with pytest.raises(grist.Error, match="no feature 'body'"):
        list(grist.Loader(bad, 2, shuffle=False, epochs=1, text=TextSpec(tok, feature="body", max_length=8)))
    # feature=None: the record itself is the text (here an Example's bytes: not UTF-8)
    with pytest.raises(grist.Error, match="invalid UTF-8"):
        list(grist.Loader(bad, 2, shuffle=False, epochs=1, text=TextSpec(tok, feature=None, max_length=8)))
    with pytest.raises(ValueError, match="no BOS id"):
        TextSpec(Tokenizer(files["gpt2.tiktoken"]))
    with pytest.raises(ValueError, match="not implemented"):
        TextSpec(tok, mode="chunk")
    with pytest.raises(ValueError, match="outputs"):
        grist.Loader(bad, 2, text=TextSpec(tok), outputs="grain")


def test_grain_dataset_and_pickle(files, examples):
    """grist.grain.LoaderDataset takes text= as any loader option; a pickled TextSpec makes the same batches."""
    import pickle

    import grist.grain
    tok = Tokenizer(files["mistral-v1.model"])
    spec = TextSpec(tok, max_length=64)
    kw = dict(seed=3, epochs=1, pack="first-fit", pack_length=64, outputs="maxtext")
    want = run(examples, spec, 4, **{k: v for k, v in kw.items() if k != "outputs"})
    got = list(grist.grain.LoaderDataset(examples, 4, text=spec, **kw))
    assert_same(got, want)
    again = pickle.loads(pickle.dumps(spec))
    assert repr(again) == repr(spec)
    assert_same(run(examples, again, 4, **{k: v for k, v in kw.items() if k != "outputs"}), want)


@pytest.mark.parametrize("threads", [1, 2])
def test_on_error_skip(files, tmp_path, threads):
    """Loader(on_error="skip") with text=: a record that is not UTF-8 or lacks the feature is dropped and
    counted (the features stage's accounting), and the batches equal MaxText's over the good records."""
    tok = Tokenizer(files["mistral-v1.model"])
    sp = spm.SentencePieceProcessor(model_file=files["mistral-v1.model"])
    good = texts()[:40]

    def example(key, value):
        return grist._grist.encode_examples([(key, "bytes", value, np.array([0, 1]),
                                              np.array([0, len(value)], np.uint64))], 1)[0]
    recs = [example("text", t.encode()) for t in good]
    bad = {5: example("text", b"caf\xc3"), 17: example("body", b"no text feature"), 30: example("text", b"\xff ok")}
    for i in sorted(bad):
        recs.insert(i, bad[i])
    path = str(tmp_path / "mixed.ar")
    with grist.Writer(path, "group_size:4") as w:
        for r in recs:
            w.write(r)
    kw = dict(seed=4, epochs=1, pack="first-fit", pack_length=80, threads=threads)
    spec = TextSpec(tok, max_length=80)
    # the default stops, naming the first bad record it meets
    with pytest.raises(grist.Error, match=r"record (5|17|30)\b.*(invalid UTF-8|no feature 'text')"):
        run(path, spec, 4, **kw)
    with grist.Loader(path, 4, text=spec, outputs="maxtext", on_error="skip", **kw) as loader:
        ours = list(loader)
        st = loader.stats()
    assert st["skipped"] == 3
    reasons = dict(st["skipped_records"])
    assert sorted(reasons) == [5, 17, 30]
    assert "invalid UTF-8" in reasons[5] and "no feature 'text'" in reasons[17] and "byte 0" in reasons[30]
    # the oracle: grist's order, the bad records left out, MaxText's steps on the rest
    order = grist_order(path, 4, seed=4, epochs=1)
    at = [i for i in range(len(recs)) if i not in bad]  # record index -> its text
    all_texts = {r: good[k] for k, r in enumerate(at)}
    theirs = maxtext_batches(lambda t: sp.encode(t), [all_texts[i] for i in order if i not in bad], 1, 2, -1, 80, 4,
                             by_text=True)
    assert_same(ours, theirs)
    # resumed mid-epoch, the same batches; a skipping map is another checkpoint id than a raising one
    with grist.Loader(path, 4, text=spec, outputs="maxtext", on_error="skip", **kw) as loader:
        first = [next(loader) for _ in range(2)]
        state = loader.get_state()
    with grist.Loader(path, 4, text=spec, outputs="maxtext", on_error="skip", state=state, **kw) as loader:
        assert_same(first + list(loader), theirs)
    with pytest.raises(grist.Error, match="does not match"):
        grist.Loader(path, 4, text=spec, outputs="maxtext", state=state, **kw)
    # a loader without skips reports none; on_error takes only "raise" or "skip"
    with grist.Loader(examples_of(tmp_path, good), 4, text=spec, on_error="skip", **kw) as loader:
        list(loader)
        assert loader.stats()["skipped"] == 0 and loader.stats()["skipped_records"] == []
    with pytest.raises(ValueError, match="on_error"):
        grist.Loader(path, 4, text=spec, on_error="ignore")


def examples_of(tmp_path, ts):
    path = str(tmp_path / "good.ar")
    ts = [t.encode() for t in ts]
    lens = np.array([0] + [len(t) for t in ts], dtype=np.uint64).cumsum().astype(np.uint64)
    recs = grist._grist.encode_examples([("text", "bytes", b"".join(ts), np.arange(len(ts) + 1, dtype=np.int64),
                                          lens)], len(ts))
    with grist.Writer(path, "group_size:4") as w:
        for r in recs:
            w.write(r)
    return path


def test_convert_tokenize(files, examples, tmp_path):
    """grist convert --tokenize writes each record's ids (the loader's text map) as raw int32 records;
    packing them gives the batches text= gives, and each record equals sentencepiece's ids with BOS/EOS."""
    import os
    import subprocess
    cli = os.environ.get("GRIST_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("GRIST_CLI is not set to the grist program")
    out = str(tmp_path / "tokens.ar")
    subprocess.run([cli, "convert", "--no-progress", "--tokenize", files["mistral-v1.model"], "--feature", "text",
                    "--add-bos", "--add-eos", "--max-length", "96", examples, out], check=True)
    sp = spm.SentencePieceProcessor(model_file=files["mistral-v1.model"])
    recs = list(grist.Reader([out]).read(range(len(texts()))))
    assert [np.frombuffer(r, "<i4").tolist() for r in recs] == [([1] + sp.encode(t) + [2])[:96] for t in texts()]
    kw = dict(seed=5, epochs=1, pack="first-fit", pack_length=96)
    want = run(examples, TextSpec(Tokenizer(files["mistral-v1.model"]), max_length=96), 4, **kw)
    with grist.Loader(out, 4, token_bytes=4, **kw) as loader:
        got = []
        for b in loader:
            with b:
                cols = {"inputs": b.data.view(np.int32).copy(), "inputs_segment_ids": b.segment_ids.copy(),
                        "inputs_positions": b.positions.copy()}
            got.append(cols)
    ours = [{"inputs": w["inputs"], "inputs_segment_ids": w["inputs_segmentation"],
             "inputs_positions": w["inputs_position"]} for w in want]
    assert len(got) == len(ours)
    for a, b in zip(got, ours):
        n = a["inputs"].shape[0]  # maxtext fills a short last batch with pad rows
        for k in a:
            assert np.array_equal(a[k], b[k][:n]), k
    # a bad record stops it, naming the input and record; the text flags need --tokenize
    bad = str(tmp_path / "bad.ar")
    with grist.Writer(bad, "group_size:1") as w:
        w.write(b"fine")
        w.write(b"a\xff")
    r = subprocess.run([cli, "convert", "--no-progress", "--tokenize", files["gpt2.tiktoken"], bad,
                        str(tmp_path / "x.ar")], capture_output=True, text=True)
    assert r.returncode == 1 and "record 1: byte 1: invalid UTF-8" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "x.ar")
    r = subprocess.run([cli, "convert", "--feature", "text", bad, str(tmp_path / "x.ar")], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "go with --tokenize" in r.stderr
