"""Run test_upload.py's SIGTERM-mid-upload test N times against one rclone, and count passes.

Not part of the suite: the loop that measures how often a signal's abort works, for a
flake that shows once in many runs. A run that fails is printed, and what it left behind
(an upload) is aborted with rclone's own client before the next run, so each run starts
clean. Load or MALLOC_PERTURB_ come from the caller's environment, e.g.

    GRIST_CLI=build/release/tools/grist MALLOC_PERTURB_=165 \
        python3 tests/interop/repeat_upload_signal.py 30

Exit 0 when every run passed, 1 otherwise; 77 when rclone cannot start here.
"""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gristcli as g  # noqa: E402
import test_upload as t  # noqa: E402


def abort_leftovers():
    """Abort what a failed run left (an upload), and its object or part files."""
    t.clear_uploads()
    for d, _, files in os.walk(t.BUCKET):
        for f in files:
            if f.startswith("term.ar") or ".rclone_temp_multipart" in f:
                os.unlink(os.path.join(d, f))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    try:
        t.setup()
    except g.Skip as e:
        print("SKIP: %s" % e)
        sys.exit(g.EXIT_SKIP)
    passed, times = 0, []
    try:
        for i in range(n):
            start = time.monotonic()
            try:
                t.test_sigterm_mid_upload_aborts()
                passed += 1
                verdict = "ok"
            except Exception:
                verdict = "FAIL\n" + traceback.format_exc(limit=1)
                abort_leftovers()
            times.append(time.monotonic() - start)
            print("run %2d: %.2f s %s" % (i + 1, times[-1], verdict))
            sys.stdout.flush()
    finally:
        for s in t.SERVERS.values():
            s.stop()
    times.sort()
    print("%d/%d passed; run time median %.2f s, max %.2f s" % (passed, n, times[len(times) // 2], times[-1]))
    sys.exit(0 if passed == n else 1)


if __name__ == "__main__":
    main()
