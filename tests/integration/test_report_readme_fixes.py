"""The report as a new user following the README meets it (issue 34): two
captures of the same application through mongoguard against the upstream, the
second with a mongosh session in it, then `mongoguard report`.

- Driver and shell housekeeping (hello, buildInfo, atlasVersion, mongosh's read
  of admin.atlascli, ...) is counted apart: no query shape, no schema block, no
  new shape in a diff.
- A find on a collection under collection-scan's minDocuments that returned
  many documents is listed under "scans below minDocuments"; --rule judges it
  with another minDocuments, and the report says so.
- SARIF that GitHub code scanning ingests (the SARIF multitool's GitHub and
  SARIF rules), with baselineState for a --baseline.
- An input that cannot be read exits 1, a name that is no capture 2.
- The words: one meaning of "finding", singulars, round time intervals, sizes
  for people, a legend of the shapes' placeholders.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from bson.regex import Regex

from test_capture_report import capture_config, captures, run_report

HOUSEKEEPING = {"hello", "isMaster", "ismaster", "buildInfo", "buildinfo", "getParameter",
                "atlasVersion", "ping", "endSessions", "saslStart", "saslContinue",
                "authenticate", "getLog", "hostInfo", "connectionStatus", "getCmdLineOpts",
                "whatsmyuri", "logout", "listDatabases"}
RULES = {"case-insensitive-regex": "log", "collection-scan": {"action": "log",
                                                             "minDocuments": 10000}}


def app(c, dbname: str, old: bool) -> None:
    db = c[dbname]
    for _ in range(6):  # 300 documents of 2 KB a read
        list(db.small.find({"status": "open"}))
    db.small.find_one({"_id": 1})
    if old:  # a finding the second capture no longer has
        db.small.find_one({"status": Regex("^OPEN", "i")})


def capture(tmp_path: Path, name: str, upstream, start_proxy, clients, dbname,
            shell=None) -> list[Path]:
    """One capture: the application, and in the second a mongosh session."""
    cdir = tmp_path / name
    cfg = json.loads(capture_config(cdir))
    cfg["rules"] = RULES
    p = start_proxy(upstream.uri, json.dumps(cfg, indent=1) + "\n")
    app(clients.via(p, appname="shop-web"), dbname, old=shell is None)
    if shell:
        shell(p.uri)
    time.sleep(1.5)  # the writer's index snapshots
    assert p.stop() == 0
    return captures(cdir)


@pytest.fixture
def pair(tmp_path, upstream, start_proxy, clients, dbname, mongoguard_bin, node_modules):
    clients.direct()[dbname].small.insert_many(
        [{"_id": i, "status": "open", "pad": "x" * 2000} for i in range(300)])

    def mongosh(uri: str) -> None:
        # as the README's walkthrough runs it: a session's start, one query
        r = subprocess.run([str(node_modules / ".bin" / "mongosh"), "--norc", uri, "--eval",
                            f"db.getSiblingDB('{dbname}').small.countDocuments({{}})"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]

    before = capture(tmp_path, "before", upstream, start_proxy, clients, dbname)
    after = capture(tmp_path, "after", upstream, start_proxy, clients, dbname, mongosh)
    out = tmp_path / "out"
    out.mkdir()
    return {"db": dbname, "before": before, "after": after, "out": out, "bin": mongoguard_bin,
            "node": node_modules}


def report(pair, *args, files=None, check=True):
    return run_report(pair["bin"], files or pair["after"], *args, check=check)


def test_housekeeping_is_counted_apart(pair):
    out = pair["out"]
    r = report(pair, "--baseline", *map(str, pair["before"]), "--json", out / "r.json",
               "--md", out / "r.md", "-o", out / "r.html")
    rep = json.loads((out / "r.json").read_text())
    hk = rep["overview"]["housekeeping"]
    assert hk["requests"] == sum(hk["commands"].values()) > 0
    # mongosh's start: the handshake, server facts, and its read of admin.atlascli
    assert {"hello", "buildInfo", "admin.atlascli"} <= set(hk["commands"]), hk
    assert not set(hk["commands"]) - HOUSEKEEPING - {"admin.atlascli"}, hk
    for s in rep["shapes"]:
        assert s["command"] not in HOUSEKEEPING and not s["ns"].startswith("admin."), s
    assert not [c for c in rep["collections"] if c["ns"].startswith("admin.")]
    # the diff: mongosh's housekeeping is no new shape (its countDocuments is)
    new = rep["diff"]["newShapes"]
    assert [s["command"] for s in new] == ["aggregate"], new
    md = (out / "r.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("- Driver and shell housekeeping: "))
    assert re.match(r"- Driver and shell housekeeping: \d+ requests \(hello \d+, ", line), line
    html = (out / "r.html").read_text()
    assert 'id="housekeeping"' in html and "mostly fails" not in html
    assert f"{hk['requests']} driver and shell housekeeping" in r.stderr


def test_scans_below_min_documents_and_rule_parameters(pair):
    out, db = pair["out"], pair["db"]
    report(pair, "--json", out / "r.json", "--md", out / "r.md", "-o", out / "r.html")
    rep = json.loads((out / "r.json").read_text())
    assert not [f for f in rep["findings"] if f["rule"] == "collection-scan"]
    quiet = [q for q in rep["quietFindings"] if q["ns"] == f"{db}.small"]
    assert len(quiet) == 1, rep["quietFindings"]
    q = quiet[0]
    assert q["rule"] == "collection-scan" and q["parameter"] == "minDocuments"
    assert q["judgedWith"] == 10000 and q["estimatedDocuments"] == 300
    # the first batches (101 documents each; getMore has its own row) hold over 1 MiB
    assert q["command"] == "find" and q["count"] == 6 and q["docsReturned"] == 606
    assert q["bytesReturned"] >= 1 << 20
    assert rep["overview"]["judgedWith"] == []
    md = (out / "r.md").read_text()
    assert "## Scans below minDocuments (10000)" in md and "Judged with" not in md
    assert "<h3>Scans below minDocuments (10000)</h3>" in (out / "r.html").read_text()

    # judged again with minDocuments 100: a finding, and the header says so
    report(pair, "--rule", "collection-scan.minDocuments=100", "--json", out / "r2.json",
           "--md", out / "r2.md", "-o", out / "r2.html")
    rep = json.loads((out / "r2.json").read_text())
    scans = [f for f in rep["findings"] if f["rule"] == "collection-scan"]
    # the listed find, and mongosh's countDocuments({}), which reads every
    # document as well (an aggregate of an empty $match and a $group)
    assert q["shapeHash"] in [f["shapeHash"] for f in scans]
    assert sorted(f["command"] for f in scans) == ["aggregate", "find"], scans
    assert rep["overview"]["judgedWith"] == [{"rule": "collection-scan",
                                             "parameter": "minDocuments", "value": 100,
                                             "capture": 10000}]
    assert not [x for x in rep["quietFindings"] if x["ns"] == f"{db}.small"]
    assert ("- Judged with (--rule): collection-scan.minDocuments=100 (the capture's: 10000)"
            in (out / "r2.md").read_text())
    assert 'id="judged-with"' in (out / "r2.html").read_text()
    # a rule turned off
    report(pair, "--rule", "case-insensitive-regex=off", "--json", out / "r3.json")
    assert json.loads((out / "r3.json").read_text())["overview"]["judgedWith"][0]["value"] == "off"


@pytest.mark.parametrize("spec,says", [
    ("collection-scan.minDocuments=-5", "from 0 to 4000000000"),
    ("collection-scan.minDocs=5", "parameters: minDocuments"),
    ("no-such-rule.x=1", "rules: case-insensitive-regex, unbounded-push"),
    ("unbounded-push=block", "must be off or log"),
    ("collection-scan", "expected RULE.PARAMETER=VALUE"),
])
def test_bad_rule_argument_exits_2(tmp_path, mongoguard_bin, spec, says):
    f = tmp_path / "capture-none.bson"  # never read: the flags are checked first
    r = run_report(mongoguard_bin, [f], "--rule", spec, "--json", tmp_path / "r.json",
                   check=False)
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert not (tmp_path / "r.json").exists()


def test_unreadable_input_exits_1(pair, tmp_path):
    missing = tmp_path / "no-such-capture.bson"
    r = report(pair, "--json", tmp_path / "r.json", files=[missing], check=False)
    assert r.returncode == 1 and str(missing) in r.stderr and "No such file" in r.stderr
    assert not (tmp_path / "r.json").exists()
    config = tmp_path / "prod.yaml"
    config.write_text("net: {}\n")
    r = report(pair, "--json", tmp_path / "r.json", files=[config], check=False)
    assert r.returncode == 2 and "not a mongoguard capture" in r.stderr


def sarif_check(pair, sarif: Path) -> None:
    """No error and no GitHub (GH*) result from the SARIF multitool."""
    log = sarif.with_suffix(".validation.sarif")
    log.unlink(missing_ok=True)
    # its bin.js runs the tool through a shell: the ';' of the kinds is quoted
    v = subprocess.run(["npx", "--no-install", "sarif-multitool", "validate", "--rule-kind",
                        '"Gh;Sarif"', "--output", str(log), str(sarif)],
                       cwd=pair["node"].parent, capture_output=True, text=True, timeout=300)
    assert log.exists(), v.stdout[-2000:] + v.stderr[-2000:]
    found = json.loads(log.read_text())["runs"][0]["results"]
    bad = [(f["ruleId"], f.get("level"), f["message"]) for f in found
           if f.get("level", "warning") == "error" or f["ruleId"].startswith("GH")]
    assert not bad, bad


def test_sarif_github_ingests(pair):
    out = pair["out"]
    sarif = out / "r.sarif"
    scan = ("--rule", "collection-scan.minDocuments=100")
    report(pair, "--baseline", *map(str, pair["before"]), "--sarif", sarif, *scan)
    doc = json.loads(sarif.read_text())
    run = doc["runs"][0]
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["fullDescription"]["text"] and rule["help"]["text"]
        assert rule["help"]["markdown"].startswith(f"**mongoguard rule `{rule['id']}`**")
    results = run["results"]
    states = set()
    for res in results:
        uri = res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert uri.startswith("file:///") and uri.endswith(".bson"), uri
        assert "new" not in res["properties"]
        states.add((res["ruleId"], res["baselineState"]))
    # the scan is in both captures; the regex query (which scans too) only in the
    # baseline; mongosh's countDocuments({}) (which reads every document) only here
    assert states == {("collection-scan", "unchanged"), ("collection-scan", "absent"),
                      ("collection-scan", "new"), ("case-insensitive-regex", "absent")}, states
    absent = next(r for r in results if r["baselineState"] == "absent")
    assert "/before/" in absent["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    sarif_check(pair, sarif)
    # the other way round: the regex is new
    report(pair, "--baseline", *map(str, pair["after"]), "--sarif", sarif, *scan,
           files=pair["before"])
    base = json.loads(sarif.read_text())["runs"][0]["results"]
    assert {(r["ruleId"], r["baselineState"]) for r in base} == {
        ("collection-scan", "unchanged"), ("collection-scan", "new"),
        ("collection-scan", "absent"), ("case-insensitive-regex", "new")}
    sarif_check(pair, sarif)


def test_sarif_check_sees_what_github_refuses(pair):
    """The check is no formality: GitHub refuses a result with no location."""
    out = pair["out"]
    sarif = out / "r.sarif"
    report(pair, "--sarif", sarif, files=pair["before"])
    doc = json.loads(sarif.read_text())
    assert doc["runs"][0]["results"]
    for r in doc["runs"][0]["results"]:
        del r["locations"]
    sarif.write_text(json.dumps(doc))
    with pytest.raises(AssertionError, match="GH1.*MissingLocationsArray"):
        sarif_check(pair, sarif)


def test_the_words(pair):
    out = pair["out"]
    r = report(pair, "--json", out / "r.json", "--md", out / "r.md", "-o", out / "r.html")
    md, html = (out / "r.md").read_text(), (out / "r.html").read_text()
    for wrong in (r"\b1 findings", r"\b1 times", r"\b1 apps", r"\b1 occurrences",
                  r"\b1 query shapes", r"\b1 collections"):
        assert not re.search(wrong, md + html), wrong
    # one meaning: a finding is a rule on a shape, its occurrences the requests
    rep = json.loads((out / "r.json").read_text())
    assert rep["overview"]["findings"] == len(rep["findings"])
    assert rep["overview"]["occurrences"] == sum(rep["overview"]["findingsPerRule"].values())
    assert f"{len(rep['findings'])} finding" in r.stderr
    assert "| rule | findings | occurrences | fix |" in md
    # round intervals of at least a second
    tl = rep["timeline"]
    assert tl["bucketUs"] % 1_000_000 == 0 and tl["bucketUs"] >= 1_000_000
    assert tl["start"] % tl["bucketUs"] == 0
    assert re.search(r"intervals? of \d+ (s|min|h|d)\)", html)
    # sizes for people; the placeholders explained wherever shapes are
    assert re.search(r">\d+\.\d (KiB|MiB)</td>", html)
    assert html.count('class="muted legend"') >= 2 and "?regex/FLAGS" in html
    assert md.count("Shapes: a literal value is replaced") >= 1
