"""Cut-through: a large request goes upstream while it is still arriving
when the configuration cannot block it, and is still judged whole before
its last bytes go (proxy/session/session.c, "Cut-through").

The upstream here is a raw TCP listener that records every byte it gets, so
a test can see what reached it before the client had sent everything, and
that what reached it is byte-for-byte what the client sent.
"""

import json
import signal
import socket
import threading
import time

import pytest

import mgwire as w

MiB = 1 << 20


class RawConn:
    def __init__(self, sock):
        self.sock = sock
        self.data = bytearray()
        self.closed = False


class RawUpstream:
    """Accepts connections, records what each sends, never answers."""

    def __init__(self):
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.conns: list[RawConn] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    def _accept(self):
        while True:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            c = RawConn(s)
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._read, args=(c,), daemon=True).start()

    def _read(self, c: RawConn):
        while True:
            try:
                b = c.sock.recv(1 << 20)
            except OSError:
                b = b""
            if not b:
                c.closed = True
                return
            with self.lock:
                c.data += b

    def with_marker(self, marker: bytes) -> RawConn | None:
        with self.lock:
            for c in self.conns:
                if marker in c.data:
                    return c
        return None

    def close(self):
        self.lsock.close()
        for c in self.conns:
            c.sock.close()


@pytest.fixture
def raw():
    r = RawUpstream()
    yield r
    r.close()


