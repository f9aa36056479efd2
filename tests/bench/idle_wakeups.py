#!/usr/bin/env python3
"""How often an idle mongoguard wakes up, per thread, with N idle client connections.

Starts build/tests/mg_fastbackend as the upstream and build/mongoguard with one worker in
front of it, opens N client connections that send nothing, waits for them to settle, then
counts each thread's epoll_wait calls over --seconds with strace, and the process's CPU time
over the same length. A stalled or idle client should cost no CPU and no wake-ups; what is
left is the worker's once-a-second maintenance step and the process's own timers.

  build/venv/bin/python tests/bench/idle_wakeups.py --connections 9000

Needs strace and a descriptor limit of 2N plus a margin (the hard limit is raised to as far
as it goes). Prints one line per thread: its wake-ups per second.
"""
from __future__ import annotations

import argparse
import re
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from procs import free_port, wait_port  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=9000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--mongoguard", default=str(ROOT / "build" / "mongoguard"))
    args = ap.parse_args()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if 2 * args.connections + 100 > hard:
        print(f"descriptor limit {hard} is too low for {args.connections} connections",
              file=sys.stderr)
        return 2
    be = subprocess.Popen([str(ROOT / "build" / "tests" / "mg_fastbackend"), "--port", "0"],
                          stdout=subprocess.PIPE, text=True)
    up = int(re.search(r"(\d+)", be.stdout.readline()).group(1))
    port = free_port()
    mg = subprocess.Popen([args.mongoguard, "--listen", f"127.0.0.1:{port}", "--upstream",
                           f"mongodb://127.0.0.1:{up}/", "--workers", "1", "--log", "/dev/null"])
    socks = []
    try:
        wait_port(port, 10, mg, "mongoguard")
        for _ in range(args.connections):
            socks.append(socket.create_connection(("127.0.0.1", port)))
        time.sleep(3)  # every session connected upstream and settled
        stat = Path(f"/proc/{mg.pid}/stat")
        t0 = sum(int(x) for x in stat.read_text().split()[13:15])
        out = subprocess.run(["timeout", str(args.seconds), "strace", "-f", "-e",
                              "trace=epoll_wait,epoll_pwait", "-p", str(mg.pid)],
                             capture_output=True, text=True).stderr
        ticks = sum(int(x) for x in stat.read_text().split()[13:15]) - t0
        names = {}
        for task in Path(f"/proc/{mg.pid}/task").iterdir():
            names[task.name] = (task / "comm").read_text().strip()
        counts: dict[str, int] = {}
        for m in re.finditer(r"^\[pid\s+(\d+)\] epoll", out, re.M):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        for line in out.splitlines():  # the main thread's lines carry no [pid]
            if line.startswith("epoll"):
                counts[str(mg.pid)] = counts.get(str(mg.pid), 0) + 1
        print(f"{args.connections} idle connections, {args.seconds} s")
        for tid, n in sorted(counts.items()):
            main = " (main)" if tid == str(mg.pid) else ""
            print(f"  thread {tid} {names.get(tid, '?')}{main}: {n / args.seconds:.1f} wake-ups/s")
        print(f"  CPU: {ticks} clock ticks in {args.seconds} s "
              f"(user+system, with strace attached)")
    finally:
        for s in socks:
            s.close()
        mg.terminate()
        mg.wait(30)
        be.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
