"""Helpers for the operator-facing tests (log formats, rotation, start-up
checks, upstream reachability, /findings): a mongoguard started with
exactly the arguments a test gives, whatever its log's format, and the
requests that make findings."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import mgwire as w
from conftest import LOG_DIR, start_on_free_port

RULES = ["case-insensitive-regex", "unbounded-push", "hot-path-lookup", "index-mismatched-sort",
         "collection-scan", "large-document", "client-side-join"]


def rules_yaml(**actions) -> str:
    """rules: every rule off but those given (names with '_' for '-')."""
    rules = {r: "off" for r in RULES}
    for k, v in actions.items():
        rules[k.replace("_", "-")] = v
    return json.dumps({"rules": rules}) + "\n"


class Mongoguard:
    """A mongoguard process of the test's own making; stop() sends SIGTERM
    and returns the exit status."""

    def __init__(self, binary: str, name: str, args: list[str], config: str | None = None,
                 wait: bool = True):
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.base = LOG_DIR / name
        self.out_path = Path(f"{self.base}.out")
        tail = []
        if config is not None:
            cfg = Path(f"{self.base}.yaml")
            cfg.write_text(config)
            tail = ["--config", str(cfg)]
        self.port, self.proc, self._out = start_on_free_port(
            lambda port: [binary, "--listen", f"127.0.0.1:{port}", *args, *tail],
            self.out_path, 10, "mongoguard", wait=wait)
        self.args = self.proc.args

    def command(self, body: dict, db: str = "admin", app: str | None = None):
        s = w.connect(self.port)
        try:
            if app:
                w.command(s, {"hello": 1, "client": {"application": {"name": app}}})
            return w.command(s, body, db=db).body
        finally:
            s.close()

    def signal(self, sig=signal.SIGUSR1):
        self.proc.send_signal(sig)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        return self.proc.returncode


def ci_regex_find(g: Mongoguard, db: str, coll: str, app: str | None = None):
    """A find a case-insensitive-regex rule reports."""
    return g.command({"find": coll, "filter": {"name": {"$regex": "^bob", "$options": "i"}}},
                     db=db, app=app)


def wait_until(pred, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout}s")
        time.sleep(0.05)


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
