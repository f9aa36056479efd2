"""Client faults: disconnecting mid-message and mid-request, half a header
and a stall (net.maxFrameWaitMS closes it, says why, and nobody else
notices), thousands of connections at once (each answered or refused
cleanly at net.maxConnections, and every descriptor back afterwards), and
a client that asks for large replies and stops reading (mongoguard's
resident memory stays within the per-connection bound session.c
documents: measured, printed, asserted)."""

from __future__ import annotations

import os
import re
import selectors
import socket
import struct
import time
import uuid

import pytest
from pymongo import MongoClient

import mgwire as w
from conftest import ROOT
from faultrelay import FaultRelay, fds_back_to, open_fds, rss_kib, settle_fds


def ping(port: int) -> None:
    with MongoClient(f"mongodb://127.0.0.1:{port}/", serverSelectionTimeoutMS=5000) as c:
        assert c.admin.command("ping")["ok"] == 1


def idle_fds(proxy) -> int:
    ping(proxy.port)
    return settle_fds(proxy.proc.pid)


def test_disconnect_mid_message(upstream, start_proxy):
    p = start_proxy(upstream.uri)
    base = idle_fds(p)
    db = f"mid_{uuid.uuid4().hex[:6]}"
    msg = w.op_msg({"insert": "c", "documents": [{"_id": i} for i in range(50)], "$db": db})
    cuts = [3, 15, 16, 17, len(msg) // 2, len(msg) - 1]
    mark = p.log.mark()
    for n in cuts:
        s = w.connect(p.port)
        s.sendall(msg[:n])
        s.close()
        # and with a reset rather than a close
        s = w.connect(p.port)
        s.sendall(msg[:n])
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    assert p.alive()
    ping(p.port)
    p.log.wait_for(lambda ln: ln.get("msg") == "Connection ended", 5, since=mark,
                   what="the connection-ended lines")
    n = fds_back_to(p.proc.pid, base, 10)
    assert n <= base, f"{n} descriptors after {2 * len(cuts)} broken clients, {base} before"
    # nothing half-sent reached the server
    with upstream.client() as c:
        assert c[db].c.count_documents({}) == 0


def test_disconnect_with_request_in_flight(upstream, start_proxy, dbname):
    """The client leaves while the server is still answering: mongoguard
    ends the upstream connection too (the relay sees it go). The reply is
    over 256 KiB, so it streams through as it comes (a smaller one to a read
    is gathered whole for client-side-join's count), and its header tells
    the client that it has begun."""
    host, port = upstream.uri.split("//")[1].rstrip("/").split(":")
    relay = FaultRelay((host, int(port)))
    try:
        p = start_proxy(relay.uri)
        with upstream.client() as c:
            c[dbname].c.insert_many([{"_id": i, "pad": "z" * 1000} for i in range(400)])
        # the first find also opens the index cache's side connection
        with MongoClient(p.uri, serverSelectionTimeoutMS=5000) as c:
            assert len(list(c[dbname].c.find())) == 400
        base = settle_fds(p.proc.pid)
        # follow this request's own upstream connection: the driver's monitors
        # and the index cache's side connection come and go on their own time
        marker = f"inflight-{uuid.uuid4().hex}".encode()
        relay.watch(marker)
        relay.slow(0.5, chunk=1024)  # ~200 s for the whole reply
        s = w.connect(p.port)
        s.sendall(w.op_msg({"find": "c", "batchSize": 1000, "comment": marker.decode(),
                            "$db": dbname}))
        deadline = time.monotonic() + 10
        while relay.carrying(marker) != (1, 1) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert relay.carrying(marker) == (1, 1), "the find never reached the server"
        # the reply has begun: its header is here, the rest is ~100 s away
        assert len(w.recv_exact(s, 16, time.monotonic() + 5)) == 16
        s.close()
        deadline = time.monotonic() + 5
        while relay.carrying(marker)[1] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert relay.carrying(marker) == (1, 0), \
            "mongoguard kept the upstream connection of a client that left"
        relay.normal()
        ping(p.port)
        n = fds_back_to(p.proc.pid, base, 10)
        assert n <= base, f"{n} descriptors, {base} before"
    finally:
        relay.close()


def test_half_header_and_stall(upstream, start_proxy):
    p = start_proxy(upstream.uri, config="net: {maxFrameWaitMS: 600}\n")
    base = idle_fds(p)
    mark = p.log.mark()
    stalled = w.connect(p.port)
    stalled.sendall(w.op_msg({"ping": 1, "$db": "admin"})[:8])
    t0 = time.monotonic()
    # meanwhile everyone else is served
    for _ in range(3):
        ping(p.port)
    assert w.wait_closed(stalled, 10) == b"", "a stalled client got bytes"
    dt = time.monotonic() - t0
    stalled.close()
    print(f"  stalled connection closed after {dt:.2f}s (net.maxFrameWaitMS 600)")
    assert 0.5 < dt < 5
    lines = p.log.wait_for(lambda ln: "net.maxFrameWaitMS" in
                           str(ln.get("attr", {}).get("reason", "")), 5, since=mark,
                           what="the frame-timeout line")
    assert "only 8 bytes arrived" in lines[0]["attr"]["reason"], lines[0]
    ping(p.port)
    n = fds_back_to(p.proc.pid, base, 10)
    assert n <= base


def test_thousands_of_connections(upstream, start_proxy):
    total, limit = 3000, 2500
    p = start_proxy(upstream.uri, config=f"net: {{maxConnections: {limit}}}\n")
    base = idle_fds(p)
    mark = p.log.mark()
    socks = []
    t0 = time.monotonic()
    try:
        for _ in range(total):
            socks.append(socket.create_connection(("127.0.0.1", p.port), timeout=20))
        opened = time.monotonic() - t0
        # every one says hello; the refused ones may already be closed
        hello = w.op_msg({"hello": 1, "$db": "admin"})
        sel = selectors.DefaultSelector()
        state = {}
        for s in socks:
            try:
                s.sendall(hello)
            except OSError:
                state[s] = "refused"
                continue
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            state[s] = b""
        answered = refused = 0
        deadline = time.monotonic() + 90
        pending = sum(1 for v in state.values() if v != "refused")
        refused = total - pending
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(1.0):
                s = key.fileobj
                try:
                    chunk = s.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    assert state[s] == b"", "a connection closed mid-reply"
                    refused += 1
                    pending -= 1
                    sel.unregister(s)
                    continue
                state[s] += chunk
                buf = state[s]
                if len(buf) >= 4 and len(buf) >= struct.unpack_from("<i", buf)[0]:
                    r = w.parse_message(buf)
                    assert r.body["ok"] == 1 and r.body.get("isWritablePrimary") is True, r.body
                    answered += 1
                    pending -= 1
                    sel.unregister(s)
        took = time.monotonic() - t0
        print(f"  {total} connections opened in {opened:.1f}s; {answered} answered, "
              f"{refused} refused, all in {took:.1f}s; mongoguard held {open_fds(p.proc.pid)} "
              f"descriptors")
        assert pending == 0, f"{pending} connections neither answered nor closed"
        assert answered == limit and refused == total - limit, (answered, refused)
        refusals = [ln for ln in p.log.since(mark)
                    if ln.get("msg", "").startswith("Connection refused: net.maxConnections")]
        assert len(refusals) == total - limit
        assert open_fds(p.proc.pid) >= base + 2 * limit  # really all at once
    finally:
        for s in socks:
            s.close()
    n = fds_back_to(p.proc.pid, base, 30)
    assert n <= base, f"{n} descriptors after the crowd left, {base} before"
    ping(p.port)


# --- a client that stops reading -------------------------------------------------

def documented_bound() -> tuple[int, int]:
    """OUT_HIGH and READ_CHUNK from proxy/session/ (session_int.h and
    transport.h), as session.c's design comment bounds a connection's
    streaming buffers by 2 x (OUT_HIGH + READ_CHUNK): read from the code so
    the test follows it."""
    session = ROOT / "proxy" / "session"
    doc = (session / "session.c").read_text()
    assert "2 x (OUT_HIGH + READ_CHUNK)" in doc, "session.c no longer documents the bound"
    src = (session / "session_int.h").read_text() + (session / "transport.h").read_text()
    vals = {}
    for name in ("OUT_HIGH", "READ_CHUNK"):
        m = re.search(rf"\b{name}\s*=\s*([0-9 *]+),", src)
        assert m, f"no {name} in proxy/session/"
        vals[name] = eval(m.group(1), {"__builtins__": {}})  # e.g. "1024 * 1024"
    return vals["OUT_HIGH"], vals["READ_CHUNK"]


def asan_binary(path: str) -> bool:
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


def test_stopped_reader_memory_bound(upstream, start_proxy, mongoguard_bin, dbname, monkeypatch):
    out_high, read_chunk = documented_bound()
    asan = asan_binary(mongoguard_bin)
    if asan:
        # ASan keeps freed memory in a quarantine (256 MB by default), which
        # would count every byte that ever streamed through; without it the
        # RSS measures what is held
        monkeypatch.setenv("ASAN_OPTIONS", (os.environ.get("ASAN_OPTIONS", "") +
                                            ":quarantine_size_mb=0").lstrip(":"))
    ndocs, size = 96, 128 * 1024  # 12 MiB: one batch
    with upstream.client() as c:
        for i in range(0, ndocs, 16):
            c[dbname].big.insert_many([{"_id": j, "pad": "p" * size} for j in range(i, i + 16)])
    p = start_proxy(upstream.uri)
    ping(p.port)
    time.sleep(0.5)
    base = rss_kib(p.proc.pid)
    nconn, per_conn = 6, 3
    finds = b"".join(w.op_msg({"find": "big", "batchSize": ndocs, "$db": dbname})
                     for _ in range(per_conn))
    socks = []
    try:
        for _ in range(nconn):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            s.connect(("127.0.0.1", p.port))
            s.sendall(finds)  # and then never read
            socks.append(s)
        # wait for the memory to stop growing: the streams are stalled
        peak, last_change = base, time.monotonic()
        t_end = time.monotonic() + 20
        while time.monotonic() < t_end:
            r = rss_kib(p.proc.pid)
            if r > peak + 128:
                peak, last_change = r, time.monotonic()
            elif time.monotonic() - last_change > 2.0:
                break
            time.sleep(0.1)
        peak = max(peak, rss_kib(p.proc.pid))
        offered = nconn * per_conn * ndocs * size
        per = 2 * (out_high + read_chunk) + len(finds)
        slack = 16 * 1024 * 1024  # allocator arenas, libevent, thread stacks touched
        bound = nconn * per + slack
        growth = (peak - base) * 1024
        print(f"  {nconn} stalled readers, {offered / 2**20:.0f} MiB of replies asked for: "
              f"VmRSS {base / 1024:.1f} -> {peak / 1024:.1f} MiB (+{growth / 2**20:.1f} MiB); "
              f"bound {nconn} x 2 x (OUT_HIGH + READ_CHUNK) + requests + "
              f"{slack >> 20} MiB = {bound / 2**20:.1f} MiB{' (ASan, no quarantine)' if asan else ''}")
        assert growth <= bound, f"grew {growth / 2**20:.1f} MiB, bound {bound / 2**20:.1f} MiB"
        # the stall held no more than that, and lost nothing: one client
        # reads on and gets every reply whole
        s = socks[0]
        s.settimeout(None)
        for _ in range(per_conn):
            r = w.recv_message(s, 60)
            assert r.body["ok"] == 1 and len(r.body["cursor"]["firstBatch"]) == ndocs
        assert p.alive()
    finally:
        for s in socks:
            s.close()
    ping(p.port)




def sigterm_with_stuck_clients(upstream, start_proxy, dbname, silent: dict,
                               blackhole: bool) -> tuple[int, float]:
    """A client that stopped reading a large reply, and a request the
    upstream never answers (only that connection goes silent, or with
    `blackhole` every connection, the index cache's side connection
    included); then SIGTERM. Returns mongoguard's exit status and how long
    past shutdownGraceMS it took to exit."""
    host, port = upstream.uri.split("//")[1].rstrip("/").split(":")
    relay = FaultRelay((host, int(port)))
    grace_ms = 1500
    try:
        with upstream.client() as c:
            c[dbname].big.insert_many([{"_id": j, "pad": "p" * 65536} for j in range(64)])
        p = start_proxy(relay.uri, config=f"shutdownGraceMS: {grace_ms}\n")
        ping(p.port)
        reader = socket.socket()
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        reader.connect(("127.0.0.1", p.port))
        reader.sendall(w.op_msg({"find": "big", "batchSize": 64, "$db": dbname}))
        time.sleep(1.0)  # the reply is stuck behind the client that does not read
        waiting = w.connect(p.port)
        w.command(waiting, {"ping": 1})
        marker = uuid.uuid4().hex
        if blackhole:
            relay.blackhole()
        else:
            relay.silence_next(marker.encode())
        waiting.sendall(w.op_msg(dict(silent, comment=marker, **{"$db": dbname})))
        time.sleep(0.3)
        t0 = time.monotonic()
        p.proc.send_signal(15)
        rc = p.proc.wait(grace_ms / 1000 + 30)
        took = time.monotonic() - t0
        print(f"  exited {rc} {took:.2f}s after SIGTERM (shutdownGraceMS {grace_ms})")
        assert w.wait_closed(waiting, 5) == b"", "the unanswered request got bytes"
        reader.close()
        waiting.close()
        return rc, took - grace_ms / 1000
    finally:
        relay.close()


def test_sigterm_with_stuck_clients_and_silent_upstream(upstream, start_proxy, dbname):
    """Shutdown is bounded by shutdownGraceMS even when nothing it waits
    for will ever finish."""
    rc, over = sigterm_with_stuck_clients(upstream, start_proxy, dbname, {"ping": 1}, False)
    assert rc == 0
    assert over < 3, f"shutdown overran shutdownGraceMS by {over:.1f}s"


def test_sigterm_while_an_index_list_fetch_hangs(upstream, start_proxy, dbname):
    """A find on a collection never seen has its index list fetched over
    the side connection; the upstream goes silent for everyone, so that
    fetch is still on the wire when shutdown frees the workers. It used to
    land in them (heap corruption, SIGABRT at exit); now exit status 0."""
    rc, over = sigterm_with_stuck_clients(
        upstream, start_proxy, dbname, {"find": "fresh", "filter": {"a": 1}, "sort": {"b": 1}},
        True)
    assert rc == 0, f"mongoguard exited {rc} when a late index fetch ended"
    # The metadata thread, blocked in listIndexes for up to the side
    # connection's socket timeout (10 s), is waited for 1 s, then left.
    assert over < 3, f"shutdown overran shutdownGraceMS by {over:.1f}s"
    lines = [ln for ln in start_proxy.proxies[-1].log.lines()
             if "exiting without waiting" in str(ln.get("msg", ""))]
    assert lines, "the abandoned index fetch must be logged"
