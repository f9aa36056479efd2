"""Replica sets through mongoguard: every connection a driver opens stays
on mongoguard, because hello replies name mongoguard's listeners.

A one-member set is FerretDB with --repl-set-name (the default mapping:
--listen plus the URI's host). Three members are scripted fake servers
(FerretDB cannot form a larger set), each paired with its own listener by
upstream.members."""

from __future__ import annotations

import subprocess
import time

import pytest
from bson.objectid import ObjectId
from pymongo import MongoClient, ReadPreference

from conftest import NODE_DIR, free_port, line_text
from fakeserver import FakeServer
from topology_helpers import ferret, node_topology  # noqa: F401 -- ferret is a fixture



def _rs_client(port: int, **kw) -> MongoClient:
    kw.setdefault("serverSelectionTimeoutMS", 10000)
    return MongoClient(f"mongodb://127.0.0.1:{port}/?replicaSet=rs0", **kw)


def _nodes_settled(client, expected: set, timeout: float = 5.0) -> frozenset:
    """client.nodes once every monitor has checked in (or the timeout)."""
    deadline = time.monotonic() + timeout
    while client.nodes != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return client.nodes


def _regex_finding(client, db: str):
    c = client[db].people
    c.insert_one({"_id": 1, "name": "Ada"})
    return list(c.find({"name": {"$regex": "^ada", "$options": "i"}}))


# --- one member: FerretDB --repl-set-name ----------------------------------------

def test_direct_replica_set_lists_the_server(ferret):
    """The problem, shown directly: the driver adopts the member list."""
    f = ferret(repl_set="rs0")
    with _rs_client(f.port) as c:
        c.admin.command("ping")
        assert c.nodes == {("127.0.0.1", f.port)}


def test_pymongo_replica_set_stays_on_mongoguard(ferret, start_proxy, dbname):
    f = ferret(repl_set="rs0")
    p = start_proxy(f.uri + "?replicaSet=rs0")
    with _rs_client(p.port) as c:
        assert len(_regex_finding(c, dbname)) == 1
        assert c.nodes == {("127.0.0.1", p.port)}, c.nodes
        assert c.topology_description.topology_type_name == "ReplicaSetWithPrimary"
        hello = c.admin.command("hello")
        assert hello["hosts"] == [f"127.0.0.1:{p.port}"]
        assert hello["setName"] == "rs0"
    p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "case-insensitive-regex", 10,
                   what="the regex finding")


def test_node_replica_set_stays_on_mongoguard(ferret, start_proxy, node_modules, dbname):
    f = ferret(repl_set="rs0")
    direct = node_topology(f.uri + "?replicaSet=rs0", dbname + "_d", "nodes")
    assert direct["servers"] == [f"127.0.0.1:{f.port}"]
    p = start_proxy(f.uri + "?replicaSet=rs0")
    via = node_topology(f"mongodb://127.0.0.1:{p.port}/?replicaSet=rs0", dbname, "nodes")
    assert via["servers"] == [f"127.0.0.1:{p.port}"], via
    assert via["type"] == "ReplicaSetWithPrimary"
    p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "case-insensitive-regex", 10,
                   what="the regex finding from the Node.js driver")


def test_mongosh_replica_set(ferret, start_proxy, node_modules, dbname):
    f = ferret(repl_set="rs0")
    p = start_proxy(f.uri + "?replicaSet=rs0")
    sh = node_modules / ".bin" / "mongosh"
    script = (f"const d = db.getSiblingDB('{dbname}'); d.s.insertOne({{_id: 1, n: 'x'}});"
              "d.s.find({n: /X/i}).toArray();"
              "print(JSON.stringify(db.hello().hosts));")
    r = subprocess.run([str(sh), "--quiet", "--norc",
                        f"mongodb://127.0.0.1:{p.port}/?replicaSet=rs0", "--eval", script],
                       capture_output=True, text=True, timeout=120, cwd=NODE_DIR)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == f'["127.0.0.1:{p.port}"]'
    p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "case-insensitive-regex", 10,
                   what="the regex finding from mongosh")


# --- three members: scripted servers, a listener each -----------------------------

class FakeSet:
    """Three fake servers answering hello as members of rs0 (the first is
    primary); extra hosts can be added to the member list later."""

    def __init__(self):
        self.servers = [FakeServer() for _ in range(3)]
        for s in self.servers:
            s.start()
        self.extra: list[str] = []
        self.primary = 0  # which member says it is primary; a test may change it
        self.election = 1
        for i, s in enumerate(self.servers):
            s.handlers["hello"] = s.handlers["isMaster"] = s.handlers["ismaster"] = \
                self._hello(i)

    @property
    def names(self) -> list[str]:
        return [f"127.0.0.1:{s.port}" for s in self.servers]

    def _hello(self, i: int):
        async def on_hello(conn, msg):
            s = self.servers[i]
            p = self.primary
            doc = s.hello_doc(setName="rs0", setVersion=1, hosts=self.names[:2] + self.extra,
                              passives=self.names[2:], primary=self.names[p], me=self.names[i],
                              isWritablePrimary=i == p, ismaster=i == p, secondary=i != p)
            if i == p:
                doc["electionId"] = ObjectId(f"{self.election:024x}")
            if i == 2:
                doc["passive"] = True
            await conn.reply(msg, doc)
        return on_hello

    def stop(self):
        for s in self.servers:
            s.stop()


