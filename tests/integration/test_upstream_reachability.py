"""One log line at start-up and at each change: "Upstream reachable" /
"Upstream unreachable: <reason>"; /readyz follows the same probe."""

from __future__ import annotations

import json

from conftest import free_port
from fakeserver import FakeServer
from ops_helpers import Mongoguard, http_get, wait_until


def upstream_lines(path):
    out = []
    for ln in path.read_text().splitlines():
        d = json.loads(ln)
        if d["msg"].startswith("Upstream reachable") or d["msg"].startswith("Upstream unreachable:"):
            out.append(d)
    return out


def test_dead_then_live_then_dead_upstream(mongoguard_bin, tmp_path):
    up_port, admin = free_port(), free_port()
    log = tmp_path / "mg.log"
    g = Mongoguard(mongoguard_bin, "upstream-watch",
                   ["--upstream", f"mongodb://127.0.0.1:{up_port}/", "--log", str(log)],
                   f'admin: {{listen: "127.0.0.1:{admin}"}}\n')
    srv, running = FakeServer(), False
    try:
        wait_until(lambda: upstream_lines(log), what="the first upstream line")
        [first] = upstream_lines(log)
        assert first["msg"] == "Upstream unreachable: Connection refused", first
        assert first["s"] == "W" and first["c"] == "NETWORK"
        assert first["attr"] == {"upstream": f"127.0.0.1:{up_port}", "reason": "Connection refused"}
        status, body = http_get(admin, "/readyz")
        assert status == 503 and "Connection refused" in body
        srv.start(up_port)  # the database comes up after the proxy
        running = True
        wait_until(lambda: len(upstream_lines(log)) >= 2, timeout=5, what="Upstream reachable")
        second = upstream_lines(log)[1]
        assert second["msg"] == "Upstream reachable" and second["s"] == "I"
        assert http_get(admin, "/readyz") == (200, "ready\n")
        assert g.command({"ping": 1})["ok"] == 1
        srv.stop()
        running = False
        # /readyz probes now, and the change is logged at once, not at the next tick
        status, _ = http_get(admin, "/readyz")
        assert status == 503
        lines = upstream_lines(log)
        assert [ln["msg"] for ln in lines] == ["Upstream unreachable: Connection refused",
                                               "Upstream reachable",
                                               "Upstream unreachable: Connection refused"]
        http_get(admin, "/readyz")  # no change: no new line
        assert len(upstream_lines(log)) == 3
    finally:
        assert g.stop() == 0
        if running:
            srv.stop()


def test_live_upstream_at_start(mongoguard_bin, tmp_path):
    srv = FakeServer()
    srv.start()
    log = tmp_path / "mg.log"
    g = Mongoguard(mongoguard_bin, "upstream-live", ["--upstream", srv.uri, "--log", str(log)])
    try:
        wait_until(lambda: upstream_lines(log), what="the first upstream line")
        assert [ln["msg"] for ln in upstream_lines(log)] == ["Upstream reachable"]
    finally:
        assert g.stop() == 0
        srv.stop()


def test_an_outage_is_one_warning_not_one_per_client(mongoguard_bin, tmp_path):
    """During an outage every client's connect fails: each logged its own
    'Upstream unreachable' warning. One outage: one such warning (the others at
    debug, still counted), beside the watch's own line."""
    up_port = free_port()
    log = tmp_path / "mg.log"
    g = Mongoguard(mongoguard_bin, "outage-once",
                   ["--upstream", f"mongodb://127.0.0.1:{up_port}/", "--log", str(log)])
    try:
        for _ in range(8):  # eight clients, each answered HostUnreachable
            reply = g.command({"ping": 1})
            assert reply["ok"] == 0 and "could not connect to upstream" in reply["errmsg"]
        wait_until(lambda: sum(1 for ln in log.read_text().splitlines()
                               if '"Connection ended"' in ln) >= 8, what="eight ends")
    finally:
        assert g.stop() == 0
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    per_client = [ln for ln in lines if ln["msg"] == "Upstream unreachable"]
    assert [ln["s"] for ln in per_client] == ["W"], per_client
