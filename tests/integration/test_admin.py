"""The admin endpoint: Prometheus metrics checked by promtool and against a
known workload, health and readiness, recent findings (redacted), the
effective config (secrets masked), the bearer token, and clean answers to
bad HTTP."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.request

import pytest
from bson.regex import Regex
from pymongo.errors import OperationFailure

import mgwire as w
from conftest import free_port

SECRET = "adm1n-marker-5521"
TOKEN = "t0ken-for-tests-9d1f"


def get(port: int, path: str, token: str | None = None, method: str = "GET"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def samples(text: str) -> dict[str, float]:
    """'name{labels}' -> value, for every sample line of an exposition."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def admin_config(port: int, token_file=None, **rules) -> str:
    cfg = {"admin": {"listen": f"127.0.0.1:{port}"},
           "rules": {"case-insensitive-regex": "block", **rules}}
    if token_file:
        cfg["admin"]["tokenFile"] = str(token_file)
    return json.dumps(cfg) + "\n"


@pytest.fixture
def admin_proxy(start_proxy, upstream, tmp_path):
    port = free_port()
    tok = tmp_path / "token"
    tok.write_text(TOKEN + "\n")
    p = start_proxy(upstream.uri, config=admin_config(port, tok))
    p.admin_port = port
    return p


def test_metrics_count_a_known_workload(admin_proxy, clients, dbname):
    p = admin_proxy
    c = clients.via(p)
    coll = c[dbname].items
    coll.insert_many([{"i": i} for i in range(5)])
    for i in range(7):
        assert coll.find_one({"i": i % 5}) is not None
    for _ in range(3):
        with pytest.raises(OperationFailure) as e:
            coll.find_one({"name": Regex(SECRET, "i")})
        assert "case-insensitive-regex" in str(e.value)

    status, headers, text = get(p.admin_port, "/metrics", TOKEN)
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    m = samples(text)
    assert m['mongoguard_commands_total{command="find"}'] == 10  # 7 found + 3 blocked
    assert m['mongoguard_commands_total{command="insert"}'] == 1
    assert m['mongoguard_blocked_total{rule="case-insensitive-regex"}'] == 3
    assert m['mongoguard_blocked_total{rule="unbounded-push"}'] == 0
    # the first occurrence is reported at once; its repeats at the next summary
    assert m['mongoguard_findings_total{rule="case-insensitive-regex",action="block"}'] >= 1
    assert m["mongoguard_connections"] >= 1
    assert m["mongoguard_connections_accepted_total"] >= 1
    # every forwarded request got exactly one reply here (no exhaust, no w:0)
    fwd = m['mongoguard_messages_total{direction="request"}']
    assert fwd >= 8 and m['mongoguard_messages_total{direction="reply"}'] == fwd
    assert m['mongoguard_request_latency_seconds_count'] == fwd
    assert m['mongoguard_request_latency_seconds_bucket{le="+Inf"}'] == fwd
    # every analysed request is timed, or counted as judged by its template
    assert (m['mongoguard_analysis_seconds_count'] +
            m['mongoguard_analysis_repeats_total']) >= 11
    assert m['mongoguard_bytes_total{direction="reply"}'] > 0
    assert re.search(r'^mongoguard_build_info\{version="[^"]+"\} 1$', text, re.M)
    assert SECRET not in text


