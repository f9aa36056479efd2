"""mongoguard's side connection (the index cache's listIndexes, count and
explain) must not change what a client's own commands get back.

FerretDB's SQLite backend serves a database over a pool of SQLite
connections; each caches the schema it last read. A request beside the
client's (the side connection counting the collection) makes the pool open a
second connection; a dropIndexes then runs on one of them while the other
sits idle with the old schema, and a createIndexes that lands on that one
(because the side connection holds the first at that moment) fails with
"SQL logic error: index ... already exists". pymongo's GridFS tests hit it
through mongoguard (cleanup: delete_many + drop_indexes; then GridIn's
find_one, list_indexes, create_index), never directly.

The first workload is that sequence, sharpened; the second is pymongo's
GridFS pattern itself. Both are races on FerretDB: without the fix the
first failed a round in 1 of 10 and 1 of 30 rounds in a standalone loop,
yet passed twice against the commit before the fix, so a pass there is weak
evidence. The rule itself is checked deterministically at the end, against
a scripted upstream that notes any request arriving while the other party
has one out in the same database (both fail before the fix, every time),
and in test_index_cache.c."""

from __future__ import annotations

import asyncio
import threading
import time

import gridfs
import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

CONFIG = """
rules:
  index-mismatched-sort: log
  collection-scan:
    action: log
    minDocuments: 100
"""

ROUNDS = 60
GRIDFS_ROUNDS = 20


def _workload(client, dbname: str, rounds: int) -> list[str]:
    """Drops and re-creates an index, each time right after a find that
    sends mongoguard for the index list: the find (on an _id range, which
    FerretDB answers from its primary key) comes back at once while the side
    connection's count still reads the whole collection, and the
    createIndexes follows a moment later. Returns the errors the client
    saw."""
    db = client[dbname]
    coll = db.big
    coll.insert_many([{"_id": i, "a": i, "b": i % 7, "pad": "x" * 200} for i in range(2000)])
    errors = []
    for _ in range(rounds):
        try:
            coll.drop_indexes()
            # an _id range, not a point: a point on _id bounds the sort to one
            # document, which index-mismatched-sort rightly leaves alone
            list(coll.find({"_id": {"$gte": 3}, "b": 3}).sort("a", 1).limit(1))
            time.sleep(0.005)
            coll.create_index([("a", 1), ("b", 1)])
        except OperationFailure as e:
            errors.append(str(e))
    return errors


def _gridfs_rounds(client, dbname: str, rounds: int) -> list[str]:
    """pymongo's own GridFS test pattern: clean up (delete_many and
    drop_indexes on fs.files and fs.chunks), then write a file (GridIn
    creates its indexes) and read it back."""
    db = client[dbname]
    fs = gridfs.GridFS(db)
    errors = []
    for i in range(rounds):
        try:
            for c in (db.fs.files, db.fs.chunks):
                c.delete_many({})
                c.drop_indexes()
            fid = fs.put(b"hello world\n" * 50, filename=f"f{i}", chunkSize=64)
            assert fs.get(fid).read() == b"hello world\n" * 50
        except OperationFailure as e:
            errors.append(str(e))
    return errors


def test_client_ddl_beside_the_side_connection(upstream, start_proxy, clients, dbname):
    if not upstream.is_ferretdb:
        pytest.skip("the race is FerretDB's (SQLite schema caches); a mongod has none")
    p = start_proxy(upstream.uri, config=CONFIG)
    errors = _workload(clients.via(p), dbname, ROUNDS)
    assert errors == [], f"{len(errors)} of {ROUNDS} rounds failed through mongoguard: {errors[:3]}"
    # The index lists were fetched meanwhile: the side connection did run.
    assert p.log.findings(), "no finding at all: the side connection never ran"


def test_gridfs_through_mongoguard(upstream, start_proxy, clients, dbname):
    if not upstream.is_ferretdb:
        pytest.skip("the race is FerretDB's (SQLite schema caches); a mongod has none")
    p = start_proxy(upstream.uri, config=CONFIG)
    errors = _gridfs_rounds(clients.via(p), dbname + "_fs", GRIDFS_ROUNDS)
    assert errors == [], f"{len(errors)} of {GRIDFS_ROUNDS} rounds failed through mongoguard: {errors[:3]}"


# --- the rule itself, deterministic: a scripted upstream that notes overlaps ---

