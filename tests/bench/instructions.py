#!/usr/bin/env python3
"""User-space instructions per request of the proxies, counted by callgrind.

Timings on a shared 2-core machine move by 10-30 % between runs; instruction
counts move by well under 1 %, so they are the stable figure for what a change
to mongoguard's request path buys. This runs mongoguard (every rule at log, or
as --rules says, one worker) and HAProxy (TCP mode, one thread) under `valgrind --tool=callgrind`
in front of build/tests/mg_fastbackend, and for each load: a warm-up of 500
requests, `callgrind_control --zero`, the measured requests, `callgrind_control
--dump`, and the dump's total divided by the requests. Only the proxy's own
user-space instructions are counted (callgrind does not see the kernel, which
is most of a small request's cost); every thread of the process is included.

  build/venv/bin/python tests/bench/instructions.py
  build/venv/bin/python tests/bench/instructions.py --requests 50000 --loads "ping c16 d16"
  build/venv/bin/python tests/bench/instructions.py --no-haproxy --loads "insert 16MB c1" \
      --requests 20 --warmup 5 --keep /tmp/cg    # then callgrind_annotate /tmp/cg/...

Prints a table and one JSON line (`--json`); exit status 0 when every load ran
without a reply error. Needs valgrind (scripts/setup.sh --tests installs it)
and haproxy unless --no-haproxy.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run_bench import LOADS, ROOT, free_port, haproxy_config, mongoguard_config  # noqa: E402
from run_bench import start_backend, stop, wait_port  # noqa: E402

DEFAULT_LOADS = ["find-id c16", "find-id c16 d16", "ping c16 d16"]
WARMUP_REQUESTS = 500


def callgrind(cmd: list[str], out: Path, log: Path) -> subprocess.Popen:
    env = dict(os.environ, MONGOC_DISABLE_SHM="1")
    return subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd,
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=env)


def control(flag: str, pid: int) -> None:
    r = subprocess.run(["callgrind_control", flag, str(pid)], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"instructions: callgrind_control {flag} {pid} failed: "
                         f"{r.stdout}{r.stderr}")


def dump_total(prefix: Path, before: set[Path]) -> tuple[int, Path]:
    """The total of the dump callgrind_control --dump just wrote (a new file
    next to the output file, `<out>.<n>`), and that file."""
    new = sorted(set(prefix.parent.glob(prefix.name + ".*")) - before,
                 key=lambda p: p.stat().st_mtime)
    if not new:
        raise SystemExit(f"instructions: no callgrind dump appeared for {prefix}")
    for line in new[-1].read_text(errors="replace").splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1]), new[-1]
    raise SystemExit(f"instructions: no totals in {new[-1]}")


def run_load(loadgen: Path, port: int, args: list[str], requests: int) -> dict:
    cmd = [str(loadgen), "--port", str(port), "--requests", str(requests), "--quiet",
           "--timeout", "60"] + args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    try:
        res = json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise SystemExit(f"instructions: mg_loadgen gave no result: {r.stdout}{r.stderr}")
    return res


def measure(name: str, proc: subprocess.Popen, port: int, out: Path, loadgen: Path,
            loads: list[str], requests: int, warmup: int) -> dict:
    figures = {}
    for load in loads:
        args = LOADS[load]
        warm = run_load(loadgen, port, args, warmup)
        control("--zero", proc.pid)
        before = set(out.parent.glob(out.name + ".*"))
        res = run_load(loadgen, port, args, requests)
        control("--dump", proc.pid)
        total, dump = dump_total(out, before)
        figures[load] = {"instructions": total, "requests": res["ops"], "dump": dump.name,
                         "per_request": total / res["ops"] if res["ops"] else None,
                         "errors": res["errors"] + warm["errors"]}
        print(f"{name:<10} {load:<16} {figures[load]['per_request'] or 0:>9,.0f} instructions "
              f"per request", file=sys.stderr)
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description="User-space instructions per request of mongoguard "
                                 "and HAProxy, counted by callgrind.")
    ap.add_argument("--requests", type=int, default=20000,
                    help="measured requests per load (after 500 of warm-up) [20000]")
    ap.add_argument("--loads", help="comma-separated load names (run_bench.py's) "
                    f"[{','.join(DEFAULT_LOADS)}]")
    ap.add_argument("--build", default=str(ROOT / "build"),
                    help="the CMake build directory holding tests/mg_loadgen [build/]")
    ap.add_argument("--mongoguard", help="mongoguard binary [$MONGOGUARD_BIN, else "
                    "<build>/mongoguard]")
    ap.add_argument("--warmup", type=int, default=WARMUP_REQUESTS,
                    help=f"unmeasured requests per load before the count [{WARMUP_REQUESTS}]")
    ap.add_argument("--keep", metavar="DIR",
                    help="keep the callgrind dumps (one per load and proxy) in DIR, for "
                    "callgrind_annotate")
    ap.add_argument("--rules", choices=["off", "log", "block"], default="log",
                    help="mongoguard's configuration, as run_bench's mg-off, mg-log, mg-block: "
                    "off is the session's own path without analysis [log]")
    ap.add_argument("--workload-off", action="store_true",
                    help="workload.enabled: false (the live statistics off; a binary "
                    "older than them knows no such key)")
    ap.add_argument("--no-haproxy", action="store_true", help="measure mongoguard only")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    a = ap.parse_args()
    loads = [x.strip() for x in (a.loads or ",".join(DEFAULT_LOADS)).split(",") if x.strip()]
    unknown = [x for x in loads if x not in LOADS]
    if unknown:
        raise SystemExit(f"instructions: unknown load(s) {unknown}; known: {list(LOADS)}")
    build = Path(a.build)
    loadgen, backend = build / "tests" / "mg_loadgen", build / "tests" / "mg_fastbackend"
    mg_bin = a.mongoguard or os.environ.get("MONGOGUARD_BIN") or str(build / "mongoguard")
    need = ["valgrind", "callgrind_control"] + ([] if a.no_haproxy else ["haproxy"])
    missing = [t for t in need if not shutil.which(t)]
    if missing:
        raise SystemExit(f"instructions: {', '.join(missing)} not found "
                         "(scripts/setup.sh --tests installs them)")
    for b in (loadgen, backend, Path(mg_bin)):
        if not b.exists():
            raise SystemExit(f"instructions: {b} not found (build first)")

    tmp = Path(tempfile.mkdtemp(prefix="mg-instr-"))
    procs: list[subprocess.Popen] = []
    status = 0
    try:
        back, up_port = start_backend(backend, 1, tmp)
        procs.append(back)
        results = {}
        mg_port = free_port()
        cfg = tmp / "mg.yaml"
        cfg.write_text(mongoguard_config(a.rules) +
                       ("workload:\n  enabled: false\n" if a.workload_off else ""))
        mg_out = tmp / "cg-mongoguard.out"
        mg = callgrind([mg_bin, "--config", str(cfg), "--listen", f"127.0.0.1:{mg_port}",
                        "--upstream", f"mongodb://127.0.0.1:{up_port}/", "--log",
                        str(tmp / "mg.log"), "--workers", "1"], mg_out, tmp / "mg.out")
        procs.append(mg)
        wait_port(mg_port, 120, mg, "mongoguard under callgrind")
        results["mongoguard"] = measure("mongoguard", mg, mg_port, mg_out, loadgen, loads,
                                        a.requests, a.warmup)
        if not a.no_haproxy:
            hp = free_port()
            hcfg = tmp / "haproxy.cfg"
            hcfg.write_text(haproxy_config(1, hp, "127.0.0.1", up_port, 2000))
            h_out = tmp / "cg-haproxy.out"
            h = callgrind(["haproxy", "-db", "-f", str(hcfg)], h_out, tmp / "haproxy.out")
            procs.append(h)
            wait_port(hp, 120, h, "haproxy under callgrind")
            results["haproxy"] = measure("haproxy", h, hp, h_out, loadgen, loads, a.requests,
                                         a.warmup)
        print("| load | mongoguard | HAProxy | mongoguard / HAProxy |")
        print("|---|---|---|---|")
        for load in loads:
            m = results["mongoguard"][load]["per_request"]
            hv = results.get("haproxy", {}).get(load, {}).get("per_request")
            print(f"| {load} | {m:,.0f} | " + (f"{hv:,.0f} | {m / hv:.1f}" if hv else "- | -")
                  + " |")
        if any(f["errors"] for r in results.values() for f in r.values()):
            print("instructions: the load generator counted reply errors", file=sys.stderr)
            status = 1
        if a.json:
            print(json.dumps({"requests": a.requests, "results": results}))
    finally:
        for p in reversed(procs):
            stop(p)
        if a.keep:
            keep = Path(a.keep)
            keep.mkdir(parents=True, exist_ok=True)
            for dump in tmp.glob("cg-*.out.*"):
                shutil.copy(dump, keep / dump.name)
            print(f"instructions: callgrind dumps in {keep}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
