"""Live reload (SIGHUP and POST /reload): rules change for connections that
stay open, a broken file changes nothing and says where it is broken,
restart-only settings are named, and traffic running through many reloads
sees no error."""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest
from bson.regex import Regex
from pymongo.errors import OperationFailure

from conftest import free_port
from topology_helpers import certs  # noqa: F401 -- fixture


def cfg(regex_action: str, admin_port: int, **extra) -> str:
    c = {"admin": {"listen": f"127.0.0.1:{admin_port}"},
         "rules": {"case-insensitive-regex": regex_action}}
    c.update(extra)
    return json.dumps(c, indent=1) + "\n"


def reloads(p, since: int, ok: bool = True, n: int = 1, timeout: float = 10.0):
    msg = "Configuration reloaded" if ok else "Reload refused; the running configuration stays"
    deadline = time.monotonic() + timeout
    while True:
        hits = [ln for ln in p.log.since(since) if ln.get("msg") == msg]
        if len(hits) >= n:
            return hits
        assert time.monotonic() < deadline, f"no '{msg}' in {p.log.path}"
        time.sleep(0.05)


def post_reload(port: int):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/reload", method="POST", data=b"")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
    raise AssertionError(f"no {name}")


@pytest.fixture
def reloadable(start_proxy, upstream):
    port = free_port()
    p = start_proxy(upstream.uri, config=cfg("log", port))
    p.admin_port = port
    return p


def accepted(p) -> int:
    return sum(1 for ln in p.log.lines() if ln.get("msg") == "Connection accepted")


def test_sighup_changes_rules_for_open_connections(reloadable, clients, dbname):
    p = reloadable
    c = clients.via(p, maxPoolSize=1)
    coll = c[dbname].people
    coll.insert_one({"name": "Ada"})
    assert coll.find_one({"name": Regex("^ada", "i")})["name"] == "Ada"  # logged only
    conns = accepted(p)

    mark = p.log.mark()
    p.config_path.write_text(cfg("block", p.admin_port))
    p.proc.send_signal(signal.SIGHUP)
    line = reloads(p, mark)[0]
    assert line["attr"]["case-insensitive-regex"] == "block"
    assert line["attr"]["source"] == "SIGHUP"
    with pytest.raises(OperationFailure) as e:
        coll.find_one({"name": Regex("^ada", "i")})
    assert "case-insensitive-regex" in str(e.value)
    assert coll.find_one({"name": "Ada"})["name"] == "Ada"
    assert accepted(p) == conns, "the reload must not drop or replace connections"
    assert metric(p.admin_port, 'mongoguard_config_reloads_total{result="ok"}') == 1


def test_broken_config_changes_nothing(reloadable, clients, dbname):
    p = reloadable
    coll = clients.via(p)[dbname].people
    mark = p.log.mark()
    p.config_path.write_text(cfg("block", p.admin_port))
    p.proc.send_signal(signal.SIGHUP)
    reloads(p, mark)

    mark = p.log.mark()
    p.config_path.write_text('rules:\n  case-insensitive-regex: log\n  no-such-rule: block\n')
    p.proc.send_signal(signal.SIGHUP)
    err = reloads(p, mark, ok=False)[0]["attr"]
    assert err["file"] == str(p.config_path)
    assert "line 3" in err["error"] and "no-such-rule" in err["error"]
    with pytest.raises(OperationFailure):  # still blocking: the old config stays
        coll.find_one({"name": Regex("x", "i")})
    assert metric(p.admin_port, 'mongoguard_config_reloads_total{result="failed"}') == 1

    status, body = post_reload(p.admin_port)
    assert status == 422 and "line 3" in body
    p.config_path.write_text(cfg("off", p.admin_port))
    status, body = post_reload(p.admin_port)
    assert status == 200, body
    assert coll.find_one({"name": Regex("x", "i")}) is None  # off: forwarded


def test_restart_only_settings_are_named(reloadable, clients, dbname):
    p = reloadable
    mark = p.log.mark()
    # net.listen in the file: the --listen flag still wins, as at start, so
    # nothing changes there; maxConnections and workers need a restart
    p.config_path.write_text(cfg("log", p.admin_port,
                                 net={"listen": "127.0.0.1:1", "maxConnections": 5},
                                 workers=7))
    p.proc.send_signal(signal.SIGHUP)
    reloads(p, mark)
    text = " ".join(ln.get("msg", "") for ln in p.log.since(mark))
    assert "net.maxConnections changed, but takes effect only after a restart" in text
    assert "workers changed" in text
    assert "net.listen changed" not in text
    # still serving on the old address
    assert clients.via(p)[dbname].c.count_documents({}) == 0
    with urllib.request.urlopen(f"http://127.0.0.1:{p.admin_port}/config", timeout=10) as r:
        assert json.loads(r.read())["net"]["listen"] == f"127.0.0.1:{p.port}"


