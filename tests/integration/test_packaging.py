"""What ships besides the binary: every example config passes --check-config,
the systemd unit passes systemd-analyze and keeps its hardening, the
Dockerfile's runtime stage runs as a non-root user."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


@pytest.mark.parametrize("cfg", CONFIGS, ids=[c.name for c in CONFIGS])
def test_example_configs_pass_check_config(mongoguard_bin, cfg, tmp_path):
    # the shipped configs may name files (a token, a capture directory)
    # that exist only where they are deployed: check them as shipped
    r = subprocess.run([mongoguard_bin, "--config", str(cfg), "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"{cfg.name}: {r.stdout}{r.stderr}"
    assert "configuration OK" in r.stdout


def test_there_is_a_config_per_use():
    names = {c.name for c in CONFIGS}
    assert {"staging.yaml", "production.yaml"} <= names


def test_systemd_unit(mongoguard_bin, tmp_path):
    unit = (ROOT / "configs" / "mongoguard.service").read_text()
    for directive in ("NoNewPrivileges=yes", "ProtectSystem=strict", "User=mongoguard",
                      "ExecReload=/bin/kill -HUP $MAINPID"):
        assert directive in unit, directive
    assert shutil.which("systemd-analyze"), "systemd-analyze is installed by scripts/setup.sh"
    # verify with the paths of this checkout (the unit names /usr/local/bin)
    local = unit.replace("/usr/local/bin/mongoguard", mongoguard_bin) \
                .replace("/bin/kill", shutil.which("kill") or "/usr/bin/kill")
    path = tmp_path / "mongoguard.service"
    path.write_text(local)
    r = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True,
                       text=True, timeout=60)
    problems = [ln for ln in (r.stdout + r.stderr).splitlines()
                if ln.strip() and "mongoguard.service" in ln]
    assert r.returncode == 0 and not problems, r.stdout + r.stderr


def test_dockerfile_runtime_stage_is_small_and_non_root():
    text = (ROOT / "scripts" / "docker" / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    assert len(stages) >= 2, "multi-stage: a build stage and a runtime stage"
    runtime = stages[-1]
    users = re.findall(r"^USER (\S+)", runtime, flags=re.M)
    assert users and users[-1] not in ("root", "0")
    assert "build-essential" not in runtime and "cmake" not in runtime
    assert re.search(r"^COPY --from=build .*mongoguard", runtime, flags=re.M)


# --- docker-compose.yml: checked without a Docker engine --------------------------

def compose() -> dict:
    import yaml
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_file_is_consistent():
    c = compose()
    services = c["services"]
    assert {"mongo1", "mongo2", "mongo3", "mongoguard", "sample-app", "prometheus"} <= set(
        services)
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, name
        if "build" in svc:
            assert (ROOT / svc["build"]["context"] / svc["build"]["dockerfile"]).exists()
        for dep in svc.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown {dep}"
        for port in svc.get("ports", []):
            assert re.fullmatch(r"127\.0\.0\.1:\d+(-\d+)?:\d+(-\d+)?", port), port
        for vol in svc.get("volumes", []):
            host = vol.split(":")[0]
            assert (ROOT / host).exists(), f"{name} mounts missing {host}"
    # the replica set names all three members, and mongoguard serves each
    init = " ".join(services["mongo1"]["healthcheck"]["test"])
    assert all(f"mongo{i}:27017" in init for i in (1, 2, 3))


def test_compose_mongoguard_config(mongoguard_bin, tmp_path):
    text = (ROOT / "scripts" / "docker" / "mongoguard.yaml").read_text()
    # the compose network's names do not resolve here: loopback addresses instead
    for i in (1, 2, 3):
        text = text.replace(f"mongo{i}:27017", f"127.0.0.{i}:27017")
    cfg = tmp_path / "compose-mongoguard.yaml"
    cfg.write_text(text)
    r = subprocess.run([mongoguard_bin, "--config", str(cfg), "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    svc = compose()["services"]["mongoguard"]
    assert "/etc/mongoguard/docker/mongoguard.yaml" in svc["command"]


def test_compose_prometheus_config():
    assert shutil.which("promtool"), "promtool (Debian's prometheus) is installed by setup.sh"
    r = subprocess.run(["promtool", "check", "config",
                        str(ROOT / "scripts" / "docker" / "prometheus.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_sample_app_commits_every_anti_pattern(start_proxy, upstream, dbname):
    import json
    import os
    import sys
    import time

    cfg = {"analysis": {"indexRefreshSecs": 1, "summaryIntervalSecs": 1},
           "rules": {"hot-path-lookup": {"action": "log", "threshold": 30},
                     "collection-scan": {"action": "log", "minDocuments": 10}}}
    p = start_proxy(upstream.uri, config=json.dumps(cfg))
    env = dict(os.environ, MONGO_URI=p.uri, SAMPLE_DB=dbname)
    rules = {"case-insensitive-regex", "unbounded-push", "hot-path-lookup",
             "index-mismatched-sort", "collection-scan", "large-document"}
    # collection-scan needs the collection's count, learned with its index
    # list (refreshed every second here): the app runs until every rule has
    # fired, or 60 s
    app = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "sample_app.py"),
                            "--pause", "0.2"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    try:
        while True:
            seen = {f["attr"]["rule"] for f in p.log.findings()}
            if rules <= seen or time.monotonic() > deadline or app.poll() is not None:
                break
            time.sleep(0.2)
    finally:
        app.terminate()
        out = app.communicate(timeout=10)[0]
    assert app.returncode in (0, -15), out
    assert rules <= seen, f"missing: {rules - seen}"


def test_sd_notify_ready_reloading_stopping(mongoguard_bin, upstream, tmp_path):
    """Type=notify: systemd counts mongoguard up when it says READY=1 (after it
    listens), not when it was exec'd; a reload is RELOADING=1 then READY=1; a stop
    STOPPING=1. The datagram socket here stands in for systemd's."""
    import signal
    import socket as so
    import time

    from conftest import free_port, wait_port

    unit = (ROOT / "configs" / "mongoguard.service").read_text()
    assert "Type=notify" in unit and "NotifyAccess=main" in unit
    sock_path = tmp_path / "notify"
    s = so.socket(so.AF_UNIX, so.SOCK_DGRAM)
    s.bind(str(sock_path))
    s.settimeout(20)
    cfg = tmp_path / "m.yaml"
    cfg.write_text("rules:\n  unbounded-push: log\n")
    port = free_port()
    p = subprocess.Popen([mongoguard_bin, "--config", str(cfg), "--listen", f"127.0.0.1:{port}",
                          "--upstream", upstream.uri, "--log", str(tmp_path / "log")],
                         env=dict(os.environ, NOTIFY_SOCKET=str(sock_path)))
    try:
        first = s.recv(4096).decode()
        assert first.startswith("READY=1"), first
        # READY came after the listener was up: a connection is accepted at once
        so.create_connection(("127.0.0.1", port), timeout=1).close()
        p.send_signal(signal.SIGHUP)
        assert s.recv(4096).decode() == "RELOADING=1"
        assert s.recv(4096).decode() == "READY=1"
        p.send_signal(signal.SIGTERM)
        assert s.recv(4096).decode() == "STOPPING=1"
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        s.close()
