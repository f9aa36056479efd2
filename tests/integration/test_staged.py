"""Staged enforcement with real clients: dry-run forwards and reports what a
block would have said; a block with `sample` blocks the same shapes every
time and dry-runs the rest; metrics and findings say which mode decided."""

from __future__ import annotations

import json
import urllib.request

import pytest
from bson.regex import Regex
from pymongo.errors import OperationFailure

from conftest import free_port

SECRET = "st4ged-marker-3308"


def metric(port: int, key: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(key + " "):
                return float(line.split()[-1])
    raise AssertionError(f"no {key}")


def test_dry_run_forwards_and_says_what_block_would(start_proxy, upstream, clients, dbname):
    admin = free_port()
    cfg = {"admin": {"listen": f"127.0.0.1:{admin}"},
           "rules": {"case-insensitive-regex": "dry-run"}}
    p = start_proxy(upstream.uri, config=json.dumps(cfg))
    coll = clients.via(p)[dbname].people
    coll.insert_one({"name": "Ada"})
    assert coll.find_one({"name": Regex("^ADA", "i")})["name"] == "Ada"  # forwarded
    f = p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "case-insensitive-regex",
                       what="the dry-run finding")[0]["attr"]
    assert f["action"] == "dry-run"
    assert f["wouldBlock"].startswith("mongoguard blocked this find: rule case-insensitive-regex")
    assert "^ADA" not in json.dumps(f)
    assert metric(admin, 'mongoguard_findings_total{rule="case-insensitive-regex",'
                         'action="dry-run"}') == 1
    assert metric(admin, 'mongoguard_blocked_total{rule="case-insensitive-regex"}') == 0


def test_block_rollout_by_sample(start_proxy, upstream, clients, dbname):
    cfg = {"rules": {"case-insensitive-regex": {"action": "block", "sample": 50}}}
    p = start_proxy(upstream.uri, config=json.dumps(cfg))
    db = clients.via(p)[dbname]
    outcome = {}
    for i in range(24):  # 24 shapes (another field each)
        for _ in range(2):  # each shape twice: the same decision
            try:
                db.c.find_one({f"f{i}": Regex(SECRET, "i")})
                got = "forwarded"
            except OperationFailure as e:
                assert "case-insensitive-regex" in str(e)
                got = "blocked"
            assert outcome.setdefault(i, got) == got
    assert set(outcome.values()) == {"forwarded", "blocked"}
    findings = p.log.findings("case-insensitive-regex")
    by_action = {f["attr"]["action"] for f in findings}
    assert by_action == {"block", "dry-run"}
    dry = [f["attr"] for f in findings if f["attr"]["action"] == "dry-run"]
    assert all(a.get("decidedBy") == "sample" and a.get("wouldBlock") for a in dry)
    assert len(dry) == sum(1 for v in outcome.values() if v == "forwarded")


def test_bad_sample_is_refused(mongoguard_bin, tmp_path):
    import subprocess
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("rules:\n  unbounded-push: {action: block, sample: 0}\n")
    r = subprocess.run([mongoguard_bin, "--config", str(cfg), "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "line 2" in r.stderr and "sample must be a whole number from 1 to 100" in r.stderr
