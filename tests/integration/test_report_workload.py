"""The report's workload and relationships (issue 35), end to end: a pymongo
workload with client-side joins (N+1 by _id, a populate-style $in batch), a
look-alike that is no join (a list, then one lookup), writes and $addToSet,
driven through two mongoguard instances with capture on (a fleet of two),
then `mongoguard report` over both capture directories: the JSON keys
`workload` and `relationships` hold the counts that were sent, and the HTML
renders in headless Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import bson
import pytest
from pymongo import ASCENDING

ROUNDS = 8  # per instance


def capture_config(cdir: Path) -> str:
    return json.dumps({"capture": {"dir": str(cdir), "replySampleRate": 1}}) + "\n"


def seed(c, dbname: str) -> None:
    db = c[dbname]
    db.customers.insert_many([{"_id": i, "name": f"c{i}", "email": f"c{i}@x.org", "tags": []}
                              for i in range(20)])
    db.orders.create_index([("status", ASCENDING)])
    db.orders.insert_many([{"_id": i, "status": "open", "created": i, "customer": i % 20}
                           for i in range(60)])


def one_round(c, dbname: str, i: int) -> None:
    db = c[dbname]
    # N+1: five orders, then each one's customer by _id
    orders = list(db.orders.find({"status": "open"}).limit(5))
    for o in orders:
        db.customers.find_one({"_id": o["customer"]})
    time.sleep(0.3)  # past the window: the next read starts afresh
    # populate: eight orders, then one $in of their customers, one field
    orders = list(db.orders.find({"created": {"$gte": 0}}).sort("created", 1).limit(8))
    list(db.customers.find({"_id": {"$in": sorted({o["customer"] for o in orders})}},
                           {"name": 1}))
    time.sleep(0.3)
    # a look-alike: a list, then one lookup (a session's user)
    list(db.orders.find({"customer": {"$exists": True}}).limit(6))
    db.customers.find_one({"_id": i % 20})
    time.sleep(0.3)
    # writes: the customer changes, its tags grow
    db.customers.update_one({"_id": i % 20}, {"$set": {"name": f"n{i}"}})
    db.customers.update_one({"_id": 0}, {"$addToSet": {"tags": f"t{i}"}})
    db.customers.find_one({"_id": 0})


@pytest.fixture
def fleet(tmp_path, upstream, start_proxy, clients, dbname):
    dirs = [tmp_path / "cap-a", tmp_path / "cap-b"]
    proxies = [start_proxy(upstream.uri, capture_config(d)) for d in dirs]
    cs = [clients.via(p, appname="shop-web") for p in proxies]
    seed(cs[0], dbname)
    for i in range(ROUNDS):
        for c in cs:  # both instances over the same time
            one_round(c, dbname, i)
    time.sleep(1.2)
    for p in proxies:
        assert p.stop() == 0
    return dirs


def expected_pairs(dirs: list[Path], parent_field: str, children: int,
                   least: int) -> tuple[int, int]:
    """The rounds as the capture timed them: (pairs, child reads). A round is a
    parent find on parent_field, then its children reads; its chain ends at the
    first gap over the 100 ms window (a client descheduled on a loaded machine),
    and it is a pair when at least `least` reads came before."""
    pairs = reads = 0
    for d in dirs:
        recs = [r for f in sorted(d.glob("*.bson")) for r in bson.decode_file_iter(f.open("rb"))
                if r["k"] in ("req", "reply")]
        by_conn: dict = {}
        for r in recs:
            by_conn.setdefault(r["conn"], []).append(r)
        for seq in by_conn.values():
            for i, r in enumerate(seq):
                if r["k"] != "req" or r.get("op") != "find" or parent_field not in r[
                        "body"].get("filter", {}):
                    continue
                last, n = seq[i + 1]["t"], 0  # the parent's reply
                for k in range(i + 2, min(i + 2 + 2 * children, len(seq)), 2):
                    if seq[k]["t"] - last > 100_000:
                        break
                    n, last = n + 1, seq[k + 1]["t"]
                if n >= least:
                    pairs, reads = pairs + 1, reads + n
    return pairs, reads


def report(bin_: str, *args) -> subprocess.CompletedProcess:
    r = subprocess.run([bin_, "report", *map(str, args), "--no-progress"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def test_workload_and_relationships_of_a_fleet(fleet, tmp_path, mongoguard_bin, dbname):
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    report(mongoguard_bin, *fleet, "--json", out, "--md", md, "-o", tmp_path / "r.html")
    j = json.loads(out.read_text())
    w = j["workload"]
    assert w["instances"] == 2
    # both instances ran over the same rounds: covered time is about one
    # instance's run, not the sum of the two
    assert 5 < w["coveredSeconds"] < 60, w["coveredSeconds"]
    cols = {c["ns"]: c for c in w["collections"]}
    cust, orders = cols[f"{dbname}.customers"], cols[f"{dbname}.orders"]
    # per instance per round: 5 + 1 + 1 + 1 customer reads, 2 writes
    assert cust["reads"] == 2 * ROUNDS * 8, cust
    assert cust["writes"] == 2 * ROUNDS * 2 + 1, cust  # + the seeding insert_many
    assert abs(cust["writesPerSecond"] - cust["writes"] / w["coveredSeconds"]) < 0.01
    assert orders["reads"] == 2 * ROUNDS * 3, orders
    tags = [a for a in cust["arrays"] if a["path"] == "tags"]
    assert tags and tags[0]["operators"] == "$addToSet" and tags[0]["writes"] == 2 * ROUNDS
    assert tags[0]["samples"] > 0 and tags[0]["growth"] > 0, tags

    rels = j["relationships"]
    assert rels["params"]["windowMs"] == 100 and rels["params"]["minFanout"] == 3
    # the live rule's findings, reproduced by the report's replay (the
    # session's reply counts come from the capture's reply records)
    assert j["overview"]["findingsPerRule"]["client-side-join"] >= 1, j["overview"]
    pairs = {(p["parent"], p["child"], p["via"]): p for p in rels["pairs"]}
    each = pairs[(f"{dbname}.orders", f"{dbname}.customers", "client-each")]
    # 2 * ROUNDS pairs of 5 reads each, unless the machine stalled the client
    # past the window mid-round (the capture's own times say when)
    want_pairs, want_reads = expected_pairs(fleet, "status", 5, 3)
    assert want_pairs >= 2 * ROUNDS - 2, "the machine stalled the client too often"
    assert each["key"] == "_id" and each["occurrences"] == want_pairs, each
    assert each["fanoutMax"] == 5 and each["childReads"] == want_reads, each
    pop = pairs[(f"{dbname}.orders", f"{dbname}.customers", "client-in")]
    want_pairs, _ = expected_pairs(fleet, "created", 1, 1)
    assert want_pairs >= 2 * ROUNDS - 2, "the machine stalled the client too often"
    assert pop["occurrences"] == want_pairs and pop["childFieldsRead"] == 1, pop
    # the look-alike (a list then one lookup) is no pair: only these two
    assert len(rels["pairs"]) == 2, rels["pairs"]
    # the customer changes about once per two joint reads: reference, said why
    for p in (each, pop):
        assert p["advice"] == "reference" and "changes often" in p["why"], p
    text = md.read_text()
    assert "## Workload" in text and "## Relationships" in text
    assert "client: one read per document (N+1)" in text


def test_workload_html_in_headless_chromium(fleet, tmp_path, mongoguard_bin):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is installed by scripts/setup.sh"
    html = tmp_path / "r.html"
    report(mongoguard_bin, *fleet, "-o", html)
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chr'}"]
    dom = subprocess.run(base + ["--enable-logging=stderr", "--v=0", "--dump-dom", html.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    for ident in ('id="workload-table"', 'id="read-table"', 'id="array-table"',
                  'id="rel-table"'):
        assert ident in dom.stdout, ident
    console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not console, console