def test_repeated_queries_are_judged_by_their_template(admin_proxy, clients, dbname):
    """A connection's query judged with no check called is the template of
    its next ones (analyzers/engine/engine.h, engine_repeat): the same find by _id
    with other values is judged without being read, counted in
    mongoguard_analysis_repeats_total, and answered as before; a query some
    rule reads is still read and blocked, and leaves the template alone.
    Raw OP_MSG, so the bodies are exactly these (a driver adds fields of
    its own that may change between requests)."""
    p = admin_proxy
    clients.via(p)[dbname].items.insert_many([{"_id": i, "v": i * 10} for i in range(25)])
    s = w.connect(p.port)
    try:
        assert w.command(s, {"hello": 1}).body["ok"] == 1

        def find_id(i: int) -> dict:
            body = w.command(s, {"find": "items", "filter": {"_id": i}, "limit": 1,
                                 "singleBatch": True}, db=dbname).body
            assert body["ok"] == 1, body
            return body["cursor"]["firstBatch"]

        def counts() -> tuple[float, float]:
            m = samples(get(p.admin_port, "/metrics", TOKEN)[2])
            return (m["mongoguard_analysis_repeats_total"],
                    m["mongoguard_analysis_seconds_count"])

        def repeats() -> float:
            return counts()[0]

        before, timed = counts()
        for i in range(20):  # the first is read and becomes the template
            assert find_id(i) == [{"_id": i, "v": i * 10}]
        # a repeat is counted, not timed: only the first is in the histogram
        assert counts() == (before + 19, timed + 1)
        blocked = w.command(s, {"find": "items",
                                "filter": {"name": {"$regex": SECRET, "$options": "i"}}},
                            db=dbname).body
        assert blocked["ok"] == 0 and blocked.get("mongoguardRule") == "case-insensitive-regex"
        assert repeats() - before == 19
        assert find_id(21) == [{"_id": 21, "v": 210}]
        assert counts() == (before + 20, timed + 2)
    finally:
        s.close()


def test_pipelined_repeats_count_as_sent_one_by_one(admin_proxy, clients, dbname):
    """A client's read of pipelined finds that repeat its connection's
    templates: after the first of the run, each is judged as the one before
    it without being decoded (proxy/session/requests.c, judge_again). The
    same finds, with a blocked query in the middle, sent one at a time on one
    connection and in one write on another, must get the same answers and
    move every counter they touch by the same amount."""
    p = admin_proxy
    c = clients.via(p)
    c[dbname].items.insert_many([{"_id": i, "v": i * 10} for i in range(25)])
    c.close()  # its monitor's hellos would move the message counters meanwhile

    def find(i: int) -> bytes:
        return w.op_msg({"find": "items", "filter": {"_id": i}, "limit": 1,
                         "singleBatch": True, "$db": dbname})

    regex = w.op_msg({"find": "items", "filter": {"name": {"$regex": SECRET, "$options": "i"}},
                      "$db": dbname})
    msgs = [find(i) for i in range(12)] + [regex] + [find(i) for i in range(12, 24)]
    keys = ["mongoguard_analysis_repeats_total", "mongoguard_analysis_seconds_count",
            'mongoguard_commands_total{command="find"}',
            'mongoguard_blocked_total{rule="case-insensitive-regex"}',
            'mongoguard_messages_total{direction="request"}',
            'mongoguard_messages_total{direction="reply"}',
            "mongoguard_request_latency_seconds_count"]

    def counters() -> list[float]:
        m = samples(get(p.admin_port, "/metrics", TOKEN)[2])
        return [m[k] for k in keys]

    def send(pipelined: bool) -> tuple[list, list[float]]:
        s = w.connect(p.port)
        try:
            assert w.command(s, {"hello": 1}).body["ok"] == 1
            before = counters()
            got = []
            if pipelined:
                s.sendall(b"".join(msgs))
                got = [w.recv_message(s) for _ in msgs]
            else:
                for m in msgs:
                    s.sendall(m)
                    got.append(w.recv_message(s))
            assert [g.response_to for g in got] == [w.parse_message(m).request_id
                                                   for m in msgs]
            answers = [(g.body["ok"], g.body.get("mongoguardRule"),
                        g.body.get("cursor", {}).get("firstBatch")) for g in got]
            return answers, [a - b for a, b in zip(counters(), before)]
        finally:
            s.close()

    one_by_one, moved = send(pipelined=False)
    assert one_by_one[0] == (1, None, [{"_id": 0, "v": 0}])
    assert one_by_one[12] == (0, "case-insensitive-regex", None)
    assert one_by_one[24] == (1, None, [{"_id": 23, "v": 230}])
    # the first find and the blocked query are read; every other find repeats
    assert moved[:4] == [23, 2, 25, 1], dict(zip(keys, moved))
    assert send(pipelined=True) == (one_by_one, moved)


def test_a_request_held_for_the_index_list_counts_once(start_proxy, upstream, clients,
                                                        dbname):
    """A find whose sort needs the index list is held until the list comes,
    then judged again; the command is counted once, when it goes."""
    port = free_port()
    p = start_proxy(upstream.uri,
                    config=admin_config(port, **{"index-mismatched-sort": "block"}))
    clients.direct()[dbname].items.create_index("a")  # unknown to mongoguard
    coll = clients.via(p)[dbname].items
    assert list(coll.find({}).sort("a", 1)) == []
    status, _, text = get(port, "/metrics")
    assert status == 200
    m = samples(text)
    assert m['mongoguard_commands_total{command="find"}'] == 1
    assert m['mongoguard_messages_total{direction="request"}'] >= 1


