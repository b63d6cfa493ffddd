#!/usr/bin/env python3
"""The loader's serial share: how much of a Loader's CPU runs on the consumer thread.

A Loader's workers decode in parallel; what the thread that calls next() does (the engine's
hand-over, the packer, the batch's Python wrapping) is serial. If that thread spends a share s
of all the CPU the pipeline uses, the pipeline cannot use more than 1/s cores however many it
has (Amdahl), so s measured on 2 cores says what 16 can reach. Each run:

  - builds the Loader and reads --warmup seconds untimed: the start-up (the first batch's wait
    and what it cost) is printed apart;
  - then reads batches for --seconds and takes every thread's CPU time
    (/proc/self/task/*/stat, utime + stime) and the consumer's own, split into the C pull
    (the engine's hand-over and, for text, the packer) and the Python wrapping into arrays
    (time.thread_time() around each part: the bench's own loop body is not counted);
  - prints items/s, items per CPU-second, the consumer's share s of the pipeline's CPU and
    the cap 1/s, and the engine's counters that say whether workers waited for a slot
    (producer_stall_ns) or the consumer for a unit (consumer_wait_ns);
  - and each worker's time split into on a CPU, runnable (waiting for a core) and blocked
    (/proc/self/task/*/schedstat, medians over the workers), and Loader()'s wall time and the
    calling thread's CPU in it. With more threads than cores (16 on 2) the workers are mostly
    runnable; the blocked share is what a machine with a core each would leave idle.

Pipelines (grist side only; the corpora are bench/py/vision_pipeline.py's and text_pipeline.py's):
  vision  --dataset DIR: RandomResizedCrop(224), flip, normalize to float32, batch --batch (64),
          over the TFDS folder vision_pipeline.py --keep DIR made (DIR/photos/1.0.0);
  text    --ranks gpt2.tiktoken: MaxText's pipeline (tiktoken format, cl100k pattern, BOS/EOS,
          trim 2048, first-fit pack 2048, batch --batch (8), outputs="maxtext") over Python's
          documentation text --copies times, epochs without end.

With --bound, also the pipeline's bound on the same threads: text, grist's tokenizer alone on
one thread times --threads; vision, grist's transform alone (bench_vision's grist side, the
loader's own crops) on --threads threads. --out FILE appends one JSON line per run (with
--label); --summary FILE prints medians per label and the ratio of alternating pairs:

    for i in 1 2 3 4 5; do for v in build/venv-base .venv; do
      $v/bin/python bench/py/loader_serial.py text --ranks gpt2.tiktoken --out /tmp/s.jsonl --label $v
    done; done; bench/py/loader_serial.py --summary /tmp/s.jsonl
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def task_cpu():
    """{tid: seconds of CPU (user + system)} of every thread of this process."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/stat" % tid) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:  # a thread that ended meanwhile
            continue
        out[int(tid)] = (int(rest[11]) + int(rest[12])) / tick
    return out


def task_sched():
    """{tid: (ns on a CPU, ns runnable waiting for one)} of every thread (/proc/.../schedstat)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/schedstat" % tid) as f:
                run_ns, wait_ns = f.read().split()[:2]
        except OSError:
            continue
        out[int(tid)] = (int(run_ns), int(wait_ns))
    return out


def sched_shares(s0, s1, wall_ns, main):
    """Each worker's time (the threads beside @main that ran at least 1% of @wall_ns) split into
    on a CPU, runnable (waiting for a core: oversubscription) and blocked (waiting on something:
    a lock, the window, a read), medians; and the consumer's (@main) the same way."""
    def split(t):
        run = (s1[t][0] - s0[t][0]) / wall_ns
        wait = (s1[t][1] - s0[t][1]) / wall_ns
        return run, wait, max(0.0, 1 - run - wait)
    workers = [split(t) for t in s1 if t in s0 and t != main and (s1[t][0] - s0[t][0]) > 0.01 * wall_ns]
    out = {"consumer_sched": split(main) if main in s0 and main in s1 else None, "workers_seen": len(workers)}
    if workers:
        out["worker_sched"] = tuple(statistics.median(w[i] for w in workers) for i in range(3))
        out["worker_blocked_max"] = max(w[2] for w in workers)
    return out


