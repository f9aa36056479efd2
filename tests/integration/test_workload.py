"""GET /workload, the per-collection Prometheus counters and `mongoguard top
--once`, against a workload of known counts driven through the real proxy
with pymongo: counts per shape and per application, documents returned,
errors by code, the rules that fired, reads and writes per collection, and
the ns / app / sort / limit parameters."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from bson.regex import Regex
from pymongo import MongoClient
from pymongo.errors import DuplicateKeyError

from conftest import free_port
from ops_helpers import http_get

N_INSERT, N_BY_ID, N_BY_STATUS, N_STATUS_DOCS = 30, 20, 5, 10
N_DUP, N_UPDATE, N_COUNT, N_REGEX = 3, 7, 4, 2


def config(admin: int, **workload) -> str:
    cfg = {"admin": {"listen": f"127.0.0.1:{admin}"},
           "rules": {"case-insensitive-regex": "log"},
           "workload": {"enabled": True, **workload}}
    return json.dumps(cfg) + "\n"


@pytest.fixture
def guarded(start_proxy, upstream):
    admin = free_port()
    p = start_proxy(upstream.uri, config(admin), extra_args=["--workers", "2"])
    p.admin = admin
    return p


def drive(p, db: str) -> None:
    """The known workload: app wl-shop on orders and customers, app wl-batch
    counting orders."""
    with MongoClient(p.uri, appname="wl-shop", serverSelectionTimeoutMS=10000) as c:
        orders, customers = c[db].orders, c[db].customers
        for i in range(N_INSERT):
            orders.insert_one({"_id": i, "status": "a" if i < N_STATUS_DOCS else "b"})
        for i in range(N_BY_ID):
            assert orders.find_one({"_id": i})["_id"] == i
        for _ in range(N_BY_STATUS):
            assert len(list(orders.find({"status": "a"}))) == N_STATUS_DOCS
        for i in range(N_DUP):
            with pytest.raises(DuplicateKeyError):
                orders.insert_one({"_id": i})
        for i in range(N_UPDATE):
            customers.update_one({"_id": i}, {"$set": {"n": i}}, upsert=True)
        for _ in range(N_REGEX):
            list(orders.find({"name": Regex("^bob", "i")}))
    with MongoClient(p.uri, appname="wl-batch", serverSelectionTimeoutMS=10000) as c:
        for _ in range(N_COUNT):
            c[db].command({"count": "orders", "query": {"status": "b"}})


def workload(p, query: str = "") -> dict:
    status, body = http_get(p.admin, "/workload" + query)
    assert status == 200, body
    return json.loads(body)


def rows(w: dict, db: str) -> list[dict]:
    return [s for s in w["shapes"] if s["ns"].startswith(db + ".")]


def one(rs: list[dict], command: str, **has) -> dict:
    found = [s for s in rs if s["command"] == command and
             all(v in s["shape"] for v in has.values())]
    assert len(found) == 1, (command, has, [(s["command"], s["shape"]) for s in rs])
    return found[0]


def test_counts_docs_errors_rules_and_collections(guarded, dbname):
    p = guarded
    drive(p, dbname)
    w = workload(p, f"?ns={dbname}.*")
    rs = rows(w, dbname)
    ins = one(rs, "insert")
    assert ins["count"] == N_INSERT + N_DUP and ins["app"] == "wl-shop"
    assert ins["errors"] == N_DUP and ins["errorsByCode"] == {"11000": N_DUP}
    assert ins["docs"] == N_INSERT  # an insert's n: documents written
    by_id = one(rs, "find", f='"_id"')
    assert by_id["count"] == N_BY_ID and by_id["docs"] == N_BY_ID and by_id["errors"] == 0
    by_status = one(rs, "find", f='"status"')
    assert by_status["count"] == N_BY_STATUS
    assert by_status["docs"] == N_BY_STATUS * N_STATUS_DOCS
    assert by_status["replies"] == N_BY_STATUS and by_status["bytes"] > 0
    assert 0 < by_status["p50MS"] <= by_status["p95MS"] <= by_status["p99MS"]
    assert by_status["rules"] == []
    regex = one(rs, "find", f='"name"')
    assert regex["count"] == N_REGEX and regex["rules"] == ["case-insensitive-regex"]
    upd = one(rs, "update")
    assert upd["count"] == N_UPDATE and upd["ns"] == f"{dbname}.customers"
    cnt = one(rs, "count")
    assert cnt["count"] == N_COUNT and cnt["app"] == "wl-batch"
    # literals are redacted in the shape's text
    assert '"b"' not in cnt["shape"]
    colls = {c["ns"]: c for c in w["collections"]}
    o = colls[f"{dbname}.orders"]
    assert o["reads"] == N_BY_ID + N_BY_STATUS + N_REGEX + N_COUNT
    assert o["writes"] == N_INSERT + N_DUP
    assert colls[f"{dbname}.customers"]["writes"] == N_UPDATE
    assert colls[f"{dbname}.customers"]["reads"] == 0
    # shapes by total time unless asked otherwise
    totals = [s["totalMS"] for s in w["shapes"]]
    assert totals == sorted(totals, reverse=True)


def test_query_parameters(guarded, dbname):
    p = guarded
    drive(p, dbname)
    by_app = workload(p, "?app=wl-batch")
    assert {s["command"] for s in by_app["shapes"]} == {"count"}
    by_ns = workload(p, f"?ns={dbname}.customers")
    assert [s["command"] for s in by_ns["shapes"]] == ["update"]
    assert [c["ns"] for c in by_ns["collections"]] == [f"{dbname}.customers"]
    by_count = workload(p, f"?ns={dbname}.*&sort=count")
    counts = [s["count"] for s in by_count["shapes"]]
    assert counts == sorted(counts, reverse=True) and counts[0] == N_INSERT + N_DUP
    limited = workload(p, f"?ns={dbname}.*&sort=count&limit=2")
    assert [s["count"] for s in limited["shapes"]] == counts[:2]
    assert limited["shapesMatched"] == len(counts) and limited["shapesListed"] == 2
    assert workload(p, f"?ns={dbname}.*&sort=docs")["shapes"][0]["docs"] == \
        N_BY_STATUS * N_STATUS_DOCS
    for bad, why in [("?sort=speed", "sort"), ("?limit=0", "limit"), ("?colour=red", "unknown")]:
        status, body = http_get(p.admin, "/workload" + bad)
        assert status == 400 and why in body, body


def test_prometheus_collection_counters(guarded, dbname):
    p = guarded
    drive(p, dbname)
    status, text = http_get(p.admin, "/metrics")
    assert status == 200
    lines = dict(ln.rsplit(" ", 1) for ln in text.splitlines() if ln and ln[0] != "#")
    o = f'{{ns="{dbname}.orders"}}'
    assert float(lines["mongoguard_collection_reads_total" + o]) == \
        N_BY_ID + N_BY_STATUS + N_REGEX + N_COUNT
    assert float(lines["mongoguard_collection_writes_total" + o]) == N_INSERT + N_DUP
    assert 'mongoguard_collection_reads_total{ns="other"}' in lines
    assert shutil.which("promtool"), "promtool (Debian's prometheus) is installed by setup.sh"
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_metrics_labels_are_bounded(start_proxy, upstream, dbname):
    admin = free_port()
    p = start_proxy(upstream.uri, config(admin, metricsCollections=2))
    p.admin = admin
    with MongoClient(p.uri, serverSelectionTimeoutMS=10000) as c:
        for i in range(5):
            c[dbname][f"c{i}"].insert_one({"i": i})
    _, text = http_get(admin, "/metrics")
    labelled = re.findall(r'^mongoguard_collection_writes_total\{ns="([^"]*)"\} (\S+)$', text,
                          re.M)
    assert len(labelled) == 3, labelled  # two collections and "other"
    assert dict(labelled)["other"] == "3"
    assert sum(float(v) for _, v in labelled) == 5


def test_folding_keeps_the_table_bounded(start_proxy, upstream, dbname):
    admin = free_port()
    p = start_proxy(upstream.uri, config(admin, shapes=16), extra_args=["--workers", "1"])
    p.admin = admin
    with MongoClient(p.uri, serverSelectionTimeoutMS=10000) as c:
        for i in range(40):  # 40 shapes: a filter on field f0 .. f39
            c[dbname].t.find_one({f"f{i}": 1})
    w = workload(p)
    assert len(w["shapes"]) <= 16
    assert w["folded"]["shapes"] >= 40 - 16
    assert w["folded"]["count"] >= 40 - 16


def test_analysis_off_counts_each_shape(start_proxy, upstream, dbname):
    """With analysis off there is no engine template to say a request has the
    shape of the one before; the decoder's template stands in, and a request
    that matches it takes the shape of the one it was made of only when that
    shape shows none of the values the template leaves free (stop 42: before,
    every request's shape was rendered again, 5,781 instructions a pipelined
    find against 1,798 with analysis on). A sort's direction is such a value:
    finds that differ only in it have two shapes, each counted alone."""
    admin = free_port()
    cfg = json.loads(config(admin))
    cfg["analysis"] = {"enabled": False}
    del cfg["rules"]
    p = start_proxy(upstream.uri, json.dumps(cfg) + "\n", extra_args=["--workers", "1"])
    p.admin = admin
    with MongoClient(p.uri, serverSelectionTimeoutMS=10000) as c:
        t = c[dbname].t
        t.insert_many([{"_id": i, "x": 1, "a": i} for i in range(5)])
        for i in range(N_BY_ID):
            assert t.find_one({"_id": i % 5})["_id"] == i % 5
        for _ in range(N_UPDATE):  # the same bytes but a sort's direction, alternating
            assert [d["a"] for d in t.find({"x": 1}).sort("a", 1)] == [0, 1, 2, 3, 4]
            assert [d["a"] for d in t.find({"x": 1}).sort("a", -1)] == [4, 3, 2, 1, 0]
    rs = rows(workload(p, f"?ns={dbname}.*"), dbname)
    assert one(rs, "find", f='"_id"')["count"] == N_BY_ID
    up = one(rs, "find", s='"sort":{"a":1}')
    down = one(rs, "find", s='"sort":{"a":-1}')
    assert up["count"] == N_UPDATE and down["count"] == N_UPDATE, (up, down)
    assert up["docs"] == down["docs"] == 5 * N_UPDATE


def test_statistics_off(start_proxy, upstream):
    admin = free_port()
    p = start_proxy(upstream.uri, config(admin, enabled=False))
    p.admin = admin
    status, body = http_get(admin, "/workload")
    assert status == 404 and "workload.enabled" in body


def test_top_once(guarded, dbname, mongoguard_bin):
    p = guarded
    drive(p, dbname)
    r = subprocess.run([mongoguard_bin, "top", "--once", "--admin", f"127.0.0.1:{p.admin}",
                        "--ns", f"{dbname}.*"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("mongoguard top - 127.0.0.1:")
    header = lines[2].split()
    assert header == ["NS", "COMMAND", "APP", "COUNT", "RATE/s", "TOTAL_MS", "P50_MS",
                      "P95_MS", "P99_MS", "DOCS", "ERRORS", "RULES", "SHAPE"]
    body = []
    for ln in lines[3:]:
        if not ln.strip():
            break
        body.append(ln)
    assert len(body) == 6  # insert, three finds, update, count
    totals = [float(ln.split()[5]) for ln in body]
    assert totals == sorted(totals, reverse=True)
    regex = [ln for ln in body if "case-insensitive-regex" in ln]
    assert len(regex) == 1 and '"name"' in regex[0]
    ins = [ln for ln in body if ln.split()[1] == "insert"]
    assert ins and ins[0].split()[3] == str(N_INSERT + N_DUP)
    assert ins[0].split()[10] == str(N_DUP)
    colls = lines[3 + len(body) + 1:]
    assert colls[0].split() == ["COLLECTION", "READS", "WRITES", "READS/s", "WRITES/s"]
    orders = [ln for ln in colls if ln.startswith(f"{dbname}.orders")]
    assert orders and orders[0].split()[1:3] == [str(N_BY_ID + N_BY_STATUS + N_REGEX +
                                                     N_COUNT), str(N_INSERT + N_DUP)]
    # an endpoint that does not answer: exit 1, said on stderr
    bad = subprocess.run([mongoguard_bin, "top", "--once", "--admin",
                          f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 1 and "cannot connect" in bad.stderr