def test_log_verbosity_is_live(reloadable, clients, dbname):
    p = reloadable
    mark = p.log.mark()
    p.config_path.write_text(cfg("log", p.admin_port, log={"verbosity": 1}))
    p.proc.send_signal(signal.SIGHUP)
    reloads(p, mark)
    c = clients.via(p)
    c[dbname].c.find_one({})
    p.log.wait_for(lambda ln: ln.get("s") == "D1" or ln.get("s", "").startswith("D"),
                   since=mark, what="a debug line after raising log.verbosity")


def test_traffic_through_many_reloads(reloadable, clients, dbname):
    p = reloadable
    c = clients.via(p, maxPoolSize=4)
    coll = c[dbname].items
    coll.insert_many([{"i": i} for i in range(20)])
    errors, done = [], threading.Event()
    count = [0]

    def work():
        while not done.is_set():
            try:
                assert coll.count_documents({"i": {"$lt": 10}}) == 10
                count[0] += 1
            except Exception as e:  # noqa: BLE001 - every failure is the finding
                errors.append(repr(e))
                return

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    mark = p.log.mark()
    t0 = time.monotonic()
    for i in range(20):
        p.config_path.write_text(cfg("log" if i % 2 else "block", p.admin_port))
        p.proc.send_signal(signal.SIGHUP)
        reloads(p, mark, n=i + 1)
    dt = time.monotonic() - t0
    done.set()
    for t in threads:
        t.join(30)
    print(f"  20 reloads in {dt:.2f}s under 4 clients: {count[0]} queries answered, "
          f"{len(errors)} failed")
    assert not errors, errors[:3]
    assert count[0] > 0


def test_reload_rereads_tls_certificates(certs, upstream, start_proxy, tmp_path):
    from test_tls import fails_with, tls_client

    pem = tmp_path / "server.pem"
    pem.write_bytes(certs.server_pem.read_bytes())
    _, _, other_pem = certs._leaf("server-other", "localhost", "DNS:localhost,IP:127.0.0.1",
                                  days=30, ca="other-ca")
    cfg_text = f'net:\n  tls:\n    mode: requireTLS\n    certificateKeyFile: "{pem}"\n'
    p = start_proxy(upstream.uri, config=cfg_text)
    with tls_client(p.port, certs.ca, maxPoolSize=1) as old:
        assert old.mg_reload_tls.c.count_documents({}) == 0
        mark = p.log.mark()
        pem.write_bytes(other_pem.read_bytes())
        p.proc.send_signal(signal.SIGHUP)
        reloads(p, mark)
        # new connections get the new certificate, the open one keeps going
        with tls_client(p.port, certs.other_ca) as c:
            assert c.mg_reload_tls.c.count_documents({}) == 0
        with tls_client(p.port, certs.ca) as c:
            fails_with(c, "certificate verify failed", "CERTIFICATE_VERIFY_FAILED")
        assert old.mg_reload_tls.c.count_documents({}) == 0

        # a file that is no certificate: refused, the running one stays
        mark = p.log.mark()
        pem.write_text("not a certificate\n")
        p.proc.send_signal(signal.SIGHUP)
        err = reloads(p, mark, ok=False)[0]["attr"]["error"]
        assert "certificateKeyFile" in err or str(pem) in err, err
        with tls_client(p.port, certs.other_ca) as c:
            assert c.mg_reload_tls.c.count_documents({}) == 0


def test_post_reload_names_the_changes_that_wait_for_a_restart(reloadable, clients, dbname):
    """POST /reload answered a bare "reloaded" while ignoring restart-only changes: the
    answer is what a deploy script reads, so it names them."""
    p = reloadable
    p.config_path.write_text(cfg("block", p.admin_port, net={"maxConnections": 5}))
    status, body = post_reload(p.admin_port)
    assert status == 200, body
    assert body.startswith("reloaded; these changes wait for a restart"), body
    assert "net.maxConnections" in body and "workers" not in body
    # the rule change itself took effect
    with pytest.raises(OperationFailure):
        clients.via(p)[dbname].c.find_one({"x": Regex("^a", "i")})
    p.config_path.write_text(cfg("log", p.admin_port))
    # net.maxConnections is back to the running value: nothing waits
    assert post_reload(p.admin_port) == (200, "reloaded\n")