@pytest.fixture
def fake_set():
    fs = FakeSet()
    yield fs
    fs.stop()


def _members_config(fs: FakeSet, listen_ports: list[int]) -> str:
    rows = "".join(f'    - {{host: "{fs.names[i]}", listen: "127.0.0.1:{listen_ports[i - 1]}"}}\n'
                   for i in (1, 2))
    return f"upstream:\n  members:\n{rows}"


def test_fake_set_direct_lists_members(fake_set):
    """The script is right: directly, the driver finds all three members."""
    with _rs_client(fake_set.servers[0].port, serverSelectionTimeoutMS=5000) as c:
        c.admin.command("ping")
        c.get_database("t", read_preference=ReadPreference.SECONDARY).c.find_one({})
        want = {("127.0.0.1", s.port) for s in fake_set.servers}
        assert _nodes_settled(c, want) == want


def test_three_members_each_on_its_listener(fake_set, start_proxy):
    ports = [free_port(), free_port()]
    p = start_proxy(f"mongodb://{fake_set.names[0]}/?replicaSet=rs0",
                    config=_members_config(fake_set, ports))
    mine = {("127.0.0.1", p.port)} | {("127.0.0.1", q) for q in ports}
    with _rs_client(p.port, serverSelectionTimeoutMS=5000) as c:
        c.admin.command("ping")
        c.get_database("t", read_preference=ReadPreference.SECONDARY).c.find_one({})
        c.t.c.insert_one({"_id": 1})
        assert _nodes_settled(c, mine) == mine
        hello = c.admin.command("hello")
        assert hello["hosts"] == [f"127.0.0.1:{p.port}", f"127.0.0.1:{ports[0]}"]
        assert hello["passives"] == [f"127.0.0.1:{ports[1]}"]
        assert hello["primary"] == f"127.0.0.1:{p.port}"
        assert hello["me"] == f"127.0.0.1:{p.port}"
    # each listener paired its clients with its own member: the secondary
    # read reached a secondary, the write the primary
    finds = [s for s in fake_set.servers[1:]
             if any(m.command == "find" for c in s.conns for m in c.received)]
    assert finds, "the secondary read reached no secondary"
    assert any(m.command == "insert" for c in fake_set.servers[0].conns for m in c.received)


def test_primary_change_is_followed(fake_set, start_proxy):
    """The set elects another primary: the driver follows it, through the
    listener of the new primary, and never leaves mongoguard."""
    ports = [free_port(), free_port()]
    p = start_proxy(f"mongodb://{fake_set.names[0]}/?replicaSet=rs0",
                    config=_members_config(fake_set, ports))
    mine = {("127.0.0.1", p.port)} | {("127.0.0.1", q) for q in ports}
    with _rs_client(p.port, serverSelectionTimeoutMS=5000, heartbeatFrequencyMS=500) as c:
        c.t.c.insert_one({"_id": 1})
        assert c.primary == ("127.0.0.1", p.port)
        fake_set.primary, fake_set.election = 1, 2  # member 1 wins an election
        deadline = time.monotonic() + 15
        while c.primary != ("127.0.0.1", ports[0]):
            assert time.monotonic() < deadline, f"primary still {c.primary}"
            time.sleep(0.1)
        c.t.c.insert_one({"_id": 2})
        assert set(c.nodes) <= mine, c.nodes
    inserts = [m for cn in fake_set.servers[1].conns for m in cn.received
               if m.command == "insert"]
    assert inserts, "the write after the election did not reach the new primary"


def test_member_added_is_left_out_and_logged(fake_set, start_proxy):
    ports = [free_port(), free_port()]
    p = start_proxy(f"mongodb://{fake_set.names[0]}/?replicaSet=rs0",
                    config=_members_config(fake_set, ports))
    newcomer = f"127.0.0.1:{free_port()}"
    fake_set.extra.append(newcomer)  # the set grew after mongoguard started
    with _rs_client(p.port, serverSelectionTimeoutMS=5000) as c:
        c.admin.command("ping")
        assert ("127.0.0.1", int(newcomer.split(":")[1])) not in c.nodes
        assert all(port in {p.port, *ports} for _, port in c.nodes), c.nodes
        assert newcomer not in str(c.admin.command("hello"))
    hits = p.log.wait_for(lambda ln: newcomer in line_text(ln) and ln.get("s") == "W", 5,
                          what="the warning naming the member without a listener")
    assert "upstream.members" in line_text(hits[0])


def test_mongos_passes_unchanged(fake, start_proxy):
    """A mongos reply lists no hosts: nothing to rewrite, bytes unchanged."""
    srv = fake()

    async def on_hello(conn, msg):
        await conn.reply(msg, srv.hello_doc(msg="isdbgrid"))

    srv.handlers["hello"] = srv.handlers["isMaster"] = srv.handlers["ismaster"] = on_hello
    p = start_proxy(srv.uri)
    with MongoClient(f"mongodb://127.0.0.1:{p.port}/", serverSelectionTimeoutMS=5000) as c:
        c.admin.command("ping")
        assert c.topology_description.topology_type_name == "Sharded"
        assert c.nodes == {("127.0.0.1", p.port)}


@pytest.fixture
def fake():
    made = []

    def make(**kw) -> FakeServer:
        s = FakeServer(**kw)
        s.start()
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()
