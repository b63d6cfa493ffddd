"""One option table: the same value is accepted or refused by `grist load` and grist.Loader,
with the same message (issue 25, point 5). The values include the disagreements the issue
found (queue_depth 32768, prefetch=1, --read-ahead 4M)."""
import re
import subprocess

import pytest

from conftest import grist, grist_cli, write_dataset

CASES = [
    ("queue_depth", "32768"), ("queue_depth", "32769"), ("queue_depth", "0"), ("queue_depth", "4096"),
    ("prefetch", "1"), ("prefetch", "64"), ("prefetch", "65"), ("prefetch", "0"),
    ("read_ahead", "4M"), ("read_ahead", "4MiB"), ("read_ahead", "64k"), ("read_ahead", "4KB"),
    ("read_ahead", "100"), ("read_ahead", "2T"), ("max_batch_bytes", "1G"), ("max_batch_bytes", "0"),
    ("threads", "1"), ("threads", "256"), ("threads", "257"), ("threads", "two"),
    ("batch_size", "0"), ("batch_size", "16777217"), ("batch_size", "7"),
    ("epochs", "-1"), ("epochs", "2"), ("seed", "18446744073709551616"), ("seed", "12"),
    ("engine", "io_uring"), ("engine", "pread"), ("io", "mmap"), ("io", "posix"),
    ("granularity", "chunks"), ("granularity", "chunk"), ("window", "0"), ("window", "65537"), ("window", "4"),
    ("layout", "padded:256"), ("layout", "padded:0"), ("layout", "square"), ("pad_value", "256"),
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("parity") / "p.ar", 200, "group_size:4,zstd:1")


def cli_result(cli, path, name, value):
    args = [cli, "load", path, "--epochs", "1", "--digest", "--" + name.replace("_", "-"), value]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if p.returncode == 0:
        return "accepted", p.stdout
    assert p.returncode == 2, (name, value, p.returncode, p.stderr)
    first = p.stderr.splitlines()[0]
    assert first.startswith("grist load: "), first
    return "refused", first[len("grist load: "):]


def py_result(path, name, value, xxh):
    kw = {"epochs": 1, name: value}
    batch_size = kw.pop("batch_size", 32)  # the CLI's default batch size
    try:
        loader = grist.Loader(path, batch_size, **kw)
        out = []
        for b in loader:
            out.append("%016x\n" % xxh(b.data.tobytes()))
            b.release()
        return "accepted", "".join(out)
    except ValueError as e:
        return "refused", str(e)


@pytest.mark.parametrize("name,value", CASES)
def test_cli_and_python_agree(data, xxh, name, value):
    cli = grist_cli()
    if not cli:
        pytest.skip("the grist CLI is not built")
    got_cli = cli_result(cli, data, name, value)
    got_py = py_result(data, name, value, xxh)
    assert got_cli == got_py
    if got_cli[0] == "refused":  # the table's message names the option (or the loader's check)
        assert got_cli[1].startswith(("%s: " % name, "record_bytes: ", "loader: ")), got_cli[1]


def test_python_ints_and_bools_read_as_the_cli_reads_text(data):
    # an int is its decimal text, a bool true/false: the same bounds, the same message
    with pytest.raises(ValueError, match=r"^queue_depth: '32769' is not a whole number in 1\.\.32768$"):
        grist.Loader(data, 8, queue_depth=32769)
    grist.Loader(data, 8, queue_depth=32768, prefetch=1, drop_remainder=True, shuffle=False).close()
    with pytest.raises(TypeError):
        grist.Loader(data, 8, read_ahead=4.5e6)


def test_prefetch_one_in_a_plain_for_loop(data):
    # the loop variable holds the previous batch while next() runs: the "prefetch=1 refused"
    n = 0
    for b in grist.Loader(data, 8, epochs=1, prefetch=1):
        n += b.num_records
    assert n == 200


def grist_bench():
    """grist-bench beside the CLI this test found (a build folder), else $GRIST_BENCH, else PATH."""
    import os
    import shutil
    cli = grist_cli()
    cands = [os.environ.get("GRIST_BENCH")]
    if cli:
        cands.append(os.path.join(os.path.dirname(os.path.dirname(cli)), "bench", "grist-bench"))
        cands.append(os.path.join(os.path.dirname(cli), "grist-bench"))
    for p in cands:
        if p and os.access(p, os.X_OK):
            return p
    return shutil.which("grist-bench")


# (option, value) refused by `grist load`; `grist order` and `grist-bench` take these options too
REFUSED = {
    "order": [("seed", "18446744073709551616"), ("epochs", "-1"), ("granularity", "chunks"), ("window", "0"),
              ("shard", "3/2"), ("shard", "x")],
    "bench": [("seed", "-1"), ("granularity", "chunks"), ("window", "65537"), ("queue_depth", "32769"),
              ("prefetch", "0"), ("read_ahead", "4kB"), ("read_ahead", "1.5M"), ("threads", "257"),
              ("batch_size", "0"), ("engine", "io_uring"), ("io", "posix"), ("max_batch_bytes", "0")],
}


@pytest.mark.parametrize("tool", ["order", "bench"])
def test_order_and_bench_refuse_as_load_does(data, tool):
    """The CLI's other front ends parse through the same table: the same refusal, word for word."""
    cli = grist_cli()
    bench = grist_bench()
    if not cli or (tool == "bench" and not bench):
        pytest.skip("the grist CLI or grist-bench is not built")
    for name, value in REFUSED[tool]:
        flag = "--" + name.replace("_", "-")
        want = cli_result(cli, data, name, value)
        assert want[0] == "refused", (name, value)
        if tool == "order":
            args, prefix = [cli, "order", "--records", "100", flag, value], "grist order: "
        else:
            args, prefix = [bench, data, "--seconds", "0.1", flag, value], "grist-bench: "
        p = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (tool, name, value, p.returncode, p.stderr)
        assert p.stderr.splitlines()[0] == prefix + want[1], (tool, name, value, p.stderr)