def until(fn, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def send_first_half(sock, msg: bytes, raw: RawUpstream, marker: bytes, at_least: int) -> RawConn:
    """Sends the first half of msg and returns the upstream connection once
    at_least bytes of it have arrived there (so it was relayed early)."""
    sock.sendall(msg[: len(msg) // 2])
    return until(lambda: (c := raw.with_marker(marker)) and len(c.data) >= at_least and c,
                 what="the first half upstream")


def big_insert(marker: str, size: int, *, corrupt_last_byte: bool = False) -> bytes:
    msg = w.op_msg({"insert": "cut", "$db": "cutdb"},
                   sequences={"documents": [{"_id": marker, "blob": b"m" * size}]})
    if corrupt_last_byte:  # the document's terminator: no longer valid BSON
        msg = msg[:-1] + b"\x01"
    return msg


def config(**rules) -> str:
    return json.dumps({"rules": {k.replace("_", "-"): v for k, v in rules.items()}}) + "\n"


def reply_of(sock) -> dict:
    return w.recv_message(sock, timeout=10).body


def test_large_insert_is_relayed_while_it_arrives(start_proxy, raw):
    """Every rule at log (the default): the first half is upstream before the
    client sends the second; the whole arrives exactly; and the request was
    still analysed whole (large-document's finding names it)."""
    p = start_proxy(raw.uri)
    msg = big_insert("cut-log", 3 * MiB)
    s = w.connect(p.port)
    c = send_first_half(s, msg, raw, b"cut-log", MiB)
    assert len(c.data) <= len(msg) // 2, "mongoguard cannot have more than the client sent"
    s.sendall(msg[len(msg) // 2:])
    until(lambda: len(c.data) >= len(msg), what="the whole request upstream")
    time.sleep(0.1)
    assert bytes(c.data) == msg, "the relayed bytes must be exactly the client's"
    until(lambda: p.log.findings("large-document"), what="a large-document finding")
    s.close()


def test_blockable_insert_waits_whole_and_is_blocked(start_proxy, raw):
    """large-document at block: an insert must be judged before the server
    sees any of it, so nothing goes upstream until it is whole, and then
    nothing at all; the connection stays usable."""
    p = start_proxy(raw.uri, config(large_document="block"))
    msg = big_insert("cut-block", 3 * MiB)
    s = w.connect(p.port)
    s.sendall(msg[: len(msg) // 2])
    time.sleep(0.5)
    assert raw.with_marker(b"cutdb") is None, "a blockable request must not be relayed early"
    s.sendall(msg[len(msg) // 2:])
    body = reply_of(s)
    assert body["ok"] == 0 and body["code"] == 96, body
    assert "large-document" in body["errmsg"]
    ping = w.op_msg({"ping": 1, "$db": "cutping"})
    s.sendall(ping)
    c = until(lambda: raw.with_marker(b"cutping"), what="the next request upstream")
    assert b"cut-block" not in c.data, "the blocked insert must never reach the server"
    assert w.is_open(s)
    s.close()


def test_blockable_insert_that_passes_goes_whole_and_in_order(start_proxy, raw):
    """large-document at block, the document under its limit: held until it
    is whole (in its own buffer), then sent exactly as it came, and a request
    the client sent right behind it (in the same write as its last bytes)
    follows it, whole and in order."""
    p = start_proxy(raw.uri, config(large_document={"action": "block", "maxBytes": 8 * MiB}))
    msg = big_insert("held-pass", 3 * MiB)
    ping = w.op_msg({"ping": 1, "$db": "heldping"})
    s = w.connect(p.port)
    s.sendall(msg[: len(msg) // 2])
    time.sleep(0.5)
    assert raw.with_marker(b"cutdb") is None, "a blockable request must not be relayed early"
    s.sendall(msg[len(msg) // 2:] + ping)
    c = until(lambda: (c := raw.with_marker(b"heldping")) and c, what="both requests upstream")
    until(lambda: len(c.data) >= len(msg) + len(ping), what="every byte upstream")
    time.sleep(0.1)
    assert bytes(c.data) == msg + ping, "the held request and the next must arrive exactly"
    assert not p.log.findings("large-document")
    s.close()


def test_only_inserts_skip_rules_that_cannot_read_them(start_proxy, raw):
    """A regex rule at block cannot block an insert, so inserts are still cut
    through; a large find (which it can block) is held until judged."""
    p = start_proxy(raw.uri, config(case_insensitive_regex="block"))
    ins = big_insert("cut-ins", 2 * MiB)
    s = w.connect(p.port)
    c = send_first_half(s, ins, raw, b"cut-ins", MiB // 2)
    s.sendall(ins[len(ins) // 2:])
    until(lambda: len(c.data) >= len(ins))
    assert bytes(c.data) == ins

    # $nin, not $in: a pattern beside a point ($in) on another field is a
    # residual filter on what the point selects, no finding of the regex rule
    find = w.op_msg({"find": "cutfind", "$db": "cutdb2",
                     "filter": {"k": {"$nin": [f"v{i:07d}" for i in range(30000)]},
                                "name": {"$regex": "^abc", "$options": "i"}}})
    assert len(find) > 256 * 1024
    s2 = w.connect(p.port)
    s2.sendall(find[: len(find) // 2])
    time.sleep(0.5)
    assert raw.with_marker(b"cutfind") is None, "a blockable find must not be relayed early"
    s2.sendall(find[len(find) // 2:])
    body = reply_of(s2)
    assert body["ok"] == 0 and body["code"] == 96 and "case-insensitive-regex" in body["errmsg"]
    time.sleep(0.2)
    assert raw.with_marker(b"cutfind") is None
    s.close()
    s2.close()


def test_malformed_large_request_never_completes_upstream(start_proxy, raw):
    """Found malformed only once whole: the client gets the error and a
    close; the server's connection ends before it has the whole message,
    so it never runs it."""
    p = start_proxy(raw.uri)
    msg = big_insert("cut-bad", 2 * MiB, corrupt_last_byte=True)
    s = w.connect(p.port)
    mark = p.log.mark()
    c = send_first_half(s, msg, raw, b"cut-bad", MiB // 2)
    s.sendall(msg[len(msg) // 2:])
    body = reply_of(s)
    assert body["ok"] == 0, body
    w.wait_closed(s)
    until(lambda: c.closed, what="the upstream connection to end")
    assert len(c.data) < len(msg), "the server must never get the whole message"
    p.log.wait_for(lambda ln: "could not be sent as it was" in w_text(ln), since=mark)


def test_reload_to_block_mid_request_stops_it(start_proxy, raw):
    """A reload that makes the request blockable while it is being relayed:
    judged by the new configuration, blocked, and the server never gets all
    of it."""
    p = start_proxy(raw.uri, config(large_document="log"), extra_args=["--workers", "1"])
    msg = big_insert("cut-race", 3 * MiB)
    s = w.connect(p.port)
    c = send_first_half(s, msg, raw, b"cut-race", MiB)
    mark = p.log.mark()
    p.config_path.write_text(config(large_document="block", case_insensitive_regex="block"))
    p.proc.send_signal(signal.SIGHUP)
    p.log.wait_for(lambda ln: ln.get("msg") == "Configuration reloaded", since=mark)
    # The log line comes before the worker moves to the new snapshot (between
    # two of its events): a probe on the same (only) worker says when it has.
    until(lambda: probe_blocked(p.port), what="the worker to take the new configuration")
    s.sendall(msg[len(msg) // 2:])
    body = reply_of(s)
    assert body["ok"] == 0 and body["code"] == 96 and "large-document" in body["errmsg"], body
    w.wait_closed(s)
    until(lambda: c.closed, what="the upstream connection to end")
    assert len(c.data) < len(msg)


def probe_blocked(port: int) -> bool:
    """True when a case-insensitive regex find is answered by mongoguard's
    block (the raw upstream never answers anything it forwards)."""
    s = w.connect(port)
    try:
        s.sendall(w.op_msg({"find": "probe", "$db": "cutprobe",
                            "filter": {"n": {"$regex": "x", "$options": "i"}}}))
        return reply_of_within(s, 0.3).get("code") == 96
    except (TimeoutError, OSError, w.Closed):
        return False
    finally:
        s.close()


def reply_of_within(sock, timeout: float) -> dict:
    return w.recv_message(sock, timeout=timeout).body


def w_text(ln: dict) -> str:
    return json.dumps(ln)


def test_large_sorted_find_waits_for_indexes_and_answers(proxy, clients, dbname):
    """A large find with a sort, through a real server: cut through in log
    mode, held for the index list at its end, then answered exactly as
    directly."""
    direct = clients.direct()[dbname]["bigin"]
    direct.insert_many([{"_id": i, "k": f"v{i:07d}", "z": -i} for i in range(50)])
    via = clients.via(proxy)[dbname]["bigin"]
    keys = [f"v{i:07d}" for i in range(30000)]
    got = list(via.find({"k": {"$in": keys}}).sort("z", 1))
    want = list(direct.find({"k": {"$in": keys}}).sort("z", 1))
    assert got == want and len(got) == 50
