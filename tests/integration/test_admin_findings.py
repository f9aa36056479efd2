"""/findings?rule=&ns=&app=&since=&limit= and admin.findingsRing; and
mongoguard_findings_total counting each finding when it happens."""

from __future__ import annotations

import json
import time

import pytest

from conftest import free_port
from fakeserver import FakeServer
from ops_helpers import Mongoguard, ci_regex_find, http_get, rules_yaml, wait_until


@pytest.fixture
def guarded(mongoguard_bin, tmp_path):
    srv = FakeServer()
    srv.start()
    admin = free_port()
    cfg = (rules_yaml(case_insensitive_regex="log", unbounded_push="log").rstrip()[:-1] +
           f', "admin": {{"listen": "127.0.0.1:{admin}", "findingsRing": 4}}}}\n')
    g = Mongoguard(mongoguard_bin, "admin-findings",
                   ["--upstream", srv.uri, "--log", str(tmp_path / "mg.log")], cfg)
    g.admin = admin
    yield g
    assert g.stop() == 0
    srv.stop()


def findings(g, query=""):
    status, body = http_get(g.admin, "/findings" + query)
    assert status == 200, body
    return json.loads(body)


def push(g, db, coll, app):
    return g.command({"update": coll, "updates": [{"q": {"_id": 1},
                                                   "u": {"$push": {"tags": "x"}}}]},
                     db=db, app=app)


def test_findings_filters_and_ring_size(guarded):
    g = guarded
    ci_regex_find(g, "shop", "users", app="web")
    push(g, "shop", "carts", app="web")
    ci_regex_find(g, "crm", "people", app="batch")
    wait_until(lambda: len(findings(g)) == 3, what="three findings")
    t_mid = int(time.time()) + 1
    time.sleep(1.1)
    g.command({"find": "orders", "filter": {"ref": {"$regex": "x", "$options": "i"}}}, db="shop",
              app="web")
    wait_until(lambda: len(findings(g)) == 4, what="four findings")
    assert [f["rule"] for f in findings(g, "?rule=unbounded-push")] == ["unbounded-push"]
    assert {f["ns"] for f in findings(g, "?ns=shop.*")} == {"shop.users", "shop.carts",
                                                           "shop.orders"}
    assert [f["ns"] for f in findings(g, "?app=batch")] == ["crm.people"]
    assert [f["ns"] for f in findings(g, "?limit=2")] == ["crm.people", "shop.orders"]
    assert [f["ns"] for f in findings(g, f"?since={t_mid}")] == ["shop.orders"]
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_mid))
    assert [f["ns"] for f in findings(g, f"?since={iso}")] == ["shop.orders"]
    both = findings(g, "?rule=case-insensitive-regex&ns=shop.*&limit=1")
    assert [f["ns"] for f in both] == ["shop.orders"]
    # the ring keeps admin.findingsRing (4): a fifth pushes the oldest out
    ci_regex_find(g, "crm", "leads", app="batch")
    wait_until(lambda: findings(g)[-1]["ns"] == "crm.leads", what="the fifth finding")
    assert [f["ns"] for f in findings(g)] == ["shop.carts", "crm.people", "shop.orders",
                                              "crm.leads"]


@pytest.mark.parametrize("query,why", [("?rule=no-such-rule", "no rule is called"),
                                       ("?limit=0", "limit"), ("?limit=x", "limit"),
                                       ("?limit=%2B5", "limit"), ("?limit=%205", "limit"),
                                       ("?since=yesterday", "since"), ("?colour=red", "unknown")])
def test_bad_findings_parameters_are_400(guarded, query, why):
    status, body = http_get(guarded.admin, "/findings" + query)
    assert status == 400 and why in body, body


def metric(g, name):
    status, body = http_get(g.admin, "/metrics")
    for ln in body.splitlines():
        if ln.startswith(name + " "):
            return float(ln.split()[-1])
    return 0.0


def test_counter_counts_each_finding_when_it_happens(guarded):
    g = guarded
    name = 'mongoguard_findings_total{rule="case-insensitive-regex",action="log"}'
    for _ in range(3):
        ci_regex_find(g, "shop", "users", app="web")
    time.sleep(0.5)  # well within the 60 s summary interval
    assert metric(g, name) == 3
