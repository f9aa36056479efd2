"""Raw bytes a driver would never send, thrown at one mongoguard in front of a
scripted server. Each bad message must get a precise error reply (addressed to
it) or that one connection closed, with a log line saying why; nothing
malformed may be forwarded upstream; and healthy connections — one pymongo
client and one raw socket opened before the first bad message — keep working
throughout.
"""

from __future__ import annotations

import re
import socket
import struct
import time

import bson
import pytest
from pymongo import MongoClient

import mgwire as w
from conftest import ProxyFactory, line_text
from fakeserver import FakeServer

CLOSE = "close"  # the connection must be closed (an error reply before it is fine)
REPLY = "reply"  # an error reply addressed to the request must come back
EITHER = "either"  # an error reply, or the connection closed


def _hdr(length, opcode=w.OP_MSG, rid=None):
    return struct.pack("<iiii", length, rid or w.next_request_id(), 0, opcode)


def _msg_raw_body(raw_body: bytes, flags: int = 0) -> bytes:
    payload = struct.pack("<I", flags) + b"\x00" + raw_body
    return _hdr(16 + len(payload)) + payload


def _with_bad_checksum() -> bytes:
    m = w.op_msg({"ping": 1, "$db": "admin"}, checksum=True)
    return m[:-4] + struct.pack("<I", (w.crc32c(m[:-4]) + 1) & 0xFFFFFFFF)


def _invalid_bson() -> bytes:
    good = bson.encode({"ping": 1, "$db": "admin"})
    bad = bytearray(good)
    bad[4] = 0x42
    return _msg_raw_body(bytes(bad))


def _bson_overruns_message() -> bytes:
    good = bson.encode({"ping": 1, "$db": "admin"})
    bad = struct.pack("<i", len(good) + 100) + good[4:]
    return _msg_raw_body(bad)


def _unknown_section_kind() -> bytes:
    m = w.op_msg({"ping": 1, "$db": "admin"}, extra_sections=b"\x02" + struct.pack("<i", 5) + b"\x00")
    return m


def _two_bodies() -> bytes:
    body = b"\x00" + bson.encode({"ping": 1, "$db": "admin"})
    return w.op_msg({"ping": 1, "$db": "admin"}, extra_sections=body)


def _no_body() -> bytes:
    docs = bson.encode({"_id": 1})
    ident = b"documents\x00"
    sec = b"\x01" + struct.pack("<i", 4 + len(ident) + len(docs)) + ident + docs
    payload = struct.pack("<I", 0) + sec
    return _hdr(16 + len(payload)) + payload


def _compressed_claims_too_much() -> bytes:
    return w.op_compressed(w.op_msg({"ping": 1, "$db": "admin"}), "zlib",
                           claimed_size=48_000_001)


def _compressed_size_lies() -> bytes:
    inner = w.op_msg({"ping": 1, "$db": "admin"})
    return w.op_compressed(inner, "zlib", claimed_size=len(inner) - 16 + 10)


def _compressed_garbage() -> bytes:
    payload = struct.pack("<iiB", w.OP_MSG, 40, 2) + b"this is not zlib data at all!!"
    return _hdr(16 + len(payload), w.OP_COMPRESSED) + payload


def _compressed_unknown_compressor() -> bytes:
    inner = w.op_msg({"ping": 1, "$db": "admin"})[16:]
    payload = struct.pack("<iiB", w.OP_MSG, len(inner), 9) + inner
    return _hdr(16 + len(payload), w.OP_COMPRESSED) + payload


def _unknown_opcode() -> bytes:
    body = bson.encode({"ping": 1})
    return _hdr(16 + 4 + len(body), 9999) + struct.pack("<i", 0) + body


def _legacy(opcode: int) -> bytes:
    body = struct.pack("<i", 0) + b"test.c\x00" + bson.encode({"_id": 1})
    return _hdr(16 + len(body), opcode) + body


