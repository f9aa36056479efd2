"""mongodb+srv:// upstreams and DNS re-resolution, against a DNS stub of
the test's own (dns_stub.py) that mongoguard asks through
upstream.dnsServer, and real FerretDB servers behind the names.

Names live under mongoguard.test; every address is 127.0.0.1."""

from __future__ import annotations

import subprocess
import time

import pytest
from bson import ObjectId
from pymongo import MongoClient
from pymongo.errors import ServerSelectionTimeoutError

from conftest import free_port, line_text, unique_name
from dns_stub import SRV, TXT, A, DnsStub
from fakeserver import FakeServer
from ops_helpers import http_get
from topology_helpers import certs, ferret  # noqa: F401 -- fixtures

SRV_HOST = "rs.mongoguard.test"
SRV_NAME = f"_mongodb._tcp.{SRV_HOST}"


@pytest.fixture
def dns():
    d = DnsStub()
    yield d
    d.stop()


def _config(dns: DnsStub, refresh: int = 60) -> str:
    return f'upstream:\n  dnsServer: "{dns.server}"\n  dnsRefreshSecs: {refresh}\n'


def _point(dns: DnsStub, *members: tuple[str, int]) -> None:
    """SRV answer: the given (label, port)s, each label.mongoguard.test at 127.0.0.1."""
    dns.set_srv(SRV_NAME, [(f"{label}.mongoguard.test", port) for label, port in members])
    for label, _ in members:
        dns.set_a(f"{label}.mongoguard.test", ["127.0.0.1"])


def _msg(p, text: str, since: int = 0) -> list[dict]:
    return [ln for ln in p.log.since(since) if ln.get("msg", "").startswith(text)]


def _wait_msg(p, text: str, since: int = 0) -> list[dict]:
    """The lines starting with text, once there is one: the start-up lines
    can land after the listener is up (a slow build, a loaded machine)."""
    return p.log.wait_for(lambda ln: ln.get("msg", "").startswith(text), since=since,
                          what=repr(text))


def _regex_finding(client: MongoClient, db: str) -> int:
    c = client[db].people
    c.insert_one({"name": "Ada"})
    return len(list(c.find({"name": {"$regex": "^ada", "$options": "i"}})))


def test_srv_uri_works_for_pymongo(ferret, dns, start_proxy):
    f = ferret()
    _point(dns, ("db1", f.port))
    p = start_proxy(f"mongodb+srv://{SRV_HOST}/?tls=false", config=_config(dns))
    db = unique_name("srv")
    with p.client() as c:
        assert _regex_finding(c, db) == 1
    # the server behind the name got the write
    with f_client(f) as direct:
        assert direct[db].people.count_documents({"name": "Ada"}) == 1
    paired = _wait_msg(p, "Listener paired with upstream server")
    assert paired and paired[0]["attr"]["upstream"] == f"db1.mongoguard.test:{f.port}"
    found = _wait_msg(p, "Upstream hosts found through DNS")
    assert found and found[0]["attr"]["hosts"] == f"db1.mongoguard.test:{f.port}"
    assert found[0]["attr"]["tls"] is False  # the URI's tls=false wins
    assert dns.count(SRV_NAME, SRV) >= 1 and dns.count(SRV_HOST, TXT) >= 1
    assert dns.count("db1.mongoguard.test", A) >= 1
    p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "case-insensitive-regex", 10,
                   what="the regex finding")


def f_client(f) -> MongoClient:
    return MongoClient(f.uri, serverSelectionTimeoutMS=10000)


def test_srv_turns_tls_on_by_default(ferret, dns, start_proxy, certs):
    """No tls= in the URI: the seedlist spec turns TLS on, and the server's
    certificate is checked against the SRV target's name. FerretDB here
    speaks TLS only, with a certificate for db1.mongoguard.test."""
    cert, key, _ = certs._leaf("srv-db1", "db1.mongoguard.test",
                               "DNS:db1.mongoguard.test,IP:127.0.0.1", days=30)
    f = ferret(tls=(cert, key), plain=False)
    _point(dns, ("db1", f.tls_port))
    p = start_proxy(f"mongodb+srv://{SRV_HOST}/?tlsCAFile={certs.ca}", config=_config(dns))
    assert _wait_msg(p, "Upstream hosts found through DNS")[0]["attr"]["tls"] is True
    with p.client() as c:
        assert c.admin.command("ping")["ok"] == 1.0
    assert _wait_msg(p, "Waiting for connections")[0]["attr"]["upstreamTLS"] is True


