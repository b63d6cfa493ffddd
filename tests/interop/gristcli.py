"""Helpers the interop tests share: running the grist CLI, parsing its output,
the golden manifest, ArrayRecord layout arithmetic, and a tiny test runner."""
import ctypes
import ctypes.util
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_ROOT, "tools"))
from make_golden import record_digest, record_sha256  # noqa: E402,F401  (one definition of the digest)

EXIT_SKIP = 77          # meson's "skipped" status
RUN_TIMEOUT = 60        # seconds; a run past it is a hang, i.e. a failure
BLOCK = 65536
BLOCK_HEADER = 24
CHUNK_HEADER = 40
POSTSCRIPT_MAGIC = 0x71930E704FDAE05E
# HighwayHash key used by Riegeli: "Riegeli/records\n" twice, as four u64 LE.
RIEGELI_KEY = (0x2F696C6567656952, 0x0A7364726F636572, 0x2F696C6567656952, 0x0A7364726F636572)


class Skip(Exception):
    """Raised by a test that cannot run on this machine."""


def grist_cli():
    path = os.environ.get("GRIST_CLI")
    if not path:
        path = os.path.join(SOURCE_ROOT, "build", "tools", "grist")
    if not os.access(path, os.X_OK):
        raise SystemExit("grist CLI not found: set GRIST_CLI (tried %s)" % path)
    return path


def golden_dir():
    data = os.environ.get("GRIST_TEST_DATA", os.path.join(SOURCE_ROOT, "tests", "data"))
    return os.path.join(data, "golden")


def load_manifest():
    with open(os.path.join(golden_dir(), "MANIFEST.json")) as f:
        return json.load(f)


