"""MongoDB wire-protocol bytes for tests: build requests and replies exactly,
read whole messages from a socket, and decode what comes back.

Everything here is deliberately independent of mongoguard's own C code, so a
test built on it checks the proxy against a second reading of the spec
(../shared/PROTOCOL.md), not against itself.
"""

from __future__ import annotations

import itertools
import select
import socket
import struct
import time
import zlib
from dataclasses import dataclass, field

import bson
from bson.codec_options import CodecOptions

OP_REPLY = 1
OP_UPDATE = 2001
OP_INSERT = 2002
OP_QUERY = 2004
OP_GET_MORE = 2005
OP_DELETE = 2006
OP_KILL_CURSORS = 2007
OP_COMPRESSED = 2012
OP_MSG = 2013

CHECKSUM_PRESENT = 1 << 0
MORE_TO_COME = 1 << 1
EXHAUST_ALLOWED = 1 << 16

COMPRESSOR_IDS = {"noop": 0, "snappy": 1, "zlib": 2, "zstd": 3}

MAX_MESSAGE_LEN = 48_000_000

_HEADER = struct.Struct("<iiii")
_ids = itertools.count(1000)

CODEC = CodecOptions(tz_aware=False)


def next_request_id() -> int:
    return next(_ids)


def encode(doc) -> bytes:
    if isinstance(doc, (bytes, bytearray)):
        return bytes(doc)
    return bson.encode(doc, codec_options=CODEC)


def header(length: int, request_id: int, response_to: int, opcode: int) -> bytes:
    return _HEADER.pack(length, request_id, response_to, opcode)


# --- CRC-32C (Castagnoli), for OP_MSG checksums -----------------------------

def _crc32c_table():
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# --- building messages ------------------------------------------------------

def op_msg(body, *, request_id: int | None = None, response_to: int = 0, flags: int = 0,
           sequences: dict | None = None, checksum: bool = False, raw_body: bytes | None = None,
           extra_sections: bytes = b"") -> bytes:
    """An OP_MSG: kind-0 body (a dict or raw BSON bytes), then kind-1 sequences
    {identifier: [docs]}. checksum=True sets bit 0 and appends a correct CRC-32C."""
    if request_id is None:
        request_id = next_request_id()
    if checksum:
        flags |= CHECKSUM_PRESENT
    payload = struct.pack("<I", flags)
    payload += b"\x00" + (raw_body if raw_body is not None else encode(body))
    for ident, docs in (sequences or {}).items():
        docs_bytes = b"".join(encode(d) for d in docs)
        ident_bytes = ident.encode() + b"\x00"
        payload += b"\x01" + struct.pack("<i", 4 + len(ident_bytes) + len(docs_bytes))
        payload += ident_bytes + docs_bytes
    payload += extra_sections
    length = 16 + len(payload) + (4 if checksum else 0)
    msg = header(length, request_id, response_to, OP_MSG) + payload
    if checksum:
        msg += struct.pack("<I", crc32c(msg))
    return msg


def op_query(ns: str, query, *, request_id: int | None = None, flags: int = 0, skip: int = 0,
             n: int = -1) -> bytes:
    if request_id is None:
        request_id = next_request_id()
    payload = struct.pack("<i", flags) + ns.encode() + b"\x00" + struct.pack("<ii", skip, n)
    payload += encode(query)
    return header(16 + len(payload), request_id, 0, OP_QUERY) + payload


def op_reply(docs, *, response_to: int, request_id: int | None = None, flags: int = 0,
             cursor_id: int = 0, starting_from: int = 0) -> bytes:
    if request_id is None:
        request_id = next_request_id()
    body = b"".join(encode(d) for d in docs)
    payload = struct.pack("<iqii", flags, cursor_id, starting_from, len(docs)) + body
    return header(16 + len(payload), request_id, response_to, OP_REPLY) + payload


def op_insert_legacy(ns: str, docs, *, request_id: int | None = None) -> bytes:
    if request_id is None:
        request_id = next_request_id()
    payload = struct.pack("<i", 0) + ns.encode() + b"\x00" + b"".join(encode(d) for d in docs)
    return header(16 + len(payload), request_id, 0, OP_INSERT) + payload


def op_get_more_legacy(ns: str, cursor_id: int, *, request_id: int | None = None) -> bytes:
    if request_id is None:
        request_id = next_request_id()
    payload = struct.pack("<i", 0) + ns.encode() + b"\x00" + struct.pack("<iq", 10, cursor_id)
    return header(16 + len(payload), request_id, 0, OP_GET_MORE) + payload


def compress(data: bytes, compressor: str) -> bytes:
    if compressor == "zlib":
        return zlib.compress(data)
    if compressor == "snappy":
        import snappy
        return snappy.compress(data)
    if compressor == "zstd":
        import zstandard
        return zstandard.ZstdCompressor().compress(data)
    if compressor == "noop":
        return data
    raise ValueError(compressor)


def decompress(data: bytes, compressor_id: int) -> bytes:
    if compressor_id == 2:
        return zlib.decompress(data)
    if compressor_id == 1:
        import snappy
        return snappy.decompress(data)
    if compressor_id == 3:
        import zstandard
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=MAX_MESSAGE_LEN)
    if compressor_id == 0:
        return data
    raise ValueError(compressor_id)


def op_compressed(message: bytes, compressor: str, *, claimed_size: int | None = None) -> bytes:
    """Wrap a whole message (header included) in OP_COMPRESSED, keeping its ids."""
    length, request_id, response_to, opcode = _HEADER.unpack_from(message)
    original = message[16:]
    data = compress(original, compressor)
    size = len(original) if claimed_size is None else claimed_size
    payload = struct.pack("<iiB", opcode, size, COMPRESSOR_IDS[compressor]) + data
    return header(16 + len(payload), request_id, response_to, OP_COMPRESSED) + payload


