"""A checked start: listen addresses and config paths refused at parse time
with exit 2 and a message naming the flag or key; --help names every action
and subcommand; --check-config tries the listen addresses and the upstream
and warns, exiting 0 while the configuration is valid."""

from __future__ import annotations

import socket
import subprocess

import pytest

from conftest import free_port


def run_bin(binary, *args, timeout=20):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("spec,why", [
    ("127.0.0.1:99999", "port must be a number from 1 to 65535"),
    ("127.0.0.1:0", "port must be a number from 1 to 65535"),
    ("127.0.0.1:-5", "port must be a number from 1 to 65535"),
    ("127.0.0.1:27a", "port must be a number from 1 to 65535"),
    ("127.0.0.1", "must look like HOST:PORT"),
    ("::1:27018", "must look like HOST:PORT"),
    ("[::1:27018", "must look like [::1]:27018"),
])
def test_bad_listen_flag_is_refused(mongoguard_bin, spec, why):
    r = run_bin(mongoguard_bin, "--listen", spec, "--check-config")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"--listen '{spec}'" in r.stderr and why in r.stderr, r.stderr


@pytest.mark.parametrize("key,yaml", [
    ("net.listen", 'net: {listen: "127.0.0.1:99999"}\n'),
    ("admin.listen", 'admin: {listen: "127.0.0.1:70000"}\n'),
    ("upstream.members listen",
     'upstream:\n  members: [{host: "db1:27017", listen: "127.0.0.1:123456"}]\n'),
])
def test_bad_listen_key_is_refused(mongoguard_bin, tmp_path, key, yaml):
    cfg = tmp_path / "mg.yaml"
    cfg.write_text(yaml)
    r = run_bin(mongoguard_bin, "--config", str(cfg), "--check-config")
    assert r.returncode == 2, r.stdout + r.stderr
    assert key in r.stderr and "port must be a number from 1 to 65535" in r.stderr, r.stderr
    assert "line " in r.stderr  # where in the file


def test_config_path_that_is_a_directory(mongoguard_bin, tmp_path):
    r = run_bin(mongoguard_bin, "--config", str(tmp_path))
    assert r.returncode == 2
    assert "is a directory" in r.stderr and "input error" not in r.stderr, r.stderr


def test_help_names_every_action_and_subcommand(mongoguard_bin):
    h = run_bin(mongoguard_bin, "--help")
    assert h.returncode == 0
    for word in ("off", "log", "dry-run", "block", "mongoguard report", "mongoguard log",
                 "--check-config", "--log-format", "SIGUSR1"):
        assert word in h.stdout, word


def test_check_config_with_a_dead_upstream_warns_and_exits_0(mongoguard_bin):
    dead = free_port()
    port = free_port()
    r = run_bin(mongoguard_bin, "--check-config", "--listen", f"127.0.0.1:{port}",
                "--upstream", f"mongodb://127.0.0.1:{dead}/")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"listen 127.0.0.1:{port}: can bind" in r.stdout
    assert f"warning: upstream 127.0.0.1:{dead}: no answer" in r.stdout, r.stdout


def test_check_config_with_a_live_upstream_and_a_taken_port(mongoguard_bin, upstream):
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    port = held.getsockname()[1]
    try:
        r = run_bin(mongoguard_bin, "--check-config", "--listen", f"127.0.0.1:{port}",
                    "--upstream", upstream.uri)
    finally:
        held.close()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "configuration OK" in r.stdout
    assert f"warning: listen 127.0.0.1:{port}: cannot bind: Address already in use" in r.stdout
    assert ": answers ping" in r.stdout and "warning: upstream" not in r.stdout, r.stdout