def default_signal_actions():
    """preexec_fn for a child that a test ends with a signal: the default action of each
    signal grist cleans up on. Run under nohup or as a shell's background job, the test
    would otherwise hand down an ignored SIGHUP or SIGINT, which grist rightly keeps."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE):
        signal.signal(s, signal.SIG_DFL)


def run(args, stdin=None, timeout=RUN_TIMEOUT):
    """Run `grist ARGS...`; returns (exit status, stdout bytes, stderr text).

    A run that outlives @timeout or dies from a signal fails the test: grist
    must answer every input, bad or good, with an exit status.
    """
    cmd = [grist_cli()] + [str(a) for a in args]
    try:
        p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError("hang: %s ran past %d s" % (" ".join(cmd), timeout))
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0 or p.returncode > 2:
        raise AssertionError("%s: exit status %d (signal or crash)\nstderr: %s"
                             % (" ".join(cmd), p.returncode, err[-2000:]))
    return p.returncode, p.stdout, err


def run_ok(args, stdin=None):
    rc, out, err = run(args, stdin)
    if rc != 0:
        raise AssertionError("grist %s: exit %d\n%s" % (" ".join(map(str, args)), rc, err[-2000:]))
    return out


def expect_error(args, words, timeout=30):
    """Run grist with @args: it must exit 1 within @timeout seconds, its stderr holding each
    of @words. Returns the stderr."""
    t0 = time.monotonic()
    rc, _, err = run(args, timeout=timeout)
    assert rc == 1, (args, rc, err)
    for w in words:
        assert w in err, (w, err)
    assert time.monotonic() - t0 < timeout
    return err


def write_records(path, options, records):
    """Write @records (bytes each) to a new ArrayRecord file with `grist write --hex`."""
    run_ok(["write", "--hex", "--options", options, path], stdin=to_hex_lines(records))


def parse_hex_lines(out):
    """Records from `--hex` output: one lowercase hex line per record."""
    if not out:
        return []
    if not out.endswith(b"\n"):
        raise AssertionError("--hex output does not end with a newline")
    lines = out[:-1].split(b"\n")
    for i, ln in enumerate(lines):
        if not re.fullmatch(rb"(?:[0-9a-f]{2})*", ln):
            raise AssertionError("--hex line %d is not lowercase hex: %r" % (i, ln[:80]))
    return [bytes.fromhex(ln.decode()) for ln in lines]


def to_hex_lines(records):
    return b"".join(r.hex().encode() + b"\n" for r in records)


def info_records(out):
    """The total `records: N` of `grist info` output (the last such line)."""
    found = re.findall(rb"^records: (\d+)\s*$", out, re.M)
    if not found:
        raise AssertionError("no 'records: N' line in grist info output:\n%s" % out.decode())
    return int(found[-1])


def check_names_offset(err, path):
    """A data error message names the file and a byte offset."""
    if path not in err or not re.search(r"byte \d+", err):
        raise AssertionError("error message does not name %s and a byte offset: %r"
                             % (path, err[-500:]))


def first_difference(a, b):
    n = min(len(a), len(b))
    for i in range(0, n, 4096):
        if a[i:i + 4096] != b[i:i + 4096]:
            for j in range(i, min(i + 4096, n)):
                if a[j] != b[j]:
                    return j
    return n if len(a) != len(b) else -1


# ArrayRecord layout arithmetic (see docs: blocks of 64 KiB with 24-byte headers).

def add_with_overhead(begin, length):
    """Physical end after writing @length logical bytes of a chunk starting at @begin."""
    return begin + length + BLOCK_HEADER * ((length + (begin + BLOCK - BLOCK_HEADER - 1) % BLOCK)
                                            // (BLOCK - BLOCK_HEADER))


def round_up_chunk_boundary(p):
    return p + max(0, (-p) % BLOCK - (BLOCK - BLOCK_HEADER - 1))


def read_logical(data, pos, n):
    """@n logical bytes of a chunk from physical @pos, skipping block headers."""
    out = bytearray()
    while len(out) < n:
        if pos % BLOCK == 0:
            pos += BLOCK_HEADER
        take = min(n - len(out), BLOCK - pos % BLOCK)
        if pos + take > len(data):
            raise ValueError("chunk runs past the end of the file")
        out += data[pos:pos + take]
        pos += take
    return bytes(out)


def chunk_extent(data, begin):
    """(header fields, end) of the chunk starting at @begin."""
    hdr = read_logical(data, begin, CHUNK_HEADER)
    _, data_size, _, type_num, decoded = struct.unpack("<5Q", hdr)
    end = max(add_with_overhead(begin, CHUNK_HEADER + data_size),
              round_up_chunk_boundary(begin + (type_num >> 8)))
    return {"data_size": data_size, "type": type_num & 0xFF, "num_records": type_num >> 8,
            "decoded_data_size": decoded}, end


def read_varint(buf, pos):
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def layout(data):
    """Regions of an ArrayRecord file image: the byte ranges each command reads."""
    size = len(data)
    ps_begin = size - BLOCK
    ps, ps_end = chunk_extent(data, ps_begin)
    body = read_logical(data, ps_begin + BLOCK_HEADER + CHUNK_HEADER, ps["data_size"])
    # Uncompressed simple chunk: type byte, sizes_len, sizes, then the protos.
    sizes_len, p = read_varint(body, 1)
    values = body[p + sizes_len:]
    tag, q = read_varint(values, 0)
    assert tag == 0x08
    footer_offset, _ = read_varint(values, q)
    _, footer_end = chunk_extent(data, footer_offset)
    return {"size": size, "data": (BLOCK_HEADER + CHUNK_HEADER, footer_offset),
            "footer": (footer_offset, footer_end), "postscript": (ps_begin, ps_end),
            "footer_offset": footer_offset}


def load_c_library(name):
    """A ctypes handle on the shared library lib@name; Skip when it cannot be loaded."""
    path = ctypes.util.find_library(name)
    try:
        return ctypes.CDLL(path or "lib%s.so" % name)
    except OSError:
        raise Skip("lib%s not loadable" % name)


class XXH64:
    """XXH64 with seed 0 through libxxhash (ctypes): what `grist load --digest` prints per batch."""

    def __init__(self):
        self.lib = load_c_library("xxhash")
        self.lib.XXH64.restype = ctypes.c_uint64
        self.lib.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]

    def __call__(self, b):
        b = bytes(b)
        return self.lib.XXH64(b, len(b), 0)

    def hex(self, b):
        """The digest as `--digest` writes it: 16 lowercase hex digits."""
        return "%016x" % self(b)


class HighwayHash:
    """Riegeli's HighwayHash-64 through libhighwayhash's C binding (ctypes)."""

    def __init__(self):
        self.lib = load_c_library("highwayhash")
        self.lib.HighwayHash64.restype = ctypes.c_uint64
        self.lib.HighwayHash64.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p,
                                           ctypes.c_uint64]
        self.key = (ctypes.c_uint64 * 4)(*RIEGELI_KEY)

    def __call__(self, b):
        return self.lib.HighwayHash64(self.key, bytes(b), len(b))


def rebuild_postscript(data, hh, footer_offset, magic=POSTSCRIPT_MAGIC):
    """A copy of file image @data whose postscript says @footer_offset and
    @magic, with every hash recomputed so that only the values are wrong.

    The new protos must encode to the old length, so the chunk keeps its size
    and the padding chunk after it stays where it is.
    """
    size = len(data)
    begin = size - BLOCK
    hdr_pos = begin + BLOCK_HEADER
    old_hdr = data[hdr_pos:hdr_pos + CHUNK_HEADER]
    _, data_size, _, type_num, decoded = struct.unpack("<5Q", old_hdr)
    proto = b"\x08" + varint(footer_offset) + b"\x10" + varint(magic)
    copies = type_num >> 8
    if len(proto) * copies != decoded:
        raise ValueError("new postscript does not keep the old length")
    sizes = varint(len(proto)) * copies
    body = b"\x00" + varint(len(sizes)) + sizes + proto * copies
    assert len(body) == data_size
    hdr = struct.pack("<4Q", data_size, hh(body), type_num, decoded)
    hdr = struct.pack("<Q", hh(hdr)) + hdr
    out = bytearray(data)
    out[hdr_pos:hdr_pos + CHUNK_HEADER] = hdr
    out[hdr_pos + CHUNK_HEADER:hdr_pos + CHUNK_HEADER + data_size] = body
    return bytes(out)


def main(tests):
    """Run test functions; exit 0 if all pass, 1 if any fails, 77 if all skip."""
    only = sys.argv[1:]
    failed = skipped = ran = 0
    for t in tests:
        if only and not any(o in t.__name__ for o in only):
            continue
        ran += 1
        try:
            t()
        except Skip as e:
            skipped += 1
            print("SKIP %s: %s" % (t.__name__, e))
            continue
        except Exception:
            failed += 1
            print("FAIL %s\n%s" % (t.__name__, traceback.format_exc()))
            continue
        print("ok   %s" % t.__name__)
    print("%d run, %d failed, %d skipped" % (ran, failed, skipped))
    sys.stdout.flush()
    if failed:
        sys.exit(1)
    sys.exit(EXIT_SKIP if ran and skipped == ran else 0)
