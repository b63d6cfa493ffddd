"""grist.Loader(text=TextSpec(...)): MaxText's batches, byte for byte, against Grain running MaxText's steps.

The oracle pipeline is built from the peers themselves: the Python tokenizer (sentencepiece,
tiktoken) encodes each record grist delivers, in grist's order for the seed, then MaxText's
TokenizeAndTrim ([BOS] + ids + [EOS], cut to max_length) or TokenizeAndChunk (the same ids
cut into pieces of max_length, each an example, through Grain's FlatMapIterDataset), Grain's
FirstFitPackIterDataset or BestFitPackIterDataset (shuffle_bins=False) with MaxText's
length_struct, Grain's batch_and_pad(pad_value=pad_id),
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


class TokenizeAndChunk(ge.FlatMapTransform):
    """MaxText's TokenizeAndChunk.flat_map (src/maxtext/input_pipeline/grain_tokenizer.py) over a text:
    the wrapper's ids ([BOS] + ids + [EOS]) in pieces of chunk_size, none for no ids; then Rekey."""

    max_fan_out = 2048

    def __init__(self, encode, chunk_size):
        self.encode, self.chunk_size = encode, chunk_size

    def flat_map(self, text):
        token_ids = self.encode(text)
        if not token_ids:
            return []
        out = []
        for start_idx in range(0, len(token_ids), self.chunk_size):
            chunk = np.asarray(token_ids[start_idx:start_idx + self.chunk_size], dtype=np.int32)
            out.append({"inputs": chunk, "targets": chunk.copy()})
        return out


def maxtext_batches(encode, order, bos, eos, pad_id, length, batch_size, packed=True, by_text=False, chunk=None,
                    packer="first-fit", trim=None, bins=None, bos_features=()):
    """MaxText's steps on Grain over texts()[i] for i in @order (@by_text: @order holds the texts themselves).
    TokenizeAndTrim to @trim ids (default @length, the row), or @chunk: TokenizeAndChunk with pieces of @chunk.
    @bins: num_packing_bins (default @batch_size, MaxText's). @packer "concat-split": ConcatThenSplitIterDataset as
    MaxText's format_and_batch builds it (with @bos: REPLACE_FIRST_TOKEN_WITH_BOS and that id, no bos_features), or
    with @bos_features given to it as well."""
    all_texts = texts()

    def wrapper(text):  # MaxText's tokenizer wrappers add BOS and EOS
        return ([bos] if bos is not None else []) + list(encode(text)) + ([eos] if eos is not None else [])
    ordered = [i if by_text else all_texts[i] for i in order]
    if chunk:
        ds = ge.FlatMapIterDataset(grain.MapDataset.source(ordered).to_iter_dataset(),
                                   TokenizeAndChunk(wrapper, chunk))
    else:
        elems = []
        for t in ordered:
            ids = np.asarray(wrapper(t), dtype=np.int32)[:trim or length]
            elems.append({"inputs": ids, "targets": ids.copy()})
        ds = grain.MapDataset.source(elems).to_iter_dataset()
    if packed and packer == "concat-split":
        kw = {}
        if bos is not None:  # data_processing_utils.format_and_batch, config.add_bos
            kw = dict(bos_handling=ge.BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS, bos_token_id=bos)
            if bos_features:
                kw["bos_features"] = bos_features
        ds = ge.ConcatThenSplitIterDataset(ds, length_struct={"inputs": length, "targets": length}, **kw)
    elif packed:
        pack = {"first-fit": ge.FirstFitPackIterDataset, "best-fit": ge.BestFitPackIterDataset}[packer]
        ds = pack(ds, length_struct={"inputs": length, "targets": length}, num_packing_bins=bins or batch_size,
                  shuffle_bins=False)
    if packed:
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


@pytest.mark.parametrize("threads", [1, 2, 16])
def test_maxtext_sentencepiece(files, examples, threads):
    """mistral v1 (SentencePiece BPE, no pad id: pad -1), first-fit packed, as MaxText's default.
    At 16 threads every unit is a tail unit (a share of what is left, at least 4 texts): the
    units' sizes change, the batches do not."""
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
    for threads in (2, 16):  # 16: the end of the run in small units (engine_async.c, tail_items())
        with grist.Loader(examples, 3, text=spec, outputs="maxtext", threads=threads, **kw) as loader:
            first = [next(loader) for _ in range(4)]
            state = loader.get_state()
        with grist.Loader(examples, 3, text=spec, outputs="maxtext", state=state, threads=threads, **kw) as loader:
            rest = list(loader)
        assert_same(first + rest, theirs)
    # another tokenizer setting is another map: its checkpoint is refused
    other = TextSpec(tok, bos_id=50000, eos_id=50001, pad_id=0, max_length=32)
    with pytest.raises(grist.Error, match="does not match"):
        grist.Loader(examples, 3, text=other, outputs="maxtext", state=state, **kw)


