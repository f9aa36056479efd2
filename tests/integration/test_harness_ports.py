"""The suite's own harness: a port found free and lost before mongoguard binds it (another
suite on the machine took it; a fresh-clone run failed so) starts mongoguard again on another
port, for the proxy fixture and the ops tests' Mongoguard alike."""

from __future__ import annotations

import socket

import conftest
import ops_helpers
import procs


def lost_then_free(monkeypatch):
    """free_port() answers a port another socket holds (bound, as a client's connection
    holds its port from the same range, not listening), then real free ones."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    answers = [taken.getsockname()[1]]
    real = procs.free_port

    def fake() -> int:
        return answers.pop(0) if answers else real()

    monkeypatch.setattr(procs, "free_port", fake)
    for module in (conftest, ops_helpers):  # where a copy of the name may be bound
        monkeypatch.setattr(module, "free_port", fake, raising=False)
    return taken


def test_proxy_starts_again_on_another_port(monkeypatch, start_proxy, upstream):
    taken = lost_then_free(monkeypatch)
    try:
        p = start_proxy(upstream.uri)
        assert p.port != taken.getsockname()[1]
        assert p.client().admin.command("ping")["ok"] == 1
        # only the attempt that listens is in the log
        assert sum("mongoguard starting" in l for l in p.log.raw_lines()) == 1
    finally:
        taken.close()


def test_ops_mongoguard_starts_again_on_another_port(monkeypatch, mongoguard_bin, upstream):
    taken = lost_then_free(monkeypatch)
    g = ops_helpers.Mongoguard(mongoguard_bin, "harness-ports", ["--upstream", upstream.uri])
    try:
        assert g.port != taken.getsockname()[1]
        assert g.command({"ping": 1})["ok"] == 1
    finally:
        assert g.stop() == 0
        taken.close()
