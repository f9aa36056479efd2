"""Authentication passes through mongoguard untouched: each client has its
own upstream connection, so SCRAM conversations (saslStart/saslContinue,
and speculative authentication inside the hello) reach the server as the
driver sent them. FerretDB with --test-enable-new-auth and a setup user.

The index cache's side connection authenticates on its own, with
credentials from the upstream URI or upstream.credentialsFile."""

from __future__ import annotations

import base64
import subprocess

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import line_text
from topology_helpers import ferret, node_topology  # noqa: F401 -- ferret is a fixture

USER, PASSWORD = "mguser", "s3cret-Pa55:word"


def _client(port: int, password: str, mechanism: str, **kw) -> MongoClient:
    kw.setdefault("serverSelectionTimeoutMS", 5000)
    return MongoClient(f"mongodb://127.0.0.1:{port}/", username=USER, password=password,
                       authSource="admin", authMechanism=mechanism, **kw)


def _attempt(port: int, password: str, mechanism: str) -> dict:
    with _client(port, password, mechanism) as c:
        try:
            c.admin.command("ping")
            db = c.get_database("mg_auth_" + mechanism.replace("-", "_"))
            db.c.insert_one({"x": 1})
            return {"ok": True, "n": db.c.count_documents({})}
        except OperationFailure as e:
            return {"ok": False, "code": e.code, "errmsg": e.details.get("errmsg")}


@pytest.fixture
def auth_ferret(ferret):
    return ferret(auth=(USER, PASSWORD), name="auth")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-1"])
def test_credentials_through_mongoguard(auth_ferret, start_proxy, mechanism):
    f = auth_ferret
    p = start_proxy(f.uri, extra_args=["--verbose"])
    direct_ok = _attempt(f.port, PASSWORD, mechanism)
    direct_bad = _attempt(f.port, "wrong", mechanism)
    if not direct_ok["ok"] and mechanism == "SCRAM-SHA-1":
        pytest.skip(f"this FerretDB does not do {mechanism}: {direct_ok}")
    assert direct_ok["ok"], direct_ok
    assert not direct_bad["ok"]
    via_ok = _attempt(p.port, PASSWORD, mechanism)
    via_bad = _attempt(p.port, "wrong", mechanism)
    assert via_ok["ok"] and via_ok["n"] == direct_ok["n"] + 1
    assert via_bad == direct_bad  # the same code and message as directly
    # no credential and no SCRAM payload in the log, even at debug level
    text = p.log.path.read_text()
    client_first = base64.b64encode(f"n,,n={USER},r=".encode()).decode()[:16]
    for secret in (PASSWORD, "wrong", client_first, "saslStart", "payload"):
        assert secret not in text, f"{secret!r} appears in the log"


def test_unauthenticated_fails_as_directly(auth_ferret, start_proxy):
    f = auth_ferret
    p = start_proxy(f.uri)

    def try_insert(port):
        with MongoClient(f"mongodb://127.0.0.1:{port}/", serverSelectionTimeoutMS=5000) as c:
            try:
                c.t.c.insert_one({"x": 1})
                return "no error"
            except OperationFailure as e:
                return (e.code, e.details.get("errmsg"))

    direct = try_insert(f.port)
    assert direct != "no error"
    assert try_insert(p.port) == direct


def test_node_driver_auth(auth_ferret, start_proxy, node_modules):
    f = auth_ferret
    p = start_proxy(f.uri)
    good = f"mongodb://{USER}:{PASSWORD.replace(':', '%3A')}@127.0.0.1:{{}}/?authSource=admin"
    bad = f"mongodb://{USER}:nope@127.0.0.1:{{}}/?authSource=admin"
    direct = node_topology(good.format(f.port), "mg_auth_node", "ping")
    assert "error" not in direct, direct
    via = node_topology(good.format(p.port), "mg_auth_node", "ping")
    assert "error" not in via, via
    assert via["count"] == {"$numberInt": "2"}  # one insert each, same database
    d_bad = node_topology(bad.format(f.port), "mg_auth_node", "ping")
    v_bad = node_topology(bad.format(p.port), "mg_auth_node", "ping")
    assert d_bad["error"]["name"] == v_bad["error"]["name"]
    assert d_bad["error"]["code"] == v_bad["error"]["code"]


# --- the index cache's side connection -------------------------------------------

SORT_CONFIG = "rules:\n  index-mismatched-sort: log\n"


def _sort_query(port: int, db: str):
    with _client(port, PASSWORD, "SCRAM-SHA-256") as c:
        c[db].orders.insert_many([{"_id": i, "a": i, "b": -i} for i in range(5)])
        list(c[db].orders.find({"a": {"$gt": 0}}).sort("b", 1))


def test_side_connection_without_credentials_warns_loudly(auth_ferret, start_proxy):
    f = auth_ferret
    p = start_proxy(f.uri, config=SORT_CONFIG)
    _sort_query(p.port, "mg_side_none")
    hits = p.log.wait_for(lambda ln: ln.get("s") == "E" and
                          "index-cache side connection has no credentials" in line_text(ln),
                          15, what="the loud side-connection warning")
    assert "upstream.credentialsFile" in hits[0]["msg"]


def test_side_connection_credentials_file(auth_ferret, start_proxy, tmp_path):
    f = auth_ferret
    creds = tmp_path / "side.credentials"
    creds.write_text(f"{USER}:{PASSWORD}\n")
    creds.chmod(0o600)
    cfg = SORT_CONFIG + f'upstream:\n  uri: "{f.uri}?authSource=admin"\n' \
                        f'  credentialsFile: "{creds}"\n'
    p = start_proxy(f.uri + "?authSource=admin", config=cfg)
    assert PASSWORD not in " ".join(p.args)  # nothing secret on the command line
    _sort_query(p.port, "mg_side_file")
    p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "index-mismatched-sort", 15,
                   what="a sort verdict, which needs listIndexes to work")
    text = p.log.path.read_text()
    assert PASSWORD not in text
    assert "requires authentication" not in text


def test_credentials_file_errors(mongoguard_bin, tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("no-colon-here\n")
    for path, want in ((bad, "username:password"), (tmp_path / "missing", "cannot read")):
        cfg = tmp_path / "c.yaml"
        cfg.write_text(f'upstream:\n  credentialsFile: "{path}"\n')
        r = subprocess.run([mongoguard_bin, "--config", str(cfg), "--check-config"],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and want in r.stderr, r.stderr