def test_maxtext_pad_is_a_real_token(files, examples):
    """pad_id equal to BOS, a token of every text: targets_segmentation is zeroed wherever a
    target is that id, inside real rows too, as MaxText's ShiftData does (grist.Batch._maxtext)."""
    tok = Tokenizer(files["gpt2.tiktoken"], pattern="llama3")
    enc = tiktoken.Encoding("l3", pat_str=PATTERNS["llama3"], mergeable_ranks=load_ranks(files["gpt2.tiktoken"]),
                            special_tokens={})
    spec = TextSpec(tok, bos_id=50000, eos_id=50001, pad_id=50000, max_length=64)
    ours = run(examples, spec, 3, seed=4, epochs=1, pack="first-fit", pack_length=64, threads=2)
    theirs = maxtext_batches(lambda t: enc.encode(t, disallowed_special=()), grist_order(examples, 3, seed=4, epochs=1),
                             50000, 50001, 50000, 64, 3)
    assert_same(ours, theirs)
    # the case is there: a target that is the pad id where the next input is a real token
    assert any(((b["targets"][:, :-1] == 50000) & (b["inputs_segmentation"][:, 1:] > 0)).any() for b in ours)


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
    with pytest.raises(ValueError, match="mode must be"):
        TextSpec(tok, mode="split")
    with pytest.raises(ValueError, match="max_length > 0"):
        TextSpec(tok, mode="chunk", max_length=0)
    with pytest.raises(ValueError, match="needs pack="):
        grist.Loader(bad, 2, text=TextSpec(tok, mode="chunk", max_length=8))
    with pytest.raises(ValueError, match="pack_piece= is set by text="):
        grist.Loader(bad, 2, text=TextSpec(tok, mode="chunk", max_length=8), pack="first-fit", pack_length=8,
                     pack_piece=4)
    with pytest.raises(ValueError, match="outputs"):
        grist.Loader(bad, 2, text=TextSpec(tok), outputs="grain")
    # pack_bos=True is the spec's BOS id, so the spec must add one; and BOS replacement is concat-split's
    with pytest.raises(ValueError, match="add_bos=False"):
        grist.Loader(bad, 2, text=TextSpec(tok, add_bos=False, max_length=8), pack="concat-split", pack_length=8,
                     pack_bos=True)
    with pytest.raises(ValueError, match="pack_bos applies to pack concat-split only"):
        grist.Loader(bad, 2, text=TextSpec(tok, max_length=8), pack="first-fit", pack_length=8, pack_bos=True)


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


@pytest.mark.parametrize("threads", [1, 2, 16])
def test_on_error_skip(files, tmp_path, threads):
    """Loader(on_error="skip") with text=: a record that is not UTF-8 or lacks the feature is dropped and
    counted (the features stage's accounting), and the batches equal MaxText's over the good records.
    16: short units, some holding dropped records, go to the packer as they are (grist_async_next())."""
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


def mid_piece(state):
    """A checkpoint of version 3 (plan/state.c): its packing round began inside a text, between two pieces."""
    return int.from_bytes(state[4:6], "little") == 3


def mid_round(state):
    """A packed checkpoint with rows of its round already delivered (pack_skip, byte 48, is not 0)."""
    return int.from_bytes(state[48:52], "little") != 0


