"""A file that shrinks under io="mmap" is a grist.Error naming the file, not a SIGBUS death
(issue 25, point 6): in a Python subprocess, as a training job would meet it."""
import errno
import os
import subprocess
import sys
import textwrap

from conftest import grist

CHILD = textwrap.dedent("""
    import os, sys
    import grist
    path, io = sys.argv[1], sys.argv[2]
    l = grist.Loader(path, 1, epochs=1, shuffle=False, io=io, threads=1, prefetch=1)
    it = iter(l)
    next(it).release()              # the file is mapped and being decoded
    os.truncate(path, 262144)       # ... and shrinks under the loader, to a page boundary
    try:
        for b in it:
            b.release()
    except grist.Error as e:
        print("grist.Error", e.errno, e)
        print("read_mode", l.stats()["read_mode"])
        sys.exit(3)
    print("no error")
""")


def run_child(path, io):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(grist.__file__))] + sys.path))
    return subprocess.run([sys.executable, "-c", CHILD, path, io], capture_output=True, text=True, timeout=120,
                          env=env)


def shrinking_file(tmp_path):
    path = str(tmp_path / "shrink.ar")
    with grist.Writer(path, "group_size:1,uncompressed") as w:
        for i in range(20000):
            w.write(b"%05d" % i * 200)
    return path


def test_mmap_shrink_is_an_error_naming_the_file(tmp_path):
    path = shrinking_file(tmp_path)
    p = run_child(path, "mmap")
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)  # not -7 (SIGBUS)
    assert p.stdout.startswith("grist.Error %d " % errno.EIO), p.stdout
    assert path in p.stdout and "SIGBUS" in p.stdout and "byte " in p.stdout, p.stdout
    assert p.stderr == "", p.stderr  # the library printed nothing


def test_auto_maps_cached_files_and_is_guarded_too(tmp_path):
    path = shrinking_file(tmp_path)
    with open(path, "rb") as f:  # in the page cache: io="auto" maps it
        while f.read(1 << 20):
            pass
    p = run_child(path, "auto")
    assert p.returncode in (0, 3), (p.returncode, p.stdout, p.stderr)
    if p.returncode == 3:
        # mapped (the file was found cached): the guard's error; else a read's, naming the file too
        assert path in p.stdout, p.stdout
        if "read_mode mmap" in p.stdout:
            assert "SIGBUS" in p.stdout, p.stdout
    assert p.stderr == "", p.stderr


READER_CHILD = textwrap.dedent("""
    import os, sys
    import grist
    path = sys.argv[1]
    r = grist.Reader(path)
    n = len(r)
    r.read([0, 1, 2])               # the fetcher maps the small file (a chunk per record)
    os.truncate(path, 262144)       # ... and it shrinks under the reader, to a page boundary
    try:
        r.read(list(range(n - 50, n)))
    except grist.Error as e:
        print("grist.Error", e.errno, e)
        sys.exit(3)
    print("no error")
""")


def test_reader_fetcher_mapping_is_guarded(tmp_path):
    """Random access maps a small dataset of small chunks (grist_io_map_small): a file that
    shrinks under it is an error naming the file, not a SIGBUS death."""
    path = shrinking_file(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(grist.__file__))] + sys.path))
    p = subprocess.run([sys.executable, "-c", READER_CHILD, path], capture_output=True, text=True, timeout=120,
                       env=env)
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)  # not -7 (SIGBUS)
    assert p.stdout.startswith("grist.Error %d " % errno.EIO), p.stdout
    assert path in p.stdout and "SIGBUS" in p.stdout, p.stdout
    assert p.stderr == "", p.stderr


FAULTHANDLER_CHILD = textwrap.dedent("""
    import faulthandler, os, shutil, sys
    import grist
    path = sys.argv[1]
    faulthandler.enable()               # a crash reporter, on before grist's first mapped read
    l = grist.Loader(path, 1, epochs=1, shuffle=False, io="mmap", threads=1, prefetch=1)
    for _, b in zip(range(10), l):
        b.release()
    l.close()
    faulthandler.disable()              # ... and off again: it puts SIGBUS back to the default
    l = grist.Loader(path, 1, epochs=1, shuffle=False, io="mmap", threads=1, prefetch=1)
    it = iter(l)
    next(it).release()
    os.truncate(path, 262144)
    try:
        for b in it:
            b.release()
    except grist.Error as e:
        print("grist.Error", e.errno, e)
        sys.exit(3)
    print("no error")
""")


def test_guard_survives_a_handler_that_restores_the_default(tmp_path):
    """faulthandler.enable() before grist's first mapped read, disable() after it: disable puts
    back the disposition enable found (the default), which took grist's chained handler away,
    and the next loader's shrinking file killed the process with SIGBUS. A loader's threads
    arm the guard again when they find the default in place."""
    path = shrinking_file(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(grist.__file__))] + sys.path))
    p = subprocess.run([sys.executable, "-c", FAULTHANDLER_CHILD, path], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)  # not -7 (SIGBUS)
    assert p.stdout.startswith("grist.Error %d " % errno.EIO), p.stdout
    assert path in p.stdout and "SIGBUS" in p.stdout, p.stdout
