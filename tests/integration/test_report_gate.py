"""The report's inputs, before/after diff and CI gate (issue 25), over captures
written here with the format's own fields (no server needed: the times, and so
the latencies, are the test's to choose), plus a capture directory written by
a real mongoguard.

- `report DIR` reads a capture directory; a name that is not a capture is
  refused by name with exit status 2 and no report.
- `--baseline` adds new and gone shapes and findings and p95 regressions;
  `--fail-on new|any|RULE[,RULE]` exits 1 when matched, 0 otherwise, 2 for a
  bad spec; `--sarif` is SARIF 2.1.0 (its schema's required fields checked);
  `--junit` has a testcase per shape and a failure per matched finding.
"""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import bson
import pytest

RULES = {"case-insensitive-regex": {"action": "log"}, "collection-scan": {"action": "off"}}
T0 = 1_700_000_000_000_000


def write_capture(path: Path, queries, instance="i1") -> Path:
    """queries: (filter document, latency in µs, repeat) triples."""
    recs = [{"k": "header", "format": "mongoguard-capture", "v": 2, "mongoguard": "t",
             "instance": instance, "redaction": "shapes", "startUs": T0, "rules": RULES},
            {"k": "indexes", "t": T0, "ns": "s.c", "count": 10,
             "indexes": [{"v": 2, "key": {"_id": 1}, "name": "_id_"}]}]
    rid, t = 0, T0
    for flt, lat, n in queries:
        for _ in range(n):
            rid += 1
            t += 1000
            recs.append({"k": "req", "t": t, "conn": 1, "client": "c:1", "app": "app",
                         "rid": rid, "op": "find", "db": "s", "ns": "s.c", "len": 100,
                         "mtc": False, "verdict": "forward",
                         "body": {"find": "c", "filter": flt, "$db": "s"}})
            recs.append({"k": "reply", "t": t + lat, "conn": 1, "rt": rid, "len": 50,
                         "ok": True, "n": 1, "cid": 0})
    path.write_bytes(b"".join(bson.encode(r) for r in recs))
    return path


