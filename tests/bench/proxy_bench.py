"""Relative cost of mongoguard on the request path, measured in one run.

Runs the same client workload three ways against one upstream, interleaved
in rounds so machine noise hits all three alike:
  direct      client -> upstream
  haproxy     client -> HAProxy (mode tcp) -> upstream    (a byte-pump baseline)
  mongoguard  client -> mongoguard (all rules on, log) -> upstream
and prints ops/s and latency percentiles, plus each as a ratio of direct.
Figures are ratios, not absolutes: these machines are noisy.

  build/venv/bin/python tests/bench/proxy_bench.py --upstream mongodb://127.0.0.1:27017/ \
      [--threads 8] [--seconds 5] [--rounds 3]

The upstream must be running (scripts/run.sh starts FerretDB on 27117).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pymongo import MongoClient

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listening on {port}")


def workload(uri: str, threads: int, seconds: float) -> tuple[float, list[float]]:
    """Each thread loops over a typical mix; returns (ops/s, latencies in ms)."""
    client = MongoClient(uri, maxPoolSize=threads, directConnection=True)
    coll = client.mgbench.items
    lat: list[list[float]] = [[] for _ in range(threads)]
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        n = 0
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            k = n % 4
            if k == 0:
                coll.find_one({"_id": (i * 1000 + n) % 500})
            elif k == 1:
                list(coll.find({"grp": n % 10}).sort("_id", 1).limit(5))
            elif k == 2:
                coll.update_one({"_id": n % 500}, {"$set": {"v": n}})
            else:
                client.admin.command("ping")
            lat[i].append((time.perf_counter() - t0) * 1000)
            n += 1

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - t0
    client.close()
    flat = [x for l in lat for x in l]
    return len(flat) / elapsed, flat


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", default="mongodb://127.0.0.1:27117/")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mongoguard", default=str(ROOT / "build" / "mongoguard"))
    args = ap.parse_args()

    host, _, port = args.upstream.split("//", 1)[1].split("/", 1)[0].rpartition(":")
    seed = MongoClient(args.upstream, directConnection=True)
    seed.mgbench.items.drop()
    seed.mgbench.items.insert_many([{"_id": i, "grp": i % 10, "v": 0} for i in range(500)])
    seed.close()

    tmp = Path(tempfile.mkdtemp(prefix="mgbench-"))
    procs = []
    hp = free_port()
    cfg = tmp / "haproxy.cfg"
    cfg.write_text(f"""global
  maxconn 4000
defaults
  mode tcp
  timeout connect 5s
  timeout client 1h
  timeout server 1h
listen mongo
  bind 127.0.0.1:{hp}
  server up {host}:{port}
""")
    targets = {"direct": args.upstream}
    if shutil.which("haproxy"):
        procs.append(subprocess.Popen(["haproxy", "-f", str(cfg)], stdout=subprocess.DEVNULL))
        wait_port(hp)
        targets["haproxy"] = f"mongodb://127.0.0.1:{hp}/"
    else:
        print("haproxy not installed: baseline limited to direct", file=sys.stderr)
    mp = free_port()
    procs.append(subprocess.Popen([args.mongoguard, "--listen", f"127.0.0.1:{mp}",
                                   "--upstream", args.upstream, "--log", str(tmp / "mg.log")]))
    wait_port(mp)
    targets["mongoguard"] = f"mongodb://127.0.0.1:{mp}/"

    results: dict[str, list[tuple[float, list[float]]]] = {k: [] for k in targets}
    try:
        for r in range(args.rounds):
            for name, uri in targets.items():
                results[name].append(workload(uri, args.threads, args.seconds))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{args.threads} threads, {args.rounds} rounds x {args.seconds}s, "
          f"mix: find by _id, find+sort+limit, update $set, ping; upstream {args.upstream}")
    print(f"{'path':<11} {'ops/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'ops vs direct':>14} "
          f"{'p50 vs direct':>14}")
    base_ops = statistics.median(o for o, _ in results["direct"])
    base_p50 = pct([x for _, l in results["direct"] for x in l], 0.5)
    for name, rs in results.items():
        ops = statistics.median(o for o, _ in rs)
        lat = [x for _, l in rs for x in l]
        p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
        print(f"{name:<11} {ops:>9.0f} {p50:>8.3f} {p99:>8.3f} {ops / base_ops:>14.3f} "
              f"{p50 / base_p50:>14.3f}")


if __name__ == "__main__":
    main()
