"""When the server drops a connection, the client sees exactly that.

FerretDB on SQLite closes the connection when it is sent a Decimal128: a
real trigger for a server-side drop in the middle of a session. Directly,
pymongo gets AutoReconnect, clears its pool, and the next operation works;
through mongoguard it must be the same (a synthesized command error made
pymongo keep its pool and fail the next operation too)."""

from __future__ import annotations

import pytest
from bson.decimal128 import Decimal128
from pymongo.errors import AutoReconnect

from conftest import line_text
from topology_helpers import node_topology


def _dropped_then_next(client, db: str) -> dict:
    c = client[db].d
    out = {"first": c.insert_one({"_id": 1}).inserted_id}
    try:
        c.insert_one({"_id": 2, "v": Decimal128("1.5")})
        out["dropped"] = "no error"
    except AutoReconnect as e:
        out["dropped"] = "AutoReconnect"
    except Exception as e:  # noqa: BLE001 -- the class is what is compared
        out["dropped"] = type(e).__name__
    # at once, within the second in which a kept pool would hand out the
    # socket the server (or mongoguard) had just closed
    out["next"] = c.insert_one({"_id": 3}).inserted_id
    out["count"] = c.count_documents({})
    return out


@pytest.fixture
def ferretdb_only(upstream):
    if not upstream.is_ferretdb:
        pytest.skip("the trigger (a Decimal128 closing the connection) is FerretDB/SQLite's")


def test_pymongo_after_server_drop(ferretdb_only, upstream, proxy, clients, dbname):
    direct = _dropped_then_next(clients.direct(retryWrites=False), dbname + "_d")
    mark = proxy.log.mark()
    via = _dropped_then_next(clients.via(proxy, retryWrites=False), dbname + "_p")
    assert direct == {"first": 1, "dropped": "AutoReconnect", "next": 3, "count": 2}
    assert via == direct
    hits = proxy.log.wait_for(lambda ln: ln.get("msg") == "Connection ended" and
                              "lost its connection to upstream" in line_text(ln), 5,
                              since=mark, what="the connection-ended line")
    assert hits[0]["s"] == "W"


def test_pymongo_retryable_write_after_drop(ferretdb_only, upstream, proxy, clients, dbname):
    """With retryable writes on (the default), the dropped insert is retried
    as a network error is: same outcome directly and through mongoguard."""
    direct = _dropped_then_next(clients.direct(), dbname + "_d")
    via = _dropped_then_next(clients.via(proxy), dbname + "_p")
    assert via == direct


def test_node_after_server_drop(ferretdb_only, node_modules, upstream, proxy, dbname):
    opts = {"retryWrites": False}
    direct = node_topology(upstream.uri, dbname + "_d", "dropped", opts)
    via = node_topology(proxy.uri, dbname + "_p", "dropped", opts)
    assert direct["dropped"] == {"name": "MongoNetworkError"}, direct
    assert direct["next"] == {"$numberInt": "3"}
    assert via == direct