# name: (bytes, expectation, reason regex for the reply's errmsg and the log)
CASES = {
    "length-15": (lambda: _hdr(15), CLOSE, r"length|size|15"),
    "length-0": (lambda: _hdr(0), CLOSE, r"length|size"),
    "length-negative": (lambda: _hdr(-20), CLOSE, r"length|size"),
    "length-48000001": (lambda: _hdr(48_000_001), CLOSE, r"length|size|48"),
    "unknown-required-flag": (lambda: w.op_msg({"ping": 1, "$db": "admin"}, flags=1 << 3),
                              REPLY, r"flag"),
    "unknown-required-flag-moretocome": (
        lambda: w.op_msg({"insert": "c", "documents": [{}], "$db": "test"},
                         flags=w.MORE_TO_COME | (1 << 4)), CLOSE, r"flag"),
    "invalid-bson": (_invalid_bson, REPLY, r"bson"),
    "bson-overruns-message": (_bson_overruns_message, EITHER,
                              r"bson|section|length|size|body|bytes"),
    "bad-checksum": (_with_bad_checksum, REPLY, r"checksum|crc"),
    "unknown-section-kind": (_unknown_section_kind, EITHER, r"section|kind"),
    "two-kind0-sections": (_two_bodies, EITHER, r"section|body|kind"),
    "no-kind0-section": (_no_body, EITHER, r"section|body|kind"),
    "unknown-opcode": (_unknown_opcode, EITHER, r"opcode|9999"),
    "op-insert": (lambda: w.op_insert_legacy("test.c", [{"_id": 1}]), CLOSE,
                  r"OP_INSERT|2002|legacy"),
    "op-update": (lambda: _legacy(w.OP_UPDATE), CLOSE, r"OP_UPDATE|2001|legacy"),
    "op-delete": (lambda: _legacy(w.OP_DELETE), CLOSE, r"OP_DELETE|2006|legacy"),
    "op-get-more": (lambda: w.op_get_more_legacy("test.c", 12345), REPLY,
                    r"OP_GET_MORE|2005|legacy|getMore|support"),
    "op-query-find-command": (lambda: w.op_query("test.$cmd", {"find": "c"}), REPLY,
                              r"OP_QUERY|support"),
    "op-query-collection": (lambda: w.op_query("test.c", {"a": 1}), REPLY,
                            r"OP_QUERY|support"),
    # A handshake namespace with nothing in it: the reply says what is wrong
    # with it, not merely that OP_QUERY is unsupported.
    "op-query-empty-command": (lambda: w.op_query("admin.$cmd", {}), REPLY,
                               r"empty.*first key"),
    "compressed-claims-48000001": (_compressed_claims_too_much, EITHER,
                                   r"compress|size|length|48"),
    "compressed-size-lies": (_compressed_size_lies, EITHER, r"compress|size|length|inflat"),
    "compressed-garbage": (_compressed_garbage, EITHER, r"compress|zlib|inflat|corrupt|invalid"),
    "compressed-unknown-compressor": (_compressed_unknown_compressor, EITHER,
                                      r"compress|compressor|9"),
}


@pytest.fixture(scope="module")
def env(request, mongoguard_bin):
    srv = FakeServer()
    srv.start()
    f = ProxyFactory(mongoguard_bin, "bad_input")
    p = f(srv.uri)
    healthy = MongoClient(p.uri, appname="healthy", serverSelectionTimeoutMS=5000,
                          socketTimeoutMS=10000, maxPoolSize=1)
    healthy.admin.command("ping")
    raw = w.connect(p.port)
    assert w.command(raw, {"ping": 1}).body["ok"] == 1
    yield srv, p, healthy, raw
    raw.close()
    healthy.close()
    problems = f.stop_all()
    srv.stop()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def check_healthy(p, healthy, raw):
    assert p.alive(), "mongoguard died"
    assert healthy.admin.command("ping")["ok"] == 1
    assert healthy.test.c.find_one({}) is None  # the fake server's empty cursor
    assert w.command(raw, {"ping": 1}).body["ok"] == 1


def assert_error_reply(r: w.Message, rid: int, reason: str):
    assert r.response_to == rid, f"error reply addressed to {r.response_to}, request was {rid}"
    doc = r.body or {}
    if r.opcode == w.OP_REPLY:
        assert doc.get("ok", 0) == 0 or "$err" in doc, doc
    else:
        assert r.opcode == w.OP_MSG
        assert doc.get("ok") == 0, doc
    text = str(doc.get("errmsg", "")) + str(doc.get("$err", ""))
    assert text, f"error reply without errmsg: {doc}"
    assert isinstance(doc.get("code"), int) and doc["code"] != 0, doc
    assert re.search(reason, text, re.I), f"errmsg {text!r} does not say why ({reason})"


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input(env, case):
    srv, p, healthy, raw = env
    build, expect, reason = CASES[case]
    check_healthy(p, healthy, raw)
    errors_before = len(srv.errors)
    data = build()
    rid = struct.unpack_from("<i", data, 4)[0]

    s = w.connect(p.port)
    port = s.getsockname()[1]
    try:
        # A hello first, so the session is fully set up when the bad bytes come.
        assert w.command(s, {"hello": 1, "client": {"application": {"name": f"bad-{case}"}}}
                         ).body["ok"] == 1
        s.sendall(data)
        t0 = time.monotonic()
        reply = None
        closed = False
        try:
            reply = w.recv_message(s, 10)
        except w.Closed:
            closed = True
        except ValueError as e:
            raise AssertionError(f"mongoguard sent a malformed frame back: {e}")
        except TimeoutError:
            raise AssertionError("no error reply and the connection is still open after 10s")
        assert time.monotonic() - t0 < 10
        if reply is not None:
            assert_error_reply(reply, rid, reason)
        if expect == REPLY:
            assert reply is not None, "expected an error reply, the connection was just closed"
        if expect == CLOSE and not closed:
            w.wait_closed(s, 5)
            closed = True
        if not closed:
            # Still open: it must still be in step.
            if w.is_open(s):
                assert w.command(s, {"ping": 1}).body["ok"] == 1
    finally:
        s.close()

    # Nothing malformed reached the server.
    fwd = [m for m in srv.messages() if m.raw == data]
    assert not fwd, "the bad message was forwarded upstream"
    for c in srv.conns:
        if c.app_name == f"bad-{case}":
            extra = [m.command for m in c.received[1:] if m.command != "ping"]
            assert not extra, f"forwarded upstream after the hello: {extra}"
    assert len(srv.errors) == errors_before, srv.errors[errors_before:]

    # A log line says why.
    deadline = time.monotonic() + 5
    while True:
        about = p.log.about_client(port)
        if any(re.search(reason, line_text(ln), re.I) for ln in about):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"no log line about client :{port} matches /{reason}/: {about}")
        time.sleep(0.05)
    check_healthy(p, healthy, raw)