def test_set_remote_options_reads_sizes_as_everything_else(data):
    """grist.set_remote_options(coalesce="1MiB") as Loader(remote_coalesce="1MiB") and
    --remote coalesce:1MiB take it; a refusal is the C grammar's message, and a value cannot
    smuggle in another option."""
    try:
        for value in ("1MiB", "1M", "4096", 4096, "0"):
            grist.set_remote_options(coalesce=value, split="8MiB")
            grist.Loader(data, 8, remote_coalesce=value).close()
        for value in ("1kB", "1.5M", "-1"):
            with pytest.raises(ValueError, match=r"^remote option coalesce: '%s' is not a size" % re.escape(value)):
                grist.set_remote_options(coalesce=value)
        with pytest.raises(ValueError, match="coalesce"):
            grist.set_remote_options(coalesce="1M,retries:0")
        for value in (1.5, True, None):
            with pytest.raises(TypeError):
                grist.set_remote_options(retries=value)
    finally:
        grist.set_remote_options()


def table_names(cli):
    out = subprocess.run([cli, "load", "--options"], capture_output=True, text=True, timeout=60).stdout
    return [m.group(1) for m in re.finditer(r"^  ([a-z_]+) ", out, re.M)]


def test_every_table_option_is_a_load_flag(data):
    """`grist load --options` prints the table as the names grist.Loader takes; each is also a
    flag of `grist load` (record_bytes as --record-bytes, not only inside --layout padded:N)."""
    cli = grist_cli()
    if not cli:
        pytest.skip("the grist CLI is not built")
    names = table_names(cli)
    assert "queue_depth" in names and "record_bytes" in names, names
    unknown = []
    for name in names:
        p = subprocess.run([cli, "load", "--" + name.replace("_", "-"), "@@", data], capture_output=True,
                           text=True, timeout=60)
        if "unknown option" in p.stderr:
            unknown.append(name)
    assert not unknown, "grist load --options lists these, grist load refuses them as flags: %s" % unknown
    # and they mean what the table says: the same batches as the compound spellings
    same = [(["--record-bytes", "1KiB", "--layout", "padded"], ["--layout", "padded:1024"]),
            (["--shard-index", "1", "--shard-count", "3"], ["--shard", "1/3"]),
            (["--shard-mode", "contiguous", "--shard", "1/3"], ["--contiguous-shards", "--shard", "1/3"]),
            (["--shuffle", "false"], ["--no-shuffle"])]
    for a, b in same:
        run = [subprocess.run([cli, "load", data, "--epochs", "1", "--digest"] + x, capture_output=True,
                              text=True, timeout=60) for x in (a, b)]
        assert run[0].returncode == 0 and run[0].stdout == run[1].stdout != "", (a, b, run[0].stderr)


def table_numbers(cli):
    """{name: (min, max, default text)} of the table's number and size options (`grist load --options`)."""
    out = subprocess.run([cli, "load", "--options"], capture_output=True, text=True, timeout=60).stdout
    pat = r"^  ([a-z_]+) +(?:number|size) (\d+)\.\.(\d+)(?:; default (.*))?$"
    return {m.group(1): (m.group(2), m.group(3), m.group(4)) for m in re.finditer(pat, out, re.M)}


# the front ends' own defaults, which their help states as theirs: not the library's
OWN = {"batch_size", "epochs"}


@pytest.mark.parametrize("tool", ["load", "order", "bench"])
def test_help_shows_the_libraries_defaults_and_bounds(data, tool):
    """Each loader option's default and bounds in `grist load`, `grist order` and grist-bench
    help are the library's table's, printed from it rather than copied (they had drifted:
    "64 MiB" beside the table's 64MiB, a read-ahead default without its cap); and the prefetch
    default they name is the hold limit grist.Loader gets from the library when none is given."""
    cli = grist_cli()
    bench = grist_bench()
    if not cli or (tool == "bench" and not bench):
        pytest.skip("the grist CLI or grist-bench is not built")
    table = table_numbers(cli)
    assert {"queue_depth", "prefetch", "window", "max_batch_bytes", "read_ahead"} <= set(table), table
    with grist.Loader(data, 8) as loader:
        assert str(loader.prefetch) == table["prefetch"][2]
    args = [bench, "--help"] if tool == "bench" else [cli, tool, "--help"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "{" + "default:" not in p.stdout, p.stdout
    # each flag's text: from its line to the next flag's
    checked = set()
    for m in re.finditer(r"^  --([a-z-]+)(.*(?:\n {20,}.*)*)", p.stdout, re.M):
        name, text = m.group(1).replace("-", "_"), m.group(2)
        if name not in table or name in OWN:
            continue
        lo, hi, default = table[name]
        d = re.search(r"\(default:? ([^;)]*)", text)
        if d:
            assert " ".join(d.group(1).split()) == default, (tool, name, text)
            checked.add(name)
        r = re.search(r"(\d+)\.\.(\d+)", text)
        if r:
            assert (r.group(1), r.group(2)) == (lo, hi), (tool, name, text)
    want = {"order": {"seed", "window"}}.get(tool, {"queue_depth", "prefetch", "window", "max_batch_bytes",
                                                    "read_ahead", "threads", "seed"})
    assert want <= checked, (tool, checked)