def make_loader(args, epochs=None):
    """(loader, items of a batch as a function of the batch dict, a per-item unit name)."""
    import grist
    if args.pipeline == "vision":
        import grist.tfds
        import grist.vision
        t = grist.vision.RandomResizedCrop(224, flip=0.5, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
        vdir = os.path.join(args.dataset, "photos", "1.0.0") if os.path.isdir(
            os.path.join(args.dataset, "photos")) else args.dataset
        loader = grist.Loader(grist.tfds.data_source(vdir, split="train"), args.batch, seed=0, threads=args.threads,
                              transforms={"image": t}, skip=["image/filename"], epochs=epochs, **args.options)
        return loader, lambda b: len(b["label"]), "images"
    from grist.text import TextSpec
    tok = tokenizer(args)
    spec = TextSpec(tok, bos_id=tok.vocab_size, eos_id=tok.vocab_size + 1, max_length=2048)
    loader = grist.Loader(text_file(args), args.batch, seed=0, epochs=epochs, text=spec, pack="first-fit",
                          pack_length=2048, outputs="maxtext", threads=args.threads, **args.options)
    return loader, None, "tokens"


_TOKENIZERS = {}


def tokenizer(args):
    """The text pipeline's tokenizer, opened once per process (run() opens it before timing Loader())."""
    from grist.text import Tokenizer
    if args.ranks not in _TOKENIZERS:
        _TOKENIZERS[args.ranks] = Tokenizer(args.ranks, pattern="cl100k")
    return _TOKENIZERS[args.ranks]


def text_file(args):
    """The corpus as an ArrayRecord file of Examples with a 'text' feature, written once per --copies."""
    sys.path.insert(0, HERE)
    import text_pipeline
    path = os.path.join(args.work, "text-%d.ar" % args.copies)
    if not os.path.exists(path):
        text_pipeline.write_examples(path + ".tmp", text_pipeline.corpus(args.copies))
        os.replace(path + ".tmp", path)
    return path


def run_epoch(args):
    """One whole epoch from the Loader's creation to its end: a short run, start-up and tail in it;
    then close(), timed apart (its wall time and the calling thread's CPU: the serial end), and
    the process's peak RSS (a fresh process per run: the tokenizer and the corpus are in it)."""
    import resource
    if args.pipeline == "text":
        tokenizer(args)
        text_file(args)
    t0, c0 = time.perf_counter(), time.process_time()
    th0 = time.thread_time()
    loader, count, unit = make_loader(args, epochs=1)
    created = time.perf_counter() - t0
    create_cpu = time.thread_time() - th0
    first, n, batches = None, 0, 0
    th1 = time.thread_time()
    for b in loader:
        if first is None:
            first = (time.perf_counter() - t0, time.process_time() - c0)
        if count:
            n += count(b)
        batches += 1
        del b
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    consumer_cpu = time.thread_time() - th1  # the consumer's serial work (and the loop's own)
    st = loader.stats()
    if not count:
        n = st["pack_tokens"]
    t1, th1 = time.perf_counter(), time.thread_time()
    loader.close()
    close_s, close_cpu = time.perf_counter() - t1, time.thread_time() - th1
    out = {"label": args.label, "pipeline": args.pipeline, "threads": args.threads, "batch": args.batch,
           "unit": unit, "items": n, "batches": batches, "wall": wall, "cpu": cpu, "pipeline_cpu": cpu,
           "rate": n / wall, "per_cpu": n / cpu, "first_batch_s": first[0], "first_batch_cpu": first[1], "epoch": 1,
           "create_s": created, "create_cpu": create_cpu, "close_s": close_s, "close_cpu": close_cpu,
           "consumer_cpu": consumer_cpu,
           "memory_bytes": st["memory_bytes"], "slot_maps": st["slot_maps"],
           "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if args.bound:
        out["bound"] = bound(args)
    return out


def run(args):
    import grist
    if args.pipeline == "text":
        tokenizer(args)
        text_file(args)
    t0, c0 = time.perf_counter(), time.process_time()
    th0 = time.thread_time()
    loader, count, unit = make_loader(args)
    # Loader(): its wall time, and the CPU of this thread in it (serial: no worker runs yet)
    created = (time.perf_counter() - t0, time.thread_time() - th0)
    pull = grist._grist.Loader.__next__
    wrap = loader._columns  # the Python wrapping grist.Loader.__next__ does after the pull
    first = None
    n = 0
    while first is None or time.perf_counter() - t0 < args.warmup:
        b = wrap(pull(loader))
        if first is None:
            first = (time.perf_counter() - t0, time.process_time() - c0)
        n += count(b) if count else 0
        del b
    warm_s = time.perf_counter() - t0
    tasks0, main = task_cpu(), os.getpid()
    sched0 = task_sched()
    c1, t1 = time.process_time(), time.perf_counter()
    st0 = loader.stats()
    pulled = wrapped = 0.0
    n = batches = 0
    while time.perf_counter() - t1 < args.seconds:
        a = time.thread_time()
        s = pull(loader)
        m = time.thread_time()
        b = wrap(s)
        e = time.thread_time()
        pulled += m - a
        wrapped += e - m
        del s
        if count:
            n += count(b)  # the bench's own work: not the loader's
        del b
        batches += 1
    wall, cpu = time.perf_counter() - t1, time.process_time() - c1
    tasks1 = task_cpu()
    sched1 = task_sched()
    st1 = loader.stats()
    if not count:  # tokens: the real tokens of the rows delivered (the packer's count)
        n = st1["pack_tokens"] - st0["pack_tokens"]
    loader.close()
    threads = {t: tasks1[t] - tasks0.get(t, 0.0) for t in tasks1}
    body = threads.get(main, 0.0) - pulled - wrapped  # the loop's own, ticks' rounding included
    pipeline_cpu = cpu - max(body, 0.0)
    consumer = pulled + wrapped
    out = {"label": args.label, "pipeline": args.pipeline, "threads": args.threads, "batch": args.batch,
           "unit": unit, "items": n, "batches": batches, "wall": wall, "cpu": cpu, "pipeline_cpu": pipeline_cpu,
           "rate": n / wall, "per_cpu": n / pipeline_cpu, "consumer_pull": pulled, "consumer_wrap": wrapped,
           "share": consumer / pipeline_cpu, "workers": sorted((v for t, v in threads.items() if t != main),
                                                               reverse=True),
           "first_batch_s": first[0], "first_batch_cpu": first[1], "warm_s": warm_s,
           "create_s": created[0], "create_cpu": created[1]}
    out.update(sched_shares(sched0, sched1, wall * 1e9, main))
    for k in ("producer_stall_ns", "consumer_stall_ns", "io_wait_ns", "slot_maps"):
        if k in st1:
            out[k] = st1[k] - st0.get(k, 0)
    if args.bound:
        out["bound"] = bound(args)
    return out


def bound(args):
    """Items/s of the pipeline's bound on --threads threads (see the module's docstring)."""
    if args.pipeline == "text":
        sys.path.insert(0, HERE)
        import text_pipeline
        from grist.text import Tokenizer
        tok = Tokenizer(args.ranks, pattern="cl100k")
        texts = text_pipeline.corpus(min(args.copies, 4))
        n = 0
        c0 = time.thread_time()
        for t in texts:  # the tokens a row gets of it: BOS + ids + EOS, trimmed to 2048
            n += min(len(tok.encode(t)) + 2, 2048)
        return n / (time.thread_time() - c0) * args.threads
    import subprocess
    sys.path.insert(0, HERE)
    import vision_pipeline
    jobs = os.path.join(args.work, "jobs.bin")
    if not os.path.exists(jobs):
        vdir = os.path.join(args.dataset, "photos", "1.0.0")
        _, records = vision_pipeline.read_records(vdir)
        vision_pipeline.write_jobs(argparse.Namespace(warmup=1), records, jobs + ".tmp")
        os.replace(jobs + ".tmp", jobs)
    exe = args.bench_vision or vision_pipeline.find_bench_vision()
    got = subprocess.run([exe, jobs, "--threads", str(args.threads), "--rounds", "1", "--reps", "1",
                          "--sides", "grist"], check=True, capture_output=True, text=True).stdout
    for line in got.splitlines():
        kv = dict(w.split("=", 1) for w in line.split())
        if kv.get("side") == "grist":
            return float(kv["wall"])
    raise SystemExit("bench_vision printed no grist side")


def show(o):
    if o.get("epoch"):
        print("%s %s, %d threads, batch %d, one epoch: %.0f %s/s, %.0f per CPU-second (%d batches in %.2f s, the "
              "first after %.3f s)" % (o["label"] or "", o["pipeline"], o["threads"], o["batch"], o["rate"], o["unit"],
                                      o["per_cpu"], o["batches"], o["wall"], o["first_batch_s"]))
        if "close_s" in o:
            print("  Loader(): %.1f ms of the calling thread's CPU; close(): %.2f ms, %.2f ms of its CPU; the loader's "
                  "memory %.1f MB (%d slot maps), peak RSS %.0f MB" % (
                      1e3 * o["create_cpu"], 1e3 * o["close_s"], 1e3 * o["close_cpu"], o["memory_bytes"] / 1e6,
                      o["slot_maps"], o["maxrss_mb"]))
        if "bound" in o:
            print("  bound on %d threads: %.0f %s/s; the epoch at %.2fx of it (wall)" % (
                o["threads"], o["bound"], o["unit"], o["rate"] / o["bound"]))
        return
    print("%s %s, %d threads, batch %d: %.0f %s/s, %.0f per CPU-second of the pipeline (%d batches in %.1f s)" % (
        o["label"] or "", o["pipeline"], o["threads"], o["batch"], o["rate"], o["unit"], o["per_cpu"], o["batches"],
        o["wall"]))
    print("  consumer thread: pull %.3f s + wrap %.3f s of %.3f s pipeline CPU: s = %.1f%%, cap %.1f cores" % (
        o["consumer_pull"], o["consumer_wrap"], o["pipeline_cpu"], 100 * o["share"], 1 / o["share"]))
    print("  other threads' CPU: %s" % ", ".join("%.2f" % v for v in o["workers"][:8]))
    print("  start-up: first batch after %.3f s (%.3f s CPU); %.1f%% of a %.1f s run" % (
        o["first_batch_s"], o["first_batch_cpu"], 100 * o["first_batch_s"] / (o["wall"] + o["warm_s"]),
        o["wall"] + o["warm_s"]))
    if o.get("worker_sched"):
        r, q, b = o["worker_sched"]
        print("  workers (%d, medians of their time): on a CPU %.1f%%, waiting for a core %.1f%%, blocked %.1f%% "
              "(most %.1f%%); producer stall %.1f%%" % (
                  o["workers_seen"], 100 * r, 100 * q, 100 * b, 100 * o["worker_blocked_max"],
                  100 * o.get("producer_stall_ns", 0) / 1e9 / (o["wall"] * o["threads"])))
    if o.get("create_s") is not None and "create_cpu" in o:
        print("  Loader(): %.1f ms, %.1f ms of the calling thread's CPU" % (1e3 * o["create_s"], 1e3 * o["create_cpu"]))
    print("  engine: %s" % ", ".join("%s %s" % (k, o[k]) for k in ("producer_stall_ns", "consumer_stall_ns",
                                                                   "slot_maps") if k in o))
    if "bound" in o:
        print("  bound on %d threads: %.0f %s/s; the pipeline at %.2fx of it (wall), %.2fx per CPU-second" % (
            o["threads"], o["bound"], o["unit"], o["rate"] / o["bound"], o["per_cpu"] * o["threads"] / o["bound"]))


def model(workers, window, held, ahead, cv, units=4000, seed=1):
    """The share of the workers' time spent decoding, in a model of the engine's policy: each
    worker keeps @ahead units claimed (claimed in order), decodes its oldest, which may take a
    slot only while it lies within @window - @held units of the oldest unconsumed one; the
    consumer takes units in order as soon as they are done; a unit takes Normal(1, @cv) time."""
    import heapq
    import random
    rng = random.Random(seed)
    dur = [max(0.05, rng.gauss(1, cv)) for _ in range(units + ahead * workers + 1)]
    nxt, consumed, t, busy = 0, 0, 0.0, 0.0
    pipes, decoding, done, events = [[] for _ in range(workers)], [None] * workers, set(), []

    def start(w):
        if decoding[w] is None and pipes[w]:
            u = pipes[w][0]
            if u == consumed or u < consumed + window - held:
                decoding[w] = u
                heapq.heappush(events, (t + dur[u], w))
    for w in range(workers):
        pipes[w], nxt = list(range(nxt, nxt + ahead)), nxt + ahead
    for w in range(workers):
        start(w)
    while consumed < units:
        t, w = heapq.heappop(events)
        u, decoding[w] = decoding[w], None
        pipes[w].pop(0)
        done.add(u)
        busy += dur[u]
        pipes[w].append(nxt)
        nxt += 1
        while consumed in done:
            done.discard(consumed)
            consumed += 1
        for x in range(workers):
            start(x)
    return busy / (t * workers)


def text_tail_model(workers, copies, split, unit=32, hold=2, tail_min=4, seed=1):
    """The share of @workers' time spent tokenizing over a finite text run, in a model of the
    engine's units: the corpus (--copies times, shuffled) in units of @unit texts claimed in
    order, each worker holding @hold (the one it tokenizes and one claimed ahead), a unit
    taking time in proportion to its bytes. @split: the last units shrink to an equal share
    of what is left, split 2 x @workers ways, at least @tail_min texts (engine_async.c,
    tail_items()). Start-up, the consumer and locks are left out: this is the tail alone."""
    import heapq
    import random
    sys.path.insert(0, HERE)
    import text_pipeline
    order = [len(t.encode()) for t in text_pipeline.corpus(copies)]
    random.Random(seed).shuffle(order)
    n, i = len(order), 0
    pipes, events, end = [[] for _ in range(workers)], [], 0.0

    def claim():
        nonlocal i
        if i >= n:
            return None
        u = unit
        if split:
            u = max(tail_min, min(unit, -(-(n - i) // (2 * workers))))
        c, i = sum(order[i:i + u]), i + u
        return c
    for w in range(workers):
        while len(pipes[w]) < hold and i < n:
            pipes[w].append(claim())
        if pipes[w]:
            heapq.heappush(events, (pipes[w][0], w))
    while events:
        t, w = heapq.heappop(events)
        pipes[w].pop(0)
        end = max(end, t)
        while len(pipes[w]) < hold and i < n:
            pipes[w].append(claim())
        if pipes[w]:
            heapq.heappush(events, (t + pipes[w][0], w))
    return sum(order) / workers / end


def show_model():
    print("workers busy, in the model (--model): units per worker claimed ahead, slot window, caller holds 1")
    for workers, window, what in ((16, 16, "16 threads, 38.5 MB slots, before: 512 MiB / slot, at least one a worker"),
                                  (16, 36, "16 threads, after: prefetch 4 + 2 x 16")):
        for ahead in (2, 4):
            print("  %-72s ahead %d: %s" % (what, ahead, ", ".join(
                "cv %.1f %.2f" % (cv, model(workers, window, 1, ahead, cv)) for cv in (0.1, 0.3))))
    print("text workers busy over a finite run, in the tail model (text_tail_model()): medians of 15 shuffles")
    for copies in (64, 640):
        for split in (False, True):
            runs = [text_tail_model(16, copies, split, seed=s) for s in range(15)]
            print("  16 workers, --copies %d (%d texts), units of 32, %-30s %.3f (lowest %.3f)" % (
                copies, 79 * copies, "the last ones split:" if split else "fixed:", statistics.median(runs),
                min(runs)))


def summary(path):
    rows = [json.loads(x) for x in open(path) if x.strip()]
    labels = list(dict.fromkeys(r["label"] for r in rows))
    for lab in labels:
        rs = [r for r in rows if r["label"] == lab]
        med = {k: statistics.median(r.get(k, 0.0) for r in rs) for k in ("rate", "per_cpu", "share", "first_batch_s")}
        extra = ""
        if all("bound" in r for r in rs):
            extra = ", %.2fx of its bound (median of runs: %s)" % (
                statistics.median(r["rate"] / r["bound"] for r in rs),
                " ".join("%.2f" % (r["rate"] / r["bound"]) for r in rs))
        share = ", s = %.1f%% (cap %.1f cores)" % (100 * med["share"], 1 / med["share"]) if med["share"] else ""
        if all("worker_sched" in r for r in rs):  # blocked: asleep on a lock, a window, a read
            extra += ", workers blocked %.1f%% (runs: %s), Loader() %.1f ms of CPU" % (
                100 * statistics.median(r["worker_sched"][2] for r in rs),
                " ".join("%.1f" % (100 * r["worker_sched"][2]) for r in rs),
                1e3 * statistics.median(r["create_cpu"] for r in rs))
        stall = ""
        if all("producer_stall_ns" in r for r in rs):  # the workers' time waiting for a window
            stall = ", workers waiting %.1f%%" % (100 * statistics.median(
                r["producer_stall_ns"] / 1e9 / (r["wall"] * r["threads"]) for r in rs))
        print("%-20s %d runs: %.0f %s/s, %.0f per CPU-second%s, first batch %.3f s%s%s" % (
            lab, len(rs), med["rate"], rs[0]["unit"], med["per_cpu"], share, med["first_batch_s"], stall, extra))
        if all("close_s" in r for r in rs):  # --epoch: the serial ends and the memory
            print("%-20s Loader() %.2f ms of CPU, the consumer %.1f ms, close() %.2f ms (%.2f ms of CPU; runs: %s), "
                  "memory %.1f MB, peak RSS %.0f MB" % (
                      "", 1e3 * statistics.median(r["create_cpu"] for r in rs),
                      1e3 * statistics.median(r.get("consumer_cpu", 0.0) for r in rs),
                      1e3 * statistics.median(r["close_s"] for r in rs),
                      1e3 * statistics.median(r["close_cpu"] for r in rs),
                      " ".join("%.2f" % (1e3 * r["close_cpu"]) for r in rs),
                      statistics.median(r["memory_bytes"] for r in rs) / 1e6,
                      statistics.median(r["maxrss_mb"] for r in rs)))
    if len(labels) == 2:
        a = [r for r in rows if r["label"] == labels[0]]
        b = [r for r in rows if r["label"] == labels[1]]
        for k in ("rate", "per_cpu", "close_s", "close_cpu", "create_cpu", "consumer_cpu", "maxrss_mb"):
            if not all(k in r for r in a + b):
                continue
            ratios = [y[k] / x[k] for x, y in zip(a, b)]
            print("%s / %s, %s: median %.2fx (pairs: %s)" % (labels[1], labels[0], k, statistics.median(ratios),
                                                              " ".join("%.2f" % r for r in ratios)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pipeline", nargs="?", choices=("vision", "text"))
    ap.add_argument("--dataset", help="vision: the folder vision_pipeline.py --keep made (or its version folder)")
    ap.add_argument("--ranks", help="text: a tiktoken ranks file (gpt2.tiktoken)")
    ap.add_argument("--copies", type=int, default=16, help="text: the corpus this many times (16: 8 MB)")
    ap.add_argument("--batch", type=int, help="rows per batch (vision 64, text 8)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds read before the timing (2)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds timed (10)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a Loader keyword (an int, else a string), e.g. max_batch_bytes=256M; repeatable")
    ap.add_argument("--epoch", action="store_true",
                    help="time one whole epoch instead, from the Loader's creation (start-up and tail in it)")
    ap.add_argument("--bound", action="store_true", help="also time the pipeline's bound (see above)")
    ap.add_argument("--bench-vision", help="bench_vision (default: this tree's build/release)")
    ap.add_argument("--work", default="/tmp/grist-loader-serial", help="where the text file and jobs go")
    ap.add_argument("--label", default="", help="--out: this run's label")
    ap.add_argument("--out", help="append the run as one JSON line to this file")
    ap.add_argument("--model", action="store_true", help="print the window model's figures (see model()) and stop")
    ap.add_argument("--summary", metavar="FILE", help="print medians per label of an --out file and stop")
    args = ap.parse_args()
    if args.summary:
        return summary(args.summary)
    if args.model:
        return show_model()
    if args.pipeline is None:
        ap.error("give a pipeline (vision or text) or --summary")
    if args.batch is None:
        args.batch = 64 if args.pipeline == "vision" else 8
    args.options = {}
    for kv in args.option:
        k, v = kv.split("=", 1)
        args.options[k] = int(v) if v.isdigit() else v
    os.makedirs(args.work, exist_ok=True)
    o = run_epoch(args) if args.epoch else run(args)
    show(o)
    if args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps(o) + "\n")


if __name__ == "__main__":
    sys.exit(main())
