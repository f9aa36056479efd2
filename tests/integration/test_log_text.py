"""log.format: text and `mongoguard log`: one line per event, a finding's
fix on the next; the live text and the subcommand's rendering of the JSON
log are the same text for the same event."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import time

from fakeserver import FakeServer
from ops_helpers import Mongoguard, ci_regex_find, rules_yaml, wait_until

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


def finding_lines(text: str) -> list[str]:
    """A finding's line and the indented lines under it (why, fix), the time,
    the connection and the client's port cut off (two proxies see the same
    event at different times, on different connections)."""
    lines = text.splitlines()
    out = []
    for i, ln in enumerate(lines):
        if re.search(r" ANALYZER (\[conn\d+\] )?case-insensitive-regex ", ln):
            out.append(re.sub(r"client=127\.0\.0\.1:\d+ ", "",
                              re.sub(r"\[conn\d+\] ", "", TIME.sub("", ln))))
            j = i + 1
            while j < len(lines) and lines[j].startswith("    "):
                out.append(lines[j])
                j += 1
    return out


def test_text_finding_and_the_subcommand_render_the_same(mongoguard_bin, tmp_path):
    srv = FakeServer()
    srv.start()
    cfg = rules_yaml(case_insensitive_regex="log")
    text_log, json_log = tmp_path / "text.log", tmp_path / "json.log"
    gt = Mongoguard(mongoguard_bin, "logtext-text", ["--upstream", srv.uri, "--log", str(text_log),
                                                     "--log-format", "text"], cfg)
    gj = Mongoguard(mongoguard_bin, "logtext-json", ["--upstream", srv.uri, "--log", str(json_log)],
                    cfg)
    try:
        for g in (gt, gj):
            ci_regex_find(g, "shop", "users", app="billing")
        wait_until(lambda: "case-insensitive-regex" in text_log.read_text(), what="text finding")
        wait_until(lambda: "case-insensitive-regex" in json_log.read_text(), what="JSON finding")
    finally:
        assert gt.stop() == 0 and gj.stop() == 0
        srv.stop()
    live = text_log.read_text()
    assert "\033[" not in live  # a file: no colour
    # one line per event, the time first; a finding's fix indented under it
    [line, why, fix] = finding_lines(live)
    assert re.match(r"^W ANALYZER case-insensitive-regex log shop\.users app=billing \{", line), line
    assert re.search(r" ANALYZER \[conn\d+\] case-insensitive-regex .* client=127\.0\.0\.1:\d+ \{",
                     live), live  # which connection, which client
    assert '"$regex"' in line and "bob" not in line  # the shape, redacted
    assert why.startswith("    why: ") and "case-insensitive" in why, why
    assert fix.startswith("    fix: "), fix
    accepted = [ln for ln in live.splitlines() if "Connection accepted" in ln]
    assert accepted and TIME.match(accepted[0]) and "{" not in accepted[0]
    assert re.search(r" I NETWORK  \[conn\d+\] Connection accepted remote=127\.0\.0\.1:\d+ "
                     r"connectionCount=\d+$", accepted[0]), accepted[0]
    # the JSON log stays JSON; `mongoguard log` renders it as the live text did
    assert all(ln.startswith("{") for ln in json_log.read_text().splitlines())
    r = subprocess.run([mongoguard_bin, "log", str(json_log)], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 0, r.stderr
    assert finding_lines(r.stdout) == [line, why, fix]
    # the filters
    for args, hit in ((["--rule", "case-insensitive-regex"], True), (["--rule", "unbounded-push"], False),
                      (["--ns", "shop.*"], True), (["--ns", "other.*"], False),
                      (["--app", "bill*"], True), (["--app", "nobody"], False)):
        r = subprocess.run([mongoguard_bin, "log", str(json_log), *args], capture_output=True,
                           text=True, timeout=10)
        assert r.returncode == 0
        assert (len(finding_lines(r.stdout)) == 3) == hit, (args, r.stdout)
        assert ("Connection accepted" in r.stdout) == False, args  # filtered lines only
    # stdin, and the same event through it
    r = subprocess.run([mongoguard_bin, "log", "-"], input=json_log.read_text(),
                       capture_output=True, text=True, timeout=10)
    assert finding_lines(r.stdout) == [line, why, fix]


def test_log_subcommand_usage_and_unreadable_files(mongoguard_bin, tmp_path):
    r = subprocess.run([mongoguard_bin, "log"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "no FILE" in r.stderr
    r = subprocess.run([mongoguard_bin, "log", "--bogus", "x"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2
    r = subprocess.run([mongoguard_bin, "log", str(tmp_path / "missing.log")],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1
    assert f"cannot read {tmp_path / 'missing.log'}: No such file or directory" in r.stderr
    r = subprocess.run([mongoguard_bin, "log", str(tmp_path)], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 1 and "is a directory" in r.stderr
    # a misspelt rule filtered every line out and exited 0
    r = subprocess.run([mongoguard_bin, "log", "--rule", "nope", "/dev/null"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "--rule nope: no such rule" in r.stderr
    assert "case-insensitive-regex" in r.stderr


def test_follow_reads_on_across_a_rotation(mongoguard_bin, tmp_path):
    log = tmp_path / "mg.log"
    line = ('{"t":{"$date":"2026-01-01T00:00:0%dZ"},"s":"I","c":"CONTROL","id":1,"ctx":"main",'
            '"msg":"event %d"}\n')
    log.write_text(line % (1, 1))
    p = subprocess.Popen([mongoguard_bin, "log", "--follow", str(log)], stdout=subprocess.PIPE,
                         text=True)
    try:
        got = [p.stdout.readline()]  # it has the file open now
        with open(log, "a") as f:
            f.write((line % (2, 2))[:40])  # half a line: held until it is whole
            f.flush()
            time.sleep(0.3)
            f.write((line % (2, 2))[40:])
        got.append(p.stdout.readline())
        os.rename(log, tmp_path / "mg.log.1")
        with open(tmp_path / "mg.log.1", "a") as f:
            f.write(line % (3, 3))  # written to the old file after the move: still read
        time.sleep(0.1)
        log.write_text(line % (4, 4))
        got += [p.stdout.readline() for _ in range(2)]
    finally:
        p.kill()
        p.wait()
    assert [g.split(" ", 3)[-1].strip() for g in got] == ["event 1", "event 2", "event 3",
                                                         "event 4"], got


def test_text_on_a_terminal_is_coloured(mongoguard_bin):
    srv = FakeServer()
    srv.start()
    master, slave = pty.openpty()
    from conftest import free_port, wait_port
    port = free_port()
    proc = subprocess.Popen([mongoguard_bin, "--listen", f"127.0.0.1:{port}", "--upstream",
                             srv.uri, "--log", "-", "--log-format", "text"],
                            stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    try:
        wait_port(port, 10, proc, "mongoguard")
        time.sleep(0.2)
        out = os.read(master, 65536).decode(errors="replace")
    finally:
        proc.terminate()
        proc.wait(20)
        os.close(master)
        srv.stop()
    assert "\033[" in out and "Waiting for connections" in out, out


def test_sighup_switches_the_format(mongoguard_bin, tmp_path):
    import signal
    srv = FakeServer()
    srv.start()
    log = tmp_path / "mg.log"
    g = Mongoguard(mongoguard_bin, "logtext-reload", ["--upstream", srv.uri, "--log", str(log)],
                   "log: {format: json}\n")
    try:
        g.command({"ping": 1})
        (g.base.with_suffix(".yaml")).write_text("log: {format: text}\n")
        g.signal(signal.SIGHUP)
        wait_until(lambda: "Configuration reloaded" in log.read_text(), what="reload")
        g.command({"ping": 1})
    finally:
        assert g.stop() == 0
        srv.stop()
    lines = log.read_text().splitlines()
    assert lines[0].startswith("{") and not lines[-1].startswith("{")
    assert TIME.match(lines[-1]) and lines[-1].endswith("Shutdown complete")


def test_log_connections_off_keeps_findings_and_failed_ends(mongoguard_bin, tmp_path):
    """Each mongosh call logged ten connection lines and no switch hid them:
    log.connections: false puts the ordinary ones at debug; findings and an end
    with a warning still show."""
    import json
    import socket

    srv = FakeServer()
    srv.start()
    log = tmp_path / "mg.log"
    g = Mongoguard(mongoguard_bin, "conn-lines-off", ["--upstream", srv.uri, "--log", str(log)],
                   json.dumps({**json.loads(rules_yaml(case_insensitive_regex="log")),
                               "log": {"connections": False}}))
    try:
        for _ in range(3):
            assert g.command({"ping": 1})["ok"] == 1
        ci_regex_find(g, "shop", "users", app="billing")
        with socket.create_connection(("127.0.0.1", g.port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\n\r\n")
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
            except OSError:
                pass
        wait_until(lambda: "not a MongoDB message" in log.read_text(), what="the bad end")
        wait_until(lambda: "case-insensitive-regex" in log.read_text(), what="the finding")
    finally:
        assert g.stop() == 0
        srv.stop()
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    msgs = [ln["msg"] for ln in lines]
    assert "Connection accepted" not in msgs
    ended = [ln for ln in lines if ln["msg"] == "Connection ended"]
    assert len(ended) == 1 and ended[0]["s"] == "W", ended
    assert "Query anti-pattern" in msgs
