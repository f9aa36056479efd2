"""net.proxyProtocol: behind an L4 load balancer, every connection begins with a
PROXY protocol header (v1 text or v2 binary) naming the real client, and the log,
the findings and /connections name that client, not the balancer. A connection
without one is closed, with the reason logged; other connections go on."""

from __future__ import annotations

import json
import socket
import struct

import pytest
from bson.regex import Regex

import mgwire as w

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2_header(src: str, sport: int, dst: str = "10.0.0.1", dport: int = 27018) -> bytes:
    addrs = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack(">HH", sport, dport)
    return V2_SIG + bytes([0x21, 0x11]) + struct.pack(">H", len(addrs)) + addrs


@pytest.fixture
def pp_proxy(start_proxy, upstream):
    cfg = {"net": {"proxyProtocol": True},
           "rules": {"case-insensitive-regex": "log"},
           "analysis": {"redactLiterals": True}}
    return start_proxy(upstream.uri, config=json.dumps(cfg))


def ended_for(p, remote: str, mark: int):
    return p.log.wait_for(lambda ln: ln.get("msg") == "Connection ended" and
                          ln["attr"].get("remote") == remote, 5, since=mark,
                          what=f"the end of {remote}")[0]


@pytest.mark.parametrize("version", [1, 2])
def test_the_header_names_the_client(pp_proxy, dbname, version):
    p = pp_proxy
    mark = p.log.mark()
    s = w.connect(p.port)
    real = "192.0.2.7:56324" if version == 1 else "203.0.113.9:8080"
    if version == 1:
        s.sendall(b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 27018\r\n")
    else:
        s.sendall(v2_header("203.0.113.9", 8080))
    assert w.command(s, {"ping": 1}).body["ok"] == 1
    # a finding names the real client too
    w.command(s, {"find": "people", "filter": {"name": Regex("^a", "i")}}, db=dbname)
    [named] = p.log.wait_for(lambda ln: ln.get("msg") == "Client named by a PROXY header",
                             5, since=mark)
    assert named["attr"]["remote"] == real and named["attr"]["version"] == version
    assert named["attr"]["via"].startswith("127.0.0.1:")
    [f] = p.log.wait_for(lambda ln: ln.get("c") == "ANALYZER" and
                         ln["attr"].get("ns") == f"{dbname}.people", 5, since=mark)
    assert f["attr"]["client"] == real
    s.close()
    assert ended_for(p, real, mark)["ctx"] == named["ctx"]


def test_a_connection_without_the_header_is_closed(pp_proxy):
    p = pp_proxy
    mark = p.log.mark()
    s = w.connect(p.port)
    local = "%s:%d" % s.getsockname()
    s.sendall(w.op_msg({"ping": 1, "$db": "admin"}))
    assert w.wait_closed(s) == b""  # nothing answered: the stream is not ours to read
    end = ended_for(p, local, mark)
    assert "PROXY protocol: no PROXY protocol header" in end["attr"]["reason"], end
    # others go on
    ok = w.connect(p.port)
    ok.sendall(b"PROXY TCP4 192.0.2.8 198.51.100.1 1000 27018\r\n")
    assert w.command(ok, {"ping": 1}).body["ok"] == 1
    ok.close()


def test_a_header_in_pieces_and_a_local_health_check(pp_proxy):
    p = pp_proxy
    s = w.connect(p.port)
    h = b"PROXY TCP4 192.0.2.10 198.51.100.1 4242 27018\r\n"
    s.sendall(h[:7])
    s.sendall(h[7:30])
    s.sendall(h[30:] + w.op_msg({"ping": 1, "$db": "admin"}))
    assert w.recv_message(s).body["ok"] == 1
    s.close()
    # v2 LOCAL: the balancer's own check keeps its own address
    mark = p.log.mark()
    c = w.connect(p.port)
    local = "%s:%d" % c.getsockname()
    c.sendall(V2_SIG + bytes([0x20, 0x00, 0x00, 0x00]))
    assert w.command(c, {"ping": 1}).body["ok"] == 1
    c.close()
    assert ended_for(p, local, mark)
