#!/usr/bin/env python3
"""What mongoguard costs on the request path, against HAProxy in TCP mode, in one run.

Runs the same raw OP_MSG load (build/tests/mg_loadgen) against one backend
several ways, interleaved in rounds so that machine noise hits all alike:

  direct     loadgen -> backend
  haproxy    loadgen -> HAProxy (mode tcp, decodes nothing) -> backend,
             once per --haproxy-threads value; each row uses the better one
  mg-off     loadgen -> mongoguard, analysis: {enabled: false} -> backend
  mg-log     loadgen -> mongoguard, every rule at log -> backend
  mg-block   loadgen -> mongoguard, every rule at block -> backend
  mg-log-1w  as mg-log with one worker (--workers 1): what the other
             workers add (a table of mg-log / mg-log-1w)
  mg-log-base  with --baseline BIN: another mongoguard binary, every rule at
             log (an earlier build, for before/after figures in one run)

The backend is build/tests/mg_fastbackend (answers at once from canned data,
so the proxy is what is measured), or the server given with --upstream for
end-to-end figures (prepared with `mg_loadgen --setup`: database mgbench).
It also measures resident memory per idle connection (each did a hello)
for every target, on fresh processes before any load.

Results: a table on stdout, saved with the raw figures to
<out>/results-<timestamp>.md and .json. Exit status 0 when every cell ran
and no reply error was counted. Standard library only:

  build/venv/bin/python tests/bench/run_bench.py            # full run, a few minutes
  build/venv/bin/python tests/bench/run_bench.py --quick    # smoke: seconds
  build/venv/bin/python tests/bench/run_bench.py --upstream mongodb://127.0.0.1:27117/
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from procs import NotListening, free_port, stop, wait_port  # noqa: E402
RULES = ["case-insensitive-regex", "unbounded-push", "hot-path-lookup", "index-mismatched-sort",
         "collection-scan", "large-document"]
# The loads insert documents up to 16 MB on purpose: large-document judges
# them (its walk is part of the cost measured) with a limit above them, so
# "every rule at block" does not refuse the load itself.
RULE_PARAMS = {"large-document": "maxBytes: 48000000"}

# name -> mg_loadgen arguments. The table first, then the other op kinds.
LOADS = {
    "find-id c1": ["--op", "find-id", "--connections", "1"],
    "find-id c16": ["--op", "find-id", "--connections", "16"],
    "find-id c128": ["--op", "find-id", "--connections", "128"],
    "insert 64KiB c1": ["--op", "insert", "--size", "64k", "--connections", "1"],
    "insert 1MiB c1": ["--op", "insert", "--size", "1m", "--connections", "1"],
    "insert 16MB c1": ["--op", "insert", "--size", "16000000", "--connections", "1"],
    "find-sort c16": ["--op", "find-sort", "--connections", "16"],
    "update c16": ["--op", "update", "--connections", "16"],
    "cursor c1": ["--op", "cursor", "--connections", "1"],
    "ping c16 d16": ["--op", "ping", "--connections", "16", "--depth", "16"],
    # Pipelined finds: every message decoded and analysed, 16 to a read, so
    # the proxy's own per-message work weighs most.
    "find-id c16 d16": ["--op", "find-id", "--connections", "16", "--depth", "16"],
    # Bulk updates of 100 and 1,000 statements a command, each statement
    # analysed: the proxy's own work weighs most, and at 1,000 it, not the
    # machine, is the limit, so the workers table can show a second worker.
    "update c16 s100": ["--op", "update", "--statements", "100", "--connections", "16"],
    "update c16 s1000": ["--op", "update", "--statements", "1000", "--connections", "16"],
    # The same, with no two statements in a row of one shape (16 shapes, half
    # of them a bounded $push): read as a batch of varied writes is. No
    # statement matches the template of the one before it; a template kept
    # through the backoff (analyze_statements) matches a later statement of
    # its shape, about 1 in 18 (17 in 18 are read).
    "update c16 s1000 k16": ["--op", "update", "--statements", "1000", "--shapes", "16",
                             "--connections", "16"],
    # Peak memory: every connection holds a 16 MB request at once. A round
    # of 128 takes seconds even direct, hence the reply timeout.
    "insert 16MB c128": ["--op", "insert", "--size", "16000000", "--connections", "128",
                         "--timeout", "120"],
}
# Loads whose operations take longer than a cell's default duration: each
# figure needs several rounds of all its connections.
MIN_DURATION = {"insert 16MB c128": 8.0}
QUICK_LOADS = {
    "find-id c1": ["--op", "find-id", "--connections", "1"],
    "find-id c4": ["--op", "find-id", "--connections", "4"],
    "find-sort c2": ["--op", "find-sort", "--connections", "2"],
    "update c2": ["--op", "update", "--connections", "2"],
    "insert 64KiB c1": ["--op", "insert", "--size", "64k", "--connections", "1"],
    "cursor c1": ["--op", "cursor", "--connections", "1"],
    "ping c2 d4": ["--op", "ping", "--connections", "2", "--depth", "4"],
}
ALL_TARGETS = ["direct", "haproxy", "mg-off", "mg-log", "mg-block", "mg-log-1w"]


# --- processes ---------------------------------------------------------------

def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Target:
    def __init__(self, name: str, port: int, proc: subprocess.Popen | None, label: str,
                 log: Path | None = None):
        self.name, self.port, self.proc, self.label, self.log = name, port, proc, label, log


def start_backend(binary: Path, threads: int, logdir: Path) -> tuple[subprocess.Popen, int]:
    err = open(logdir / "fastbackend.err", "wb")
    p = subprocess.Popen([str(binary), "--port", "0", "--threads", str(threads)],
                         stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    if "listening on" not in line:
        raise SystemExit(f"run_bench: mg_fastbackend did not start: {line!r}")
    return p, int(line.rsplit(":", 1)[1])


def haproxy_config(threads: int, listen_port: int, host: str, port: int, maxconn: int,
                   bufsize: int | None = None) -> str:
    """HAProxy in TCP mode: bytes from 127.0.0.1:listen_port to host:port;
    bufsize: its tune.bufsize (None: HAProxy's default, 16 KiB)."""
    tune = f"\n  tune.bufsize {bufsize}" if bufsize else ""
    return f"""global
  maxconn {maxconn}
  nbthread {threads}{tune}
defaults
  mode tcp
  maxconn {maxconn}
  timeout connect 5s
  timeout client 1h
  timeout server 1h
listen mongo
  bind 127.0.0.1:{listen_port}
  server up {host}:{port}
"""


def start_haproxy(threads: int, host: str, port: int, maxconn: int, tmp: Path,
                  bufsize: int | None = None) -> Target:
    lp = free_port()
    cfg = tmp / f"haproxy-{threads}t.cfg"
    cfg.write_text(haproxy_config(threads, lp, host, port, maxconn, bufsize))
    out = open(tmp / f"haproxy-{threads}t.out", "wb")
    p = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=out, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    wait_port(lp, 15, p, "haproxy")
    return Target(f"haproxy-{threads}t", lp, p, f"HAProxy nbthread {threads}")


def mongoguard_config(kind: str) -> str:
    if kind == "off":
        return "analysis:\n  enabled: false\n"
    def rule(r: str) -> str:
        extra = RULE_PARAMS.get(r)
        return f"  {r}: {{action: {kind}, {extra}}}\n" if extra else f"  {r}: {kind}\n"
    return "rules:\n" + "".join(rule(r) for r in RULES)


def start_mongoguard(binary: str, kind: str, upstream: str, workers: int, tmp: Path,
                     name: str | None = None, note: str | None = None) -> Target:
    name = name or f"mg-{kind}"
    lp = free_port()
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(mongoguard_config(kind))
    log = tmp / f"{name}.log"
    out = open(tmp / f"{name}.out", "wb")
    p = subprocess.Popen([binary, "--config", str(cfg), "--listen", f"127.0.0.1:{lp}",
                          "--upstream", upstream, "--log", str(log), "--workers", str(workers)],
                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    wait_port(lp, 15, p, f"mongoguard ({kind})")
    label = {"off": "mongoguard analysis off", "log": "mongoguard all rules log",
             "block": "mongoguard all rules block"}[kind]
    if note:
        label += f" ({note})"
    return Target(name, lp, p, label, log)


# --- idle connections --------------------------------------------------------

def hello_msg(request_id: int) -> bytes:
    doc = b"\x10hello\x00" + struct.pack("<i", 1) + b"\x02$db\x00" + struct.pack("<i", 6) + \
        b"admin\x00"
    doc = struct.pack("<i", len(doc) + 5) + doc + b"\x00"
    body = struct.pack("<I", 0) + b"\x00" + doc
    return struct.pack("<iiii", 16 + len(body), request_id, 0, 2013) + body


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return buf


def idle_memory(target: Target, pid: int, n: int) -> dict:
    """RSS of pid before and after n connections to target that each did a hello."""
    before = rss_kib(pid)
    socks: list[socket.socket] = []
    failed = 0
    try:
        for start in range(0, n, 250):
            chunk = []
            for i in range(start, min(n, start + 250)):
                try:
                    s = socket.create_connection(("127.0.0.1", target.port), timeout=10)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.sendall(hello_msg(i + 1))
                    chunk.append((i + 1, s))
                except OSError:
                    failed += 1
            for rid, s in chunk:
                try:
                    hdr = recv_exact(s, 16)
                    length, _, response_to, _ = struct.unpack("<iiii", hdr)
                    recv_exact(s, length - 16)
                    if response_to != rid:
                        failed += 1
                    socks.append(s)
                except OSError:
                    failed += 1
                    s.close()
        time.sleep(0.5)
        after = rss_kib(pid)
    finally:
        for s in socks:
            s.close()
    time.sleep(0.5)
    ok = len(socks)
    return {"target": target.name, "connections": ok, "failed": failed, "rss_before_kib": before,
            "rss_after_kib": after, "kib_per_conn": (after - before) / ok if ok else None}


def raise_fd_limit(n: int) -> int:
    """Raises RLIMIT_NOFILE (inherited by the proxies started later) so that n
    idle connections fit: 2 fds per connection in a proxy. As root the hard
    limit is raised too. Returns how many idle connections fit."""
    want = 2 * n + 2000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard >= want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
        return n
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
        return n
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    fit = max(0, (hard - 2000) // 2)
    print(f"run_bench: RLIMIT_NOFILE hard limit {hard}: idle test limited to {fit} connections",
          file=sys.stderr)
    return fit


# --- the run -----------------------------------------------------------------

def run_loadgen(loadgen: Path, port: int, args: list[str], duration: float, warmup: float,
                label: str, cpu_pid: int | None = None) -> dict:
    """One cell. With cpu_pid, the load generator also reports that process's
    CPU time per operation over the measured window (`cpu_us`)."""
    cmd = [str(loadgen), "--port", str(port), "--duration", str(duration), "--warmup",
           str(warmup), "--quiet", "--label", label] + args
    if cpu_pid:
        cmd += ["--cpu-of", str(cpu_pid)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + warmup + 90)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        if lines:
            res = json.loads(lines[-1])
            res["exit"] = r.returncode
            res["cpu_us"] = (res.pop("cpu_us_per_op", None) or {}).get(str(cpu_pid))
            return res
        why = f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
    except subprocess.TimeoutExpired:
        why = "timed out"
    return {"label": label, "ops_per_s": 0.0, "ops": 0, "errors": 1, "first_error": why,
            "latency_us": {"p50": 0, "p99": 0, "p999": 0}, "exit": -1, "cpu_us": None}


def cpu_ticks() -> tuple[int, int]:
    """All CPUs' time and the part the hypervisor stole (/proc/stat, ticks)."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(f[:8]), f[7] if len(f) > 7 else 0
    except (OSError, ValueError):
        return 0, 0


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    hv = "not installed"
    if shutil.which("haproxy"):
        first = subprocess.run(["haproxy", "-v"], capture_output=True,
                               text=True).stdout.splitlines()[0]
        hv = "HAProxy " + first.split()[2] if first.startswith("HAProxy version") else first
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    return {"nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
            "haproxy": hv, "git": git, "loadavg_at_start": os.getloadavg()[0]}


def med(xs):
    return statistics.median(xs) if xs else 0.0


def fmt_ops(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def summarise(results: dict, loads: list[str], targets: list[str], hap_names: list[str]) -> dict:
    """Per load: each target's median ops/s and latency over the rounds; the
    HAProxy column is the better of its thread counts."""
    out = {}
    for load in loads:
        row = {}
        for t in targets:
            rs = results[load][t]
            row[t] = {"ops_per_s": med([r["ops_per_s"] for r in rs]),
                      "p50_us": med([r["latency_us"]["p50"] for r in rs]),
                      "p99_us": med([r["latency_us"]["p99"] for r in rs]),
                      "p999_us": med([r["latency_us"]["p999"] for r in rs]),
                      "errors": sum(r["errors"] for r in rs),
                      "rounds": [r["ops_per_s"] for r in rs]}
            cpus = [r["cpu_us"] for r in rs if r.get("cpu_us")]
            if cpus:
                row[t]["cpu_us"] = {k: med([c[k] for c in cpus]) for k in ("user", "system")}
                row[t]["cpu_us"]["total"] = med([c["user"] + c["system"] for c in cpus])
        if hap_names:
            best = max(hap_names, key=lambda h: row[h]["ops_per_s"])
            row["haproxy"] = dict(row[best], best_of=best)
        out[load] = row
    return out


def peak_kib(pid: int) -> int | None:
    """VmHWM: the most resident memory the process ever had."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def like_for_like(summary: dict, info: dict, mg_cols: list[str], hap_names: list[str]) -> list:
    """mongoguard against HAProxy at the same thread count (mg-log-1w against
    haproxy-1t, mg-log against haproxy-<workers>t), and each at its better
    count: the Throughput table sets HAProxy's better count against
    mongoguard's default, which on a machine whose cores the load generator
    and the backend share favours the proxy with fewer threads."""
    w = info.get("mg_workers")
    pairs = [(c, h) for c, h in (("mg-log-1w", "haproxy-1t"), ("mg-log", f"haproxy-{w}t"))
             if c in mg_cols and h in hap_names]
    if not pairs:
        return []
    names = {"mg-log-1w": "1 worker / 1 thread", "mg-log": f"{w} workers / {w} threads"}
    cols = [names[c] for c, _ in pairs]
    both = "mg-log" in mg_cols and "mg-log-1w" in mg_cols
    if both:
        cols.append("better / better")
    lines = ["", "## Like for like: mg-log / HAProxy at the same thread count", "",
             "Round by round, each pair run in the same round: median (lowest-highest)."
             " The last column sets the better of mongoguard's worker counts against the"
             " better of HAProxy's thread counts, each by its median.", "",
             "| load | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for load, row in summary.items():
        cells = []
        for c, h in pairs:
            rs = [m / x for m, x in zip(row[c]["rounds"], row[h]["rounds"]) if x]
            cells.append(f"{med(rs):.2f} ({min(rs):.2f}-{max(rs):.2f})" if rs else "-")
        if both:
            mg = max(row["mg-log"]["ops_per_s"], row["mg-log-1w"]["ops_per_s"])
            cells.append(ratio(mg, row["haproxy"]["ops_per_s"]))
        lines.append(f"| {load} | " + " | ".join(cells) + " |")
    return lines


def render(summary: dict, idle: list[dict], info: dict, mg_cols: list[str], hap_names: list[str],
           findings: dict, peaks: dict | None = None) -> str:
    m = info["machine"]
    has_hap = bool(hap_names)
    lines = [f"# mongoguard proxy benchmark, {info['started']}", "",
             f"- machine: {m['nproc']} cores ({m['cpu']}), Linux {m['kernel']}, "
             f"load average {m['loadavg_at_start']:.2f} at start",
             f"- {m['haproxy']}"
             + (f" (tune.bufsize {info['haproxy_bufsize']})" if info.get("haproxy_bufsize") else "")
             + f"; {info['mongoguard_version']} (git {m['git']})",
             f"- backend: {info['backend']}",
             f"- {info['rounds']} rounds x {info['duration']} s per cell (after "
             f"{info['warmup']} s warm-up), targets interleaved; medians over rounds",
             f"- CPU time the hypervisor took for other guests (steal, /proc/stat) during"
             f" a cell: median {100 * info['steal']['median']:.0f} %, highest"
             f" {100 * info['steal']['max']:.0f} %; {info['steal']['repeated']} of"
             f" {info['steal']['cells']} cells were run again for more than"
             f" {info['steal']['limit_pct']:g} %, {info['steal']['over']} kept above it"
             f" after the last try (such a cell's figures say more about the host than"
             f" about the proxies)",
             f"- command: `{info['command']}`", ""]
    head = ["load", "direct"] + (["HAProxy"] if has_hap else []) + mg_cols
    ratios = []
    if has_hap:
        ratios += [f"{c} / HAProxy" for c in mg_cols]
    ratios += [f"{c} / direct" for c in mg_cols]
    if has_hap:
        ratios = ["HAProxy / direct"] + ratios
    lines += ["## Throughput (ops/s)", "",
              "| " + " | ".join(head + ratios) + " |",
              "|" + "---|" * (len(head) + len(ratios))]
    for load, row in summary.items():
        d = row["direct"]["ops_per_s"]
        cells = [load, fmt_ops(d)]
        if has_hap:
            h = row["haproxy"]
            cells.append(fmt_ops(h["ops_per_s"]) + f" ({h['best_of'].split('-')[1]})")
        cells += [fmt_ops(row[c]["ops_per_s"]) for c in mg_cols]
        rs = []
        if has_hap:
            rs.append(ratio(row["haproxy"]["ops_per_s"], d))
            rs += [ratio(row[c]["ops_per_s"], row["haproxy"]["ops_per_s"]) for c in mg_cols]
        rs += [ratio(row[c]["ops_per_s"], d) for c in mg_cols]
        lines.append("| " + " | ".join(cells + rs) + " |")
    if has_hap:
        lines += ["", "HAProxy: the better of nbthread "
                  + " and ".join(h.split("-")[1].rstrip("t") for h in hap_names)
                  + " for each row (in brackets: 1t, 2t = threads)."]
    if has_hap and mg_cols:
        lines += ["", "## Spread: each mongoguard target / HAProxy, round by round", "",
                  "Ratios of cells run one after the other in the same round (HAProxy at the"
                  " thread count of its row): median, lowest and highest over the rounds. A"
                  " median ratio near 1 whose range spans 1 is no difference this machine can"
                  " show.", "",
                  "| load | " + " | ".join(mg_cols) + " |", "|---|" + "---|" * len(mg_cols)]
        for load, row in summary.items():
            hr = row[row["haproxy"]["best_of"]]["rounds"]
            cells = []
            for c in mg_cols:
                rs = [m / h for m, h in zip(row[c]["rounds"], hr) if h]
                cells.append(f"{med(rs):.2f} ({min(rs):.2f}-{max(rs):.2f})" if rs else "-")
            lines.append(f"| {load} | " + " | ".join(cells) + " |")
    if "mg-log" in mg_cols and "mg-log-1w" in mg_cols:
        w = info.get("mg_workers")
        hw = f"haproxy-{w}t"
        both = all(hw in row and "haproxy-1t" in row for row in summary.values()) and w != 1
        lines += ["", f"## Workers: mg-log ({w} workers) / mg-log-1w (1 worker)", "",
                  "Throughput with every rule at log, the same binary and load. More"
                  " workers can only add where a worker thread is what limits; where the"
                  " load generator and the backend share the machine's cores, the cores"
                  " limit, and the ratio is noise around 1."
                  + (f" The last column is HAProxy's own: nbthread {w} / nbthread 1, the"
                     " same threads' cost to a proxy that decodes nothing." if both else ""),
                  "", "| load | mg-log | mg-log-1w | ratio |" + (" HAProxy |" if both else ""),
                  "|---|---|---|---|" + ("---|" if both else "")]
        for load, row in summary.items():
            cells = [fmt_ops(row['mg-log']['ops_per_s']), fmt_ops(row['mg-log-1w']['ops_per_s']),
                     ratio(row['mg-log']['ops_per_s'], row['mg-log-1w']['ops_per_s'])]
            if both:
                cells.append(ratio(row[hw]['ops_per_s'], row['haproxy-1t']['ops_per_s']))
            lines.append(f"| {load} | " + " | ".join(cells) + " |")
    lines += like_for_like(summary, info, mg_cols, hap_names)
    lines += ["", "## Latency (µs, p50 / p99; medians over rounds)", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for load, row in summary.items():
        cols = ["direct"] + (["haproxy"] if has_hap else []) + mg_cols
        lines.append("| " + " | ".join([load] + [
            f"{row[c]['p50_us']:.0f} / {row[c]['p99_us']:.0f}" for c in cols]) + " |")
    cpu_cols = (["haproxy"] if has_hap else []) + mg_cols
    if any("cpu_us" in row[c] for row in summary.values() for c in cpu_cols):
        lines += ["", "## Proxy CPU time per request (µs, user + system; medians over rounds)",
                  "",
                  "Every thread of the proxy process, over the measured window, from"
                  " /proc/PID/stat (10 ms ticks), divided by the operations completed in it."
                  " Less noisy than throughput on a shared machine: it does not depend on"
                  " how the cores were shared out, only on what the proxy did per request"
                  " (most of it the kernel's socket work).", "",
                  "| load | " + " | ".join(cpu_cols) + " | "
                  + " | ".join(f"{c} / HAProxy" for c in mg_cols if has_hap) + " |",
                  "|---|" + "---|" * (len(cpu_cols) + (len(mg_cols) if has_hap else 0))]
        for load, row in summary.items():
            def cell(c):
                u = row[c].get("cpu_us")
                return f"{u['user']:.1f} + {u['system']:.1f}" if u else "-"
            rs = []
            h = row["haproxy"].get("cpu_us") if has_hap else None
            for c in mg_cols if has_hap else []:
                u = row[c].get("cpu_us")
                rs.append(ratio(u["total"], h["total"]) if u and h else "-")
            lines.append(f"| {load} | " + " | ".join(cell(c) for c in cpu_cols)
                         + (" | " + " | ".join(rs) if rs else "") + " |")
    if idle:
        lines += ["", "## Idle connections (resident memory)", "",
                  "| process | idle connections | RSS before (MiB) | RSS after (MiB) | "
                  "KiB per connection |", "|---|---|---|---|---|"]
        for i in idle:
            per = f"{i['kib_per_conn']:.1f}" if i["kib_per_conn"] is not None else "-"
            lines.append(f"| {i['label']} | {i['connections']:,}"
                         f"{' (' + str(i['failed']) + ' failed)' if i['failed'] else ''} | "
                         f"{i['rss_before_kib'] / 1024:.1f} | {i['rss_after_kib'] / 1024:.1f} | "
                         f"{per} |")
    if peaks:
        lines += ["", "## Peak resident memory over the run (VmHWM)", "",
                  "Highest resident memory each process reached; the largest load"
                  " (`insert 16MB c128` when it ran: 128 connections each holding a 16 MB"
                  " request) sets it. mongoguard's documented bound per connection is one"
                  " request plus about 3.3 MiB of streaming buffers.", "",
                  "| process | peak (MiB) |", "|---|---|"]
        for name, kib in peaks.items():
            lines.append(f"| {name} | {kib / 1024:,.0f} |")
    errs = {t: sum(row[t]["errors"] for row in summary.values())
            for t in next(iter(summary.values())) if t != "haproxy"}
    lines += ["", "Reply errors counted by the load generator: " +
              ", ".join(f"{t} {e}" for t, e in errs.items()) + "."]
    if findings:
        lines.append("mongoguard findings logged: " +
                     ", ".join(f"{t} {n}" for t, n in findings.items()) + ".")
    return "\n".join(lines) + "\n"


def parse_upstream(uri: str) -> tuple[str, int]:
    if not uri.startswith("mongodb://"):
        raise SystemExit("run_bench: --upstream must be a mongodb:// URI")
    hostport = uri[len("mongodb://"):].split("/", 1)[0].split(",")[0].rsplit("@", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host:
        host, port = hostport, "27017"
    host = socket.gethostbyname(host)
    return host, int(port)


def main() -> int:
    ap = argparse.ArgumentParser(
        description="mongoguard's cost on the request path, against HAProxy in TCP mode and "
                    "direct, in one interleaved run.",
        epilog="Load names: " + ", ".join(LOADS) + ". Targets: " + ", ".join(ALL_TARGETS) + ".")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: small loads, 1 round of 0.25 s, 200 idle connections, "
                         "HAProxy nbthread 1 only")
    ap.add_argument("--upstream", metavar="URI",
                    help="benchmark against this server instead of mg_fastbackend "
                         "(prepares database mgbench on it)")
    ap.add_argument("--rounds", type=int, help="rounds over every load and target [3]")
    ap.add_argument("--duration", type=float, help="measured seconds per cell [1.0]")
    ap.add_argument("--warmup", type=float, help="unmeasured seconds per cell [0.2]")
    ap.add_argument("--loads", help="comma-separated load names [all]")
    ap.add_argument("--targets", help="comma-separated targets [all]")
    ap.add_argument("--haproxy-threads", default=None,
                    help="HAProxy nbthread values to measure; each row uses the best [1,2]")
    ap.add_argument("--haproxy-bufsize", type=int, metavar="BYTES",
                    help="HAProxy's tune.bufsize: its buffer per direction, the most it "
                         "reads or writes per call [HAProxy's default, 16384]")
    ap.add_argument("--idle-conns", type=int,
                    help="idle connections for the memory measurement, 0 to skip [9000]")
    ap.add_argument("--mg-workers", type=int, default=0,
                    help="mongoguard --workers (0 = one per CPU it may use) [0]")
    ap.add_argument("--backend-threads", type=int, default=1,
                    help="mg_fastbackend threads [1]")
    ap.add_argument("--build", default=str(ROOT / "build"),
                    help="the CMake build directory holding tests/mg_loadgen [build/]")
    ap.add_argument("--mongoguard", default=os.environ.get("MONGOGUARD_BIN"),
                    help="mongoguard binary [$MONGOGUARD_BIN, else <build>/mongoguard]")
    ap.add_argument("--baseline", metavar="BIN",
                    help="also run this mongoguard binary, every rule at log, as target "
                         "mg-log-base, interleaved with the others: before/after figures "
                         "from one run")
    ap.add_argument("--max-steal", type=float, default=5.0, metavar="PCT",
                    help="run a cell again when the hypervisor stole more than PCT %% of the "
                         "CPU time during it (/proc/stat steal) [5]")
    ap.add_argument("--steal-retries", type=int, default=3, metavar="N",
                    help="at most N more tries of such a cell; the last is kept whatever "
                         "its steal [3]")
    ap.add_argument("--out", help="where results-<timestamp>.md/.json go [<build>/bench]")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temporary directory (configs, logs) and print its path")
    a = ap.parse_args()

    build = Path(a.build)
    loadgen, backend = build / "tests" / "mg_loadgen", build / "tests" / "mg_fastbackend"
    mg_bin = a.mongoguard or str(build / "mongoguard")
    for b in (loadgen, backend, Path(mg_bin)) + ((Path(a.baseline),) if a.baseline else ()):
        if not os.access(b, os.X_OK):
            raise SystemExit(f"run_bench: {b} is not built (cmake --build {build})")
    loads_all = QUICK_LOADS if a.quick else LOADS
    if a.loads:
        names = [x.strip() for x in a.loads.split(",")]
        bad = [n for n in names if n not in LOADS and n not in QUICK_LOADS]
        if bad:
            raise SystemExit(f"run_bench: unknown loads {bad}; known: {', '.join(LOADS)}, "
                             f"{', '.join(QUICK_LOADS)}")
        loads = {n: LOADS.get(n) or QUICK_LOADS[n] for n in names}
    else:
        loads = loads_all
    targets = [x.strip() for x in (a.targets or ",".join(ALL_TARGETS)).split(",")]
    if "direct" not in targets or any(t not in ALL_TARGETS for t in targets):
        raise SystemExit(f"run_bench: --targets must include direct and be among {ALL_TARGETS}")
    rounds = a.rounds or (1 if a.quick else 3)
    duration = a.duration or (0.25 if a.quick else 1.0)
    warmup = a.warmup if a.warmup is not None else (0.05 if a.quick else 0.2)
    idle_n = a.idle_conns if a.idle_conns is not None else (200 if a.quick else 9000)
    hap_threads = [int(x) for x in (a.haproxy_threads or ("1" if a.quick else "1,2")).split(",")]
    if "haproxy" in targets and not shutil.which("haproxy"):
        raise SystemExit("run_bench: haproxy is not installed (scripts/setup.sh --tests installs "
                         "it), or leave it out with --targets")
    if idle_n:
        idle_n = raise_fd_limit(idle_n)

    started = datetime.datetime.now()
    stamp = started.strftime("%Y%m%d-%H%M%S")
    out_dir = Path(a.out) if a.out else build / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="mgbench-"))
    procs: list[subprocess.Popen] = []
    status = 0
    try:
        if a.upstream:
            up_host, up_port = parse_upstream(a.upstream)
            backend_desc = f"{a.upstream} (prepared with mg_loadgen --setup)"
            backend_proc = None
        else:
            backend_proc, up_port = start_backend(backend, a.backend_threads, tmp)
            procs.append(backend_proc)
            up_host = "127.0.0.1"
            backend_desc = f"mg_fastbackend, {a.backend_threads} thread(s)"
        upstream_uri = f"mongodb://{up_host}:{up_port}/"

        def setup() -> None:
            r = subprocess.run([str(loadgen), "--setup", "--host", up_host, "--port",
                                str(up_port)], capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                raise SystemExit(f"run_bench: mg_loadgen --setup failed: {r.stdout}{r.stderr}")
        setup()

        tlist: list[Target] = [Target("direct", up_port, backend_proc, "direct")]
        hap_names = []
        if "haproxy" in targets:
            for n in hap_threads:
                t = start_haproxy(n, up_host, up_port, max(4000, idle_n + 500), tmp,
                                  a.haproxy_bufsize)
                procs.append(t.proc)
                tlist.append(t)
                hap_names.append(t.name)
        for kind in ("off", "log", "block"):
            if f"mg-{kind}" in targets:
                t = start_mongoguard(mg_bin, kind, upstream_uri, a.mg_workers, tmp)
                procs.append(t.proc)
                tlist.append(t)
        if "mg-log-1w" in targets:
            t = start_mongoguard(mg_bin, "log", upstream_uri, 1, tmp, "mg-log-1w", "1 worker")
            procs.append(t.proc)
            tlist.append(t)
        if a.baseline:
            t = start_mongoguard(a.baseline, "log", upstream_uri, a.mg_workers, tmp,
                                 "mg-log-base", a.baseline)
            procs.append(t.proc)
            tlist.append(t)
        mg_cols = [t.name for t in tlist if t.name.startswith("mg-")]
        mg_version = subprocess.run([mg_bin, "--version"], capture_output=True,
                                    text=True).stdout.strip()

        # Idle memory first, on fresh processes (a heap that has served 16 MB
        # messages would hide new allocations).
        idle = []
        for t in tlist:
            if not idle_n or t.proc is None:
                continue
            r = idle_memory(t, t.proc.pid, idle_n)
            r["label"] = "mg_fastbackend (direct)" if t.name == "direct" else t.label
            idle.append(r)
            print(f"idle {t.name}: {r['connections']} connections, "
                  f"{r['kib_per_conn'] or 0:.1f} KiB each", file=sys.stderr)

        results = {load: {t.name: [] for t in tlist} for load in loads}
        for r in range(rounds):
            order = tlist[r % len(tlist):] + tlist[:r % len(tlist)]
            for load, largs in loads.items():
                for t in order:
                    if a.upstream and "insert" in load:
                        setup()  # keeps the inserted volume bounded on a real server
                    for attempt in range(1 + a.steal_retries):
                        t0 = cpu_ticks()
                        res = run_loadgen(loadgen, t.port, largs,
                                          max(duration, MIN_DURATION.get(load, 0.0)), warmup,
                                          f"{load} via {t.name}",
                                          t.proc.pid if t.proc and t.name != "direct" else None)
                        t1 = cpu_ticks()
                        res["steal"] = (t1[1] - t0[1]) / (t1[0] - t0[0]) if t1[0] > t0[0] \
                            else 0.0
                        res["attempts"] = attempt + 1
                        if res["steal"] * 100 <= a.max_steal or attempt == a.steal_retries:
                            break
                        print(f"round {r + 1}/{rounds} {load:<16} {t.name:<11} again: "
                              f"{100 * res['steal']:.0f} % of the CPU time stolen",
                              file=sys.stderr)
                    results[load][t.name].append(res)
                    flag = f"  ERRORS {res['errors']}: {res.get('first_error')}" \
                        if res["errors"] else ""
                    print(f"round {r + 1}/{rounds} {load:<16} {t.name:<11} "
                          f"{res['ops_per_s']:>11,.0f} ops/s  p50 "
                          f"{res['latency_us']['p50']:>8.0f} us  steal "
                          f"{100 * res['steal']:3.0f} %{flag}", file=sys.stderr)
                    if res["errors"] or res["ops"] == 0:
                        status = 1
        findings = {}
        for t in tlist:
            if t.log is not None and t.log.exists():
                findings[t.name] = sum(1 for ln in t.log.read_text(errors="replace").splitlines()
                                       if '"c":"ANALYZER"' in ln)
        peaks = {t.name: k for t in tlist if t.proc is not None
                 and (k := peak_kib(t.proc.pid)) is not None}
        summary = summarise(results, list(loads), [t.name for t in tlist], hap_names)
        cells = [c for by_t in results.values() for rs in by_t.values() for c in rs]
        steals = [c["steal"] for c in cells]
        info = {"started": started.isoformat(timespec="seconds"), "machine": machine(),
                "steal": {"median": med(steals), "max": max(steals, default=0.0),
                          "limit_pct": a.max_steal, "cells": len(cells),
                          "repeated": sum(1 for c in cells if c["attempts"] > 1),
                          "over": sum(1 for c in steals if 100 * c > a.max_steal)},
                "haproxy_bufsize": a.haproxy_bufsize,
                "mongoguard_version": mg_version, "backend": backend_desc, "rounds": rounds,
                "duration": duration, "warmup": warmup,
                "mg_workers": a.mg_workers or len(os.sched_getaffinity(0)),
                "command": " ".join(["tests/bench/run_bench.py"] + sys.argv[1:])}
        text = render(summary, idle, info, mg_cols, hap_names, findings, peaks)
        md, js = out_dir / f"results-{stamp}.md", out_dir / f"results-{stamp}.json"
        md.write_text(text)
        js.write_text(json.dumps({"info": info, "summary": summary, "idle": idle,
                                  "findings": findings, "peaks_kib": peaks, "raw": results},
                                 indent=1))
        print(text)
        print(f"saved {md} and {js}", file=sys.stderr)
    finally:
        for p in reversed(procs):
            rc = stop(p)
            if p.args[0] == mg_bin and rc != 0:
                print(f"run_bench: mongoguard exited with status {rc}", file=sys.stderr)
                status = 1
        if a.keep:
            print(f"run_bench: logs and configs kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    try:
        sys.exit(main())
    except NotListening as e:
        sys.exit(f"run_bench: {e}")
