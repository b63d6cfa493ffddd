"""The layering issue 25 asks for, checked on the built binaries and the sources.

Usage: check_layering.py LIBGRIST_SO GRIST_CLI

- Neither libgrist.so nor the `grist` CLI starts a process (system, popen, exec*, posix_spawn):
  so neither runs a package manager or a plotting tool; that is grist-bench's business
  (bench/), which says what it runs. Read from their dynamic imports with nm -D, so a call
  hidden behind a macro or a helper still counts.
- bench/ reaches the library through its public headers (grist/*.h), the internal API that
  is declared as such (grist/internal/*.h), the front ends' shared helpers (tools/frontend/cli.h)
  and its own headers: never a private header of src/ ("io/io.h", "common/error.h", ...).
- The benchmark and the CLI do not depend on each other (issue 36): no file of bench/ includes
  a header of tools/, none of tools/ a header of bench/, and neither meson.build names the
  other's targets; what both need is tools/frontend/'s library.
- Nothing the user is told to `pip install` is the unrelated PyPI project called grist: the
  distribution is grist-loader (pyproject.toml), `import grist` stays.
Exit 77 (skip) without nm.
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SPAWN = {"system", "popen", "execl", "execle", "execlp", "execv", "execve", "execvp", "execvpe", "fexecve",
         "posix_spawn", "posix_spawnp"}


def imports(binary):
    out = subprocess.run(["nm", "-D", "--undefined-only", binary], check=True, capture_output=True,
                         text=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def bench_includes():
    bad = []
    bench = os.path.join(ROOT, "bench")
    own = {f for f in os.listdir(bench) if f.endswith(".h")}
    public = {"grist/" + f for f in os.listdir(os.path.join(ROOT, "include", "grist")) if f.endswith(".h")}
    internal = {"grist/internal/" + f for f in os.listdir(os.path.join(ROOT, "include", "grist", "internal"))}
    allowed = own | public | internal | {"cli.h"}
    for name in sorted(os.listdir(bench)):
        if not name.endswith((".c", ".h", ".cc")):
            continue
        for n, line in enumerate(open(os.path.join(bench, name)), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m and m.group(1) not in allowed:
                bad.append("bench/%s:%d includes \"%s\"" % (name, n, m.group(1)))
    return bad


def fronts_apart():
    bad = []
    headers = {d: {f for f in os.listdir(os.path.join(ROOT, d)) if f.endswith(".h")} for d in ("bench", "tools")}
    targets = {"bench": ("grist_bench_exe", "bench_py_install_dir"), "tools": ("grist_exe", "grist_cli_sources")}
    for here, there in (("bench", "tools"), ("tools", "bench")):
        for name in sorted(os.listdir(os.path.join(ROOT, here))):
            path = os.path.join(ROOT, here, name)
            if name.endswith((".c", ".h", ".cc")):
                for n, line in enumerate(open(path), 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if m and os.path.basename(m.group(1)) in headers[there] - headers[here]:
                        bad.append("%s/%s:%d includes %s's \"%s\"" % (here, name, n, there, m.group(1)))
            elif name == "meson.build":
                for n, line in enumerate(open(path), 1):
                    for t in targets[there]:
                        if re.search(r"\b%s\b" % t, line.split("#")[0]):
                            bad.append("%s/meson.build:%d uses %s's %s" % (here, n, there, t))
    return bad


def pip_names():
    """Every `pip install grist...` that names a distribution (not a path) must name grist-loader."""
    bad = []
    for top in ("README.md", "docs", "python", "examples", "pyproject.toml", "tools", "bench"):
        p = os.path.join(ROOT, top)
        files = [p] if os.path.isfile(p) else [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs]
        for f in sorted(files):
            if not f.endswith((".md", ".py", ".toml", ".pyi", ".txt")) and "install" not in os.path.basename(f):
                continue
            for n, line in enumerate(open(f, errors="replace"), 1):
                for m in re.finditer(r"pip3? install\s+(?:-\S+\s+)*['\"]?(grist\b[^\s'\"`]*)", line):
                    if not m.group(1).startswith("grist-loader"):
                        bad.append("%s:%d: pip install %s (the distribution is grist-loader)"
                                   % (os.path.relpath(f, ROOT), n, m.group(1)))
    return bad


def main():
    lib, cli = sys.argv[1], sys.argv[2]
    if not shutil.which("nm"):
        print("nm missing: skipped")
        return 77
    problems = []
    for binary in (lib, cli):
        spawned = sorted(imports(binary) & SPAWN)
        if spawned:
            problems.append("%s calls %s: only grist-bench may start programs" % (os.path.basename(binary),
                                                                                  spawned))
    problems += bench_includes()
    problems += fronts_apart()
    problems += pip_names()
    for p in problems:
        print("FAIL: " + p)
    if problems:
        return 1
    print("libgrist and the CLI start no process; bench/ includes public and declared-internal headers only; "
          "bench/ and tools/ share tools/frontend/ and nothing of each other; "
          "every pip install names grist-loader")
    return 0


if __name__ == "__main__":
    sys.exit(main())
