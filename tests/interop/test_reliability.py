#!/usr/bin/env python3
"""Defects an adversarial campaign found in the grist CLI, each pinned by a test.

Every test drives the CLI on files grist writes here and checks the exit status and
the message: a FIFO as input, writes to a full device, an interrupted write, ranges of
checkpoints, exit codes. Exit 77 means skipped.
"""
import os
import shutil
import tempfile

import gristcli as g

TMP = tempfile.mkdtemp(prefix="grist-reliab-")


def path(name):
    return os.path.join(TMP, name)


def setup():
    g.run_ok(["write", "--options", "group_size:1,zstd:3", path("e.ar")],
             stdin=b"".join(b"%d\n" % i for i in range(1, 201)))


def test_fifo_input_is_refused():
    """A FIFO (no writer) as input: every command answers at once instead of blocking in open()."""
    fifo = path("x.ar")
    os.mkfifo(fifo)
    try:
        for args in (["verify", fifo], ["cat", fifo], ["get", fifo, "--", "0"], ["info", fifo],
                     ["load", fifo], ["load", fifo, "--engine", "ref"], ["order", fifo],
                     ["load", path("e.ar"), "--resume", fifo]):
            rc, _, err = g.run(args, timeout=20)
            assert rc == 2 and "FIFO" in err and fifo in err, (args, rc, err)
    finally:
        os.unlink(fifo)


def main():
    try:
        setup()
        g.main([test_fifo_input_is_refused])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
