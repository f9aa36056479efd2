"""Design review, second round (issue 25, items 5-7): a real-driver workload
through mongoguard against the upstream with capture on, then the report.

- Recommendations: find({a}).sort({b}) and find({a, b}).sort({c}) give ESR
  keys {a, b} and {a, b, c}; one index {a, b, c} serves both, and the
  existing index {a} (a prefix of it) is marked redundant.
- Array evidence: a $push whose array grows across the capture (the app
  reads the document after each push, so replies are sampled) ranks above
  one that stays at the few elements the business allows, which is labelled
  as seen only small.
- Time: the findings-per-rule and busiest-shapes p95 charts are inline SVG
  with one series per rule found and per busy shape; the filter script is
  there, and without it every row is still in the page.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import bson
import pytest
from pymongo import ASCENDING

from test_capture_report import MARKER, capture_config, captures, run_report

RULES = {"unbounded-push": "log", "index-mismatched-sort": "log",
         "collection-scan": {"action": "log", "minDocuments": 50}}


def workload(c, dbname: str) -> None:
    db = c[dbname]
    db.recs.find_one({"_id": 0})  # learn the index list first (as test_all_six_rules does)
    time.sleep(0.5)
    db.carts.insert_one({"_id": 1, "events": [], "addresses": []})
    for i in range(40):
        # two sort shapes that one index serves
        list(db.recs.find({"a": MARKER}).sort("b", ASCENDING))
        list(db.recs.find({"a": MARKER, "b": MARKER}).sort("c", ASCENDING))
        # an array that grows all along; one the business bounds at 5
        db.carts.update_one({"_id": 1}, {"$push": {"events": MARKER}})
        if i < 5:
            db.carts.update_one({"_id": 1}, {"$push": {"addresses": MARKER}})
        db.carts.find_one({"_id": 1})
        time.sleep(0.03)


@pytest.fixture
def review(tmp_path, upstream, start_proxy, clients, dbname, mongoguard_bin):
    direct = clients.direct()[dbname]
    direct.recs.insert_many([{"_id": i, "a": f"a{i % 5}", "b": i % 7, "c": i} for i in range(100)])
    direct.recs.create_index([("a", ASCENDING)])
    cdir = tmp_path / "cap"
    cfg = json.loads(capture_config(cdir))
    cfg["rules"] = RULES
    p = start_proxy(upstream.uri, json.dumps(cfg, indent=1) + "\n")
    workload(clients.via(p, appname="review2"), dbname)
    time.sleep(1.5)  # the writer's index snapshots and a summary interval
    assert p.stop() == 0
    out = tmp_path / "out"
    out.mkdir()
    files = captures(cdir)
    run_report(mongoguard_bin, files, "-o", out / "r.html", "--json", out / "r.json",
               "--md", out / "r.md")
    rep = json.loads((out / "r.json").read_text())
    yield {"db": dbname, "out": out, "rep": rep, "files": files, "tmp": tmp_path}


def test_one_index_serves_both_sort_shapes_and_the_old_one_is_redundant(review):
    rep, db = review["rep"], review["db"]
    ns = f"{db}.recs"
    sorts = [f for f in rep["findings"] if f["rule"] == "index-mismatched-sort" and f["ns"] == ns]
    assert len(sorts) == 2, [f["suggestion"] for f in sorts]
    recs = [r for r in rep["recommendations"] if r["ns"] == ns and r["kind"] == "index"]
    assert len(recs) == 1, recs
    r = recs[0]
    assert r["key"] == '{"a": 1, "b": 1, "c": 1}'
    assert r["command"] == (f'db.getSiblingDB("{db}").getCollection("recs")'
                            '.createIndex({"a": 1, "b": 1, "c": 1})')
    assert sorted(r["shapes"]) == sorted(f["shapeHash"] for f in sorts)
    assert [x["name"] for x in r["redundantIndexes"]] == ["a_1"]
    assert r["redundantIndexes"][0]["dropCommand"].endswith('.dropIndex("a_1")')
    by_hash = {s["shapeHash"]: s for s in rep["shapes"]}
    assert r["totalMs"] == pytest.approx(sum(by_hash[h]["totalMs"] for h in r["shapes"]),
                                         abs=0.01)
    # ranked: collections by their shapes' time, and every fix says what to run or do
    totals = [x["collectionTotalMs"] for x in rep["recommendations"]]
    assert totals == sorted(totals, reverse=True)
    for x in rep["recommendations"]:
        assert x["shapes"]
        if x["kind"] == "index":
            assert x["command"].startswith("db.getSiblingDB(") and ".createIndex({" in x["command"]
        else:
            assert x["pattern"] and x["change"] and x["command"] is None
    html = (review["out"] / "r.html").read_text()
    assert html.index('id="recommendations"') < html.index('id="shapes"')
    assert r["command"].replace('"', "&quot;") in html or r["command"] in html
    md = (review["out"] / "r.md").read_text()
    assert "## Recommendations" in md and r["command"] in md and 'dropIndex("a_1")' in md
    for f in list(review["out"].iterdir()) + review["files"]:
        assert MARKER.encode() not in f.read_bytes(), f


def test_a_growing_array_ranks_above_one_the_business_bounds(review):
    rep, db = review["rep"], review["db"]
    pushes = [f for f in rep["findings"] if f["rule"] == "unbounded-push"
              and f["ns"] == f"{db}.carts"]
    assert len(pushes) == 2
    ev = {f["arrayEvidence"]["path"]: f["arrayEvidence"] for f in pushes}
    grow, small = ev["events"], ev["addresses"]
    assert grow["largest"] == 40 and grow["samples"] >= 40
    assert grow["secondHalfLargest"] > grow["firstHalfLargest"] >= 1
    assert grow["growth"] == grow["secondHalfLargest"] - grow["firstHalfLargest"] > 0
    assert grow["p95"] <= grow["largest"] and not grow["seenOnlySmall"]
    assert small["largest"] == 5 and small["growth"] == 0 and small["seenOnlySmall"]
    assert grow["growthRank"] == 1 and small["growthRank"] == 2
    # the bounded one is labelled, not hidden; its fix is no redesign
    design = {r["change"]: r["pattern"] for r in rep["recommendations"] if r["kind"] == "design"}
    # titled by the patterns the words offer: a cap (subset), then buckets for one that grows
    assert sorted(design.values()) == ["subset or bucket pattern", "subset pattern"]
    html = (review["out"] / "r.html").read_text()
    sec = html[html.index('id="rule-unbounded-push"'):html.index('id="rule-hot-path-lookup"')]
    assert sec.index("<code>events</code>") < sec.index("<code>addresses</code>")
    assert "seen only small (at most 5" in sec and "largest <b>40</b>" in sec
    md = (review["out"] / "r.md").read_text()
    table = md[md.index("## Arrays that grow"):]
    assert table.index("`events`") < table.index("`addresses`") and "seen only small" in table


def _dom(tmp: Path, page: Path, *flags: str) -> str:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is installed by scripts/setup.sh"
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'chr'}", *flags,
                        "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not console, console
    return r.stdout


def test_time_charts_and_filters(review):
    rep, db, tmp = review["rep"], review["db"], review["tmp"]
    tl = rep["timeline"]
    # round intervals of a second or more, at most 30, covering the capture
    assert 1 <= tl["buckets"] <= 30 and tl["bucketUs"] % 1_000_000 == 0
    assert tl["start"] <= rep["overview"]["start"]
    assert tl["start"] + tl["buckets"] * tl["bucketUs"] > rep["overview"]["end"]
    for rule, n in rep["overview"]["findingsPerRule"].items():
        assert sum(tl["findingsPerRule"][rule]) == n, rule
    by_time = [s["shapeHash"] for s in rep["shapes"] if s["replies"]][:5]
    assert [s["shapeHash"] for s in tl["busiestShapes"]] == by_time
    html = (review["out"] / "r.html").read_text()
    assert "<script src" not in html and "https://" not in html

    def svg(id_: str) -> str:
        i = html.index(f'<svg id="{id_}"')
        return html[i:html.index("</svg>", i)]
    rules_found = [r for r, n in rep["overview"]["findingsPerRule"].items() if n]
    assert svg("rules-time-chart").count('class="series"') == len(rules_found) == 2
    assert svg("p95-time-chart").count('class="series"') == len(by_time) == 5
    for r in rules_found:
        assert f'data-series="{r}"' in svg("rules-time-chart")

    # without scripts (the page with its script taken out: --dump-dom needs
    # them on): the filter form stays hidden and every row is there
    assert html.count("<script>") == 1 and "getElementById('filters')" in html
    bare = tmp / "bare.html"
    bare.write_text(re.sub(r"<script>.*?</script>", "", html, flags=re.S))
    off = _dom(tmp, bare)
    assert '<form id="filters" class="filters" hidden=""' in off
    rows = off.count("<tr data-ns=")
    assert rows == len(rep["shapes"]) and 'style="display: none' not in off
    # with them: the form shows, and choosing a namespace hides the others' rows
    ns = f"{db}.carts"
    probe = tmp / "probe.html"
    probe.write_text(html.replace("</body>", (
        "<script>var s=document.querySelector('select[data-filter=ns]');"
        f"s.value={json.dumps(ns)};s.dispatchEvent(new Event('change'));</script></body>")))
    on = _dom(tmp, probe)
    assert '<form id="filters" class="filters">' in on
    shown = re.findall(r'<tr data-ns="([^"]*)"[^>]*?(style="display: none;")?>', on)
    assert {n for n, hid in shown if not hid} == {ns}
    assert {n for n, hid in shown if hid} == {s["ns"] for s in rep["shapes"]} - {ns}
