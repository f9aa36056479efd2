"""Security properties (issue 12): authentication passes through untouched,
no credential or SCRAM payload is written anywhere mongoguard writes, literal
values are redacted by default everywhere (and shown only when redaction is
turned off), and the admin endpoint refuses what it must.

Covered elsewhere, not repeated here:
- wrong passwords fail exactly as directly, through pymongo (SCRAM-SHA-256 and
  SCRAM-SHA-1) and the Node.js driver: test_auth.py;
- malformed HTTP, unknown paths and methods, the token on /metrics, the
  masked URI passwords in /config: test_admin.py;
- TLS to the upstream verifies the certificate and the host name by default
  (wrong CA, expired, wrong host all fail until the URI allows them):
  test_tls.py::test_upstream_bad_certificates.
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import bson
import pytest
from bson.binary import Binary
from bson.regex import Regex
from pymongo import MongoClient
from pymongo.errors import OperationFailure

import mgwire as w
from conftest import free_port
from fakeserver import FakeServer
from topology_helpers import ferret  # noqa: F401 -- fixture

USER, PASSWORD = "mgsecuser", "pa55-Secret-7f3a:x"
WRONG = "wr0ng-Secret-b21c"
NEW_PASSWORD = "n3w-user-Pass-c0de"
MARKER = "MARKER-7f3a"
RULES = ["case-insensitive-regex", "unbounded-push", "hot-path-lookup", "index-mismatched-sort",
         "collection-scan", "large-document", "client-side-join"]


def http(port: int, path: str, token: str | None = None, method: str = "GET",
         headers: dict | None = None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=b"" if method == "POST" else None)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scram_markers(user: str) -> list[bytes]:
    """What a SCRAM conversation carries, raw (in BSON binaries, capture files)
    and base64 (as JSON renders binaries): the client-first bare message, the
    client-final's channel binding and nonce prefix."""
    raw = [f"n,,n={user},r=".encode(), b"c=biws,r="]
    return raw + [base64.b64encode(r)[:-2] for r in raw]


def files_bytes(paths) -> bytes:
    return b"".join(Path(p).read_bytes() for p in paths)


# --- authentication passes through ----------------------------------------------------

def test_auth_commands_are_relayed_byte_for_byte(start_proxy):
    """saslStart, saslContinue, authenticate and speculative authentication in
    the hello: each reaches the server exactly as sent, and the server's answer
    (success or failure) reaches the client exactly as the server sent it.
    mongoguard never answers them itself, even with every rule on block."""
    srv = FakeServer()
    srv.start()
    answers = {
        "saslStart": {"conversationId": 1, "done": False, "ok": 1.0,
                      "payload": Binary(b"r=client-nonceSERVER,s=c2FsdA==,i=4096")},
        "saslContinue": {"conversationId": 1, "done": True, "ok": 1.0,
                         "payload": Binary(b"v=c2VydmVyLXNpZ25hdHVyZQ==")},
        "authenticate": {"ok": 0.0, "errmsg": "Authentication failed.", "code": 18,
                         "codeName": "AuthenticationFailed"},
    }

    def answer(name):
        async def h(conn, msg):
            await conn.reply(msg, answers[name])
        return h

    for name in answers:
        srv.handlers[name] = answer(name)
    try:
        cfg = json.dumps({"rules": {r: "block" for r in RULES}})
        p = start_proxy(srv.uri, cfg, extra_args=["--verbose"])
        s = w.connect(p.port)
        try:
            sent = [
                w.op_msg({"saslStart": 1, "mechanism": "SCRAM-SHA-256", "$db": "admin",
                          "payload": Binary(b"n,,n=someone,r=client-nonce"),
                          "options": {"skipEmptyExchange": True}}),
                w.op_msg({"saslContinue": 1, "conversationId": 1, "$db": "admin",
                          "payload": Binary(b"c=biws,r=client-nonceSERVER,p=cHJvb2Y=")}),
                w.op_msg({"authenticate": 1, "mechanism": "MONGODB-X509", "user": "CN=x",
                          "$db": "$external"}),
                w.op_query("admin.$cmd", {"saslStart": 1, "mechanism": "PLAIN",
                                          "payload": Binary(b"\x00someone\x00" +
                                                            PASSWORD.encode())}),
            ]
            for msg in sent:
                s.sendall(msg)
                got = w.recv_message(s)
                name = w.parse_message(msg).command
                # the client's bytes reached the server unchanged ...
                at_server = srv.wait_for(lambda: [m for m in srv.messages(name)
                                                  if m.request_id ==
                                                  w.parse_message(msg).request_id], 5,
                                         what=name)
                assert at_server[0].raw == msg, name
                # ... and the server's bytes reached the client unchanged
                conn = next(c for c in srv.conns if at_server[0] in c.received)
                assert got.raw in conn.sent, name
            # speculative authentication inside the hello is left in place
            hello = {"hello": 1, "$db": "admin", "client": {"application": {"name": "spec"}},
                     "speculativeAuthenticate": {"saslStart": 1, "mechanism": "SCRAM-SHA-256",
                                                 "payload": Binary(b"n,,n=someone,r=abc"),
                                                 "db": "admin"}}
            msg = w.op_msg(hello)
            s.sendall(msg)
            w.recv_message(s)
            [m] = [m for m in srv.messages("hello") if m.request_id ==
                   w.parse_message(msg).request_id]
            assert m.raw == msg
        finally:
            s.close()
        text = p.log.path.read_text()
        for secret in [PASSWORD] + [m.decode() for m in scram_markers("someone")]:
            assert secret not in text, f"{secret!r} in the log"
        assert not any(ln.get("c") == "ANALYZER" for ln in p.log.lines()), \
            "an auth command was analysed"
    finally:
        srv.stop()


