"""A tiny UDP DNS server for the mongodb+srv:// tests: it answers SRV, TXT
and A queries from a table the test changes while mongoguard runs, on
127.0.0.1 and a free port (mongoguard reaches it through
upstream.dnsServer). It can also be told to fail (SERVFAIL) to test
what mongoguard does when DNS is down.

Only what the tests need: one question per query, no compression in
answers, no TCP (answers stay far below 512 bytes)."""

from __future__ import annotations

import socket
import struct
import threading

SRV, TXT, A = 33, 16, 1
NOERROR, SERVFAIL, NXDOMAIN = 0, 2, 3


def _name(labels: str) -> bytes:
    out = b""
    for part in labels.rstrip(".").split("."):
        out += bytes([len(part)]) + part.encode()
    return out + b"\0"


def _read_name(msg: bytes, off: int) -> tuple[str, int]:
    parts = []
    while True:
        n = msg[off]
        off += 1
        if n == 0:
            return ".".join(parts), off
        parts.append(msg[off:off + n].decode())
        off += n


class DnsStub:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.records: dict[tuple[str, int], list[bytes]] = {}
        self.fail = False
        self.queries: list[tuple[str, int]] = []
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def server(self) -> str:
        return f"127.0.0.1:{self.port}"

    # --- the table -----------------------------------------------------------

    def set_srv(self, name: str, targets: list[tuple[str, int]]) -> None:
        """name: the full query name (_mongodb._tcp.host)."""
        with self.lock:
            self.records[(name.lower(), SRV)] = [
                struct.pack("!HHH", 0, 5, port) + _name(t) for t, port in targets]

    def set_txt(self, name: str, records: list[list[str]]) -> None:
        """One list of character-strings per TXT record."""
        with self.lock:
            self.records[(name.lower(), TXT)] = [
                b"".join(bytes([len(s)]) + s.encode() for s in strings) for strings in records]

    def set_a(self, name: str, addrs: list[str]) -> None:
        with self.lock:
            self.records[(name.lower(), A)] = [socket.inet_aton(a) for a in addrs]

    def count(self, name: str, qtype: int) -> int:
        with self.lock:
            return sum(1 for q in self.queries if q == (name.lower(), qtype))

    # --- serving -------------------------------------------------------------

    def _answer(self, query: bytes) -> bytes:
        qid, _flags, qd = struct.unpack("!HHH", query[:6])
        name, off = _read_name(query, 12)
        qtype, qclass = struct.unpack("!HH", query[off:off + 4])
        question = query[12:off + 4]
        key = (name.lower(), qtype)
        with self.lock:
            self.queries.append(key)
            rdatas = self.records.get(key, [])
            known = any(k[0] == key[0] for k in self.records)
            fail = self.fail
        rcode = SERVFAIL if fail else (NOERROR if known else NXDOMAIN)
        if fail:
            rdatas = []
        flags = 0x8180 | rcode
        head = struct.pack("!HHHHHH", qid, flags, 1, len(rdatas), 0, 0)
        answers = b"".join(
            b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 1, len(rd)) + rd for rd in rdatas)
        return head + question + answers

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                query, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                self.sock.sendto(self._answer(query), peer)
            except (IndexError, struct.error, UnicodeDecodeError):
                continue  # not a query we can read: no answer, as a server would

    def stop(self) -> None:
        self._stop = True
        self.thread.join(2)
        self.sock.close()
