"""Starting and stopping the processes tests, benchmarks and the soak run on
loopback: one copy of each helper for tests/integration/conftest.py,
tests/bench/run_bench.py and scripts/soak.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

# libmongoc (in mongoguard and the C tools) keeps counters nothing reads in
# a /dev/shm/mongoc-PID file, made before main runs and left behind when a
# process is killed; a later process with the same pid finds the file taken
# and prints a warning on its own, which breaks a JSON log on stdout. Every
# process started from here goes without them (see README, Logs).
os.environ.setdefault("MONGOC_DISABLE_SHM", "1")


class NotListening(AssertionError):
    """A server did not accept connections (an AssertionError, so a pytest
    fixture that waits on one fails as an assertion)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float, proc: subprocess.Popen | None = None,
              what: str = "server") -> None:
    """Returns once 127.0.0.1:port accepts a connection; NotListening when
    proc exits first or timeout seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise NotListening(f"{what} exited with status {proc.returncode} before it "
                               f"accepted connections")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise NotListening(f"{what} did not accept connections on port {port} within {timeout}s")


def start_on_free_port(args_for, out_path, timeout: float, what: str = "server",
                       tries: int = 3, wait: bool = True):
    """Starts args_for(port) on a free port, its stdout and stderr in the
    file out_path, and returns (port, proc, out) once it listens (out: the
    open file). free_port() closes the port it found before the server
    binds it, so another process (a second suite on the machine, a server
    starting) can take it in between: a server whose output then says
    "Address already in use" is started again on another port, up to tries
    times. wait False: started once, not waited for. NotListening, with the
    server's output, when it does not listen."""
    for attempt in range(1, tries + 1):
        port = free_port()
        args = args_for(port)
        out = open(out_path, "wb")
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        if not wait:
            return port, proc, out
        try:
            wait_port(port, timeout, proc, what)
            return port, proc, out
        except NotListening:
            proc.kill()
            proc.wait()
            out.close()
            text = open(out_path, errors="replace").read()
            if attempt < tries and "Address already in use" in text:
                continue
            raise NotListening(f"{what} failed to start: {' '.join(args)}\n{text[-3000:]}")
    raise AssertionError("unreachable")


def stop(proc: subprocess.Popen, timeout: float = 30) -> int:
    """SIGTERM, then SIGKILL after timeout seconds; the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
