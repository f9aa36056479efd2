#!/usr/bin/env python3
"""What a proxy's second thread costs, per request, mongoguard and HAProxy alike.

run_bench.py sets mongoguard's default (a worker per CPU) against HAProxy's
better thread count. On a small host that the load generator and the
backend share, those differ, and this says by how much each proxy pays for
a second thread: for each proxy at 1 and 2 threads, in rounds, one load
(`find-id c16 d16` unless --load says otherwise) through it while `perf
stat` counts the proxy's CPU time (task-clock), context switches and its
recv, send and epoll_wait calls over a window of the run; every figure is
divided by the requests completed in that window's load. Needs perf with
the syscalls tracepoints (root, or perf_event_paranoid -1).

  build/venv/bin/python tests/bench/thread_cost.py [--rounds 3] [--mongoguard BIN]
      [--baseline OLDBIN]

With --baseline, another mongoguard binary (an earlier commit's) runs at 1
and 2 workers in the same rounds, as "mongoguard-base": a change's effect on
CPU per request, measured beside the noise of the same minutes.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_bench as rb  # noqa: E402

EVENTS = ["task-clock", "context-switches", "syscalls:sys_enter_recvfrom",
          "syscalls:sys_enter_sendto", "syscalls:sys_enter_epoll_wait"]
NAMES = ["CPU µs", "context switches", "recv", "send", "epoll_wait"]


def measure(loadgen: Path, port: int, pid: int, args: list[str], seconds: float) -> dict:
    """The load for seconds + 2; perf stat on pid over `seconds` of it,
    from 1 s in. Figures per request."""
    load = subprocess.Popen([str(loadgen), "--port", str(port), "--duration", str(seconds + 2),
                             "--quiet"] + args, stdout=subprocess.PIPE, text=True)
    time.sleep(1)
    perf = subprocess.run(["perf", "stat", "-x", ",", "-e", ",".join(EVENTS), "-p", str(pid),
                           "--", "sleep", str(seconds)], capture_output=True, text=True)
    out = load.communicate()[0]
    res = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    ops = res["ops_per_s"] * seconds
    counts = {}
    for line in perf.stderr.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2] in EVENTS and f[0] not in ("<not counted>", "<not supported>"):
            counts[f[2]] = float(f[0])
    missing = [e for e in EVENTS if e not in counts]
    if missing:
        raise SystemExit(f"thread_cost: perf did not count {missing}: {perf.stderr[-400:]}")
    per = {e: counts[e] / ops for e in EVENTS}
    per["task-clock"] *= 1000  # msec -> µs
    per["ops_per_s"] = res["ops_per_s"]
    return per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0, help="perf's window a cell [3]")
    ap.add_argument("--load", default="find-id c16 d16", help="a run_bench load name")
    ap.add_argument("--build", default=str(rb.ROOT / "build"))
    ap.add_argument("--mongoguard", help="the binary [build/mongoguard]")
    ap.add_argument("--baseline", help="an earlier mongoguard binary, run beside it")
    a = ap.parse_args()
    if not shutil.which("perf") or not shutil.which("haproxy"):
        raise SystemExit("thread_cost: needs perf (linux-perf) and haproxy")
    build = Path(a.build)
    loadgen = build / "tests" / "mg_loadgen"
    mg_bin = a.mongoguard or str(build / "mongoguard")
    args = rb.LOADS[a.load]
    cells = [("mongoguard", 1), ("HAProxy", 1), ("mongoguard", 2), ("HAProxy", 2)]
    bins = {"mongoguard": mg_bin}
    if a.baseline:
        bins["mongoguard-base"] = a.baseline
        cells += [("mongoguard-base", 1), ("mongoguard-base", 2)]
    got: dict = {c: [] for c in cells}
    with tempfile.TemporaryDirectory(prefix="mg-threads-") as t:
        tmp = Path(t)
        backend, bport = rb.start_backend(build / "tests" / "mg_fastbackend", 1, tmp)
        try:
            for _ in range(a.rounds):
                for proxy, n in cells:
                    target = (rb.start_mongoguard(bins[proxy], "log",
                                                  f"mongodb://127.0.0.1:{bport}/", n, tmp)
                              if proxy in bins
                              else rb.start_haproxy(n, "127.0.0.1", bport, 1000, tmp))
                    try:
                        got[(proxy, n)].append(measure(loadgen, target.port, target.proc.pid,
                                                       args, a.seconds))
                    finally:
                        rb.stop(target.proc)
        finally:
            rb.stop(backend)
    print(f"# {a.load}: per request, median over {a.rounds} rounds (lowest-highest)\n")
    print("| proxy | threads | ops/s | " + " | ".join(NAMES) + " |")
    print("|---|---|---|" + "---|" * len(NAMES))
    for (proxy, n), rows in got.items():
        def cell(key: str, fmt: str) -> str:
            xs = [r[key] for r in rows]
            return (fmt % statistics.median(xs)) + " (" + fmt % min(xs) + "-" + fmt % max(xs) + ")"
        print(f"| {proxy} | {n} | {cell('ops_per_s', '%.0f')} | "
              + " | ".join(cell(e, "%.3f") for e in EVENTS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
