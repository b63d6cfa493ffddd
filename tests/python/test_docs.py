"""The documentation cannot drift from the program.

- docs/cli.md names every flag of `grist --help`, of each subcommand's `--help` and every option
  of `grist load --options`, and no flag the program lacks;
- every relative link in README.md and docs/*.md resolves, its #anchor included (GitHub's
  heading slugs);
- every code block marked as a command runs. The convention (docs/architecture.md, "Docs"): a
  fenced ```sh, ```python or ```c block right after a line `<!-- run -->` is run by this test
  in an empty temporary folder, with the `grist` CLI first on PATH, the package importable and
  $GRIST_TEST_DATA pointing at tests/data (a C block is compiled against include/ and the
  built libgrist.so first); it makes its own small data and must exit 0.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, grist_cli

DOCS = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
# a flag: --name not continued by another name character (fio's --read_iolog is not --read)
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*(?![\w-])")
FENCE = re.compile(r"^(```|~~~)")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def strip_code(text):
    """The text with fenced blocks and `inline code` blanked (links inside code are not links);
    lines keep their numbers."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    s = re.sub(r"`", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    """The anchors of a Markdown file: its headings' slugs, numbered as GitHub numbers repeats."""
    seen, out, fenced = {}, set(), False
    for line in read(path).splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m and not fenced:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def links(path):
    """(target, line) of every Markdown link and image in the file, outside code."""
    text = strip_code(read(path))
    for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
        yield m.group(1), text.count("\n", 0, m.start()) + 1


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_resolve(doc):
    bad = []
    for target, line in links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
        if not os.path.exists(dest):
            bad.append("line %d: %s: no such file" % (line, target))
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            bad.append("line %d: %s: no heading with that anchor" % (line, target))
    assert not bad, "%s:\n  %s" % (os.path.relpath(doc, ROOT), "\n  ".join(bad))


def test_slug_is_githubs():
    assert slug("Checking less: `verify=headers`") == "checking-less-verifyheaders"
    assert slug("Remote datasets (s3://, gs://, http(s)://)") == "remote-datasets-s3-gs-https"
    assert slug("Loader options (`grist load --options`)") == "loader-options-grist-load---options"


@pytest.fixture(scope="module")
def cli_path():
    path = grist_cli()
    if not path:
        pytest.skip("the grist CLI is not built (set GRIST_CLI)")
    return path


def help_text(cli_path, *args):
    p = subprocess.run([cli_path, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def sections(text):
    """{heading: body} of the level-2 sections of a Markdown text ('' for the part before them)."""
    out, name = {"": []}, ""
    for line in text.splitlines():
        if line.startswith("## "):
            name = line[3:].strip()
            out[name] = []
        else:
            out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def commands(cli_path):
    """The subcommands `grist --help` lists (its "commands:" block), so a new one needs a section."""
    block = help_text(cli_path, "--help").split("commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines() if line.strip()]


def test_cli_md_names_every_flag_and_no_other(cli_path):
    doc = sections(read(os.path.join(ROOT, "docs", "cli.md")))
    COMMANDS = commands(cli_path)
    assert "load" in COMMANDS and "order" in COMMANDS, COMMANDS
    top = set(FLAG.findall(help_text(cli_path, "--help"))) | {"--version"}
    per = {c: set(FLAG.findall(help_text(cli_path, c, "--help"))) | {"--help"} for c in COMMANDS}
    everything = top.union(*per.values())
    problems = []
    missing = top - set(FLAG.findall(doc["Every command"]))
    if missing:
        problems.append("Every command: missing %s" % sorted(missing))
    for c in COMMANDS:
        name = "grist " + c
        if name not in doc:
            problems.append("no section '## %s'" % name)
            continue
        named = set(FLAG.findall(doc[name]))
        if per[c] - {"--help"} - named:
            problems.append("%s: missing %s" % (name, sorted(per[c] - {"--help"} - named)))
        if named - per[c] - top:
            problems.append("%s: not flags of the command %s" % (name, sorted(named - per[c] - top)))
    for name, body in doc.items():
        extra = set(FLAG.findall(body)) - everything
        if extra:
            problems.append("%s: flags grist does not have %s" % (name or "(top)", sorted(extra)))
    assert not problems, "docs/cli.md against grist --help:\n  " + "\n  ".join(problems)


def test_cli_md_lists_every_loader_option(cli_path):
    table = help_text(cli_path, "load", "--options")
    options = set(re.findall(r"^  ([a-z][a-z0-9_]*) ", table, re.M))
    assert {"batch_size", "seed", "read_ahead"} <= options
    body = sections(read(os.path.join(ROOT, "docs", "cli.md")))["Loader options (`grist load --options`)"]
    documented = set(re.findall(r"^\| `([a-z][a-z0-9_]*)` \|", body, re.M))
    assert documented == options, "missing %s, extra %s" % (sorted(options - documented),
                                                             sorted(documented - options))
    # 'every option it lists is also a flag here' (grist load --help): held to it
    load_flags = set(FLAG.findall(help_text(cli_path, "load", "--help")))
    assert {"--" + o.replace("_", "-") for o in options} <= load_flags


def run_blocks():
    """(doc, line, language, code) of every block marked <!-- run --> in README.md and docs/."""
    out = []
    for doc in DOCS:
        lines = read(doc).splitlines()
        for i, line in enumerate(lines):
            if line != "<!-- run -->":
                continue
            m = re.match(r"^```(sh|python|c)\s*$", lines[i + 1]) if i + 1 < len(lines) else None
            assert m, "%s:%d: <!-- run --> must stand right before a ```sh, ```python or ```c block" % (doc, i + 1)
            end = next(k for k in range(i + 2, len(lines)) if lines[k].startswith("```"))
            out.append((os.path.relpath(doc, ROOT), i + 3, m.group(1), "\n".join(lines[i + 2:end]) + "\n"))
    return out


