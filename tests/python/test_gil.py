"""The GIL is released while grist waits: in Loader's next() and in Reader.read().

With a switch interval of 1000 s a thread holding the GIL keeps it until it blocks or C code
lets it go. A helper thread is woken just before each call; if it gets to run before the
call returns, the call must have released the GIL.
"""
import sys
import threading

from conftest import grist


def runs_during(call, tries=200):
    """True once the helper ran while `call()` was in progress (within @tries calls)."""
    wake, ran, stop = threading.Event(), [], [False]

    def helper():
        while not stop[0]:
            wake.wait()
            wake.clear()
            ran.append(1)
    t = threading.Thread(target=helper, daemon=True)
    t.start()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1000)
    try:
        for _ in range(tries):
            ran.clear()
            wake.set()
            call()
            if ran:  # checked before anything else could hand the GIL over
                return True
        return False
    finally:
        sys.setswitchinterval(old)
        stop[0] = True
        wake.set()
        t.join()


def test_loader_next_releases_the_gil(files):
    loader = grist.Loader(files, 500, seed=1, engine="ref")  # decodes on the consumer's call
    assert runs_during(lambda: next(loader).release())


def test_batched_read_releases_the_gil(files):
    r = grist.Reader(files)
    idx = list(range(0, 2001, 2))
    assert runs_during(lambda: r.read(idx))