def test_txt_replica_set_one_member(ferret, dns, start_proxy):
    """TXT gives replicaSet (in two character-strings, joined); FerretDB's
    one-member set names itself 127.0.0.1:port, the address the SRV
    target resolves to, so hello maps it to mongoguard's listener."""
    f = ferret(repl_set="rs0")
    _point(dns, ("db1", f.port))
    dns.set_txt(SRV_HOST, [["replicaSet=rs0&auth", "Source=admin"]])
    p = start_proxy(f"mongodb+srv://{SRV_HOST}/?tls=false", config=_config(dns))
    assert _wait_msg(p, "Upstream hosts found through DNS")[0]["attr"]["replicaSet"] == "rs0"
    db = unique_name("srvrs")
    with MongoClient(f"mongodb://127.0.0.1:{p.port}/?replicaSet=rs0",
                     serverSelectionTimeoutMS=10000) as c:
        assert _regex_finding(c, db) == 1
        assert c.topology_description.topology_type_name == "ReplicaSetWithPrimary"
        assert c.nodes == {("127.0.0.1", p.port)}, c.nodes
        assert c.admin.command("hello")["hosts"] == [f"127.0.0.1:{p.port}"]
        # the index cache's side connection (the expanded URI, replicaSet=rs0,
        # addresses from the stub) lists indexes: a verdict on a sort
        list(c[db].people.find({"name": "Ada"}).sort("age", 1))
    p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "index-mismatched-sort", 10,
                   what="the sort finding (needs the side connection)")
    assert not _msg(p, "Cannot list indexes")
    assert not _msg(p, "Replica-set members without a mongoguard listener")


def test_txt_with_a_forbidden_option_is_refused(dns, mongoguard_bin):
    _point(dns, ("db1", 27017))
    dns.set_txt(SRV_HOST, [["replicaSet=rs0&tls=false"]])
    r = _check(mongoguard_bin, f"mongodb+srv://{SRV_HOST}/", dns)
    assert r.returncode == 2
    assert "TXT record option 'tls=false' is not allowed" in r.stderr, r.stderr


def _check(binary: str, uri: str, dns: DnsStub, tmp_cfg: str | None = None):
    """`mongoguard --check-config` with the stub as name server: the same
    resolution start-up does, then exit."""
    cfg = tmp_cfg or f"/tmp/mg-srv-{ObjectId()}.yaml"
    with open(cfg, "w") as fh:
        fh.write(_config(dns))
    try:
        return subprocess.run([binary, "--config", cfg, "--upstream", uri, "--check-config"],
                              capture_output=True, text=True, timeout=30)
    finally:
        subprocess.run(["rm", "-f", cfg])


def test_target_outside_parent_domain_is_refused(dns, mongoguard_bin):
    dns.set_srv(SRV_NAME, [("db1.mongoguard.test", 27017), ("db2.elsewhere.test", 27017)])
    r = _check(mongoguard_bin, f"mongodb+srv://{SRV_HOST}/", dns)
    assert r.returncode == 2
    assert ("SRV record for rs.mongoguard.test names db2.elsewhere.test, which is not in its "
            "parent domain: refused") in r.stderr, r.stderr