def test_promtool_accepts_the_exposition(admin_proxy, clients, dbname):
    assert shutil.which("promtool"), "promtool (Debian's prometheus) is installed by setup.sh"
    clients.via(admin_proxy)[dbname].c.find_one({})
    _, _, text = get(admin_proxy.admin_port, "/metrics", TOKEN)
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_health_findings_and_config(admin_proxy, clients, dbname):
    p = admin_proxy
    assert get(p.admin_port, "/healthz", TOKEN)[:1] == (200,)
    assert get(p.admin_port, "/readyz", TOKEN)[:1] == (200,)
    coll = clients.via(p)[dbname].people
    with pytest.raises(OperationFailure):
        coll.find_one({"name": Regex(SECRET, "i")})
    status, headers, body = get(p.admin_port, "/findings", TOKEN)
    assert status == 200 and headers["Content-Type"] == "application/json"
    found = json.loads(body)
    mine = [f for f in found if f["ns"] == f"{dbname}.people"]
    assert mine and mine[-1]["rule"] == "case-insensitive-regex"
    assert mine[-1]["action"] == "block"
    assert SECRET not in body  # redacted as the log is

    status, _, body = get(p.admin_port, "/config", TOKEN)
    cfg = json.loads(body)
    assert cfg["rules"]["case-insensitive-regex"]["action"] == "block"
    assert cfg["admin"]["tokenFile"].endswith("token")
    assert TOKEN not in body


def test_token_required_and_bad_requests(admin_proxy):
    port = admin_proxy.admin_port
    assert get(port, "/metrics")[0] == 401
    assert get(port, "/metrics", "wrong-token")[0] == 401
    assert get(port, "/nope", TOKEN)[0] == 404
    assert get(port, "/metrics", TOKEN, method="POST")[0] == 405
    # malformed HTTP: a clear 400 (or a close), and the endpoint keeps serving
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
        answer = s.recv(4096)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"a" * 40000 +
                  b"\r\n\r\n")
        answer = s.recv(4096)
        assert answer == b"" or answer.split(b" ")[1] in (b"400", b"413", b"431")
    assert get(port, "/healthz", TOKEN)[0] == 200


def test_readyz_when_upstream_is_down(start_proxy):
    dead = free_port()  # nothing listens there
    port = free_port()
    p = start_proxy(f"mongodb://127.0.0.1:{dead}/", config=admin_config(port))
    assert get(port, "/healthz")[0] == 200  # no token configured: none needed
    assert get(port, "/readyz")[0] == 503
    assert p.alive()


def test_config_masks_the_upstream_password(start_proxy, upstream):
    port = free_port()
    uri = upstream.uri.replace("mongodb://", "mongodb://someone:pa55word-x@", 1)
    cfg = json.loads(admin_config(port))
    cfg["sinks"] = {"mongodb": {"uri": uri.replace("pa55word-x", "s1nkpass-y")}}
    start_proxy(uri, config=json.dumps(cfg))
    status, _, body = get(port, "/config")
    assert status == 200
    assert "pa55word-x" not in body and "s1nkpass-y" not in body
    shown = json.loads(body)
    assert "someone:****@" in shown["upstream"]["uri"]
    assert "someone:****@" in shown["sinks"]["mongodb"]["uri"]


def test_admin_is_off_by_default(proxy):
    # the shared proxy has no config: no admin port is opened; the log says nothing of one
    assert not any("Admin endpoint" in ln.get("msg", "") for ln in proxy.log.lines())


