"""Multikey learned from writes, end to end through mongoguard in front of FerretDB, whose
explain never says an index is multikey: a sort that {s: 1, tags: 1} gives while tags holds
scalars is judged in memory once a write mongoguard forwards puts an array under tags (a
multikey key with bounds cannot give the order: a document sorts by its least element, which
may lie outside them). The rule logic is unit-tested in tests/unit/test_engine_arrays.c."""

from __future__ import annotations

import time

from test_analyzers import config, wait_findings
from test_rules_round2 import rules


def test_a_forwarded_array_makes_the_sort_in_memory(clients, upstream, start_proxy, dbname):
    direct = clients.direct()[dbname]["posts"]
    direct.create_index([("s", 1), ("tags", 1)])
    direct.insert_many([{"_id": i, "s": i % 3, "tags": f"t{i:02d}"} for i in range(30)])
    p = start_proxy(upstream.uri, config(rules(index_mismatched_sort="log")))
    posts = clients.via(p, appname="multikey")[dbname]["posts"]
    ns = f"{dbname}.posts"

    def query():
        return [d["_id"] for d in posts.find({"s": 1, "tags": {"$gte": "t10"}}).sort("tags", 1)]

    want = [d["_id"] for d in direct.find({"s": 1, "tags": {"$gte": "t10"}}).sort("tags", 1)]
    assert query() == want
    time.sleep(2)  # the first request's verdict comes late, once the list is known
    assert query() == want
    time.sleep(0.5)
    assert p.log.findings("index-mismatched-sort") == [], "tags holds no array yet"

    posts.insert_one({"_id": 100, "s": 1, "tags": ["t50", "t60"]})
    assert query() == [d["_id"] for d in
                       direct.find({"s": 1, "tags": {"$gte": "t10"}}).sort("tags", 1)]
    f = wait_findings(p, rule="index-mismatched-sort", ns=ns)[0]["attr"]
    assert f["command"] == "find"
    assert "sorts in memory" in f["detail"], f["detail"]