# --- decoding ---------------------------------------------------------------

@dataclass
class Message:
    raw: bytes
    length: int
    request_id: int
    response_to: int
    opcode: int
    flags: int = 0
    body: dict | None = None  # OP_MSG kind-0 body, or first OP_REPLY / OP_QUERY document
    sequences: dict = field(default_factory=dict)
    docs: list = field(default_factory=list)  # OP_REPLY documents
    ns: str | None = None  # OP_QUERY full collection name
    cursor_id: int = 0
    compressed_from: int | None = None  # compressor id when it arrived as OP_COMPRESSED

    @property
    def more_to_come(self) -> bool:
        return self.opcode == OP_MSG and bool(self.flags & MORE_TO_COME)

    @property
    def exhaust_allowed(self) -> bool:
        return self.opcode == OP_MSG and bool(self.flags & EXHAUST_ALLOWED)

    @property
    def command(self) -> str | None:
        if self.body:
            return next(iter(self.body))
        return None


def parse_message(raw: bytes) -> Message:
    length, request_id, response_to, opcode = _HEADER.unpack_from(raw)
    m = Message(raw=raw, length=length, request_id=request_id, response_to=response_to,
                opcode=opcode)
    if opcode == OP_COMPRESSED:
        orig_opcode, size, cid = struct.unpack_from("<iiB", raw, 16)
        inner = decompress(raw[25:], cid)
        assert len(inner) == size, f"OP_COMPRESSED claims {size} bytes, inflates to {len(inner)}"
        m2 = parse_message(header(16 + size, request_id, response_to, orig_opcode) + inner)
        m2.raw = raw
        m2.compressed_from = cid
        return m2
    if opcode == OP_MSG:
        (m.flags,) = struct.unpack_from("<I", raw, 16)
        end = length - (4 if m.flags & CHECKSUM_PRESENT else 0)
        pos = 20
        while pos < end:
            kind = raw[pos]
            pos += 1
            if kind == 0:
                (n,) = struct.unpack_from("<i", raw, pos)
                m.body = bson.decode(raw[pos:pos + n], codec_options=CODEC)
                pos += n
            elif kind == 1:
                (n,) = struct.unpack_from("<i", raw, pos)
                sec_end = pos + n
                nul = raw.index(b"\x00", pos + 4)
                ident = raw[pos + 4:nul].decode()
                docs = []
                p = nul + 1
                while p < sec_end:
                    (dn,) = struct.unpack_from("<i", raw, p)
                    docs.append(bson.decode(raw[p:p + dn], codec_options=CODEC))
                    p += dn
                m.sequences[ident] = docs
                pos = sec_end
            else:
                raise ValueError(f"unknown OP_MSG section kind {kind}")
    elif opcode == OP_REPLY:
        m.flags, m.cursor_id, _start, nret = struct.unpack_from("<iqii", raw, 16)
        m.docs = list(bson.decode_all(raw[36:], codec_options=CODEC))
        assert len(m.docs) == nret
        m.body = m.docs[0] if m.docs else None
    elif opcode == OP_QUERY:
        (m.flags,) = struct.unpack_from("<i", raw, 16)
        nul = raw.index(b"\x00", 20)
        m.ns = raw[20:nul].decode()
        pos = nul + 1 + 8
        (n,) = struct.unpack_from("<i", raw, pos)
        m.body = bson.decode(raw[pos:pos + n], codec_options=CODEC)
    return m


# --- sockets ----------------------------------------------------------------

class Closed(Exception):
    """The peer closed the connection (or reset it)."""


def recv_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"timed out with {len(buf)} of {n} bytes")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
        except (ConnectionResetError, BrokenPipeError) as e:
            raise Closed(str(e)) from e
        except socket.timeout as e:
            raise TimeoutError(f"timed out with {len(buf)} of {n} bytes") from e
        if not chunk:
            raise Closed(f"EOF after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def recv_message(sock: socket.socket, timeout: float = 10.0) -> Message:
    deadline = time.monotonic() + timeout
    head = recv_exact(sock, 16, deadline)
    (length,) = struct.unpack_from("<i", head)
    if length < 16 or length > MAX_MESSAGE_LEN:
        raise ValueError(f"reply with bad length {length}")
    rest = recv_exact(sock, length - 16, deadline)
    return parse_message(head + rest)


def wait_closed(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Read until EOF; return whatever arrived first. TimeoutError if the peer
    keeps the connection open past timeout."""
    deadline = time.monotonic() + timeout
    got = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"connection still open after {timeout}s ({len(got)} bytes read)")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return bytes(got)
        except socket.timeout:
            continue
        if not chunk:
            return bytes(got)
        got += chunk


def is_open(sock: socket.socket) -> bool:
    r, _, _ = select.select([sock], [], [], 0)
    if not r:
        return True
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except OSError:
        return False


def connect(port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> socket.socket:
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def command(sock: socket.socket, body: dict, *, db: str = "admin", timeout: float = 10.0,
            **kw) -> Message:
    """Send one OP_MSG command and return its reply, checking responseTo."""
    body = dict(body)
    body.setdefault("$db", db)
    rid = next_request_id()
    sock.sendall(op_msg(body, request_id=rid, **kw))
    reply = recv_message(sock, timeout)
    assert reply.response_to == rid, f"reply responseTo {reply.response_to} != requestID {rid}"
    return reply