def test_warns_when_reachable_beyond_the_host_without_a_token(start_proxy, upstream, tmp_path):
    """On loopback, or with a token, nothing to warn about; on every interface
    without a token, one warning saying what anyone could do and the fix."""
    quiet = start_proxy(upstream.uri, config=admin_config(free_port()))
    port = free_port()
    open_cfg = json.loads(admin_config(port))
    open_cfg["admin"]["listen"] = f"0.0.0.0:{port}"
    loud = start_proxy(upstream.uri, config=json.dumps(open_cfg))
    tok = tmp_path / "token"
    tok.write_text("s3cret-token\n")
    tok.chmod(0o600)
    guarded_cfg = json.loads(admin_config(free_port(), token_file=str(tok)))
    guarded_cfg["admin"]["listen"] = "0.0.0.0:" + guarded_cfg["admin"]["listen"].split(":")[1]
    guarded = start_proxy(upstream.uri, config=json.dumps(guarded_cfg))
    assert get(port, "/healthz")[0] == 200

    def warnings(p):
        return [ln for ln in p.log.lines()
                if ln.get("s") == "W" and "needs no token" in ln.get("msg", "")]
    assert warnings(quiet) == [] and warnings(guarded) == []
    [w] = warnings(loud)
    assert "admin.tokenFile" in w["msg"] and f"0.0.0.0:{port}" in w["msg"]


def test_probes_need_no_token(admin_proxy):
    """A kubelet or load balancer probe sends no Authorization header: /healthz and
    /readyz answer it; everything else still wants the token."""
    port = admin_proxy.admin_port
    assert get(port, "/healthz")[0] == 200
    assert get(port, "/readyz")[0] == 200
    assert get(port, "/config")[0] == 401
    assert get(port, "/findings")[0] == 401


def test_config_shows_the_workers_running(start_proxy, upstream):
    """`workers: 0` (one per core) was shown as 0: /config shows the values in force."""
    port = free_port()
    cfg = json.loads(admin_config(port))
    cfg["workers"] = 0
    p = start_proxy(upstream.uri, config=json.dumps(cfg))
    (ready,) = [ln for ln in p.log.lines() if ln.get("msg") == "Waiting for connections"]
    running = ready["attr"]["workers"]
    assert running >= 1
    assert json.loads(get(port, "/config")[2])["workers"] == running


def test_list_and_close_connections(admin_proxy, clients, dbname):
    """What a pgbouncer operator reaches for (SHOW CLIENTS, KILL): the open client
    connections with who, what and how much, and closing one, token-guarded."""
    p = admin_proxy
    busy = clients.via(p, appname="lister-busy", maxPoolSize=1)
    busy[dbname].items.insert_many([{"i": i} for i in range(5)])
    assert len(list(busy[dbname].items.find({}))) == 5
    other = clients.via(p, appname="lister-other", maxPoolSize=1)
    other.admin.command("ping")

    assert get(p.admin_port, "/connections")[0] == 401
    status, headers, body = get(p.admin_port, "/connections", TOKEN)
    assert status == 200 and headers["Content-Type"] == "application/json"
    conns = json.loads(body)
    mine = [c for c in conns if c["appName"] == "lister-busy"]
    assert mine, conns
    # the pool's operation connection is the one that carried the requests
    worker = max(mine, key=lambda c: c["requests"])
    assert worker["requests"] >= 3 and worker["bytesIn"] > 0 and worker["bytesOut"] > 0
    assert worker["state"] in ("idle", "busy") and worker["ageSecs"] >= 0
    assert worker["ctx"] == f"conn{worker['id']}" and worker["client"].startswith("127.0.0.1:")
    assert worker["upstream"] and worker["tls"] is False

    # close it: the log says an operator did; the driver reconnects on its next call
    mark = p.log.mark()
    assert get(p.admin_port, f"/connections/{worker['id']}/close", TOKEN)[0] == 405
    status, _, text = get(p.admin_port, f"/connections/{worker['id']}/close", TOKEN,
                          method="POST")
    assert status == 200 and text == f"closed conn{worker['id']}\n", text
    [ended] = p.log.wait_for(lambda ln: ln.get("msg") == "Connection ended" and
                             ln.get("ctx") == worker["ctx"], 5, since=mark, what="the end")
    assert "closed by an operator" in ended["attr"]["reason"]
    ids = {c["id"] for c in json.loads(get(p.admin_port, "/connections", TOKEN)[2])}
    assert worker["id"] not in ids
    assert get(p.admin_port, f"/connections/{worker['id']}/close", TOKEN, method="POST")[0] == 404
    assert get(p.admin_port, "/connections/abc/close", TOKEN, method="POST")[0] == 404
    # the others were not touched
    assert other.admin.command("ping")["ok"] == 1
