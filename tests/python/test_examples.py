"""Every program in examples/ is run by a test of this suite on small data, its output checked.

The runs themselves live beside the feature each example shows (test_jax_example.py runs
train_jax.py, test_grain_jax_example.py grain_jax.py, test_tfds.py tfds_jax.py); this test
holds the folder to that: an example no test runs fails here, naming it.
"""
import glob
import os
import re

from conftest import HERE, ROOT


def test_every_example_is_run_by_a_test():
    examples = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "examples", "*"))
                      if not os.path.basename(p).startswith((".", "__")))
    assert examples, "examples/ is empty"
    tests = {}
    for path in glob.glob(os.path.join(HERE, "test_*.py")):
        if os.path.basename(path) != os.path.basename(__file__):
            with open(path, encoding="utf-8") as f:
                tests[os.path.basename(path)] = f.read()
    # a test runs an example when it names examples/NAME (a path join or a string) and runs a
    # subprocess: the examples are programs with a command line, run as their users run them
    unrun = []
    for name in examples:
        named = re.compile(r"""["']examples["']\s*,\s*["']%s["']|examples/%s""" % (re.escape(name), re.escape(name)))
        if not any(named.search(src) and "subprocess" in src for src in tests.values()):
            unrun.append(name)
    assert not unrun, "examples no test runs: %s (run each in a test on small data, output checked)" % unrun
