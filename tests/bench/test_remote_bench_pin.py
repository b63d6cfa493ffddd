#!/usr/bin/env python3
"""bench/py/remote_bench.py's CPU split (--server-cpus, --grist-cpus): pin_tree() leaves no thread
of a server unpinned, not even one started while it walks; pin_server() pins the in-process
asyncio proxy's thread without the bench's main thread, whose mask every grist run inherits.
Needs two CPUs in the affinity mask (77 otherwise)."""
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "py"))

# A server that keeps starting threads for a while, from threads of its own (as Go's runtime
# does): each spawner starts 60 long-lived threads, 1 ms apart.
SPAWNER = """
import threading, time
def sleeper(): time.sleep(3600)
def spawner():
    for _ in range(60):
        threading.Thread(target=sleeper, daemon=True).start()
        time.sleep(0.001)
for _ in range(8):
    threading.Thread(target=spawner, daemon=True).start()
print("ready", flush=True)
time.sleep(3600)
"""


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    try:
        import remote_bench as rb
    except ImportError as e:
        print("remote_bench.py does not import here: %s" % e)
        return 77
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        print("one CPU allowed: nothing to split")
        return 77
    first, other = min(allowed), {max(allowed)}
    # pin_tree(): every thread, those started during the walk too
    for trial in range(5):
        p = subprocess.Popen([sys.executable, "-c", SPAWNER], stdout=subprocess.PIPE)
        try:
            p.stdout.readline()
            time.sleep(0.05)
            rb.pin_tree(p.pid, other)
            time.sleep(0.6)  # the spawners are done: every thread they started is there
            loose = []
            for tid in os.listdir("/proc/%d/task" % p.pid):
                try:
                    if os.sched_getaffinity(int(tid)) != other:
                        loose.append(int(tid))
                except ProcessLookupError:
                    pass
            if loose:
                fail("trial %d: %d threads of the server not pinned to %s" % (trial, len(loose), other))
        finally:
            p.kill()
            p.wait()
    # pin_server() on a proxy that is a thread of this process: that thread only
    os.sched_setaffinity(0, allowed)
    ev = threading.Event()
    proxy = threading.Thread(target=ev.wait, daemon=True)
    proxy.start()

    class Proxy:  # the part of remote_servers.FaultProxy that pinning looks at
        thread = proxy
    rb.pin_server(Proxy(), other)
    if os.sched_getaffinity(proxy.native_id) != other:
        fail("the proxy's thread is on %s, not %s" % (os.sched_getaffinity(proxy.native_id), other))
    for cpus, want in ((None, allowed), ({first}, {first})):  # --server-cpus alone, then with --grist-cpus
        rb.CLIENT_CPUS = cpus
        got = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                             capture_output=True, text=True, preexec_fn=rb.pin_client).stdout.strip()
        if got != str(sorted(want)):
            fail("--grist-cpus %s: a grist run started on CPUs %s, not %s" % (cpus, got, sorted(want)))
    ev.set()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
