"""A scripted MongoDB server for frames a real server will not produce on
demand: exhaust getMore streams, streaming hello, moreToCome requests that get
no reply, malformed replies.

It runs an asyncio loop in a background thread so synchronous pytest code can
use it. Every message it receives is recorded with its exact bytes, so a test
can assert what mongoguard forwarded. By default it answers like a small
standalone mongod (hello, ping, empty cursors, acknowledged writes); a test
overrides any command with a handler:

    async def on_find(conn, msg):
        await conn.reply(msg, {"cursor": {...}, "ok": 1})
    server.handlers["find"] = on_find

Handlers run one at a time per connection, in arrival order, which is how a
mongod connection behaves too.

A test can also give it a catalogue of collections, for index kinds a test server
cannot create (partial, hidden, hashed, wildcard, text, 2dsphere, collation) and
multikey facts it does not report:

    server.add_collection("shop.orders", count=50000, multikey=["tags"],
                          indexes=[{"key": {"tags": 1}, "name": "tags_1"}])

Then listIndexes, count (and the $collStats count of estimatedDocumentCount) and
explain of a find answer for it as mongod does: explain's winningPlan is
LIMIT > FETCH > IXSCAN of the hinted index, with isMultiKey and multiKeyPaths
computed from the multikey paths given (a path is multikey when it or a prefix of
it holds arrays), which is what mongoguard's side connection reads.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
import threading
import time

import bson
from bson.int64 import Int64
from bson.objectid import ObjectId

import mgwire as w


class FakeConn:
    def __init__(self, server: "FakeServer", cid: int, reader, writer):
        self.server = server
        self.id = cid
        self.reader = reader
        self.writer = writer
        self.received: list[w.Message] = []
        self.sent: list[bytes] = []
        self.app_name: str | None = None
        self.driver_name: str | None = None
        self.closed = False
        self.peer = writer.get_extra_info("peername")

    async def send_raw(self, data: bytes) -> None:
        self.sent.append(data)
        self.writer.write(data)
        await self.writer.drain()

    async def reply(self, msg: w.Message, doc, *, flags: int = 0, response_to: int | None = None,
                    request_id: int | None = None) -> int:
        """Answer msg (OP_MSG, or OP_REPLY to an OP_QUERY). Returns the reply's requestID."""
        rid = request_id if request_id is not None else w.next_request_id()
        rt = msg.request_id if response_to is None else response_to
        if msg.opcode == w.OP_QUERY:
            data = w.op_reply([doc], response_to=rt, request_id=rid)
        else:
            data = w.op_msg(doc, request_id=rid, response_to=rt, flags=flags)
        await self.send_raw(data)
        return rid

    async def close(self) -> None:
        self.closed = True
        try:
            self.writer.close()
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


