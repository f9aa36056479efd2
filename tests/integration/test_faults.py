"""Faults the proxy must survive: running out of file descriptors (accept
backs off with a log line, does not spin, and recovers), and no descriptor
leaks across many connections, including ones the upstream refuses."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import time

import pytest

from conftest import LOG_DIR, ProxyLog, free_port, wait_port


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def hello_ok(port: int, timeout: float = 5.0) -> bool:
    from pymongo import MongoClient
    with MongoClient(f"mongodb://127.0.0.1:{port}/", serverSelectionTimeoutMS=int(timeout * 1000),
                     connectTimeoutMS=int(timeout * 1000)) as c:
        return c.admin.command("ping")["ok"] == 1


def start_limited(binary: str, upstream_uri: str, nofile: int, name: str):
    port = free_port()
    log = LOG_DIR / f"{name}-{port}.log"
    LOG_DIR.mkdir(parents=True, exist_ok=True)

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}", "--upstream", upstream_uri,
                             "--log", str(log), "--workers", "1"],
                            preexec_fn=limit, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    wait_port(port, 10, proc, "mongoguard")
    return proc, port, ProxyLog(log)


def stop(proc) -> int:
    proc.terminate()
    return proc.wait(20)


def test_out_of_descriptors_backs_off_and_recovers(mongoguard_bin, upstream):
    # each client takes two descriptors (its socket and its upstream's)
    proc, port, log = start_limited(mongoguard_bin, upstream.uri, 96, "fd-exhaustion")
    held = []
    try:
        for _ in range(80):  # well past what 96 descriptors allow
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            held.append(s)
        log.wait_for(lambda ln: ln.get("msg") == "Cannot accept connections; pausing accepts",
                     timeout=10, what="the accept pause")
        line = [ln for ln in log.lines() if ln.get("msg", "").startswith("Cannot accept")][0]
        assert "Too many open files" in line["attr"]["error"]
        # no busy loop while descriptors stay exhausted
        before = cpu_seconds(proc.pid)
        time.sleep(2.0)
        assert cpu_seconds(proc.pid) - before < 0.5, "accept must not spin on EMFILE"
        assert proc.poll() is None
        # descriptors come back: the waiting clients are served and new ones work
        for s in held[:60]:
            s.close()
        del held[:60]
        assert hello_ok(port, timeout=10)
        log.wait_for(lambda ln: ln.get("msg") == "Accepting connections again", timeout=10,
                     what="the recovery line")
    finally:
        for s in held:
            s.close()
        assert stop(proc) == 0


def test_no_descriptor_leaks(mongoguard_bin, upstream, start_proxy):
    p = start_proxy(upstream.uri)
    assert hello_ok(p.port)
    time.sleep(0.3)
    base = open_fds(p.proc.pid)
    from pymongo import MongoClient
    for i in range(30):
        with MongoClient(p.uri, serverSelectionTimeoutMS=5000) as c:
            c.admin.command("ping")
        s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
        s.sendall(b"\x10\x00\x00")  # half a header, then gone
        s.close()
    # a proxy whose upstream refuses: every client connection still goes
    dead = start_proxy(f"mongodb://127.0.0.1:{free_port()}/")
    dead_base = open_fds(dead.proc.pid)
    for _ in range(20):
        with pytest.raises(Exception):
            with MongoClient(dead.uri, serverSelectionTimeoutMS=300) as c:
                c.admin.command("ping")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if open_fds(p.proc.pid) <= base and open_fds(dead.proc.pid) <= dead_base:
            break
        time.sleep(0.2)
    assert open_fds(p.proc.pid) <= base, "descriptors leaked across connections"
    assert open_fds(dead.proc.pid) <= dead_base, "descriptors leaked on refused upstreams"