SIDE_APP = "mongoguard-metadata"
# what a client sends that waits for the side connection (index_cache.h): DDL and inserts
SCHEMA_CHANGES = ("createIndexes", "dropIndexes", "create", "drop", "dropDatabase",
                  "collMod", "renameCollection", "insert")


def _scripted(start_proxy, slow: str):
    """A fake upstream whose `slow` command (from the side connection for
    count, from the client for createIndexes) takes 0.4 s, and which notes
    each request that arrives while the other party has one out in the
    same database."""
    from fakeserver import FakeServer
    srv = FakeServer()
    srv.start()
    srv.add_collection("shop.orders", indexes=[{"key": {"a": 1}, "name": "a_1"}], count=500)
    srv.add_collection("shop.other", indexes=[{"key": {"x": 1}, "name": "x_1"}], count=500)
    out = {"side": 0, "client": 0}
    overlaps: list[str] = []

    def party(conn) -> str:
        return "side" if conn.app_name == SIDE_APP else "client"

    async def any_command(conn, msg):
        me = party(conn)
        other = "client" if me == "side" else "side"
        db = (msg.body or {}).get("$db")
        # the client's reads may overlap the side connection (only schema
        # changes wait): they are neither counted nor noted
        if me == "client" and msg.command not in SCHEMA_CHANGES:
            return False
        if db == "shop" and msg.command not in ("hello", "isMaster", "ismaster", "ping",
                                                "endSessions"):
            if out[other]:
                overlaps.append(f"{me} {msg.command} while {other} had one out")
            out[me] += 1
            try:
                if msg.command == slow:
                    await asyncio.sleep(0.4)
                if msg.command == "createIndexes":
                    await conn.reply(msg, {"ok": 1.0, "numIndexesBefore": 2,
                                           "numIndexesAfter": 3})
                    return True
                return False  # the catalogue (or the default) answers
            finally:
                out[me] -= 1
        return False

    srv.handlers["*"] = any_command
    p = start_proxy(srv.uri, config=CONFIG)
    return srv, p, overlaps


def _wait_side_knows(client, p):
    deadline = time.monotonic() + 10
    while not p.log.findings("collection-scan"):
        list(client.shop.other.find({"qty": 1}))
        assert time.monotonic() < deadline, "the side connection never answered"
        time.sleep(0.05)


def test_client_ddl_waits_for_the_side_connection(start_proxy):
    """The side connection counts shop.orders (0.4 s) when the client's
    createIndexes comes: it goes when the side connection is done."""
    srv, p, overlaps = _scripted(start_proxy, slow="count")
    try:
        with MongoClient(p.uri, appname="ddl-waits", serverSelectionTimeoutMS=10000) as c:
            _wait_side_knows(c, p)
            overlaps.clear()
            list(c.shop.orders.find({"qty": 1}))  # sends the side connection for the list
            time.sleep(0.1)  # its count is out now
            c.shop.orders.create_index("qty")
        assert overlaps == []
        # it waited for the side connection, not out the wait's limit
        assert not [ln for ln in p.log.lines() if "still busy" in ln.get("msg", "")]
        assert srv.messages("count") and srv.messages("createIndexes")
        assert srv.errors == []
    finally:
        srv.stop()


def test_side_connection_waits_for_client_ddl(start_proxy):
    """A client's createIndexes to shop is out (0.4 s) when a find to another
    collection of shop sends the side connection for its list: the fetch
    starts when the createIndexes' reply has passed."""
    srv, p, overlaps = _scripted(start_proxy, slow="createIndexes")
    try:
        with MongoClient(p.uri, appname="side-waits", serverSelectionTimeoutMS=10000) as a, \
                MongoClient(p.uri, appname="side-waits-2", serverSelectionTimeoutMS=10000) as b:
            a.admin.command("ping")
            b.admin.command("ping")
            t = threading.Thread(target=lambda: a.shop.orders.create_index("qty"))
            t.start()
            time.sleep(0.1)  # the createIndexes is out
            list(b.shop.orders.find({"qty": 1}))  # unknown list: the side connection is sent
            t.join(10)
            _wait_side_knows(b, p)
        assert overlaps == []
        assert srv.messages("listIndexes") and srv.messages("createIndexes")
        assert srv.errors == []
    finally:
        srv.stop()