class FakeServer:
    def __init__(self, *, topology_version: bool = False, max_wire_version: int = 21):
        self.handlers: dict = {}
        self.conns: list[FakeConn] = []
        self.topology_version = topology_version
        self.process_id = ObjectId()
        self.tv_counter = 0
        self.max_wire_version = max_wire_version
        self.port: int | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server = None
        self._next_cid = 1
        self._lock = threading.Lock()
        self.errors: list[str] = []
        self.catalog: dict[str, dict] = {}

    # --- lifecycle ----------------------------------------------------------

    def start(self, port: int = 0) -> int:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(port), self._loop)
        self.port = fut.result(10)
        return self.port

    async def _start(self, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port,
                                                  limit=64 * 1024 * 1024)
        return self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def _stop():
            self._server.close()
            for c in list(self.conns):
                await c.close()
            me = asyncio.current_task()
            pending = [t for t in asyncio.all_tasks() if t is not me]
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        try:
            asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                # closed here, not by the garbage collector at exit, where
                # its self-pipe may already be gone ("Invalid file
                # descriptor: -1" printed after the run)
                self._loop.close()

    def run(self, coro, timeout: float = 10):
        """Run a coroutine on the server's loop from test code."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    # --- what arrived -------------------------------------------------------

    def messages(self, command: str | None = None, app: str | None = None) -> list[w.Message]:
        with self._lock:
            out = []
            for c in self.conns:
                if app is not None and c.app_name != app:
                    continue
                for m in c.received:
                    if command is None or m.command == command:
                        out.append(m)
            return out

    def client_conns(self, app: str) -> list[FakeConn]:
        with self._lock:
            return [c for c in self.conns if c.app_name == app]

    def wait_for(self, predicate, timeout: float = 10.0, what: str = "condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = predicate()
            if v:
                return v
            time.sleep(0.02)
        raise AssertionError(f"fake server: timed out waiting for {what}")

    # --- serving ------------------------------------------------------------

    def hello_doc(self, **extra) -> dict:
        doc = {
            "helloOk": True,
            "ismaster": True,
            "isWritablePrimary": True,
            "maxBsonObjectSize": 16 * 1024 * 1024,
            "maxMessageSizeBytes": w.MAX_MESSAGE_LEN,
            "maxWriteBatchSize": 100000,
            "localTime": datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None),
            "logicalSessionTimeoutMinutes": 30,
            "connectionId": 1,
            "minWireVersion": 0,
            "maxWireVersion": self.max_wire_version,
            "readOnly": False,
        }
        if self.topology_version:
            doc["topologyVersion"] = {"processId": self.process_id,
                                      "counter": Int64(self.tv_counter)}
        doc.update(extra)
        doc["ok"] = 1.0
        return doc

    async def _serve(self, reader, writer):
        with self._lock:
            conn = FakeConn(self, self._next_cid, reader, writer)
            self._next_cid += 1
            self.conns.append(conn)
        try:
            while True:
                try:
                    head = await reader.readexactly(16)
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                (length,) = struct.unpack_from("<i", head)
                if length < 16 or length > w.MAX_MESSAGE_LEN:
                    self.errors.append(f"conn {conn.id}: bad length {length}")
                    break
                try:
                    rest = await reader.readexactly(length - 16)
                except (asyncio.IncompleteReadError, ConnectionError):
                    self.errors.append(f"conn {conn.id}: truncated message")
                    break
                msg = w.parse_message(head + rest)
                if msg.command in ("hello", "isMaster", "ismaster") and msg.body:
                    app = msg.body.get("client", {}).get("application", {}).get("name")
                    drv = msg.body.get("client", {}).get("driver", {}).get("name")
                    if app is not None:
                        conn.app_name = app
                    if drv is not None:
                        conn.driver_name = drv
                with self._lock:
                    conn.received.append(msg)
                await self._dispatch(conn, msg)
                if conn.closed:
                    break
        except Exception as e:  # a test's handler failed: record it, drop the connection
            self.errors.append(f"conn {conn.id}: {type(e).__name__}: {e}")
        finally:
            await conn.close()

    async def _dispatch(self, conn: FakeConn, msg: w.Message) -> None:
        name = msg.command
        handler = self.handlers.get(name) or self.handlers.get("*")
        if handler is not None:
            r = handler(conn, msg)
            if asyncio.iscoroutine(r):
                r = await r
            if r is not False:  # a handler returns False to fall through to the default
                return
        await self.default(conn, msg)

    # --- the catalogue -----------------------------------------------------

    def add_collection(self, ns: str, *, indexes: list[dict], count: int = 0,
                       multikey: list[str] | tuple = ()) -> None:
        """Catalogue ns ("db.coll"): its indexes as listIndexes returns them (the _id
        index first unless given; "v": 2 added), its document count, and the paths that
        hold arrays in some document."""
        specs = [dict({"v": 2}, **ix) for ix in indexes]
        if not any(ix.get("name") == "_id_" for ix in specs):
            specs.insert(0, {"v": 2, "key": {"_id": 1}, "name": "_id_"})
        self.catalog[ns] = {"indexes": specs, "count": count, "multikey": set(multikey)}

    def _multikey_paths(self, entry: dict, key: dict) -> dict:
        out = {}
        for field in key:
            parts = field.split(".")
            prefixes = [".".join(parts[:i + 1]) for i in range(len(parts))]
            out[field] = [p for p in prefixes if p in entry["multikey"]]
        return out

    def _explain_reply(self, db: str, entry: dict, inner: dict) -> dict:
        coll = inner.get("find")
        hint = inner.get("hint")
        ix = None
        for spec in entry["indexes"]:
            if (isinstance(hint, str) and spec.get("name") == hint) or \
                    (isinstance(hint, dict) and list(hint.items()) == list(spec["key"].items())):
                ix = spec
        if ix is None:
            plan = {"stage": "COLLSCAN", "direction": "forward"}
        else:
            paths = self._multikey_paths(entry, ix["key"])
            plan = {"stage": "FETCH", "inputStage": {
                "stage": "IXSCAN", "keyPattern": ix["key"], "indexName": ix.get("name"),
                "isMultiKey": any(paths.values()), "multiKeyPaths": paths,
                "isUnique": bool(ix.get("unique")), "isSparse": bool(ix.get("sparse")),
                "isPartial": "partialFilterExpression" in ix, "indexVersion": 2,
                "direction": "forward"}}
        if inner.get("limit"):
            plan = {"stage": "LIMIT", "limitAmount": inner["limit"], "inputStage": plan}
        return {"explainVersion": "1",
                "queryPlanner": {"namespace": f"{db}.{coll}", "indexFilterSet": False,
                                 "parsedQuery": inner.get("filter", {}), "winningPlan": plan,
                                 "rejectedPlans": []},
                "command": dict(inner, **{"$db": db}), "ok": 1.0}

    async def catalog_answer(self, conn: FakeConn, msg: w.Message) -> bool:
        """Answers msg from the catalogue when it is about a catalogued collection."""
        name = msg.command
        body = msg.body or {}
        db = body.get("$db", "test")
        target = body.get("explain", {}).get("find") if name == "explain" else body.get(name)
        entry = self.catalog.get(f"{db}.{target}") if isinstance(target, str) else None
        if entry is None:
            return False
        ns = f"{db}.{target}"
        if name == "listIndexes":
            await conn.reply(msg, {"cursor": {"id": Int64(0), "ns": ns,
                                              "firstBatch": entry["indexes"]}, "ok": 1.0})
        elif name == "count":
            await conn.reply(msg, {"n": entry["count"], "ok": 1.0})
        elif name == "explain":
            await conn.reply(msg, self._explain_reply(db, entry, body["explain"]))
        elif name == "aggregate" and any("$collStats" in st for st in body.get("pipeline", [])):
            await conn.reply(msg, {"cursor": {"id": Int64(0), "ns": ns, "firstBatch": [
                {"ns": ns, "count": entry["count"]}]}, "ok": 1.0})
        else:
            return False
        return True

    async def default(self, conn: FakeConn, msg: w.Message) -> None:
        if msg.opcode not in (w.OP_MSG, w.OP_QUERY):
            return  # legacy fire-and-forget or unknown: no reply, like 5.1+
        if msg.more_to_come:
            return  # no reply may be sent
        if self.catalog and msg.opcode == w.OP_MSG and await self.catalog_answer(conn, msg):
            return
        name = msg.command
        body = msg.body or {}
        if msg.opcode == w.OP_QUERY and name not in ("hello", "isMaster", "ismaster"):
            await conn.reply(msg, {"ok": 0.0, "errmsg": "unsupported OP_QUERY command",
                                   "code": 352, "codeName": "UnsupportedOpQueryCommand"})
            return
        if name in ("hello", "isMaster", "ismaster"):
            if "topologyVersion" in body and "maxAwaitTimeMS" in body:
                # Awaitable hello: hold it, as a server with nothing to report does.
                await asyncio.sleep(min(int(body["maxAwaitTimeMS"]), 2000) / 1000)
            await conn.reply(msg, self.hello_doc())
            return
        db = body.get("$db", "test")
        if name in ("find", "aggregate", "listIndexes", "listCollections"):
            coll = body.get(name) if isinstance(body.get(name), str) else "$cmd.aggregate"
            first = []
            if name == "listIndexes":
                first = [{"v": 2, "key": {"_id": 1}, "name": "_id_"}]
            await conn.reply(msg, {"cursor": {"id": Int64(0), "ns": f"{db}.{coll}",
                                              "firstBatch": first}, "ok": 1.0})
            return
        if name in ("insert", "update", "delete"):
            seq = {"insert": "documents", "update": "updates", "delete": "deletes"}[name]
            n = len(body.get(seq, msg.sequences.get(seq, [])))
            await conn.reply(msg, {"n": n, "ok": 1.0})
            return
        if name == "buildInfo" or name == "buildinfo":
            await conn.reply(msg, {"version": "7.0.0", "versionArray": [7, 0, 0, 0],
                                   "maxBsonObjectSize": 16 * 1024 * 1024, "ok": 1.0})
            return
        await conn.reply(msg, {"ok": 1.0})


def cursor_reply(ns: str, batch: list, cursor_id: int, *, first: bool) -> dict:
    key = "firstBatch" if first else "nextBatch"
    return {"cursor": {"id": Int64(cursor_id), "ns": ns, key: batch}, "ok": 1.0}


def encoded(doc) -> bytes:
    return bson.encode(doc)
