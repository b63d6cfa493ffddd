"""libgrist.so exports the public API only, under the soname its ABI version gives.

Usage: check_exports.py LIBGRIST_SO SOVERSION. Every defined dynamic symbol must start with
grist_ (the version script src/libgrist.map; its version node GRIST_1 aside), every
function the public headers declare with GRIST_API must be there, the soname must be
libgrist.so.SOVERSION, and the library must call nothing that prints (printf, fwrite, perror, ...). Exit 77 (skip) without nm or objdump.
"""
import os
import re
import shutil
import subprocess
import sys


def main():
    lib, soversion = sys.argv[1], sys.argv[2]
    if not shutil.which("nm") or not shutil.which("objdump"):
        print("nm or objdump missing: skipped")
        return 77
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    stray = sorted(n for n in names if not n.startswith("grist_") and not n.startswith("GRIST_"))
    assert not stray, "exported but not grist_*: %s" % stray[:20]
    include = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "grist")
    declared = set()
    for h in sorted(f for f in os.listdir(include) if f.endswith(".h")):
        text = open(os.path.join(include, h)).read()
        declared |= set(re.findall(r"GRIST_API\s+[^;(]*?\b(grist_\w+)\s*\(", text))
    missing = sorted(declared - names)
    assert not missing, "declared GRIST_API but not exported: %s" % missing
    # the library never prints: nothing it calls writes to a stream or the terminal
    undef = subprocess.run(["nm", "-D", "--undefined-only", lib], check=True, capture_output=True,
                           text=True).stdout
    called = {line.split()[-1].split("@")[0] for line in undef.splitlines() if line.strip()}
    printing = {"printf", "fprintf", "vprintf", "vfprintf", "dprintf", "vdprintf", "puts", "fputs", "putchar",
                "fputc", "putc", "perror", "fwrite", "stderr", "stdout", "psignal", "psiginfo", "warn", "warnx",
                "err", "errx", "error"}
    printing |= {"__%s_chk" % n for n in printing}
    assert not called & printing, "libgrist calls %s: the library must not print" % sorted(called & printing)
    dyn = subprocess.run(["objdump", "-p", lib], check=True, capture_output=True, text=True).stdout
    soname = re.search(r"SONAME\s+(\S+)", dyn)
    assert soname and soname.group(1) == "libgrist.so." + soversion, soname and soname.group(1)
    print("%d symbols, all grist_*; %d declared, all exported; soname %s" % (len(names), len(declared),
                                                                            soname.group(1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
