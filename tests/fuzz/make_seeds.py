#!/usr/bin/env python3
"""Seed corpora for the libFuzzer harnesses, from the golden files in tests/data.

Usage: make_seeds.py OUT_DIR GRIST_CLI
Writes OUT_DIR/{reader,chunk,footer,state,example,csv}: whole files; each chunk with its file
offset; the postscript, footer records and writer options of the uncompressed files;
checkpoints `grist load` saves on the file fuzz_state opens, under each of its configs; and
the golden tf.train.Example records (TFDS's and protobuf's) behind each of fuzz_example's
three spec bytes; small CSV texts, good and bad, behind fuzz_csv's spec bytes; two small
SentencePiece models (fuzz_spm).
"""
import glob
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
import gristcli as g  # noqa: E402


def put(d, name, data):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def spm_seeds(d):
    """Two small real SentencePiece models: Unigram with the NFKC charsmap, BPE with byte fallback."""
    try:
        import sentencepiece as spm
    except ImportError:
        print("make_seeds.py: no sentencepiece module: fuzz_spm starts without seeds", file=sys.stderr)
        return
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w") as f:
            for doc in sorted(glob.glob(os.path.join(HERE, "..", "..", "docs", "*.md"))):
                f.write(open(doc, encoding="utf-8").read())
        for name, kw in (("unigram-nfkc", dict(model_type="unigram", normalization_rule_name="nmt_nfkc", vocab_size=300)),
                         ("bpe-bytes", dict(model_type="bpe", byte_fallback=True, split_digits=True, character_coverage=0.99, vocab_size=500,
                                            normalization_rule_name="identity"))):
            prefix = os.path.join(tmp, name)
            spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, minloglevel=2,
                                           num_threads=1, hard_vocab_limit=False, **kw)
            put(d, name, open(prefix + ".model", "rb").read())


def main():
    out, cli = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(g.golden_dir(), "*.array_record")))
    for path in files:
        name = os.path.basename(path)
        data = open(path, "rb").read()
        put(os.path.join(out, "reader"), name, data)
        lay = g.layout(data)
        pos, k = 0, 0
        while pos < lay["size"]:
            try:
                _, end = g.chunk_extent(data, pos)
            except (ValueError, struct.error):
                break
            if end <= pos:
                break
            put(os.path.join(out, "chunk"), "%s.%d" % (name, k), struct.pack("<I", pos) + data[pos:min(end, pos + 300000)])
            pos, k = end, k + 1
        # the postscript record and, when stored uncompressed, the footer's records
        ps, _ = g.chunk_extent(data, lay["postscript"][0])
        body = g.read_logical(data, lay["postscript"][0] + g.CHUNK_HEADER, ps["data_size"])
        if body[0] == 0:
            sizes_len, p = g.read_varint(body, 1)
            first, _ = g.read_varint(body, p)
            put(os.path.join(out, "footer"), name + ".ps", b"\x00" + body[p + sizes_len:p + sizes_len + first])
        begin = lay["footer"][0]
        fh, _ = g.chunk_extent(data, begin)
        body = g.read_logical(data, begin + g.CHUNK_HEADER, fh["data_size"])
        if body[0] == 0:
            sizes_len, p = g.read_varint(body, 1)
            q, at = p, p + sizes_len
            for i in range(min(fh["num_records"], 8)):
                n, q = g.read_varint(body, q)
                put(os.path.join(out, "footer"), "%s.%d" % (name, i), (b"\x01" if i == 0 else b"\x02") + body[at:at + n])
                at += n
    for i, opts in enumerate(("", "default", "group_size:1,zstd:3", "uncompressed,group_size:16", "brotli:6",
                              "snappy,pad_to_block_boundary:true", "zstd:-5,window_log:25",
                              "group_size:65536,transpose:false,max_parallelism:auto,window_log:auto")):
        put(os.path.join(out, "footer"), "options.%d" % i, b"\x03" + opts.encode())
    # fuzz_example: a spec byte, then a real record
    for path in sorted(glob.glob(os.path.join(HERE, "..", "data", "features", "*.pb"))):
        name = os.path.basename(path)
        rec = open(path, "rb").read()
        spec = 0 if name.startswith("mnist") else 1
        put(os.path.join(out, "example"), "%d.%s" % (spec, name), bytes([spec]) + rec)
        if spec:
            put(os.path.join(out, "example"), "2.%s" % name, b"\x02" + rec)
    # fuzz_csv: a spec byte (bit 0: lists, bit 1: two shards), then CSV text
    csv_seeds = [b'a,b,c\r\n1,0.5,x\r\n\r\n-2,1e3,"q ""u"" ,\nz"\n',
                 b'\xef\xbb\xbfc,b,a,extra\n"t1 t2",1 2 3,4 5,\n,,,\n',
                 b'a,b,c\n1,2\n', b'a,b,c\n"1"x,2,3\n', b'a,b,c\n1,2,"open\n']
    for i, text in enumerate(csv_seeds):
        for spec in (0, 1, 2, 3):
            put(os.path.join(out, "csv"), "%d.%d" % (spec, i), bytes([spec]) + text)
    # fuzz_text: a mode byte (pattern, special tokens allowed), then text
    text_seeds = ["the cat's 123 words\n\n  end", "it'S THE 1234567 <|endoftext|><s>x", "caf\u00e9 e\u0301 \u65e5\u672c",
                  "\t \u3000\xa0\x85a", "aaaa" * 64, "   \r\n/\r\n...  ", "\U0001f468\u200d\U0001f469 \U0001f44d\U0001f3fd"]
    for i, text in enumerate(text_seeds):
        for mode in (0, 1, 2, 3, 4, 9):
            put(os.path.join(out, "text"), "%d.%d" % (mode, i), bytes([mode]) + text.encode())
    put(os.path.join(out, "text"), "bad", b"\x00ab\xff\xc3")
    # fuzz_spm: whole .model files, trained on the repository's own docs by sentencepiece's trainer
    spm_seeds(os.path.join(out, "spm"))
    # fuzz_state: config byte, flags byte (0), then a state saved with that config
    target = os.path.join(g.golden_dir(), "zstd_default_g1.array_record")
    tmp = os.path.join(out, "state.tmp")
    for cfg in (0x00, 0x01 | 0x04, 0x03 | 0x08, 0x11, 0x20, 0x23 | 0x04, 0x40, 0x41 | 0x04):
        k = 1 + (cfg & 3)
        args = [cli, "load", target, "--stop-after", "3" if cfg & 64 else "1", "--save-state", tmp, "--engine", "ref",
                "--shard", "%d/%d" % (((cfg >> 2) & 3) % k, k)]
        if cfg & 16:
            args.append("--contiguous-shards")
        if cfg & 32:
            args += ["--granularity", "chunk"]
        if cfg & 64:  # packed, records in pieces: a state of version 2 or 3
            args += ["--pack", "best-fit:64:4", "--token-bytes", "1", "--pack-piece", "5", "--batch-size", "2"]
        if subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            put(os.path.join(out, "state"), "cfg%02x" % cfg, bytes([cfg, 0]) + open(tmp, "rb").read())
    if os.path.exists(tmp):
        os.unlink(tmp)


if __name__ == "__main__":
    main()