BLOCKS = run_blocks()


def test_some_blocks_are_marked():
    docs = {b[0] for b in BLOCKS}
    assert {"README.md", "docs/cli.md", "docs/python.md"} <= docs


def compile_c(code, cli_path, tmp_path):
    """Build a C block against this tree's headers and the libgrist.so beside the CLI's build."""
    cc = shutil.which("cc") or shutil.which("gcc")
    libdir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(cli_path))), "src")
    if not cc or not os.path.exists(os.path.join(libdir, "libgrist.so")):
        pytest.skip("no C compiler, or no built libgrist.so beside %s" % cli_path)
    src, exe = tmp_path / "prog.c", str(tmp_path / "prog")
    src.write_text(code)
    p = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", os.path.join(ROOT, "include"), str(src),
                        "-o", exe, "-L", libdir, "-lgrist", "-Wl,-rpath," + libdir],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return exe


@pytest.mark.parametrize("doc,line,lang,code", BLOCKS, ids=["%s:%d" % (b[0], b[1]) for b in BLOCKS])
def test_marked_block_runs(doc, line, lang, code, cli_path, tmp_path):
    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(cli_path)) + os.pathsep + os.environ["PATH"],
               GRIST_TEST_DATA=os.path.join(ROOT, "tests", "data"))
    if lang == "c":
        argv = [compile_c(code, cli_path, tmp_path)]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", code] if lang == "sh" else [sys.executable, "-c", code]
    p = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, "%s:%d exited %d\n%s" % (doc, line, p.returncode, p.stderr[-3000:])


@pytest.mark.parametrize("doc", [d for d in DOCS if os.path.basename(os.path.dirname(d)) == "docs"],
                         ids=lambda p: os.path.relpath(p, ROOT))
def test_each_page_says_what_it_is_for_and_links_its_neighbours(doc):
    """Within its opening (the text before the second heading) a page links back to the
    README and to at least one other page of docs/."""
    text = read(doc)
    heads = [m.start() for m in re.finditer(r"^## ", text, re.M)]
    opening = text[:heads[1] if len(heads) > 1 else len(text)]
    targets = [t for t, _ in links(doc) if t.split("#")[0] and text.find("(" + t + ")") < len(opening)]
    assert "../README.md" in targets, "%s: no link back to the README in its opening" % doc
    pages = {t.split("#")[0] for t in targets if re.match(r"^[\w-]+\.md$", t.split("#")[0])}
    assert pages, "%s: no link to a neighbouring page of docs/ in its opening" % doc
