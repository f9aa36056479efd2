"""The session's batched paths, where a pipelining client and large requests
take it: a read of many requests judged in one pass and moved at once, the
replies of one read relayed at once, and a large request sent upstream from
its own buffer (what the socket does not take is queued by reference, not
copied) to an upstream that reads slowly, over TCP and over TLS.

The upstreams here are scripted: they record every byte they get, so a test
sees exactly what mongoguard forwarded and in what order, and they answer a
whole burst in one write, so mongoguard meets many replies in one read, with
a reply the protocol forbids (to a moreToCome request) in the middle.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import threading
import time

import pytest

import mgwire as w
from topology_helpers import certs  # noqa: F401 -- fixture

MiB = 1 << 20


def until(fn, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.data = bytearray()
        self.msgs: list[bytes] = []
        self.closed = False


class ScriptedUpstream:
    """Accepts connections (plain, or TLS with `tls` an ssl context) and
    records what each sends. A connection whose first request names `marker`
    is scripted: once `batch` requests have arrived, answer(msgs) gives the
    bytes of every reply to them, sent in one write; each later request is
    answered alone with {ok: 1}. Other connections (the index cache's) are
    never answered. read_chunk/pause make it a slow reader."""

    def __init__(self, marker: bytes, batch: int = 0, answer=None, tls=None,
                 read_chunk: int = 1 << 20, pause: float = 0.0, rcvbuf: int = 0):
        self.marker, self.batch, self.answer = marker, batch, answer
        self.tls, self.read_chunk, self.pause = tls, read_chunk, pause
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if rcvbuf:  # set before listen, so accepted sockets start with it
            self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.conns: list[Conn] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def uri(self, **opts) -> str:
        q = "&".join(f"{k}={v}" for k, v in opts.items())
        return f"mongodb://127.0.0.1:{self.port}/" + (f"?{q}" if q else "")

    def _accept(self):
        while True:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        if self.tls:
            try:
                s = self.tls.wrap_socket(s, server_side=True)
            except (OSError, ssl.SSLError):
                s.close()
                return
        c = Conn(s)
        with self.lock:
            self.conns.append(c)
        scripted, answered = None, 0
        while True:
            try:
                b = s.recv(self.read_chunk)
            except OSError:
                b = b""
            if not b:
                c.closed = True
                return
            with self.lock:
                c.data += b
                while len(c.data) - sum(map(len, c.msgs)) >= 4:
                    at = sum(map(len, c.msgs))
                    (n,) = struct.unpack_from("<i", c.data, at)
                    if len(c.data) - at < n:
                        break
                    c.msgs.append(bytes(c.data[at:at + n]))
                msgs = list(c.msgs)
            if scripted is None and msgs:
                scripted = self.marker in msgs[0]
            if scripted and self.answer:
                out = b""
                if answered == 0 and len(msgs) >= self.batch:
                    out = self.answer(msgs[:self.batch])
                    answered = self.batch
                if answered:
                    for m in msgs[answered:]:
                        out += reply_to(m, {"ok": 1.0})
                    answered = len(msgs)
                if out:
                    s.sendall(out)
            if self.pause:
                time.sleep(self.pause)

    def scripted(self) -> Conn | None:
        with self.lock:
            for c in self.conns:
                if c.msgs and self.marker in c.msgs[0]:
                    return c
        return None

    def close(self):
        self.lsock.close()
        for c in self.conns:
            try:
                c.sock.close()
            except OSError:
                pass


def reply_to(msg: bytes, body: dict) -> bytes:
    return w.op_msg(body, response_to=w.parse_message(msg).request_id)


def config(verbosity: int = 0, **rules) -> str:
    return json.dumps({"log": {"verbosity": verbosity},
                       "rules": {k.replace("_", "-"): v for k, v in rules.items()}}) + "\n"


@pytest.fixture
def scripted():
    made = []

    def make(**kw) -> ScriptedUpstream:
        u = ScriptedUpstream(**kw)
        made.append(u)
        return u

    yield make
    for u in made:
        u.close()


# --- a burst of pipelined requests -----------------------------------------------------

def test_burst_with_answers_of_ours_in_the_middle(start_proxy, scripted):
    """One write of seven requests: two answered by mongoguard itself (a
    block, a malformed request), one w:0. Exactly the other five reach the
    server, byte for byte and in order; the server answers all five in one
    write, a forbidden reply to the w:0 request among them; the client gets
    six replies, in the order it asked, ours between the server's."""
    def answer(msgs):
        return b"".join(reply_to(m, {"ok": 1.0, "seq": i}) for i, m in enumerate(msgs))

    up = scripted(marker=b"burstdb", batch=5, answer=answer)
    p = start_proxy(up.uri(), config(case_insensitive_regex="block"))
    ping = [w.op_msg({"ping": 1, "$db": "burstdb", "n": i}) for i in range(4)]
    blocked = w.op_msg({"find": "c", "$db": "burstdb",
                        "filter": {"name": {"$regex": "^x", "$options": "i"}}})
    bad = w.op_msg({"ping": 1, "$db": "burstdb"}, flags=1 << 5)  # an unknown required bit
    w0 = w.op_msg({"insert": "c", "$db": "burstdb", "documents": [{"_id": 1}],
                   "writeConcern": {"w": 0}}, flags=w.MORE_TO_COME)
    burst = [ping[0], blocked, ping[1], bad, ping[2], w0, ping[3]]
    s = w.connect(p.port)
    s.sendall(b"".join(burst))
    asked = [m for m in burst if m is not w0]
    got = [w.recv_message(s) for _ in asked]
    assert [r.response_to for r in got] == [w.parse_message(m).request_id for m in asked]
    assert [r.body.get("seq") for r in got] == [0, None, 1, None, 2, 4]  # 3: the w:0's, dropped
    assert got[1].body["code"] == 96 and "case-insensitive-regex" in got[1].body["errmsg"]
    assert got[3].body["ok"] == 0 and got[3].body.get("code") != 96
    c = up.scripted()
    assert c.msgs == [ping[0], ping[1], ping[2], w0, ping[3]], \
        "exactly the forwarded requests, byte for byte, in order"
    # the connection goes on
    s.sendall(ping[0])
    assert w.recv_message(s).body["ok"] == 1
    s.close()


def test_long_burst_past_the_pipeline_limit(start_proxy, scripted):
    """More requests in one write than may be in flight (64), a block every
    seventh: the rest wait for room, and every reply still comes in order."""
    n = 300

    def answer(msgs):
        return b"".join(reply_to(m, {"ok": 1.0}) for m in msgs)

    up = scripted(marker=b"longdb", batch=1, answer=answer)
    p = start_proxy(up.uri(), config(case_insensitive_regex="block"))
    msgs, forwarded = [], []
    for i in range(n):
        if i % 7 == 3:
            msgs.append(w.op_msg({"find": "c", "$db": "longdb",
                                  "filter": {"k": {"$regex": "a", "$options": "i"}}}))
        else:
            msgs.append(w.op_msg({"ping": 1, "$db": "longdb", "i": i}))
            forwarded.append(msgs[-1])
    s = w.connect(p.port)
    s.sendall(b"".join(msgs))
    got = [w.recv_message(s) for _ in msgs]
    assert [r.response_to for r in got] == [w.parse_message(m).request_id for m in msgs]
    assert [r.body.get("code") == 96 for r in got] == [i % 7 == 3 for i in range(n)]
    assert up.scripted().msgs == forwarded
    s.close()


def test_burst_with_a_held_request_in_the_middle(start_proxy, upstream, clients, dbname):
    """A sort whose index list mongoguard does not know yet, at block, is
    held in the middle of a burst: the requests behind it wait, so the
    server runs them after it and every reply comes in the order asked."""
    clients.direct()[dbname].items.create_index("a")  # unknown to mongoguard
    p = start_proxy(upstream.uri, config(1, index_mismatched_sort="block"))
    burst = [
        w.op_msg({"insert": "items", "$db": dbname, "documents": [{"_id": 1, "a": 2}]}),
        w.op_msg({"find": "items", "$db": dbname, "filter": {}, "sort": {"a": 1}}),
        w.op_msg({"insert": "items", "$db": dbname, "documents": [{"_id": 2, "a": 1}]}),
        w.op_msg({"find": "items", "$db": dbname, "filter": {}, "sort": {"_id": 1}}),
    ]
    mark = p.log.mark()
    s = w.connect(p.port)
    s.sendall(b"".join(burst))
    got = [w.recv_message(s, timeout=20) for _ in burst]
    assert [r.response_to for r in got] == [w.parse_message(m).request_id for m in burst]
    assert got[0].body["n"] == 1 and got[2].body["n"] == 1
    # the held find ran before the second insert: it saw one document
    assert [d["_id"] for d in got[1].body["cursor"]["firstBatch"]] == [1]
    assert [d["_id"] for d in got[3].body["cursor"]["firstBatch"]] == [1, 2]
    p.log.wait_for(lambda ln: "Holding a request" in ln.get("msg", ""), 10, since=mark,
                   what="the sort held for the index list")
    s.close()


# --- 16 MB requests to a slow upstream -------------------------------------------------

def big_insert(marker: str, size: int, flags: int = 0) -> bytes:
    return w.op_msg({"insert": "big", "$db": "bigdb", "writeConcern": {"w": 0}},
                    sequences={"documents": [{"_id": marker, "blob": b"q" * size}]},
                    flags=flags)


def sanitized(pid: int) -> bool:
    """A sanitizer build keeps freed memory in quarantine (ASan) or shadows
    it (TSan): peak memory says nothing about how many buffers were held
    at once."""
    with open(f"/proc/{pid}/maps") as f:
        maps = f.read()
    return "libasan" in maps or "libtsan" in maps


def vm_hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def slow_16mb_pair(start_proxy, up):
    """Two 16 MB w:0 inserts and a ping in one stream to an upstream that
    reads slowly: both are cut through (nothing is in flight), the second
    waits for the first one's buffer to be written; the server gets every
    byte, in order; mongoguard holds about one request at a time."""
    p = start_proxy(up.uri(**({"tls": "true", "tlsCAFile": up.ca} if up.tls else {})))
    one = big_insert("slow-1", 16_000_000 - 200, w.MORE_TO_COME)
    two = big_insert("slow-2", 16_000_000 - 200, w.MORE_TO_COME)
    ping = w.op_msg({"ping": 1, "$db": "bigdb"})
    before = vm_hwm_kib(p.proc.pid)
    s = w.connect(p.port)
    threading.Thread(target=s.sendall, args=(one + two + ping,), daemon=True).start()
    r = w.recv_message(s, timeout=120)
    assert r.response_to == w.parse_message(ping).request_id and r.body["ok"] == 1
    c = up.scripted()
    assert len(c.msgs) == 3 and c.msgs[0] == one and c.msgs[1] == two and c.msgs[2] == ping, \
        "every byte of both, and the ping, in order"
    grew = vm_hwm_kib(p.proc.pid) - before
    # one 16 MB buffer, the streaming buffers, allocator slack; two held at
    # once would be 32 MB and more
    if not sanitized(p.proc.pid):
        assert grew < 28 * 1024, f"resident memory grew by {grew} KiB"
    s.close()


def test_16mb_inserts_byte_exact_through_a_slow_upstream(start_proxy, scripted):
    up = scripted(marker=b"bigdb", batch=3, answer=lambda m: reply_to(m[2], {"ok": 1.0}),
                  read_chunk=256 * 1024, pause=0.002, rcvbuf=64 * 1024)
    up.ca = None
    slow_16mb_pair(start_proxy, up)


def test_16mb_inserts_byte_exact_through_a_slow_tls_upstream(start_proxy, scripted, certs):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(certs.server_cert), str(certs.server_key))
    up = scripted(marker=b"bigdb", batch=3, answer=lambda m: reply_to(m[2], {"ok": 1.0}),
                  tls=ctx, read_chunk=256 * 1024, pause=0.002, rcvbuf=64 * 1024)
    up.ca = certs.ca
    slow_16mb_pair(start_proxy, up)
