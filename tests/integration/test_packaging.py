"""What ships besides the binary: every example config passes --check-config,
the systemd unit passes systemd-analyze and keeps its hardening, the
Dockerfile's runtime stage runs as a non-root user."""

from __future__ import annotations

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
