"""Helpers for the connectivity tests: a FerretDB of the test's own (a
one-member replica set, TLS, authentication), certificates made at test
time with `openssl`, and the Node.js topology script.

Kept apart from conftest.py so the shared fixtures stay as they are."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import BUILD, LOG_DIR, NODE_DIR, ferretdb_binary, free_port, wait_port


class Ferret:
    """A FerretDB started with extra flags; stop() at teardown. tls: a
    (certificate, key) pair for --listen-tls."""

    def __init__(self, *, repl_set: str | None = None, tls: tuple[Path, Path] | None = None,
                 auth: tuple[str, str] | None = None,
                 plain: bool = True, name: str = "ferret"):
        self.data = BUILD / "test-data" / f"{name}-{uuid.uuid4().hex[:8]}"
        self.data.mkdir(parents=True, exist_ok=True)
        self.port = free_port() if plain else None
        self.tls_port = free_port() if tls else None
        args = [ferretdb_binary(), "--handler=sqlite", f"--sqlite-url=file:{self.data}/",
                f"--state-dir={self.data}", "--telemetry=disable", "--debug-addr=-",
                "--log-level=warn"]
        args.append(f"--listen-addr=127.0.0.1:{self.port}" if plain else "--listen-addr=")
        if repl_set:
            args.append(f"--repl-set-name={repl_set}")
        if tls:
            args += [f"--listen-tls=127.0.0.1:{self.tls_port}",
                     f"--listen-tls-cert-file={tls[0]}", f"--listen-tls-key-file={tls[1]}"]
        if auth:
            args += ["--test-enable-new-auth", f"--setup-username={auth[0]}",
                     f"--setup-password={auth[1]}", "--setup-database=admin"]
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"{name}-{uuid.uuid4().hex[:6]}-ferretdb.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        wait_port(self.port or self.tls_port, 30, self.proc, "FerretDB")
        if auth:
            # the setup user is created at backend initialisation: wait for it
            time.sleep(0.5)

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.data, ignore_errors=True)


@pytest.fixture
def ferret():
    """Factory: ferret(repl_set=..., tls=..., auth=...) -> Ferret."""
    made = []

    def make(**kw) -> Ferret:
        f = Ferret(**kw)
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop()


# --- certificates --------------------------------------------------------------

class Certs:
    """A CA, a server certificate for 127.0.0.1/localhost, a client
    certificate, plus the bad ones: another CA, an expired server
    certificate, and one for the wrong host name."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.ca, self.ca_key = self._ca("ca", "mongoguard test CA")
        self.other_ca, self.other_ca_key = self._ca("other-ca", "some other CA")
        self.server_cert, self.server_key, self.server_pem = self._leaf(
            "server", "localhost", "DNS:localhost,IP:127.0.0.1", days=30)
        self.client_cert, self.client_key, self.client_pem = self._leaf(
            "client", "test client", None, days=30, client=True)
        self.expired_cert, self.expired_key, self.expired_pem = self._leaf(
            "expired", "localhost", "DNS:localhost,IP:127.0.0.1", days=-1)
        self.wrong_cert, self.wrong_key, self.wrong_pem = self._leaf(
            "wronghost", "db.example.com", "DNS:db.example.com", days=30)
        self.other_client_cert, self.other_client_key, self.other_client_pem = self._leaf(
            "other-client", "stranger", None, days=30, client=True, ca="other-ca")

    def _run(self, *args: str) -> None:
        r = subprocess.run(["openssl", *args], cwd=self.root, capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"openssl {' '.join(args)} failed: {r.stderr}")

    def _ca(self, name: str, cn: str) -> tuple[Path, Path]:
        self._run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                  "-out", f"{name}.pem", "-days", "30", "-subj", f"/CN={cn}",
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        return self.root / f"{name}.pem", self.root / f"{name}.key"

    def _leaf(self, name: str, cn: str, san: str | None, days: int, client: bool = False,
              ca: str = "ca") -> tuple[Path, Path, Path]:
        self._run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                  "-out", f"{name}.csr", "-subj", f"/CN={cn}")
        ext = self.root / f"{name}.ext"
        lines = ["basicConstraints=CA:FALSE",
                 f"extendedKeyUsage={'clientAuth' if client else 'serverAuth,clientAuth'}"]
        if san:
            lines.append(f"subjectAltName={san}")
        ext.write_text("\n".join(lines) + "\n")
        # days=-1: notAfter a day before notBefore (now), so already expired
        self._run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey",
                  f"{ca}.key", "-CAcreateserial", "-out", f"{name}.crt", "-days", str(days),
                  "-extfile", ext.name)
        pem = self.root / f"{name}-combined.pem"
        pem.write_text((self.root / f"{name}.crt").read_text() +
                       (self.root / f"{name}.key").read_text())
        return self.root / f"{name}.crt", self.root / f"{name}.key", pem


@pytest.fixture(scope="session")
def certs() -> Certs:
    root = BUILD / "test-certs" / uuid.uuid4().hex[:8]
    c = Certs(root)
    yield c
    shutil.rmtree(root, ignore_errors=True)


# --- the Node.js topology script ----------------------------------------------

def node_topology(uri: str, db: str, scenario: str, options: dict | None = None,
                  timeout: float = 90) -> dict:
    cmd = ["node", str(NODE_DIR / "topology.mjs"), uri, db, scenario]
    if options:
        cmd.append(json.dumps(options))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "NODE_NO_WARNINGS": "1"})
    assert r.returncode == 0, f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no JSON from {' '.join(cmd)}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return json.loads(lines[-1])
