"""scripts/run.sh: stdout is the log alone from line 1, the URI is printed
once mongoguard listens, and FerretDB never outlives the script. The setup
step is skipped by pointing it at prebuilt binaries (MG_FERRETDB,
MG_MONGOGUARD), so these take seconds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, ferretdb_binary, free_port


def ferret_pids(fport: int) -> list[int]:
    """FerretDB processes listening on fport, by their command lines."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"--listen-addr=127.0.0.1:{fport}".encode() in cmd:
            pids.append(int(d.name))
    return pids


def run_env(mongoguard_bin, tmp_path, listen: str, fport: int) -> dict:
    return {**os.environ, "MG_FERRETDB": ferretdb_binary(), "MG_MONGOGUARD": mongoguard_bin,
            "MG_LISTEN": listen, "MG_FERRETDB_PORT": str(fport),
            "MG_FERRETDB_DATA": str(tmp_path / "ferretdb-data")}


@pytest.fixture(scope="module", autouse=True)
def _no_external_upstream():
    if os.environ.get("MONGOGUARD_TEST_UPSTREAM"):
        pytest.skip("run.sh starts FerretDB itself")


def test_port_taken_leaves_no_ferretdb(mongoguard_bin, tmp_path):
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    listen = f"127.0.0.1:{held.getsockname()[1]}"
    fport = free_port()
    try:
        t0 = time.monotonic()
        r = subprocess.run([str(ROOT / "scripts/run.sh")], capture_output=True, text=True,
                           timeout=60, env=run_env(mongoguard_bin, tmp_path, listen, fport))
    finally:
        held.close()
    assert r.returncode != 0, r.stderr
    assert "in use" in r.stderr and "Connect with" not in r.stderr, r.stderr
    assert time.monotonic() - t0 < 20
    assert ferret_pids(fport) == []


def test_mongoguard_failing_after_ferretdb_started_stops_it(mongoguard_bin, tmp_path):
    """mongoguard refuses its arguments once FerretDB runs: FerretDB goes too."""
    fport = free_port()
    r = subprocess.run([str(ROOT / "scripts/run.sh"), "--workers", "9999"], capture_output=True,
                       text=True, timeout=60,
                       env=run_env(mongoguard_bin, tmp_path, f"127.0.0.1:{free_port()}", fport))
    assert r.returncode == 2, r.stderr
    assert "FerretDB" in r.stderr and "before it listened" in r.stderr, r.stderr
    assert ferret_pids(fport) == []


def test_stdout_is_the_log_and_sigterm_stops_both(mongoguard_bin, tmp_path):
    port, fport = free_port(), free_port()
    p = subprocess.Popen([str(ROOT / "scripts/run.sh")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env=run_env(mongoguard_bin, tmp_path, f"127.0.0.1:{port}", fport))
    try:
        err = ""
        while "Connect with" not in err:  # printed only once mongoguard listens
            line = p.stderr.readline()
            assert line, f"run.sh ended early: {err}"
            err += line
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert ferret_pids(fport)
        p.send_signal(signal.SIGTERM)
        out, rest = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    lines = out.splitlines()
    assert lines and all(json.loads(ln)["t"] for ln in lines), out[:500]
    assert json.loads(lines[0])["msg"] == "mongoguard starting"
    assert json.loads(lines[-1])["msg"] == "Shutdown complete"
    assert ferret_pids(fport) == []


def test_help_starts_nothing(mongoguard_bin, tmp_path):
    """`run.sh --help` started FerretDB before mongoguard printed its help."""
    fport = free_port()
    r = subprocess.run([str(ROOT / "scripts/run.sh"), "--help"], capture_output=True, text=True,
                       timeout=30,
                       env=run_env(mongoguard_bin, tmp_path, f"127.0.0.1:{free_port()}", fport))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Usage: scripts/run.sh") and "--config FILE" in r.stdout
    assert ferret_pids(fport) == [] and not (tmp_path / "ferretdb-data").exists()


def test_a_foreign_server_on_the_ferretdb_port_is_refused(mongoguard_bin, tmp_path):
    """Something already answering on FerretDB's port was used silently in its place."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    fport = held.getsockname()[1]
    port = free_port()
    try:
        r = subprocess.run([str(ROOT / "scripts/run.sh")], capture_output=True, text=True,
                           timeout=60,
                           env=run_env(mongoguard_bin, tmp_path, f"127.0.0.1:{port}", fport))
    finally:
        held.close()
    assert r.returncode == 1, r.stderr
    assert f"127.0.0.1:{fport} already answers" in r.stderr, r.stderr
    assert "Connect with" not in r.stderr and not r.stdout


def test_one_sigint_to_the_group_drains_once(mongoguard_bin, tmp_path):
    """Ctrl-C in a terminal signals the whole foreground group: mongoguard took the
    terminal's SIGINT and then run.sh's SIGTERM as a second signal ("closing every
    connection now"). Its children run in sessions of their own now."""
    port, fport = free_port(), free_port()
    p = subprocess.Popen([str(ROOT / "scripts/run.sh"), "--config",
                          str(ROOT / "configs" / "staging.yaml")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True,
                         env=run_env(mongoguard_bin, tmp_path, f"127.0.0.1:{port}", fport))
    try:
        err = ""
        while "Connect with" not in err:
            line = p.stderr.readline()
            assert line, f"run.sh ended early: {err}"
            err += line
        os.killpg(p.pid, signal.SIGINT)
        out, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    msgs = [json.loads(ln)["msg"] for ln in out.splitlines()]
    assert p.returncode == 130
    assert not any(m.startswith("Second signal") for m in msgs), msgs
    assert msgs[-1] == "Shutdown complete"
    assert ferret_pids(fport) == []