@pytest.mark.parametrize("how", ["close", "shutdown-write"])
def test_truncated_frame_then_close(env, how):
    srv, p, healthy, raw = env
    check_healthy(p, healthy, raw)
    s = w.connect(p.port)
    port = s.getsockname()[1]
    msg = w.op_msg({"insert": "c", "documents": [{"_id": i} for i in range(20)], "$db": "test"})
    s.sendall(msg[: len(msg) // 2])
    time.sleep(0.1)
    if how == "close":
        s.close()
    else:
        s.shutdown(socket.SHUT_WR)
        got = w.wait_closed(s, 10)
        assert got == b"" or w.parse_message(got).body["ok"] == 0
        s.close()
    deadline = time.monotonic() + 5
    while True:
        about = p.log.about_client(port)
        if any(re.search(r"truncat|incomplete|partial|closed|ended|eof", line_text(ln), re.I)
               for ln in about if ln.get("msg") != "Connection accepted"):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"no log line about the truncated frame from :{port}: {about}")
        time.sleep(0.05)
    assert not [m for m in srv.messages("insert") if m.sequences == {} and
                len(m.body.get("documents", [])) == 20]
    check_healthy(p, healthy, raw)


def test_stuck_sender_is_closed(mongoguard_bin, start_proxy):
    """net.maxFrameWaitMS: a request whose first bytes arrived must complete in
    time, else that connection is closed."""
    srv = FakeServer()
    srv.start()
    try:
        p = start_proxy(srv.uri, config="net:\n  maxFrameWaitMS: 500\n")
        s = w.connect(p.port)
        other = w.connect(p.port)
        try:
            msg = w.op_msg({"ping": 1, "$db": "admin"})
            s.sendall(msg[:10])
            t0 = time.monotonic()
            w.wait_closed(s, 10)
            assert 0.3 < time.monotonic() - t0 < 5
            assert w.command(other, {"ping": 1}).body["ok"] == 1
        finally:
            s.close()
            other.close()
    finally:
        srv.stop()


def test_many_bad_connections_at_once(env):
    """50 connections each sending garbage at the same time; the healthy ones
    never notice."""
    srv, p, healthy, raw = env
    socks = [w.connect(p.port) for _ in range(50)]
    try:
        for i, s in enumerate(socks):
            s.sendall(_hdr(15) if i % 2 else w.op_insert_legacy("test.c", [{"_id": i}]))
        check_healthy(p, healthy, raw)
        for s in socks:
            w.wait_closed(s, 10)
    finally:
        for s in socks:
            s.close()
    check_healthy(p, healthy, raw)


@pytest.mark.parametrize("sent,said", [
    (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "the client sent an HTTP request"),
    (bytes.fromhex("160301020001000200fc0303") + b"\0" * 60,
     "the client sent a TLS handshake, and this listener takes plain connections"),
])
def test_another_protocol_on_the_port_is_named(env, sent, said):
    """A browser or a TLS client on the plain port was logged as a bad message length;
    mongod says what it saw, and so does the log now."""
    srv, p, healthy, raw = env
    mark = p.log.mark()
    s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
    port = s.getsockname()[1]
    try:
        s.sendall(sent)
        s.settimeout(5)
        while s.recv(4096):
            pass
    except OSError:
        pass
    finally:
        s.close()
    [ended] = p.log.wait_for(lambda ln: ln.get("msg") == "Connection ended" and
                             ln["attr"].get("remote") == f"127.0.0.1:{port}", 5,
                             since=mark, what="the connection's end")
    assert said in ended["attr"]["reason"], ended
    check_healthy(p, healthy, raw)
