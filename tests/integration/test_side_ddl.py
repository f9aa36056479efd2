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
GridFS pattern itself. Both are races: without the fix the first failed a
round in 1 of 10 and 1 of 30 rounds in a standalone loop, and this file
passed twice against the commit before the fix, so a pass here is weak
evidence; the deterministic check of the rule is test_index_cache.c
(test_side_connection_and_client_ddl_never_overlap)."""

from __future__ import annotations

import time

import gridfs
import pytest
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
    sends mongoguard for the index list: the find (by _id, which FerretDB
    answers from its primary key) comes back at once while the side
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
            list(coll.find({"_id": 3, "b": 3}).sort("a", 1).limit(1))
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