def test_dns_failure_at_start_is_a_clear_error(dns, mongoguard_bin, tmp_path):
    dns.fail = True
    cfg = tmp_path / "mg.yaml"
    cfg.write_text(_config(dns))
    # the serving path, not only --check-config
    r = subprocess.run([mongoguard_bin, "--config", str(cfg), "--listen", f"127.0.0.1:{free_port()}",
                        "--upstream", f"mongodb+srv://{SRV_HOST}/", "--log", "-"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert (f"cannot find the upstream's hosts: SRV lookup of {SRV_NAME}: no answer for "
            f"{SRV_NAME} from {dns.server} (timeout or server failure)") in r.stderr, r.stderr
    # a name with no SRV record says so differently
    dns.fail = False
    r = _check(mongoguard_bin, f"mongodb+srv://{SRV_HOST}/", dns)
    assert r.returncode == 2
    assert f"{SRV_NAME} does not exist (NXDOMAIN from {dns.server})" in r.stderr, r.stderr


def test_dns_change_moves_new_connections(ferret, dns, start_proxy):
    """The SRV answer moves from one FerretDB to another while mongoguard
    runs: a connection open before keeps its server, connections opened
    after go to the new one; a host that appears without a listener is
    warned about."""
    f1, f2 = ferret(name="ferret-a"), ferret(name="ferret-b")
    _point(dns, ("db1", f1.port))
    p = start_proxy(f"mongodb+srv://{SRV_HOST}/?tls=false", config=_config(dns, refresh=1))
    db = unique_name("srvmove")
    old = MongoClient(p.uri, serverSelectionTimeoutMS=10000, maxPoolSize=1)
    old[db].c.insert_one({"which": "before"})
    mark = p.log.mark()
    _point(dns, ("db2", f2.port))
    changed = p.log.wait_for(lambda ln: ln.get("msg", "").startswith("Upstream hosts changed"),
                             10, since=mark, what="the DNS change")[0]
    assert changed["attr"]["now"] == f"db2.mongoguard.test:{f2.port}"
    assert changed["attr"]["trigger"] == "upstream.dnsRefreshSecs"
    with MongoClient(p.uri, serverSelectionTimeoutMS=10000) as new:
        new[db].c.insert_one({"which": "after"})
    old[db].c.insert_one({"which": "old connection, after"})  # its pooled socket: f1
    old.close()
    with f_client(f1) as d1, f_client(f2) as d2:
        assert sorted(x["which"] for x in d1[db].c.find()) == ["before",
                                                               "old connection, after"]
        assert [x["which"] for x in d2[db].c.find()] == ["after"]
    # a second host joins the answer: net.listen stays on db2, db3 has no listener
    mark = p.log.mark()
    dns.set_srv(SRV_NAME, [("db3.mongoguard.test", 27999), ("db2.mongoguard.test", f2.port)])
    dns.set_a("db3.mongoguard.test", ["127.0.0.1"])
    warn = p.log.wait_for(lambda ln: ln.get("msg", "").startswith(
        "Upstream host has no mongoguard listener"), 10, since=mark, what="the bypass warning")[0]
    assert warn["s"] == "W" and warn["attr"]["host"] == "db3.mongoguard.test:27999"
    assert not [ln for ln in p.log.since(mark)
                if ln.get("msg") == "Listener paired with upstream server"]


def test_refresh_failure_keeps_the_last_good_answer(ferret, dns, start_proxy):
    f = ferret()
    _point(dns, ("db1", f.port))
    p = start_proxy(f"mongodb+srv://{SRV_HOST}/?tls=false", config=_config(dns, refresh=1))
    mark = p.log.mark()
    dns.fail = True
    warn = p.log.wait_for(lambda ln: ln.get("msg", "").startswith(
        "Re-resolving the upstream failed; keeping the last good answer"), 15, since=mark,
        what="the refresh warning")[0]
    assert warn["s"] == "W" and "timeout or server failure" in warn["attr"]["error"]
    with p.client() as c:  # new connections still reach the last good host
        c[unique_name("srvfail")].c.insert_one({"x": 1})
    assert not _msg(p, "Upstream hosts changed", mark)


def test_plain_host_name_is_re_resolved(ferret, dns, start_proxy):
    """A mongodb:// URI's host name is looked up again on the timer (not
    only at start-up); losing its record keeps the last good address."""
    f = ferret()
    dns.set_a("plain.mongoguard.test", ["127.0.0.1"])
    p = start_proxy(f"mongodb://plain.mongoguard.test:{f.port}/", config=_config(dns, refresh=1))
    first = dns.count("plain.mongoguard.test", A)
    deadline = time.monotonic() + 10
    while dns.count("plain.mongoguard.test", A) < first + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dns.count("plain.mongoguard.test", A) >= first + 2
    mark = p.log.mark()
    dns.set_a("plain.mongoguard.test", [])
    del dns.records[("plain.mongoguard.test", A)]
    warn = p.log.wait_for(lambda ln: ln.get("msg", "").startswith("Re-resolving the upstream"),
                          15, since=mark, what="the refresh warning")[0]
    assert "plain.mongoguard.test does not exist" in warn["attr"]["error"], line_text(warn)
    with p.client() as c:
        c[unique_name("plain")].c.insert_one({"x": 1})


def test_connect_failure_re_resolves_at_once(ferret, dns, start_proxy):
    """With the timer off, a failed upstream connect is what makes
    mongoguard ask DNS again; the driver's retry then reaches the new host."""
    f1, f2 = ferret(name="ferret-a"), ferret(name="ferret-b")
    _point(dns, ("db1", f1.port))
    p = start_proxy(f"mongodb+srv://{SRV_HOST}/?tls=false", config=_config(dns, refresh=0))
    before = dns.count(SRV_NAME, SRV)
    time.sleep(1.5)
    assert dns.count(SRV_NAME, SRV) == before  # no timer
    _point(dns, ("db2", f2.port))
    f1.stop()
    db = unique_name("srvfailover")
    mark = p.log.mark()
    with MongoClient(p.uri, serverSelectionTimeoutMS=15000) as c:
        c[db].c.insert_one({"x": 1})
    changed = _msg(p, "Upstream hosts changed", mark)
    assert changed and changed[0]["attr"]["trigger"] == "connecting upstream failed"
    assert _msg(p, "Upstream unreachable", mark)
    with f_client(f2) as d2:
        assert d2[db].c.count_documents({}) == 1


def test_watch_and_readyz_follow_the_routes(dns, start_proxy):
    """The SRV answer first names a host where nothing listens, then a live
    one: the upstream watch and /readyz follow the routes the sessions are
    given, not the address resolved at start-up, and the watch's lines name
    the address they probed."""
    dead = free_port()
    _point(dns, ("db1", dead))
    admin = free_port()
    p = start_proxy(f"mongodb+srv://{SRV_HOST}/?tls=false",
                    config=_config(dns, refresh=1) + f'admin: {{listen: "127.0.0.1:{admin}"}}\n')
    down = _wait_msg(p, "Upstream unreachable:")[0]
    assert down["attr"]["upstream"] == f"db1.mongoguard.test:{dead}", line_text(down)
    assert http_get(admin, "/readyz")[0] == 503
    s = FakeServer()
    live = s.start()
    try:
        mark = p.log.mark()
        _point(dns, ("db2", live))
        up = p.log.wait_for(lambda ln: ln.get("msg") == "Upstream reachable", 15, since=mark,
                            what="Upstream reachable")[0]
        assert up["attr"]["upstream"] == f"db2.mongoguard.test:{live}", line_text(up)
        assert http_get(admin, "/readyz") == (200, "ready\n")
        with p.client() as c:  # the sessions went the same way
            assert c.admin.command("ping")["ok"] == 1
    finally:
        s.stop()


def test_load_balanced_reply_is_warned_once_per_connection(start_proxy):
    """A hello reply with serviceId (a load balancer's) gets one warning
    per client connection, however many hellos it carries."""
    s = FakeServer()
    s.start()
    try:
        async def lb_hello(conn, msg):
            await conn.reply(msg, s.hello_doc(serviceId=ObjectId()))
        s.handlers["hello"] = s.handlers["isMaster"] = s.handlers["ismaster"] = lb_hello
        p = start_proxy(s.uri)
        with MongoClient(f"mongodb://127.0.0.1:{p.port}/?loadBalanced=true", maxPoolSize=1,
                         serverSelectionTimeoutMS=5000) as c:
            for _ in range(3):
                c.admin.command("hello")
        warns = [ln for ln in p.log.lines()
                 if ln.get("msg", "").startswith("Upstream answers as a load balancer")]
        assert len(warns) == 1, [line_text(w) for w in warns]
        assert warns[0]["s"] == "W" and "serviceId" in warns[0]["attr"]["reason"]
        assert len(s.messages("hello")) >= 4  # the handshake and three commands
    finally:
        s.stop()


def test_srv_service_name(dns, mongoguard_bin):
    """srvServiceName picks the SRV name asked; directConnection=true is
    refused with an SRV URI (libmongoc's parser, as the spec says)."""
    dns.set_srv(f"_custom._tcp.{SRV_HOST}", [("db7.mongoguard.test", 27123)])
    dns.set_a("db7.mongoguard.test", ["127.0.0.1"])
    r = _check(mongoguard_bin, f"mongodb+srv://{SRV_HOST}/?srvServiceName=custom&tls=false", dns)
    assert r.returncode == 0, r.stderr
    assert "upstream db7.mongoguard.test:27123" in r.stdout, r.stdout
    assert dns.count(f"_custom._tcp.{SRV_HOST}", SRV) == 1 and dns.count(SRV_NAME, SRV) == 0
    r = _check(mongoguard_bin, f"mongodb+srv://{SRV_HOST}/?directConnection=true", dns)
    assert r.returncode == 2 and "invalid upstream URI" in r.stderr, r.stderr