def resume_from_each(path, spec, batch_size, theirs, want, **kw):
    """Take the state after every batch; resume from the first and the middle one for which @want is true (and
    the middle one of all): the rest equals @theirs from there. Returns how many states @want took."""
    states = []
    with grist.Loader(path, batch_size, text=spec, outputs="maxtext", **kw) as loader:
        for _ in loader:
            states.append(loader.get_state())
    wanted = [k for k, st in enumerate(states) if want(st)]
    picks = sorted(set(wanted[:1] + wanted[len(wanted) // 2:][:1] + [len(states) // 2]))
    for k in picks:
        with grist.Loader(path, batch_size, text=spec, outputs="maxtext", state=states[k], **kw) as loader:
            assert_same(list(loader), theirs[k + 1:])
    return len(wanted)


@pytest.mark.parametrize("threads", [1, 2])
def test_maxtext_chunk(files, examples, threads):
    """TextSpec(mode="chunk"): MaxText's TokenizeAndChunk (BOS in the first piece, EOS in the last, each piece an
    example) -> FirstFitPack -> batch_and_pad -> shift, on Grain; resumed between two pieces of one text."""
    tok = Tokenizer(files["mistral-v1.model"])
    sp = spm.SentencePieceProcessor(model_file=files["mistral-v1.model"])
    spec = TextSpec(tok, max_length=40, mode="chunk")
    kw = dict(seed=7, epochs=1, pack="first-fit", pack_length=64, threads=threads)
    ours = run(examples, spec, 4, **kw)
    theirs = maxtext_batches(sp.encode, grist_order(examples, 4, seed=7, epochs=1), 1, 2, -1, 64, 4, chunk=40)
    assert_same(ours, theirs)
    between = resume_from_each(examples, spec, 4, theirs, mid_piece, **kw)
    assert between, "no checkpoint fell between two pieces of a text"
    # pieces as long as the row (MaxText's own setting): every long text fills whole rows
    spec = TextSpec(tok, max_length=64, mode="chunk")
    assert_same(run(examples, spec, 4, **kw),
                maxtext_batches(sp.encode, grist_order(examples, 4, seed=7, epochs=1), 1, 2, -1, 64, 4, chunk=64))
    # chunk and trim are different maps: a chunk checkpoint does not restore a trim loader
    with grist.Loader(examples, 4, text=spec, outputs="maxtext", **kw) as loader:
        next(loader)
        state = loader.get_state()
    with pytest.raises(grist.Error, match="does not match"):
        grist.Loader(examples, 4, text=TextSpec(tok, max_length=64), outputs="maxtext", state=state, **kw)
    print("chunk, %d threads: %d batches equal MaxText's; %d checkpoints between two pieces" % (threads, len(ours),
                                                                                              between))


@pytest.mark.parametrize("threads", [1, 2])
def test_maxtext_best_fit(files, examples, threads):
    """pack="best-fit": Grain's BestFitPackIterDataset(shuffle_bins=False) on MaxText's steps, trimmed and chunked;
    checkpoints mid-round resume exactly."""
    tok = Tokenizer(files["gpt2.tiktoken"], pattern="cl100k")
    enc = tiktoken.Encoding("c", pat_str=PATTERNS["cl100k"], mergeable_ranks=load_ranks(files["gpt2.tiktoken"]),
                            special_tokens={})

    def encode(t):
        return enc.encode(t, disallowed_special=())
    order = grist_order(examples, 5, seed=11, epochs=1)
    # 7 bins, batches of 5 rows: rounds straddle batches, so checkpoints fall inside them
    kw = dict(seed=11, epochs=1, pack="best-fit", pack_length=80, pack_bins=7, threads=threads)
    spec = TextSpec(tok, bos_id=50000, eos_id=50001, pad_id=0, max_length=50)
    ours = run(examples, spec, 5, **kw)
    theirs = maxtext_batches(encode, order, 50000, 50001, 0, 80, 5, packer="best-fit", trim=50, bins=7)
    assert_same(ours, theirs)
    # best-fit is not first-fit on these records (else this test would prove little)
    first = maxtext_batches(encode, order, 50000, 50001, 0, 80, 5, trim=50, bins=7)
    assert len(first) != len(theirs) or any(not np.array_equal(a["inputs"], b["inputs"])
                                            for a, b in zip(theirs, first))
    assert resume_from_each(examples, spec, 5, theirs, mid_round, **kw)
    chunk = TextSpec(tok, bos_id=50000, eos_id=50001, pad_id=0, max_length=30, mode="chunk")
    theirs = maxtext_batches(encode, order, 50000, 50001, 0, 80, 5, chunk=30, packer="best-fit", bins=7)
    assert_same(run(examples, chunk, 5, **kw), theirs)
    assert resume_from_each(examples, chunk, 5, theirs, mid_piece, **kw)
    print("best-fit, %d threads: %d batches equal Grain's" % (threads, len(ours)))


@pytest.mark.parametrize("threads", [1, 2])
def test_maxtext_concat_split(files, examples, threads):
    """pack="concat-split": MaxText's concat_then_split. MaxText hands Grain's ConcatThenSplitIterDataset
    REPLACE_FIRST_TOKEN_WITH_BOS and the BOS id but no bos_features, so Grain replaces nothing and the default (no
    pack_bos) is MaxText's batches; pack_bos=True is Grain's replacement on inputs and targets. Trimmed (SentencePiece,
    pad -1) and chunked (GPT-2 ranks, pad 0), resumed from checkpoints taken inside a text."""
    tok = Tokenizer(files["mistral-v1.model"])
    sp = spm.SentencePieceProcessor(model_file=files["mistral-v1.model"])
    order = grist_order(examples, 4, seed=13, epochs=1)
    kw = dict(seed=13, epochs=1, pack="concat-split", pack_length=64, threads=threads)
    spec = TextSpec(tok, max_length=64)
    maxtext = maxtext_batches(sp.encode, order, 1, 2, -1, 64, 4, packer="concat-split")
    assert_same(run(examples, spec, 4, **kw), maxtext)
    replaced = maxtext_batches(sp.encode, order, 1, 2, -1, 64, 4, packer="concat-split",
                               bos_features=("inputs", "targets"))
    bos_kw = dict(kw, pack_bos=True)
    assert_same(run(examples, spec, 4, **bos_kw), replaced)
    # the replacement changes rows that begin inside a text, and only the first cell of such a row
    changed = [(a["inputs"] != b["inputs"]) for a, b in zip(maxtext, replaced)]
    assert sum(int(c.sum()) for c in changed) > 0 and all(not c[:, 1:].any() for c in changed)
    assert resume_from_each(examples, spec, 4, replaced, mid_round, **bos_kw), "no checkpoint fell inside a text"
    # a checkpoint without pack_bos does not restore a loader with it
    with grist.Loader(examples, 4, text=spec, outputs="maxtext", **kw) as loader:
        next(loader)
        state = loader.get_state()
    with pytest.raises(grist.Error, match="does not match"):
        grist.Loader(examples, 4, text=spec, outputs="maxtext", state=state, **bos_kw)
    # chunked: every piece but a text's first begins without BOS, and gets it
    gpt = Tokenizer(files["gpt2.tiktoken"], pattern="llama3")
    enc = tiktoken.Encoding("l3", pat_str=PATTERNS["llama3"], mergeable_ranks=load_ranks(files["gpt2.tiktoken"]),
                            special_tokens={})
    chunk = TextSpec(gpt, bos_id=50000, eos_id=50001, pad_id=0, max_length=40, mode="chunk")
    theirs = maxtext_batches(lambda t: enc.encode(t, disallowed_special=()), order, 50000, 50001, 0, 64, 4,
                             chunk=40, packer="concat-split", bos_features=("inputs", "targets"))
    assert_same(run(examples, chunk, 4, **bos_kw), theirs)
    assert resume_from_each(examples, chunk, 4, theirs, mid_round, **bos_kw)
    print("concat-split, %d threads: %d batches equal MaxText's, %d with BOS replaced" % (threads, len(maxtext),
                                                                                       len(replaced)))


@pytest.mark.parametrize("threads", [1, 2])
def test_maxtext_concat_split_bos_features(files, examples, threads):
    """pack_bos_features=: Grain's bos_features naming inputs or targets alone, before MaxText's shift. Trimmed with
    add_bos, every segment that begins inside a row begins with BOS already and targets never see a row's first cell,
    so ("inputs",) is ("inputs", "targets") (pack_bos=True) there and ("targets",) is no replacement; chunked, a
    piece that begins inside a row keeps its own token in the feature not named: they differ, and grist gives each,
    resumed too. Without outputs="maxtext" (Grain's own keys, no targets) ("inputs",) is pack_bos."""
    order = grist_order(examples, 4, seed=13, epochs=1)
    kw = dict(seed=13, epochs=1, pack="concat-split", pack_length=64, threads=threads, pack_bos=True)
    tok = Tokenizer(files["mistral-v1.model"])
    sp = spm.SentencePieceProcessor(model_file=files["mistral-v1.model"])
    spec = TextSpec(tok, max_length=64)
    both = maxtext_batches(sp.encode, order, 1, 2, -1, 64, 4, packer="concat-split", bos_features=("inputs", "targets"))
    inputs = maxtext_batches(sp.encode, order, 1, 2, -1, 64, 4, packer="concat-split", bos_features=("inputs",))
    assert_same(inputs, both)
    assert_same(run(examples, spec, 4, pack_bos_features=("inputs",), **kw), inputs)
    targets = maxtext_batches(sp.encode, order, 1, 2, -1, 64, 4, packer="concat-split", bos_features=("targets",))
    assert_same(targets, maxtext_batches(sp.encode, order, 1, 2, -1, 64, 4, packer="concat-split"))
    assert_same(run(examples, spec, 4, pack_bos_features=("targets",), **kw), targets)
    # chunked (GPT-2 ranks, pad 0): pieces after a text's first begin without BOS
    gpt = Tokenizer(files["gpt2.tiktoken"], pattern="llama3")
    enc = tiktoken.Encoding("l3", pat_str=PATTERNS["llama3"], mergeable_ranks=load_ranks(files["gpt2.tiktoken"]),
                            special_tokens={})
    chunk = TextSpec(gpt, bos_id=50000, eos_id=50001, pad_id=0, max_length=40, mode="chunk")
    encode = lambda t: enc.encode(t, disallowed_special=())  # noqa: E731
    theirs = {f: maxtext_batches(encode, order, 50000, 50001, 0, 64, 4, chunk=40, packer="concat-split",
                                 bos_features=f) for f in (("inputs", "targets"), ("inputs",), ("targets",))}
    for f in (("inputs",), ("targets",)):
        assert_same(run(examples, chunk, 4, pack_bos_features=f, **kw), theirs[f])
        # against both: the replaced feature equals, the other one differs somewhere, and only there
        same, other = ("inputs", "targets") if f == ("inputs",) else ("targets", "inputs")
        assert all(np.array_equal(a[same], b[same]) for a, b in zip(theirs[f], theirs[("inputs", "targets")]))
        assert any(not np.array_equal(a[other], b[other]) for a, b in zip(theirs[f], theirs[("inputs", "targets")]))
        assert all(np.array_equal(a[k], b[k]) for a, b in zip(theirs[f], theirs[("inputs", "targets")])
                   for k in a if k not in ("inputs", "targets", "targets_segmentation"))
    assert resume_from_each(examples, chunk, 4, theirs[("inputs",)], mid_round, pack_bos_features=["inputs"], **kw)
    # the setting is in the checkpoint's fingerprint: another one's state is refused, either way
    settings = [dict(kw, pack_bos_features=("inputs",)), dict(kw, pack_bos_features=("targets",)), kw,
                dict(kw, pack_bos=None)]
    for a in settings:
        with grist.Loader(examples, 4, text=chunk, outputs="maxtext", **a) as loader:
            next(loader)
            state = loader.get_state()
        for b in settings:
            if b is not a:
                with pytest.raises(grist.Error, match="does not match"):
                    grist.Loader(examples, 4, text=chunk, outputs="maxtext", state=state, **b)
    # Grain's default keys (length_struct {"inputs": L}, no shift): bos_features={"inputs"} is pack_bos
    ds = ge.FlatMapIterDataset(grain.MapDataset.source([texts()[i] for i in order]).to_iter_dataset(),
                               TokenizeAndChunk(lambda t: [50000] + encode(t) + [50001], 40))
    ds = ge.ConcatThenSplitIterDataset(ds.map(lambda e: {"inputs": e["inputs"]}), length_struct={"inputs": 64},
                                       bos_handling=ge.BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS,
                                       bos_token_id=50000, bos_features=("inputs",))
    rows = list(ds)
    with grist.Loader(examples, 4, text=chunk, pack_bos_features=("inputs",), **kw) as loader:
        ours = list(loader)
    for k in ("inputs", "inputs_segment_ids", "inputs_positions"):
        assert np.array_equal(np.concatenate([b[k] for b in ours]), np.stack([r[k] for r in rows]).astype(np.int32))
    for bad, msg in ((("targets",), "can only be"), (("inputs", "x"), "names"), ("inputs", "not a str")):
        with pytest.raises((ValueError, TypeError), match=msg):
            grist.Loader(examples, 4, text=chunk, pack_bos_features=bad, **kw)
    with pytest.raises(ValueError, match="add_bos or add_eos"):
        grist.Loader(examples, 4, text=TextSpec(tok, add_bos=False, add_eos=False, max_length=64), outputs="maxtext",
                     pack_bos_features=("inputs",), **dict(kw, pack_bos=1))
    print("concat-split, %d threads: bos_features inputs / targets alone equal Grain's" % threads)
