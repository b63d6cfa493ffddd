"""The library never prints; what it has to say (a fallback it took, a setting it could not
use) reaches Python's logging, as the logger "grist", so a trainer routes, raises or silences
it as it does every other library's, and nothing is printed unless the application configures
logging (issue 25, point 4). In a subprocess: GRIST_MAX_CHUNK_BYTES is read once per process,
as grist is imported."""
import os
import subprocess
import sys
import textwrap

from conftest import grist, write_dataset

CHILD = textwrap.dedent("""
    import logging, sys
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append((record.name, record.levelname, record.getMessage()))

    # logging set up first, as an application does: the variable is read as grist is imported
    if sys.argv[2] == "kept":
        logging.getLogger("grist").addHandler(Keep())
        logging.getLogger("grist").propagate = False
    elif sys.argv[2] == "configured":
        logging.basicConfig()            # the application's logging: to stderr
    import grist
    r = grist.Reader(sys.argv[1])
    assert len(r.read([0, 1])) == 2
    print(seen)
""")


def run_child(path, mode):
    env = dict(os.environ, GRIST_MAX_CHUNK_BYTES="4kB", PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(grist.__file__))] + sys.path))
    return subprocess.run([sys.executable, "-c", CHILD, path, mode], capture_output=True, text=True,
                          timeout=120, env=env)


def test_library_diagnostics_reach_python_logging(tmp_path):
    path = write_dataset(tmp_path / "l.ar", 10)
    p = run_child(path, "kept")
    assert p.returncode == 0, p.stderr
    seen = eval(p.stdout)
    assert len(seen) == 1, seen
    name, level, msg = seen[0]
    assert (name, level) == ("grist", "WARNING") and "GRIST_MAX_CHUNK_BYTES='4kB' is not a size" in msg, seen
    assert p.stderr == "", p.stderr  # with propagation off, nothing is printed


def test_printed_only_when_the_application_configures_logging(tmp_path):
    # the package adds a NullHandler, as Python's logging HOWTO advises libraries: with logging
    # unconfigured nothing is printed (the library never prints); basicConfig() shows it once
    path = write_dataset(tmp_path / "l.ar", 10)
    p = run_child(path, "unconfigured")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    p = run_child(path, "configured")
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("WARNING:grist:GRIST_MAX_CHUNK_BYTES='4kB' is not a size") == 1, p.stderr
