"""A TCP relay between mongoguard and a real server that makes upstream
faults on command.

    relay = FaultRelay(("127.0.0.1", ferret_port))   # listens on a free loopback port
    proxy = start_proxy(relay.uri)
    relay.cut_after(40, match=b"marker")  # next message with b"marker": 40 bytes, then close
    relay.reset_next(match=b"marker")     # next such message: RST (SO_LINGER 0) both ways
    relay.silence_next(b"marker")         # swallow it; that connection never answers again
    relay.refuse()                        # stop listening: connects get ECONNREFUSED
    relay.blackhole()                     # accept (and read) but never answer
    relay.slow(0.2, chunk=4096)           # server -> proxy: chunk bytes per 0.2 s
    relay.drop_all(reset=False)           # end every relayed connection now
    relay.come_back()                     # listen again on the same port, no faults
    relay.close()

Every relayed connection is one thread with a selector over both sockets:
simple, and a fault never depends on the timing of another connection. The
relay counts what it saw (accepted, cuts, resets) so a test can check that
its fault really happened rather than assume it."""

from __future__ import annotations

import os
import selectors
import socket
import struct
import threading
import time


def _linger0(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


def _close(sock: socket.socket | None, reset: bool = False) -> None:
    if sock is None:
        return
    if reset:
        _linger0(sock)
    try:
        sock.close()
    except OSError:
        pass


class FaultRelay:
    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1", port: int = 0):
        self.target = target
        self.host = host
        self._lock = threading.Lock()
        self._gen = 0  # drop_all(): connections of an older generation end
        self._drop_reset = False
        self._blackhole = False
        self._slow: tuple[float, int] | None = None
        self._cut: tuple[int, bytes | None] | None = None
        self._reset: bytes | None | bool = False
        self._cut_reply: tuple[int, bytes | None] | None = None
        self._silence: bytes | None = None
        self._pairs: set[threading.Thread] = set()
        self._marked: dict[bytes, set[threading.Thread]] = {}  # watch(): who carried it
        self.accepted = 0
        self.cuts = 0
        self.resets = 0
        self.closed = False
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self.port = port
        self._listen()

    # --- listening -----------------------------------------------------------

    def _listen(self) -> None:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((self.host, self.port))
        ls.listen(512)
        self.port = ls.getsockname()[1]
        self._listener = ls
        t = threading.Thread(target=self._accept_loop, args=(ls,), daemon=True,
                             name=f"faultrelay-accept-{self.port}")
        self._accept_thread = t
        t.start()

    def _accept_loop(self, ls: socket.socket) -> None:
        while True:
            try:
                down, _ = ls.accept()
            except OSError:
                return  # refuse() or close() shut the listener
            with self._lock:
                self.accepted += 1
                gen = self._gen
            t = threading.Thread(target=self._pair, args=(down, gen), daemon=True,
                                 name=f"faultrelay-conn-{self.port}")
            with self._lock:
                self._pairs.add(t)
            t.start()

    @property
    def uri(self) -> str:
        return f"mongodb://{self.host}:{self.port}/"

    # --- faults --------------------------------------------------------------

    def normal(self) -> None:
        """No fault for what comes next (listening is left as it is)."""
        with self._lock:
            self._blackhole = False
            self._slow = None
            self._cut = None
            self._reset = False
            self._cut_reply = None
            self._silence = None

    def refuse(self) -> None:
        """Stop listening: new connections are refused by the kernel."""
        ls, self._listener = self._listener, None
        if ls is not None:
            try:
                ls.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            ls.close()
        if self._accept_thread is not None:
            self._accept_thread.join(5)

    def come_back(self) -> None:
        """Listen again on the same port, with no fault armed."""
        self.normal()
        if self._listener is None:
            self._listen()

    def blackhole(self, on: bool = True) -> None:
        """Accept connections and read what arrives, but never forward or
        answer (in both directions, for existing connections too)."""
        with self._lock:
            self._blackhole = on

    def slow(self, delay: float, chunk: int = 4096) -> None:
        """Server -> proxy: at most `chunk` bytes per `delay` seconds."""
        with self._lock:
            self._slow = (delay, chunk) if delay > 0 else None

    def cut_after(self, nbytes: int, match: bytes | None = None) -> None:
        """The next proxy -> server read (containing `match`, if given) is
        forwarded only up to `nbytes`, then both sides are closed."""
        with self._lock:
            self._cut = (nbytes, match)

    def cut_reply_after(self, nbytes: int, match: bytes | None = None) -> None:
        """The reply to the next request (containing `match`, if given) is
        forwarded only up to `nbytes` (half a reply), then both sides are
        closed."""
        with self._lock:
            self._cut_reply = (nbytes, match)

    def silence_next(self, match: bytes) -> None:
        """The next request containing `match` is swallowed, and its
        connection goes silent from then on (the others carry on)."""
        with self._lock:
            self._silence = match

    def reset_next(self, match: bytes | None = None) -> None:
        """The next proxy -> server read (containing `match`, if given) is
        not forwarded: both sides are reset instead (RST, SO_LINGER 0)."""
        with self._lock:
            self._reset = match if match is not None else True

    def drop_all(self, reset: bool = False) -> None:
        """End every connection relayed so far (FIN, or RST with reset)."""
        with self._lock:
            self._gen += 1
            self._drop_reset = reset
            old = list(self._pairs)
        # synchronous: once it returns no old connection forwards anything
        for t in old:
            if t is not threading.current_thread():
                t.join(5)

    def live(self) -> int:
        with self._lock:
            self._pairs = {t for t in self._pairs if t.is_alive()}
            return len(self._pairs)

    def watch(self, marker: bytes) -> None:
        """Remember every relayed connection whose proxy -> server bytes
        contain `marker` (from now on), for carrying() to count."""
        with self._lock:
            self._marked.setdefault(marker, set())

    def carrying(self, marker: bytes) -> tuple[int, int]:
        """(seen, still open): the connections that carried `marker`. A test
        can follow its own request's connection while others (a driver's
        monitors, the index cache's side connection) come and go."""
        with self._lock:
            ts = self._marked.get(marker, set())
            return len(ts), sum(1 for t in ts if t.is_alive())

    def wait_idle(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.live() == 0:
                return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        self.closed = True
        self.refuse()
        self.drop_all()
        self.wait_idle(5)

    # --- one relayed connection ----------------------------------------------

    def _pair(self, down: socket.socket, gen: int) -> None:
        up = None
        try:
            with self._lock:
                hole = self._blackhole
            if not hole:
                try:
                    up = socket.create_connection(self.target, timeout=5)
                except OSError:
                    _close(down, reset=True)
                    return
                up.settimeout(None)
                up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            down.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._relay(down, up, gen)
        finally:
            # a reset already closed them; closing again is harmless
            _close(down)
            _close(up)

    def _relay(self, down: socket.socket, up: socket.socket | None, gen: int) -> None:
        st: dict = {"cut_reply": None, "silent": False}  # this connection's own faults
        sel = selectors.DefaultSelector()
        sel.register(down, selectors.EVENT_READ, "down")
        if up is not None:
            sel.register(up, selectors.EVENT_READ, "up")
        try:
            while not self.closed:
                with self._lock:
                    if self._gen != gen:
                        reset = self._drop_reset
                        _close(down, reset)
                        _close(up, reset)
                        return
                for key, _ in sel.select(0.05):
                    if key.data == "down":
                        if not self._from_proxy(down, up, st):
                            return
                    elif not self._from_server(down, up, st):
                        return
        finally:
            sel.close()

    def _from_proxy(self, down: socket.socket, up: socket.socket | None, st: dict) -> bool:
        try:
            data = down.recv(65536)
        except OSError:
            data = b""
        if not data:
            return False
        with self._lock:
            for marker, ts in self._marked.items():
                if marker in data:
                    ts.add(threading.current_thread())
            if self._silence is not None and self._silence in data:
                self._silence = None
                st["silent"] = True
            if self._blackhole or up is None or st["silent"]:
                return True  # read and dropped: never answered
            reset = self._reset
            if reset is not False and (reset is True or reset in data):
                self._reset = False
                self.resets += 1
                _close(up, reset=True)
                _close(down, reset=True)
                return False
            cr = self._cut_reply
            if cr is not None and (cr[1] is None or cr[1] in data):
                self._cut_reply = None
                st["cut_reply"] = cr[0]
            cut = self._cut
            if cut is not None and (cut[1] is None or cut[1] in data):
                self._cut = None
                self.cuts += 1
            else:
                cut = None
        if cut is not None:
            try:
                up.sendall(data[:cut[0]])
            except OSError:
                pass
            _close(up)
            _close(down)
            return False
        try:
            up.sendall(data)
        except OSError:
            return False
        return True

    def _from_server(self, down: socket.socket, up: socket.socket, st: dict) -> bool:
        with self._lock:
            hole = self._blackhole or st["silent"]
            slow = self._slow
        if hole:
            time.sleep(0.05)  # leave it unread: the server's bytes never arrive
            return True
        try:
            data = up.recv(slow[1] if slow else 65536)
        except OSError:
            data = b""
        if not data:
            return False
        cut, st["cut_reply"] = st["cut_reply"], None
        if cut is not None:
            with self._lock:
                self.cuts += 1
        if cut is not None:
            try:
                down.sendall(data[:cut])
            except OSError:
                pass
            _close(up)
            _close(down)
            return False
        if slow:
            time.sleep(slow[0])
        try:
            down.sendall(data)
        except OSError:
            return False
        return True


# --- the proxy process, seen from /proc --------------------------------------

def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_table(pid: int) -> dict[int, str]:
    """fd -> what it is (readlink), for messages that show what leaked."""
    out = {}
    for f in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(f)] = os.readlink(f"/proc/{pid}/fd/{f}")
        except OSError:
            pass
    return out


def tcp_peers(pid: int) -> dict[str, str]:
    """socket inode -> "local -> remote state" for the process's TCP sockets."""
    inodes = {v[8:-1] for v in fd_table(pid).values() if v.startswith("socket:[")}
    states = {"01": "ESTABLISHED", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "0A": "LISTEN", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "09": "LAST_ACK"}
    out = {}

    def addr(h: str) -> str:
        ip, port = h.split(":")
        return ".".join(str(int(ip[i:i + 2], 16)) for i in (6, 4, 2, 0)) + f":{int(port, 16)}"

    for line in open(f"/proc/{pid}/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[9] in inodes:
            out[f[9]] = f"{addr(f[1])} -> {addr(f[2])} {states.get(f[3], f[3])}"
    return out


def rss_kib(pid: int) -> int:
    """VmRSS of a process, in KiB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def settle_fds(pid: int, quiet: float = 0.5, timeout: float = 10.0) -> int:
    """The descriptor count once it has stopped changing for `quiet` s."""
    deadline = time.monotonic() + timeout
    last, since = open_fds(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        n = open_fds(pid)
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last


def fds_back_to(pid: int, baseline: int, timeout: float = 10.0) -> int:
    """Wait for the descriptor count to come down to `baseline`; returns
    the last count (the caller asserts)."""
    deadline = time.monotonic() + timeout
    n = open_fds(pid)
    while n > baseline and time.monotonic() < deadline:
        time.sleep(0.1)
        n = open_fds(pid)
    return n