@pytest.fixture
def auth_ferret(ferret):
    return ferret(auth=(USER, PASSWORD), name="sec")


def _login(port: int, password: str, mechanism: str = "SCRAM-SHA-256", **kw) -> str:
    with MongoClient(f"mongodb://127.0.0.1:{port}/", username=USER, password=password,
                     authSource="admin", authMechanism=mechanism,
                     serverSelectionTimeoutMS=5000, **kw) as c:
        try:
            c.admin.command("ping")
            c.mg_sec.c.find_one({"email": Regex("^" + MARKER, "i")})
            return "ok"
        except OperationFailure as e:
            return f"{e.code}: {e.details.get('errmsg')}"


def test_no_credential_or_scram_payload_anywhere(auth_ferret, start_proxy, tmp_path):
    """The worst case for leaks: debug logging, the admin endpoint, a capture
    with redaction off (whole messages), literals shown, the fleet sink and the
    index cache's side connection both authenticating. Logins succeed and fail
    as directly; afterwards neither the password, nor a wrong one, nor a new
    user's password, nor any SCRAM message is in the log, /metrics, /findings,
    /config or the capture files."""
    f = auth_ferret
    creds = tmp_path / "side.credentials"
    creds.write_text(f"{USER}:{PASSWORD}\n")
    creds.chmod(0o600)
    admin = free_port()
    cdir = tmp_path / "cap"
    sink_uri = f"mongodb://{USER}:{PASSWORD.replace(':', '%3A')}@127.0.0.1:{f.port}/" \
               "?authSource=admin"
    cfg = {
        "admin": {"listen": f"127.0.0.1:{admin}"},
        "analysis": {"redactLiterals": False},
        "capture": {"dir": str(cdir), "redactLiterals": False},
        "upstream": {"uri": f.uri + "?authSource=admin", "credentialsFile": str(creds)},
        "sinks": {"mongodb": {"uri": sink_uri, "database": "mgsec_fleet", "flushMS": 100}},
        "rules": {"case-insensitive-regex": "log", "index-mismatched-sort": "log"},
    }
    p = start_proxy(f.uri + "?authSource=admin", json.dumps(cfg), extra_args=["--verbose"])
    mechanisms = ["SCRAM-SHA-256", "SCRAM-SHA-1"]
    for mech in mechanisms:
        direct = (_login(f.port, PASSWORD, mech), _login(f.port, WRONG, mech))
        via = (_login(p.port, PASSWORD, mech), _login(p.port, WRONG, mech))
        assert via == direct, mech
    assert _login(p.port, PASSWORD) == "ok" and _login(p.port, WRONG) != "ok"
    # a user created and changed through mongoguard: its password is a literal too
    with MongoClient(p.uri, username=USER, password=PASSWORD, authSource="admin",
                     serverSelectionTimeoutMS=5000) as c:
        try:
            c.admin.command("createUser", "mgsec_other", pwd=NEW_PASSWORD, roles=[])
            c.admin.command("updateUser", "mgsec_other", pwd=NEW_PASSWORD + "2")
        except OperationFailure:
            pass  # the server may not do it; the request still went through mongoguard
        c.mg_sec.c.insert_one({"x": 1})
        list(c.mg_sec.c.find({"x": 1}).sort("y", 1))  # a side-connection verdict
    p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "case-insensitive-regex", 10,
                   what="a finding")
    time.sleep(0.5)  # the sink's flush
    surfaces = {
        "/metrics": http(admin, "/metrics")[1],
        "/findings": http(admin, "/findings")[1],
        "/config": http(admin, "/config")[1],
    }
    assert p.stop() == 0
    surfaces["log"] = p.log.path.read_text()
    surfaces["stdout"] = p.out_path.read_text(errors="replace")
    caps = sorted(cdir.glob("capture-*.bson"))
    assert caps, "no capture written"
    blob = files_bytes(caps)
    for cmd in (b"saslContinue", b"speculativeAuthenticate", b"createUser"):
        assert cmd in blob, f"the capture missed {cmd!r}: nothing to check"
    secrets = [PASSWORD, PASSWORD.replace(":", "%3A"), WRONG, NEW_PASSWORD]
    for where, text in surfaces.items():
        for secret in secrets + [m.decode() for m in scram_markers(USER)]:
            assert secret not in text, f"{secret!r} in {where}"
    for secret in [s.encode() for s in secrets] + scram_markers(USER):
        assert secret not in blob, f"{secret!r} in a capture file (redaction off)"
    # the sink's records: written with the sink's own credentials, no secret in them
    with MongoClient(f.uri, username=USER, password=PASSWORD, authSource="admin") as c:
        recs = list(c.mgsec_fleet.findings.find({}, {"_id": 0}))
    assert recs, "no fleet records"
    dump = json.dumps(recs, default=str)
    assert not any(s in dump for s in secrets)


