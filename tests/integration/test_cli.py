"""The command line, the configuration file, the log's shape and shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time

import pytest

import mgwire as w
from conftest import LOG_DIR, free_port, wait_port
from fakeserver import FakeServer


def run_bin(binary, *args, timeout=10):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)


def test_version_and_help(mongoguard_bin):
    v = run_bin(mongoguard_bin, "--version")
    assert v.returncode == 0 and "mongoguard" in (v.stdout + v.stderr)
    h = run_bin(mongoguard_bin, "--help")
    assert h.returncode == 0
    text = h.stdout + h.stderr
    for flag in ("--listen", "--upstream", "--log", "--config"):
        assert flag in text


def test_bad_command_line_and_config(mongoguard_bin, tmp_path):
    r = run_bin(mongoguard_bin, "--no-such-flag")
    assert r.returncode == 2
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("rules:\n  case-insensitive-regex: log\n  not-a-rule: block\n")
    r = run_bin(mongoguard_bin, "--config", str(cfg), "--listen", f"127.0.0.1:{free_port()}")
    assert r.returncode == 2
    assert "not-a-rule" in r.stderr + r.stdout
    cfg.write_text("rules:\n  unbounded-push: maybe\n")
    r = run_bin(mongoguard_bin, "--config", str(cfg), "--listen", f"127.0.0.1:{free_port()}")
    assert r.returncode == 2


def test_log_to_stdout(upstream, start_proxy):
    p = start_proxy(upstream.uri, log_to_file=False)
    with p.client() as c:
        c.admin.command("ping")
    assert p.stop() == 0
    lines = [json.loads(ln) for ln in p.out_path.read_text().splitlines() if ln.startswith("{")]
    assert any(ln.get("msg") == "Connection accepted" or ln.get("c") == "NETWORK" for ln in lines)
    assert all({"t", "s", "c", "id", "ctx", "msg"} <= set(ln) for ln in lines)


def test_config_file_supplies_everything(mongoguard_bin, upstream):
    port = free_port()
    log = LOG_DIR / "config_only.log"
    if log.exists():
        log.unlink()
    cfg = LOG_DIR / "config_only.yaml"
    cfg.write_text(f'net: {{listen: "127.0.0.1:{port}"}}\nupstream: {{uri: "{upstream.uri}"}}\n'
                   f'log: {{path: "{log}"}}\nrules:\n  case-insensitive-regex: log\n')
    proc = subprocess.Popen([mongoguard_bin, "--config", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_port(port, 10, proc, "mongoguard")
        s = w.connect(port)
        assert w.command(s, {"ping": 1}).body["ok"] == 1
        s.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    assert log.exists() and log.read_text().strip()


def _startup_line(mongoguard_bin, upstream, cpus=None):
    """The "Waiting for connections" line of a mongoguard started with no
    --workers, on the CPUs given (None: this process's)."""
    port = free_port()
    log = LOG_DIR / f"cpus_{port}.log"
    def pin():
        if cpus is not None:
            os.sched_setaffinity(0, cpus)
    proc = subprocess.Popen([mongoguard_bin, "--listen", f"127.0.0.1:{port}", "--upstream",
                             upstream.uri, "--log", str(log)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=pin)
    try:
        wait_port(port, 10, proc, "mongoguard")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    lines = [json.loads(ln) for ln in log.read_text().splitlines() if ln.startswith("{")]
    return next(ln["attr"] for ln in lines if ln["msg"] == "Waiting for connections")


def test_default_workers_follow_the_cpus_it_may_use(mongoguard_bin, upstream):
    """workers: 0 starts one worker per CPU of the process's affinity mask
    (taskset, a cpuset), capped by a cgroup's CPU quota, not one per core
    of the machine (proxy/runtime/cpus.h)."""
    mine = os.sched_getaffinity(0)
    a = _startup_line(mongoguard_bin, upstream)
    assert a["cpuAffinity"] == len(mine)
    assert a["workers"] == a["cpusUsable"]
    assert a["cpusUsable"] == (min(len(mine), a["cpuQuota"]) if a["cpuQuota"] else len(mine))
    one = _startup_line(mongoguard_bin, upstream, {min(mine)})
    assert (one["cpuAffinity"], one["cpusUsable"], one["workers"]) == (1, 1, 1)


def test_sigterm_lets_in_flight_request_finish(start_proxy):
    """SIGTERM while a request waits on the server: the client still gets its
    reply, then mongoguard exits 0."""
    srv = FakeServer()
    srv.start()
    try:
        async def slow(conn, msg):
            await asyncio.sleep(1.5)
            await conn.reply(msg, {"cursor": {"id": 0, "ns": "test.c", "firstBatch": [{"_id": 42}]},
                                   "ok": 1.0})

        srv.handlers["find"] = slow
        p = start_proxy(srv.uri)
        s = w.connect(p.port)
        idle = w.connect(p.port)
        try:
            rid = w.next_request_id()
            s.sendall(w.op_msg({"find": "c", "$db": "test"}, request_id=rid))
            time.sleep(0.3)
            t0 = time.monotonic()
            p.proc.send_signal(signal.SIGTERM)
            r = w.recv_message(s, 10)
            assert r.response_to == rid and r.body["cursor"]["firstBatch"] == [{"_id": 42}]
            assert p.proc.wait(15) == 0
            assert time.monotonic() - t0 < 12
            # No new connections after shutdown.
            with pytest.raises(OSError):
                w.connect(p.port, timeout=2).close()
        finally:
            s.close()
            idle.close()
    finally:
        srv.stop()


def test_sigterm_with_streaming_hello_open(start_proxy):
    """An awaitable hello held by the server does not hold up shutdown."""
    srv = FakeServer(topology_version=True)
    srv.start()
    try:
        async def hold(conn, msg):
            if msg.body and "maxAwaitTimeMS" in msg.body:
                await asyncio.sleep(30)
                return None
            return False

        srv.handlers["hello"] = hold
        p = start_proxy(srv.uri)
        s = w.connect(p.port)
        try:
            first = w.command(s, {"hello": 1})
            s.sendall(w.op_msg({"hello": 1, "$db": "admin",
                                "topologyVersion": first.body["topologyVersion"],
                                "maxAwaitTimeMS": 30000}, flags=w.EXHAUST_ALLOWED))
            time.sleep(0.3)
            t0 = time.monotonic()
            p.proc.send_signal(signal.SIGTERM)
            assert p.proc.wait(15) == 0
            assert time.monotonic() - t0 < 12
        finally:
            s.close()
    finally:
        srv.stop()


def test_sigint_exits_zero(upstream, start_proxy):
    p = start_proxy(upstream.uri)
    with p.client() as c:
        c.admin.command("ping")
    p.proc.send_signal(signal.SIGINT)
    assert p.proc.wait(15) == 0
