"""Phase 2 (issue 3): the first four rules on real driver traffic, in `log` and
`block` mode, through mongoguard in front of the upstream.

For each rule: the finding's log line and its fields, the error a blocked
client sees, that a blocked write changed nothing (checked over a direct
connection), and that a logged request reached the server and came back as it
would directly. FerretDB lacks $lookup and ignores $slice: hot-path-lookup
tests check mongoguard's decision and that the server's own answer (whatever
it is) reaches the client unchanged, never that a join ran.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from bson.regex import Regex
from pymongo import ASCENDING, UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure
from pymongo.write_concern import WriteConcern

import mgwire as w
from conftest import line_text
from fakeserver import FakeServer

RULES = ["case-insensitive-regex", "unbounded-push", "hot-path-lookup", "index-mismatched-sort",
         "collection-scan", "large-document", "client-side-join"]
SECRET = "s3cr3t-literal-7731"


def config(rules: dict, **analysis) -> str:
    """YAML text (JSON is YAML) for a config holding analysis options and rules."""
    cfg = {"analysis": {"redactLiterals": True, **analysis}, "rules": rules}
    return json.dumps(cfg, indent=1) + "\n"


def only(rule: str, action, **extra) -> dict:
    """A rules map with `rule` set as given and every other rule off."""
    rules = {r: "off" for r in RULES}
    rules[rule] = action if not extra else {"action": action, **extra}
    return rules


def wait_findings(p, *, rule: str, ns: str | None = None, n: int = 1, timeout: float = 10,
                  since: int = 0, **match) -> list[dict]:
    def hits():
        out = []
        for f in p.log.findings(rule, since):
            a = f["attr"]
            if ns is not None and a.get("ns") != ns:
                continue
            if all(a.get(k) == v for k, v in match.items()):
                out.append(f)
        return out

    deadline = time.monotonic() + timeout
    while True:
        got = hits()
        if len(got) >= n:
            return got
        if time.monotonic() > deadline:
            tail = "\n".join(p.log.raw_lines()[-20:])
            raise AssertionError(f"expected {n} {rule} finding(s) on {ns} {match}, got {len(got)}"
                                 f"; log tail:\n{tail}")
        time.sleep(0.05)


def no_findings(p, *, rule: str | None = None, ns: str, since: int = 0):
    got = [f for f in p.log.findings(rule, since) if f["attr"].get("ns") == ns]
    assert not got, f"unexpected findings on {ns}: {[f['attr'] for f in got]}"


def check_finding(f: dict, *, rule: str, action: str, ns: str, command: str,
                  app: str | None = None):
    assert f["c"] == "ANALYZER"
    assert isinstance(f["t"]["$date"], str) and f["s"] in ("W", "I", "E")
    a = f["attr"]
    assert a["rule"] == rule
    assert a["action"] == action
    assert a["ns"] == ns
    assert a["command"] == command
    assert re.fullmatch(r"[0-9a-f]{16}", str(a["shapeHash"])), a["shapeHash"]
    assert a["shape"], "empty shape"
    assert isinstance(a["suggestion"], str) and len(a["suggestion"]) > 10
    assert isinstance(a["detail"], str) and a["detail"]
    assert re.fullmatch(r"127\.0\.0\.1:\d+", a["client"]), a["client"]
    if app is not None:
        assert a["appName"] == app
    assert a["repeats"] == 0
    assert SECRET not in line_text(f), "a literal value reached the log"


def assert_blocked(exc: OperationFailure, rule: str):
    assert exc.code == 96, exc.details
    details = exc.details or {}
    assert details.get("ok") == 0
    assert details.get("codeName") == "OperationFailed"
    assert "mongoguard blocked" in details.get("errmsg", "")
    assert rule in details.get("errmsg", "")
    assert details.get("mongoguardRule") == rule


def seed(clients, dbname: str, coll: str, docs: list[dict]):
    clients.direct()[dbname][coll].insert_many(docs)


def snapshot(clients, dbname: str, coll: str) -> list[dict]:
    return list(clients.direct()[dbname][coll].find({}).sort("_id", 1))


# --- case-insensitive-regex ---------------------------------------------------------

CI_FORMS = {
    "bson-regex": lambda: {"email": Regex("^bob", "i")},
    "regex-options": lambda: {"email": {"$regex": "^bob", "$options": "i"}},
    "regex-object-with-flags": lambda: {"email": {"$regex": Regex("^bob", "i")}},
    "in-and": lambda: {"$and": [{"n": {"$gte": 0}}, {"email": {"$regex": "bob", "$options": "si"}}]},
    "in-or": lambda: {"$or": [{"n": 1}, {"email": Regex("bob", "i")}]},
    "in-in": lambda: {"email": {"$in": [Regex("^bob", "i"), "x"]}},
    "under-not": lambda: {"email": {"$not": Regex("^zed", "i")}},
    "elem-match": lambda: {"tags": {"$elemMatch": {"$regex": "^T", "$options": "i"}}},
}

CI_NEAR_MISSES = {
    "no-i": lambda: {"email": Regex("^bob", "")},
    "options-m": lambda: {"email": {"$regex": "^bob", "$options": "m"}},
    "string-equality": lambda: {"email": "/bob/i"},
    "literal-i-in-pattern": lambda: {"email": {"$regex": "i$"}},
    "field-named-options": lambda: {"options": "i"},
}


@pytest.mark.parametrize("form", list(CI_FORMS))
def test_ci_regex_log(clients, upstream, start_proxy, dbname, form):
    p = start_proxy(upstream.uri, config(only("case-insensitive-regex", "log")))
    docs = [{"_id": 1, "email": "BOB@x.org", "n": 1, "tags": ["Tea"]},
            {"_id": 2, "email": "alice@x.org", "n": 2, "tags": ["x"]}]
    seed(clients, dbname, "users", docs)
    filt = CI_FORMS[form]()
    direct = list(clients.direct()[dbname]["users"].find(filt).sort("_id", 1))
    via = list(clients.via(p, appname="ci-log")[dbname]["users"].find(filt).sort("_id", 1))
    assert via == direct
    [f] = wait_findings(p, rule="case-insensitive-regex", ns=f"{dbname}.users")
    check_finding(f, rule="case-insensitive-regex", action="log", ns=f"{dbname}.users",
                  command="find", app="ci-log")


def test_ci_regex_near_misses_not_flagged(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(only("case-insensitive-regex", "log")))
    seed(clients, dbname, "users", [{"_id": 1, "email": "bob@x.org"}])
    c = clients.via(p)[dbname]["users"]
    for name, make in CI_NEAR_MISSES.items():
        list(c.find(make()))
    # A sentinel that must be flagged, sent last on the same collection.
    list(c.find({"sentinel": Regex("x", "i")}))
    wait_findings(p, rule="case-insensitive-regex", ns=f"{dbname}.users")
    fs = p.log.findings("case-insensitive-regex")
    assert len(fs) == 1 and "sentinel" in json.dumps(fs[0]["attr"]["shape"]), \
        [f["attr"]["shape"] for f in fs]


def test_ci_regex_other_commands_log(clients, upstream, start_proxy, dbname):
    """count, distinct, aggregate $match, $regexMatch, delete and update filters."""
    p = start_proxy(upstream.uri, config(only("case-insensitive-regex", "log")))
    seed(clients, dbname, "u", [{"_id": i, "email": f"User{i}@x"} for i in range(10)])
    c = clients.via(p)[dbname]["u"]
    rx = Regex("^user1", "i")
    d = clients.direct()[dbname]["u"]
    assert c.count_documents({"email": rx}) == d.count_documents({"email": rx})
    assert sorted(c.distinct("_id", {"email": rx})) == sorted(d.distinct("_id", {"email": rx}))
    assert list(c.aggregate([{"$match": {"email": rx}}])) == list(d.aggregate([{"$match": {"email": rx}}]))
    try:
        list(c.aggregate([{"$match": {"$expr": {"$regexMatch": {"input": "$email", "regex": "^u",
                                                                "options": "i"}}}}]))
    except OperationFailure:
        pass  # the server may not implement $regexMatch; the decision is what is tested
    c.update_many({"email": rx}, {"$set": {"seen": True}})
    c.delete_many({"email": Regex("^user9", "i")})
    cmds = {f["attr"]["command"] for f in wait_findings(p, rule="case-insensitive-regex",
                                                       ns=f"{dbname}.u", n=6)}
    assert {"aggregate", "update", "delete"} <= cmds
    assert cmds & {"count", "aggregate"}  # pymongo's count_documents is an aggregate
    assert "distinct" in cmds
    assert d.count_documents({"seen": True}) == 1 and d.count_documents({}) == 9


def test_ci_regex_block(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(only("case-insensitive-regex", "block")))
    docs = [{"_id": i, "email": f"User{i}@x", "v": 0} for i in range(5)]
    seed(clients, dbname, "u", docs)
    c = clients.via(p, appname="ci-block", maxPoolSize=1)[dbname]["u"]
    with pytest.raises(OperationFailure) as ei:
        list(c.find({"email": Regex("^user", "i")}))
    assert_blocked(ei.value, "case-insensitive-regex")
    [f] = wait_findings(p, rule="case-insensitive-regex", ns=f"{dbname}.u")
    check_finding(f, rule="case-insensitive-regex", action="block", ns=f"{dbname}.u",
                  command="find", app="ci-block")
    # Blocked writes change nothing.
    with pytest.raises(OperationFailure) as ei:
        c.update_many({"email": {"$regex": "user", "$options": "i"}}, {"$set": {"v": 1}})
    assert_blocked(ei.value, "case-insensitive-regex")
    with pytest.raises(OperationFailure) as ei:
        c.delete_many({"email": Regex("user", "i")})
    assert_blocked(ei.value, "case-insensitive-regex")
    assert snapshot(clients, dbname, "u") == docs
    # The connection (the only one in the pool) is still usable, and a
    # harmless query passes.
    assert [d["_id"] for d in c.find({"email": Regex("^User1")})] == [1]
    assert c.database.client.admin.command("ping")["ok"] == 1


def test_ci_regex_explain_never_blocked(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(only("case-insensitive-regex", "block")))
    seed(clients, dbname, "u", [{"_id": 1, "email": "a"}])
    db = clients.via(p)[dbname]
    filt = {"email": Regex("^a", "i")}
    try:
        db.command({"explain": {"find": "u", "filter": filt}, "verbosity": "queryPlanner"})
        outcome = "ok"
    except OperationFailure as e:
        assert e.code != 96, "explain was blocked"
        outcome = e.code
    try:
        clients.direct()[dbname].command({"explain": {"find": "u", "filter": filt},
                                          "verbosity": "queryPlanner"})
        expected = "ok"
    except OperationFailure as e:
        expected = e.code
    assert outcome == expected
    [f] = wait_findings(p, rule="case-insensitive-regex", ns=f"{dbname}.u")
    assert f["attr"]["action"] == "log"


# --- unbounded-push ------------------------------------------------------------------

def test_unbounded_push_log(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(only("unbounded-push", "log")))
    seed(clients, dbname, "carts", [{"_id": 1, "items": []}, {"_id": 2, "items": []}])
    c = clients.via(p, appname="push-log")[dbname]["carts"]
    r = c.update_one({"_id": 1}, {"$push": {"items": SECRET}})
    assert r.modified_count == 1
    [f] = wait_findings(p, rule="unbounded-push", ns=f"{dbname}.carts")
    check_finding(f, rule="unbounded-push", action="log", ns=f"{dbname}.carts", command="update",
                  app="push-log")
    # The write went through.
    assert snapshot(clients, dbname, "carts")[0]["items"] == [SECRET]
    # Other carriers: findAndModify, bulk update, upsert.
    c.find_one_and_update({"_id": 2}, {"$push": {"items": {"sku": 1}}, "$set": {"x": 1}})
    c.bulk_write([UpdateOne({"_id": 1}, {"$push": {"hist": {"a": 1}}})])
    c.update_one({"_id": 3}, {"$push": {"up": 1}}, upsert=True)
    fs = wait_findings(p, rule="unbounded-push", ns=f"{dbname}.carts", n=3)
    assert {f["attr"]["command"] for f in fs} >= {"update", "findAndModify"}


def test_unbounded_push_near_misses(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(only("unbounded-push", "log")))
    seed(clients, dbname, "c", [{"_id": 1, "a": [], "n": 0}])
    c = clients.via(p)[dbname]["c"]
    c.update_one({"_id": 1}, {"$push": {"a": {"$each": [1, 2], "$slice": -5}}})
    c.update_one({"_id": 1}, {"$set": {"push": 1}, "$inc": {"n": 1}})
    outcome(lambda: c.aggregate([{"$group": {"_id": None, "all": {"$push": "$n"}}}]))  # accumulator
    c.update_one({"_id": 1}, {"$pull": {"a": 1}})
    c.update_one({"_id": 1}, {"$push": {"sentinel": 1}})
    [f] = wait_findings(p, rule="unbounded-push", ns=f"{dbname}.c")
    assert "sentinel" in json.dumps(f["attr"]["shape"])
    assert len(p.log.findings("unbounded-push")) == 1


def test_unbounded_push_block(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(only("unbounded-push", "block")))
    docs = [{"_id": 1, "items": [], "a": 0}, {"_id": 2, "items": [], "a": 0}]
    seed(clients, dbname, "carts", docs)
    client = clients.via(p, appname="push-block", maxPoolSize=1)
    c = client[dbname]["carts"]
    with pytest.raises(OperationFailure) as ei:
        c.update_one({"_id": 1}, {"$push": {"items": SECRET}})
    assert_blocked(ei.value, "unbounded-push")
    [f] = wait_findings(p, rule="unbounded-push", ns=f"{dbname}.carts")
    check_finding(f, rule="unbounded-push", action="block", ns=f"{dbname}.carts",
                  command="update", app="push-block")
    with pytest.raises(OperationFailure) as ei:
        c.find_one_and_update({"_id": 2}, {"$push": {"items": 1}})
    assert_blocked(ei.value, "unbounded-push")
    # A batch is blocked whole: the harmless first statement is not applied either.
    with pytest.raises((OperationFailure, BulkWriteError)) as ei:
        c.bulk_write([UpdateOne({"_id": 1}, {"$set": {"a": 1}}),
                      UpdateOne({"_id": 2}, {"$push": {"items": 2}})])
    err = ei.value
    if isinstance(err, BulkWriteError):
        assert err.details.get("nModified", 0) == 0 and err.details.get("nMatched", 0) == 0
        assert any(e["code"] == 96 for e in err.details.get("writeErrors", [])) or \
            "mongoguard blocked" in str(err.details)
    else:
        assert_blocked(err, "unbounded-push")
    # An unacknowledged (w:0) blocked update: no reply, dropped, logged.
    c.with_options(write_concern=WriteConcern(w=0)).update_one({"_id": 2},
                                                               {"$push": {"w0": "w0"}})
    assert client.admin.command("ping")["ok"] == 1  # the pooled connection is still in step
    p.log.wait_for(lambda ln: ln.get("c") == "ANALYZER" and ln["attr"].get("action") == "block"
                   and '"w0"' in json.dumps(ln["attr"].get("shape")), 10,
                   what="the finding for the blocked w:0 update")
    time.sleep(0.3)
    assert snapshot(clients, dbname, "carts") == docs


# --- scoping by namespace and application ------------------------------------------------

def test_scoped_by_app_and_namespace(clients, upstream, start_proxy, dbname):
    shop = dbname + "_shop"
    other = dbname + "_other"
    rules = {r: "off" for r in RULES}
    rules["unbounded-push"] = {"action": "log", "scopes": [
        {"namespaces": [f"{shop}.*"], "apps": ["checkout*"], "action": "block"}]}
    p = start_proxy(upstream.uri, config(rules))
    for db in (shop, other):
        clients.direct()[db]["carts"].insert_one({"_id": 1, "items": []})

    checkout = clients.via(p, appname="checkout-svc")
    reporting = clients.via(p, appname="reporting")
    with pytest.raises(OperationFailure) as ei:
        checkout[shop]["carts"].update_one({"_id": 1}, {"$push": {"items": "a"}})
    assert_blocked(ei.value, "unbounded-push")
    # Same app, other namespace: logged, applied.
    assert checkout[other]["carts"].update_one({"_id": 1}, {"$push": {"items": "b"}}).modified_count == 1
    # Same namespace, other app: logged, applied.
    assert reporting[shop]["carts"].update_one({"_id": 1}, {"$push": {"items": "c"}}).modified_count == 1
    assert clients.direct()[shop]["carts"].find_one({"_id": 1})["items"] == ["c"]
    assert clients.direct()[other]["carts"].find_one({"_id": 1})["items"] == ["b"]
    # Each (namespace, app, action) is visible in the log: the reporting
    # service's logged push must not hide inside the checkout block finding.
    want = {(f"{shop}.carts", "checkout-svc", "block"),
            (f"{other}.carts", "checkout-svc", "log"),
            (f"{shop}.carts", "reporting", "log")}
    deadline = time.monotonic() + 10
    while True:
        got = {(f["attr"]["ns"], f["attr"]["appName"], f["attr"]["action"])
               for f in p.log.findings("unbounded-push")}
        if want <= got or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert got == want


# --- hot-path-lookup ---------------------------------------------------------------------

def lookup_pipeline(coll: str, nested: str = "top") -> list:
    lk = {"$lookup": {"from": coll + "_b", "localField": "bid", "foreignField": "_id", "as": "b"}}
    if nested == "facet":
        return [{"$facet": {"x": [{"$match": {"a": 1}}, lk]}}]
    if nested == "graph":
        return [{"$graphLookup": {"from": coll, "startWith": "$p", "connectFromField": "p",
                                  "connectToField": "_id", "as": "anc"}}]
    return [{"$match": {"a": {"$gte": 0}}}, lk]


def outcome(fn):
    try:
        return ("ok", list(fn()))
    except OperationFailure as e:
        return ("error", e.code, (e.details or {}).get("codeName"), (e.details or {}).get("errmsg"))


@pytest.mark.parametrize("nested", ["top", "facet", "graph"])
def test_hot_path_lookup_log(clients, upstream, start_proxy, dbname, nested):
    p = start_proxy(upstream.uri, config(only("hot-path-lookup", "log", threshold=3,
                                              windowSeconds=60)))
    seed(clients, dbname, "a", [{"_id": i, "a": i, "bid": i, "p": i - 1} for i in range(5)])
    seed(clients, dbname, "a_b", [{"_id": i} for i in range(5)])
    direct = outcome(lambda: clients.direct()[dbname]["a"].aggregate(lookup_pipeline("a", nested)))
    c = clients.via(p, appname="lookup-log")[dbname]["a"]
    ns = f"{dbname}.a"
    for i in range(3):
        # Whatever the server answers (FerretDB: NotImplemented) reaches the client unchanged.
        assert outcome(lambda: c.aggregate(lookup_pipeline("a", nested))) == direct
        if i < 2:
            time.sleep(0.2)
            no_findings(p, rule="hot-path-lookup", ns=ns)
    [f] = wait_findings(p, rule="hot-path-lookup", ns=ns)
    check_finding(f, rule="hot-path-lookup", action="log", ns=ns, command="aggregate",
                  app="lookup-log")


def test_hot_path_lookup_block(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(only("hot-path-lookup", "block", threshold=3,
                                              windowSeconds=60)))
    seed(clients, dbname, "a", [{"_id": 1, "a": 1, "bid": 1}])
    direct = outcome(lambda: clients.direct()[dbname]["a"].aggregate(lookup_pipeline("a")))
    c = clients.via(p, appname="lookup-block")[dbname]["a"]
    for _ in range(2):
        assert outcome(lambda: c.aggregate(lookup_pipeline("a"))) == direct
    with pytest.raises(OperationFailure) as ei:
        list(c.aggregate(lookup_pipeline("a")))
    assert_blocked(ei.value, "hot-path-lookup")
    [f] = wait_findings(p, rule="hot-path-lookup", ns=f"{dbname}.a")
    check_finding(f, rule="hot-path-lookup", action="block", ns=f"{dbname}.a",
                  command="aggregate", app="lookup-block")
    # An aggregation without a join is untouched.
    assert outcome(lambda: c.aggregate([{"$match": {"a": 1}}])) == \
        outcome(lambda: clients.direct()[dbname]["a"].aggregate([{"$match": {"a": 1}}]))


# --- index-mismatched-sort ----------------------------------------------------------------

def test_index_mismatched_sort_log(clients, upstream, start_proxy, dbname):
    seed(clients, dbname, "s", [{"_id": i, "a": i % 3, "b": i, "c": -i} for i in range(30)])
    clients.direct()[dbname]["s"].create_index([("a", ASCENDING), ("b", ASCENDING)])
    p = start_proxy(upstream.uri, config(only("index-mismatched-sort", "log")))
    c = clients.via(p, appname="sort-log")[dbname]["s"]
    d = clients.direct()[dbname]["s"]
    ns = f"{dbname}.s"
    served = [({"a": 1}, [("b", 1)]), ({}, [("a", 1)]), ({}, [("a", -1), ("b", -1)]),
              ({"a": {"$gt": 0}}, [("a", 1), ("b", 1)]), ({}, [("_id", -1)])]
    for filt, sort in served:
        assert list(c.find(filt).sort(sort)) == list(d.find(filt).sort(sort))
    time.sleep(0.5)
    no_findings(p, rule="index-mismatched-sort", ns=ns)
    # Not served: sort on b alone, and a sort on c after a range on a.
    assert list(c.find({}).sort("b", 1)) == list(d.find({}).sort("b", 1))
    assert list(c.find({"a": {"$gt": 0}}).sort("c", 1)) == list(d.find({"a": {"$gt": 0}}).sort("c", 1))
    assert list(c.find({}).sort([("a", 1), ("b", -1)])) == list(d.find({}).sort([("a", 1), ("b", -1)]))
    fs = wait_findings(p, rule="index-mismatched-sort", ns=ns, n=3)
    for f in fs:
        check_finding(f, rule="index-mismatched-sort", action="log", ns=ns, command="find",
                      app="sort-log")
        assert "createIndex" in f["attr"]["suggestion"]
    assert len(p.log.findings("index-mismatched-sort")) == 3


def test_index_mismatched_sort_block_and_invalidation(clients, upstream, start_proxy, dbname):
    """Blocks an unserved sort; after createIndexes passes through mongoguard
    the cached index list is refreshed and the sort is no longer blocked."""
    seed(clients, dbname, "s", [{"_id": i, "k": 30 - i} for i in range(30)])
    p = start_proxy(upstream.uri, config(only("index-mismatched-sort", "block")))
    c = clients.via(p, appname="sort-block")[dbname]["s"]
    with pytest.raises(OperationFailure) as ei:
        list(c.find({}).sort("k", 1))
    assert_blocked(ei.value, "index-mismatched-sort")
    [f] = wait_findings(p, rule="index-mismatched-sort", ns=f"{dbname}.s")
    check_finding(f, rule="index-mismatched-sort", action="block", ns=f"{dbname}.s",
                  command="find", app="sort-block")
    assert "createIndex" in f["attr"]["suggestion"] and "k" in f["attr"]["suggestion"]
    c.create_index("k")
    deadline = time.monotonic() + 10
    while True:
        try:
            got = list(c.find({}).sort("k", -1))
            break
        except OperationFailure as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"still blocked 10s after createIndexes: {e.details}")
            time.sleep(0.2)
    assert got == list(clients.direct()[dbname]["s"].find({}).sort("k", -1))


# --- shapes, redaction, dedupe --------------------------------------------------------------

def test_shape_hash_stable_and_literals_redacted(clients, upstream, start_proxy, dbname):
    seed(clients, dbname, "u", [{"_id": 1, "email": "a"}])
    hashes = []
    for run in range(2):
        p = start_proxy(upstream.uri, config(only("case-insensitive-regex", "log")))
        c = clients.via(p)[dbname]["u"]
        # ranges, not points: a pattern beside a point on another field is
        # a residual filter, no finding of this rule
        list(c.find({"email": Regex(f"^{SECRET}-{run}", "i"), "n": {"$gt": run}}))
        list(c.find({"email": Regex("^x", "i"), "other": {"$ne": 1}}))
        fs = wait_findings(p, rule="case-insensitive-regex", n=2)
        by_shape = {json.dumps(f["attr"]["shape"], sort_keys=True): f["attr"]["shapeHash"]
                    for f in fs}
        assert len(by_shape) == 2, by_shape
        hashes.append([h for _, h in sorted(by_shape.items())])
        assert SECRET not in "\n".join(p.log.raw_lines())
    assert hashes[0] == hashes[1], "shapeHash changed between runs (or with literal values)"
    assert hashes[0][0] != hashes[0][1], "different shapes share a hash"


def test_redaction_off_shows_literals(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(only("case-insensitive-regex", "log"),
                                         redactLiterals=False))
    list(clients.via(p)[dbname]["u"].find({"email": Regex(f"^{SECRET}", "i")}))
    [f] = wait_findings(p, rule="case-insensitive-regex", ns=f"{dbname}.u")
    assert SECRET in json.dumps(f["attr"]["shape"])


def test_repeats_summarised(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(only("case-insensitive-regex", "log"),
                                         summaryIntervalSecs=1))
    c = clients.via(p)[dbname]["u"]
    for i in range(10):
        list(c.find({"email": Regex(f"^v{i}", "i")}))  # one shape, ten literals
    [first] = wait_findings(p, rule="case-insensitive-regex", ns=f"{dbname}.u")
    assert first["attr"]["repeats"] == 0
    summary = p.log.wait_for(lambda ln: ln.get("c") == "ANALYZER"
                             and ln.get("attr", {}).get("repeats", 0) > 0, 5,
                             what="a summary of repeats")[0]
    assert summary["attr"]["repeats"] == 9
    assert summary["attr"]["shapeHash"] == first["attr"]["shapeHash"]
    immediate = [f for f in p.log.findings("case-insensitive-regex") if f["attr"]["repeats"] == 0]
    assert len(immediate) == 1


def test_analysis_sees_inside_op_compressed(start_proxy):
    """A client that sends OP_COMPRESSED without negotiating is still analysed."""
    srv = FakeServer()
    srv.start()
    try:
        p = start_proxy(srv.uri, config(only("case-insensitive-regex", "block")))
        s = w.connect(p.port)
        try:
            for comp in ("snappy", "zlib", "zstd"):
                inner = w.op_msg({"find": "users", "filter": {"email": Regex("^a", "i")},
                                  "$db": "shop"})
                s.sendall(w.op_compressed(inner, comp))
                r = w.recv_message(s)
                assert r.response_to == w.parse_message(inner).request_id
                assert r.body["ok"] == 0 and r.body["code"] == 96, r.body
                assert r.body.get("mongoguardRule") == "case-insensitive-regex"
            assert not srv.messages("find")
        finally:
            s.close()
    finally:
        srv.stop()


def test_analysis_disabled_is_pure_proxy(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, json.dumps({"analysis": {"enabled": False},
                                              "rules": {"case-insensitive-regex": "block"}}))
    seed(clients, dbname, "u", [{"_id": 1, "email": "A"}])
    assert [d["_id"] for d in clients.via(p)[dbname]["u"].find({"email": Regex("^a", "i")})] == [1]
    assert not p.log.findings()


# --- the Node.js driver and mongosh ----------------------------------------------------------

def _js_clients():
    from test_clients import mongosh, node
    return {"node": lambda nm, uri, db: node(nm, uri, db, "antipatterns", {"appName": "node-app"}),
            "mongosh": lambda nm, uri, db: mongosh(nm, uri, db, "antipatterns")}


@pytest.mark.parametrize("client", ["node", "mongosh"])
def test_js_clients_log_mode(node_modules, clients, upstream, start_proxy, dbname, client):
    run = _js_clients()[client]
    rules = {r: "off" for r in RULES}
    rules["case-insensitive-regex"] = "log"
    rules["unbounded-push"] = "log"
    p = start_proxy(upstream.uri, config(rules))
    direct = run(node_modules, upstream.uri, dbname + "_d")
    via = run(node_modules, p.uri, dbname + "_p")
    assert via == direct
    ci = wait_findings(p, rule="case-insensitive-regex", ns=f"{dbname}_p.users")
    push = wait_findings(p, rule="unbounded-push", ns=f"{dbname}_p.users")
    check_finding(ci[0], rule="case-insensitive-regex", action="log", ns=f"{dbname}_p.users",
                  command="find")
    check_finding(push[0], rule="unbounded-push", action="log", ns=f"{dbname}_p.users",
                  command="update")
    if client == "node":
        assert ci[0]["attr"]["appName"] == "node-app"
    else:
        assert ci[0]["attr"]["appName"].startswith("mongosh")


@pytest.mark.parametrize("client", ["node", "mongosh"])
def test_js_clients_block_mode(node_modules, clients, upstream, start_proxy, dbname, client):
    run = _js_clients()[client]
    rules = {r: "off" for r in RULES}
    rules["case-insensitive-regex"] = "block"
    rules["unbounded-push"] = "block"
    p = start_proxy(upstream.uri, config(rules))
    via = run(node_modules, p.uri, dbname)
    for key, rule in (("find", "case-insensitive-regex"), ("push", "unbounded-push")):
        assert via[key]["code"] == 96 and via[key]["codeName"] == "OperationFailed", via[key]
        assert via[key]["blocked"] and via[key]["rule"] == rule, via[key]
    # The blocked $push changed nothing, seen by the client and directly.
    assert via["after"][0]["items"] == []
    assert clients.direct()[dbname]["users"].find_one({"_id": 1})["items"] == []
    wait_findings(p, rule="case-insensitive-regex", ns=f"{dbname}.users", action="block")
    wait_findings(p, rule="unbounded-push", ns=f"{dbname}.users", action="block")