# --- redaction -------------------------------------------------------------------------

def _redaction_workload(port: int, db: str):
    """The marker as a filter value, an update value and in inserted documents,
    each in a request that gives a finding."""
    with MongoClient(f"mongodb://127.0.0.1:{port}/", serverSelectionTimeoutMS=5000,
                     appname="redaction") as c:
        coll = c[db].c
        coll.insert_one({"_id": 1, "email": MARKER, "items": [], "blob": MARKER * 400})
        list(coll.find({"email": Regex(f"^{MARKER}", "i")}))          # a filter value
        coll.update_one({"email": MARKER}, {"$push": {"items": MARKER}})  # update value
        coll.update_many({"n": {"$gt": 0}}, {"$set": {"note": MARKER}})   # a scan's update
        list(coll.find({"email": MARKER}).sort("created", -1))       # sort, value in filter
        list(coll.aggregate([{"$match": {"email": {"$in": [MARKER, Regex(MARKER, "i")]}}}]))


def _redaction_run(tmp_path, upstream, start_proxy, dbname, mongoguard_bin, off: bool) -> dict:
    admin = free_port()
    cdir = tmp_path / "cap"
    fleet_db = dbname + "_fleet"
    rules = {r: "log" for r in RULES}
    rules["large-document"] = {"action": "log", "maxBytes": 1024}
    rules["collection-scan"] = {"action": "log", "minDocuments": 0}
    cfg = {"admin": {"listen": f"127.0.0.1:{admin}"},
           "capture": {"dir": str(cdir)},
           "sinks": {"mongodb": {"uri": upstream.uri, "database": fleet_db, "flushMS": 100}},
           "rules": rules}
    if off:  # the two keys that turn redaction off (both default to true)
        cfg["analysis"] = {"redactLiterals": False}
        cfg["capture"]["redactLiterals"] = False
    p = start_proxy(upstream.uri, json.dumps(cfg))
    _redaction_workload(p.port, dbname)
    p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "unbounded-push", 10,
                   what="the push finding")
    time.sleep(0.5)
    out = {"/metrics": http(admin, "/metrics")[1], "/findings": http(admin, "/findings")[1]}
    assert p.stop() == 0
    out["log"] = p.log.path.read_text()
    with upstream.client() as c:
        out["fleet"] = json.dumps(list(c[fleet_db].findings.find({}, {"_id": 0})), default=str)
    caps = sorted(cdir.glob("capture-*.bson"))
    out["capture"] = files_bytes(caps).decode("latin-1")
    rdir = tmp_path / "report"
    rdir.mkdir()
    r = subprocess.run([mongoguard_bin, "report", *map(str, caps), "--no-progress",
                        "-o", str(rdir / "r.html"), "--json", str(rdir / "r.json"),
                        "--md", str(rdir / "r.md")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for name in ("r.html", "r.json", "r.md"):
        out[f"report {name}"] = (rdir / name).read_text()
    out["report stdout"] = r.stdout + r.stderr
    assert json.loads(out["/findings"]), "no findings to check"
    assert json.loads(out["fleet"]), "no fleet records to check"
    return out


def test_redaction_is_on_by_default_everywhere(tmp_path, upstream, start_proxy, dbname,
                                               mongoguard_bin):
    out = _redaction_run(tmp_path, upstream, start_proxy, dbname, mongoguard_bin, off=False)
    for where, text in out.items():
        assert MARKER not in text, f"the marker reached {where} with redaction on by default"
    assert '"?string"' in out["log"]  # the shapes are there, with placeholders


def test_redaction_off_shows_literals(tmp_path, upstream, start_proxy, dbname, mongoguard_bin):
    """With analysis.redactLiterals and capture.redactLiterals false the marker
    shows in the log, /findings, the fleet collection and the capture. The
    report's shapes stay redacted (README), and metrics never carry values."""
    out = _redaction_run(tmp_path, upstream, start_proxy, dbname, mongoguard_bin, off=True)
    for where in ("log", "/findings", "fleet", "capture"):
        assert MARKER in out[where], f"redaction off, yet no marker in {where}"
    for where in ("/metrics", "report r.html", "report r.json", "report r.md"):
        assert MARKER not in out[where], f"the marker reached {where}"


# --- the admin endpoint ----------------------------------------------------------------

TOKEN = "s3c-token-6e2d"


def test_admin_only_where_told(mongoguard_bin, tmp_path):
    """No admin endpoint unless configured, and never an implicit address: a
    bare port is refused (it would have to guess an interface)."""
    for spec in ("9216", "localhost"):
        cfg = tmp_path / "c.yaml"
        cfg.write_text(json.dumps({"admin": {"listen": spec}}))
        r = subprocess.run([mongoguard_bin, "--config", str(cfg), "--check-config"],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and "HOST:PORT" in r.stderr, (spec, r.stderr)


def test_admin_token_guards_every_path(start_proxy, upstream, tmp_path):
    """With a token, every path but the probes answers 401 without it, including
    POST /reload, which then reloads nothing, and the connection list and close;
    only the exact bearer token works. The probes (/healthz, /readyz) are open: a
    kubelet or a load balancer's check sends no token (issue 34), and they tell
    nothing the token protects."""
    admin = free_port()
    tok = tmp_path / "token"
    tok.write_text(TOKEN + "\n")
    tok.chmod(0o600)
    cfg = {"admin": {"listen": f"127.0.0.1:{admin}", "tokenFile": str(tok)},
           "rules": {"case-insensitive-regex": "log"}}
    p = start_proxy(upstream.uri, json.dumps(cfg))
    p.config_path.write_text(json.dumps({**cfg, "rules": {"case-insensitive-regex": "block"}}))
    bad_auth = [None, "Bearer", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}",
                f"bearer{TOKEN}", f"Bearer  {TOKEN} extra"]
    for path, method in (("/metrics", "GET"), ("/findings", "GET"), ("/config", "GET"),
                         ("/connections", "GET"), ("/connections/1/close", "POST"),
                         ("/reload", "POST"), ("/nope", "GET")):
        for value in bad_auth:
            headers = {"Authorization": value} if value else {}
            status, body = http(admin, path, method=method, headers=headers)
            assert status == 401, (path, value, status)
            assert TOKEN not in body
        status, _ = http(admin, f"{path}?token={TOKEN}", method=method)
        assert status == 401, (path, "token in the query string")
    for probe in ("/healthz", "/readyz"):
        status, body = http(admin, probe)
        assert status == 200 and TOKEN not in body, (probe, status)
    # the refused reload changed nothing; the right token reloads
    status, text = http(admin, "/metrics", TOKEN)
    assert status == 200 and 'mongoguard_config_reloads_total{result="ok"} 0' in text
    assert http(admin, "/reload", TOKEN, method="POST")[0] == 200
    status, text = http(admin, "/metrics", TOKEN)
    assert 'mongoguard_config_reloads_total{result="ok"} 1' in text
    assert TOKEN not in p.log.path.read_text()
    refused = [ln["msg"] for ln in p.log.lines() if ln.get("s") == "W" and
               ln.get("msg", "").startswith("Admin request without the right bearer token")]
    assert any("(/reload)" in m for m in refused), refused[-3:]