def report(bin_, *args):
    return subprocess.run([bin_, "report", "--no-progress", *map(str, args)],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def pair(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    write_capture(old / "capture-1.bson", [({"a": 0}, 1000, 10),
                                           ({"email": bson.Regex("?", "i")}, 500, 3)])
    new = tmp_path / "new"
    new.mkdir()
    write_capture(new / "capture-1.bson", [({"a": 0}, 10000, 10), ({"b": 0}, 800, 2),
                                           ({"name": bson.Regex("?", "i")}, 500, 2)])
    return old, new


def test_directory_and_refusals(tmp_path, pair, mongoguard_bin):
    old, _ = pair
    out = tmp_path / "r.json"
    r = report(mongoguard_bin, old, "--json", out)
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    assert rep["overview"]["requests"] == 13 and rep["inputs"][0]["path"].endswith("capture-1.bson")
    assert rep["diff"] is None
    # the same as naming the file
    out2 = tmp_path / "r2.json"
    assert report(mongoguard_bin, old / "capture-1.bson", "--json", out2).returncode == 0
    assert json.loads(out2.read_text())["shapes"] == rep["shapes"]

    yaml = tmp_path / "prod.yaml"
    yaml.write_text("listen: 0.0.0.0:27017\n")
    html = tmp_path / "never.html"
    # a name that is no capture is a usage error (2); one that cannot be read
    # is an input that failed (1), as bsondump's missing file is
    for bad, why, status in [(yaml, "not a mongoguard capture", 2),
                             (tmp_path / "missing.bson", "No such", 1),
                             (tmp_path / "empty", "no capture files", 2)]:
        if bad.name == "empty":
            bad.mkdir()
        r = report(mongoguard_bin, old, bad, "-o", html)
        assert r.returncode == status, (bad, r.stderr)
        assert str(bad) in r.stderr and why in r.stderr, r.stderr
        assert not html.exists()
    r = report(mongoguard_bin, old, "--baseline", yaml, "-o", html)
    assert r.returncode == 2 and "prod.yaml" in r.stderr and not html.exists()


def test_baseline_diff(tmp_path, pair, mongoguard_bin):
    old, new = pair
    out, md, page = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "r.html"
    r = report(mongoguard_bin, new, "--baseline", old, "--json", out, "--md", md, "-o", page)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())["diff"]
    new_shapes = sorted(s["shape"] for s in d["newShapes"])  # {b} and the {name} regex
    assert len(new_shapes) == 2 and '"b"' in new_shapes[0] and "name" in new_shapes[1]
    assert len(d["goneShapes"]) == 1 and "email" in d["goneShapes"][0]["shape"]
    assert [(f["rule"], f["count"]) for f in d["newFindings"]] == [("case-insensitive-regex", 2)]
    assert [(f["rule"], f["count"]) for f in d["goneFindings"]] == [("case-insensitive-regex", 3)]
    reg = d["latencyRegressions"]
    assert len(reg) == 1 and reg[0]["beforeP95Ms"] == 1.0 and reg[0]["p95Ms"] == 10.0
    assert "## Before and after" in md.read_text()
    assert 'id="diff"' in page.read_text() and "Latency regressions: 1" in page.read_text()


@pytest.mark.parametrize("spec,baseline,status", [
    ("new", True, 1), ("new", False, 1), ("any", True, 1),
    ("collection-scan", False, 0), ("case-insensitive-regex", False, 1),
    ("collection-scan,case-insensitive-regex", True, 1), ("unbounded-push", True, 0),
    ("no-such-rule", False, 2), ("", False, 2)])
def test_fail_on(tmp_path, pair, mongoguard_bin, spec, baseline, status):
    old, new = pair
    args = [new, "--fail-on", spec, "--json", tmp_path / "r.json"]
    if baseline:
        args += ["--baseline", old]
    r = report(mongoguard_bin, *args)
    assert r.returncode == status, r.stderr


def test_fail_on_new_passes_when_nothing_is_new(tmp_path, pair, mongoguard_bin):
    old, _ = pair
    r = report(mongoguard_bin, old, "--baseline", old, "--fail-on", "new", "--json",
               tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    r = report(mongoguard_bin, old, "--baseline", old, "--fail-on", "any", "--json",
               tmp_path / "r.json")
    assert r.returncode == 1


def test_sarif_required_fields(tmp_path, pair, mongoguard_bin):
    """The SARIF 2.1.0 schema's required properties, object by object (sarifLog:
    version, runs; run: tool; tool: driver; toolComponent: name; reportingDescriptor:
    id; result: message; message: text or id; multiformatMessageString: text)."""
    old, new = pair
    f = tmp_path / "r.sarif"
    r = report(mongoguard_bin, new, "--baseline", old, "--sarif", f)
    assert r.returncode == 0, r.stderr
    log = json.loads(f.read_text())
    assert log["version"] == "2.1.0" and isinstance(log["runs"], list) and len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "mongoguard"
    ids = [rule["id"] for rule in driver["rules"]]
    assert "case-insensitive-regex" in ids and "client-side-join" in ids and len(ids) == 7
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["help"]["text"]
    res = run["results"]
    # one per finding, and with a baseline one per finding gone since ("absent")
    now = [x for x in res if x["baselineState"] != "absent"]
    assert len(now) == 1
    for x in res:
        assert x["message"]["text"] and x["ruleId"] in ids and ids[x["ruleIndex"]] == x["ruleId"]
        assert x["level"] in ("none", "note", "warning", "error")
        p = x["properties"]
        assert p["namespace"] == "s.c" and p["shape"] and p["fix"]
        assert x["locations"][0]["logicalLocations"][0]["name"] == "s.c"
        assert x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(".bson")
    assert now[0]["baselineState"] == "new"


def test_junit(tmp_path, pair, mongoguard_bin):
    old, new = pair
    f = tmp_path / "r.xml"
    r = report(mongoguard_bin, new, "--baseline", old, "--fail-on", "new", "--junit", f)
    assert r.returncode == 1, r.stderr
    root = ET.parse(f).getroot()
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 3 and suite.get("tests") == "3"
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == 1 and suite.get("failures") == "1"
    assert failed[0].find("failure").get("type") == "case-insensitive-regex"
    # no --fail-on: every shape passes
    r = report(mongoguard_bin, new, "--junit", f)
    assert r.returncode == 0 and ET.parse(f).getroot().find("testsuite").get("failures") == "0"


def test_capture_directory_from_mongoguard(tmp_path, upstream, start_proxy, clients, dbname,
                                           mongoguard_bin):
    cdir = tmp_path / "cap"
    cfg = {"capture": {"dir": str(cdir), "replySampleRate": 1}}
    p = start_proxy(upstream.uri, json.dumps(cfg) + "\n")
    clients.via(p)[dbname].c.find_one({"x": 1})
    assert p.stop() == 0
    out = tmp_path / "r.json"
    r = report(mongoguard_bin, cdir, "--json", out)
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    assert any(s["ns"] == f"{dbname}.c" for s in rep["shapes"])
