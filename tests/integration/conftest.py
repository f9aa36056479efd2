"""Fixtures for mongoguard's integration suite.

Upstream: MONGOGUARD_TEST_UPSTREAM (any mongodb:// URI) if set; otherwise the
suite starts its own FerretDB (MONGOGUARD_FERRETDB, else build/tools/ferretdb,
else `ferretdb` on PATH) on a free loopback port with a fresh data directory
under build/test-data/.

mongoguard: MONGOGUARD_BIN, else build/mongoguard. Each proxy gets a free port
and a log file under build/test-logs/ (or MONGOGUARD_TEST_LOG_DIR); it is
stopped with SIGTERM and must exit with status 0.

Run everything: build/venv/bin/python -m pytest tests/integration -q
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from pymongo import MongoClient

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from procs import free_port, start_on_free_port, wait_port  # noqa: E402,F401  (tests import them from here)

ROOT = HERE.parent.parent
BUILD = ROOT / "build"

# A suite started in the background of a shell without job control (`nohup scripts/test.sh &`,
# `cmd &` in a script) inherits SIGINT and SIGQUIT ignored, and so would every process it
# starts: Python sets no handler for a signal ignored at its start, and exec keeps SIG_IGN.
# scripts/run.sh could then not trap the Ctrl-C that test_run_script.py and test_readme.py send
# it (bash cannot trap a signal ignored on entry), and those tests would hang on how the suite
# was launched. SIGINT is Python's default again here, which its children see as the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# MONGOGUARD_TEST_LOG_DIR: where the proxies' logs, configs and the helper
# servers' logs go (default build/test-logs). Two runs of the suite at once
# from one tree need a directory each: the files are named by test and by a
# per-run counter, and a proxy removes its files before it starts.
LOG_DIR = Path(os.environ.get("MONGOGUARD_TEST_LOG_DIR") or BUILD / "test-logs")
NODE_DIR = HERE / "node"

READY_TIMEOUT = 10.0
STOP_TIMEOUT = 20.0


# --- small helpers -----------------------------------------------------------

def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]


# --- upstream ---------------------------------------------------------------

class Upstream:
    def __init__(self, uri: str, kind: str, proc=None, data_dir=None):
        self.uri = uri
        self.kind = kind  # "ferretdb" (started by the suite) or "external"
        self.proc = proc
        self.data_dir = data_dir

    @property
    def is_ferretdb(self) -> bool:
        return self.kind == "ferretdb"

    def client(self, **kw) -> MongoClient:
        kw.setdefault("serverSelectionTimeoutMS", 10000)
        return MongoClient(self.uri, **kw)


def ferretdb_binary() -> str:
    env = os.environ.get("MONGOGUARD_FERRETDB")
    if env:
        return env
    local = BUILD / "tools" / "ferretdb"
    if local.exists():
        return str(local)
    found = shutil.which("ferretdb")
    if found:
        return found
    pytest.fail("no FerretDB: set MONGOGUARD_FERRETDB, build build/tools/ferretdb (the setup "
                "script does), put ferretdb on PATH, or set MONGOGUARD_TEST_UPSTREAM",
                pytrace=False)


@pytest.fixture(scope="session")
def upstream():
    uri = os.environ.get("MONGOGUARD_TEST_UPSTREAM")
    if uri:
        up = Upstream(uri, "external")
        with up.client() as c:
            c.admin.command("ping")
        yield up
        return
    binary = ferretdb_binary()
    v = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    if v.returncode != 0:
        pytest.fail(f"FerretDB at {binary} does not run (--version exited {v.returncode}):\n"
                    f"{(v.stdout + v.stderr)[-1500:]}", pytrace=False)
    data = BUILD / "test-data" / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    errlog = open(LOG_DIR / "ferretdb.log", "wb")
    proc = subprocess.Popen(
        [binary, "--handler=sqlite", f"--sqlite-url=file:{data}/", f"--state-dir={data}",
         f"--listen-addr=127.0.0.1:{port}", "--telemetry=disable", "--debug-addr=-",
         "--log-level=warn"],
        stdout=errlog, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_port(port, 30, proc, "FerretDB")
        up = Upstream(f"mongodb://127.0.0.1:{port}/", "ferretdb", proc, data)
        with up.client() as c:
            c.admin.command("ping")
        yield up
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        errlog.close()


# --- mongoguard --------------------------------------------------------------

def mongoguard_binary() -> str:
    return os.environ.get("MONGOGUARD_BIN") or str(BUILD / "mongoguard")


@pytest.fixture(scope="session")
def mongoguard_bin() -> str:
    binary = mongoguard_binary()
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary} is not built (set MONGOGUARD_BIN or build it)", pytrace=False)
    r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        pytest.fail(f"{binary} --version exited {r.returncode}: {r.stderr.strip()}",
                    pytrace=False)
    return binary


class ProxyLog:
    """mongoguard's JSON-lines log, read from its file as it grows."""

    def __init__(self, path: Path):
        self.path = path

    def raw_lines(self) -> list[str]:
        if not self.path.exists():
            return []
        text = self.path.read_text(errors="replace")
        return [ln for ln in text.splitlines() if ln.strip()]

    def lines(self) -> list[dict]:
        out = []
        for ln in self.raw_lines():
            try:
                out.append(json.loads(ln))
            except json.JSONDecodeError:
                out.append({"_unparsed": ln})
        return out

    def mark(self) -> int:
        """Position to read from later: log.since(mark)."""
        return len(self.raw_lines())

    def since(self, mark: int) -> list[dict]:
        return self.lines()[mark:]

    def findings(self, rule: str | None = None, since: int = 0) -> list[dict]:
        return [ln for ln in self.since(since)
                if ln.get("c") == "ANALYZER" and isinstance(ln.get("attr"), dict)
                and "rule" in ln["attr"] and (rule is None or ln["attr"]["rule"] == rule)]

    def wait_for(self, predicate, timeout: float = 10.0, since: int = 0, what: str = "log line"):
        deadline = time.monotonic() + timeout
        while True:
            hits = [ln for ln in self.since(since) if predicate(ln)]
            if hits:
                return hits
            if time.monotonic() > deadline:
                tail = "\n".join(self.raw_lines()[-30:])
                raise AssertionError(f"no {what} in {self.path} within {timeout}s; tail:\n{tail}")
            time.sleep(0.05)

    def ctx_of_client(self, client_port: int, since: int = 0) -> set[str]:
        """The ctx values of lines that mention a client's local port (e.g. the
        connection-accepted line's remote address)."""
        pat = re.compile(rf"[:\"]\s*{client_port}\b")
        ctxs = set()
        for ln in self.since(since):
            if "ctx" in ln and pat.search(json.dumps(ln.get("attr", {}))):
                ctxs.add(ln["ctx"])
        return ctxs

    def about_client(self, client_port: int, since: int = 0) -> list[dict]:
        ctxs = self.ctx_of_client(client_port, since)
        return [ln for ln in self.since(since) if ln.get("ctx") in ctxs]


def line_text(ln: dict) -> str:
    return json.dumps(ln, default=str)


# MONGOGUARD_TEST_WORKERS=N: every proxy the fixtures start runs N worker
# threads, whatever the machine's core count, unless the test passes its own
# --workers. scripts/test.sh uses it to run a subset through the
# ThreadSanitizer build with more than one worker. The flag wins over a
# `workers` key in the config file, at start and on reload.
TEST_WORKERS = os.environ.get("MONGOGUARD_TEST_WORKERS")


def workers_mode_args(args: list[str]) -> list[str]:
    if not TEST_WORKERS or any(a in ("-w", "--workers") or a.startswith("--workers=")
                               for a in args):
        return []
    return ["--workers", TEST_WORKERS]


class Proxy:
    _seq = itertools.count(1)

    def __init__(self, binary: str, upstream_uri: str, name: str, config: str | None = None,
                 extra_args: list[str] | None = None, log_to_file: bool = True):
        n = next(self._seq)
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        base = LOG_DIR / f"{_safe(name)}-{n}"
        self.log_path = Path(f"{base}.log")
        self.out_path = Path(f"{base}.out")
        head = [binary]
        if config is not None:
            cfg = Path(f"{base}.yaml")
            cfg.write_text(config)
            self.config_path = cfg
            head += ["--config", str(cfg)]

        def args_for(port: int) -> list[str]:  # a new port: what a lost one logged goes
            if self.log_path.exists():
                self.log_path.unlink()
            args = head + ["--listen", f"127.0.0.1:{port}", "--upstream", upstream_uri,
                           "--log", str(self.log_path) if log_to_file else "-"]
            args += extra_args or []
            return args + workers_mode_args(args)

        self.upstream_uri = upstream_uri
        self.log = ProxyLog(self.log_path if log_to_file else self.out_path)
        self.returncode: int | None = None
        self.port, self.proc, self._out = start_on_free_port(args_for, self.out_path,
                                                             READY_TIMEOUT, "mongoguard")
        self.args = self.proc.args

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    def client(self, **kw) -> MongoClient:
        kw.setdefault("serverSelectionTimeoutMS", 10000)
        return MongoClient(self.uri, **kw)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        if self.returncode is not None:
            return self.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._out.close()
                self.returncode = -9
                raise AssertionError(f"mongoguard did not exit within {STOP_TIMEOUT}s of SIGTERM")
        self._out.close()
        self.returncode = self.proc.returncode
        return self.returncode

    def describe(self) -> str:
        return f"mongoguard on :{self.port} (log {self.log.path})"


class ProxyFactory:
    def __init__(self, binary: str, name: str):
        self.binary = binary
        self.name = name
        self.proxies: list[Proxy] = []

    def __call__(self, upstream_uri: str, config: str | None = None,
                 extra_args: list[str] | None = None, log_to_file: bool = True) -> Proxy:
        p = Proxy(self.binary, upstream_uri, self.name, config, extra_args, log_to_file)
        self.proxies.append(p)
        return p

    def stop_all(self) -> list[str]:
        problems = []
        for p in self.proxies:
            try:
                crashed = not p.alive() and p.returncode is None
                rc = p.stop()
            except AssertionError as e:
                problems.append(f"{p.describe()}: {e}")
                continue
            if rc != 0:
                how = "had already exited" if crashed else "exited on SIGTERM"
                problems.append(f"{p.describe()} {how} with status {rc}; output tail:\n"
                                f"{p.out_path.read_text(errors='replace')[-2000:]}")
            problems += log_shape_problems(p)
        return problems


def log_shape_problems(p: Proxy) -> list[str]:
    """Every line of the log is a JSON object in mongod's structured shape, and
    none reports an internal error (a state change the code refused)."""
    bad = []
    for i, ln in enumerate(p.log.lines()):
        why = None
        if "_unparsed" in ln:
            why = "not JSON"
        elif not (isinstance(ln.get("t"), dict) and isinstance(ln["t"].get("$date"), str)):
            why = "t.$date missing"
        elif ln.get("s") not in ("F", "E", "W", "I", "D") and not str(ln.get("s", "")).startswith("D"):
            why = "bad s"
        elif not isinstance(ln.get("c"), str) or not isinstance(ln.get("id"), int):
            why = "c/id missing"
        elif not isinstance(ln.get("ctx"), str) or not isinstance(ln.get("msg"), str):
            why = "ctx/msg missing"
        elif "attr" in ln and not isinstance(ln["attr"], dict):
            why = "attr not an object"
        elif ln["msg"].startswith("Internal error"):
            why = "internal error"
        if why:
            bad.append(f"{p.log.path} line {i + 1}: {why}: {str(ln)[:300]}")
    return bad[:5]


@pytest.fixture
def start_proxy(request, mongoguard_bin):
    """Factory: start_proxy(upstream_uri, config=None, extra_args=None) -> Proxy.
    Every proxy it started is stopped with SIGTERM at teardown and must exit 0."""
    f = ProxyFactory(mongoguard_bin, request.node.name)
    yield f
    problems = f.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def proxy(request, mongoguard_bin, upstream):
    """One mongoguard with no config in front of the upstream, shared by a module."""
    f = ProxyFactory(mongoguard_bin, request.module.__name__)
    p = f(upstream.uri)
    yield p
    problems = f.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


# --- clients -----------------------------------------------------------------

@pytest.fixture
def clients(upstream):
    """clients.direct(**kw) / clients.via(proxy, **kw): pymongo clients closed at teardown."""

    class Clients:
        def __init__(self):
            self.open = []

        def direct(self, **kw):
            c = upstream.client(**kw)
            self.open.append(c)
            return c

        def via(self, p, **kw):
            c = p.client(**kw)
            self.open.append(c)
            return c

    cs = Clients()
    yield cs
    for c in cs.open:
        c.close()


@pytest.fixture
def dbname(request, upstream):
    """A database name unique to this test; dropped afterwards on the upstream."""
    name = unique_name("mg_" + _safe(request.node.name)[:30].replace(".", "_"))
    yield name
    with upstream.client() as c:
        for n in c.list_database_names():
            if n.startswith(name):
                c.drop_database(n)


# --- node, mongosh and the C client ------------------------------------------

@pytest.fixture(scope="session")
def node_modules():
    if not (NODE_DIR / "node_modules" / "mongodb").exists() or \
            not (NODE_DIR / "node_modules" / ".bin" / "mongosh").exists():
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            pytest.fail(f"npm ci in {NODE_DIR} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}",
                        pytrace=False)
        # the mark scripts/setup.sh checks: without it the next run.sh (as
        # test_run_script.py starts it) would run npm ci again, deleting
        # node_modules under whatever else is using it
        shutil.copyfile(NODE_DIR / "package-lock.json",
                        NODE_DIR / "node_modules" / ".package-lock.json.mg")
    return NODE_DIR / "node_modules"


C_SRC = HERE / "c" / "mg_client.c"


@pytest.fixture(scope="session")
def c_client() -> str:
    """The libmongoc test client: MONGOGUARD_C_CLIENT, the CMake-built
    build/tests/mg_client, or compiled here from tests/integration/c/mg_client.c."""
    env = os.environ.get("MONGOGUARD_C_CLIENT")
    if env:
        return env
    built = BUILD / "tests" / "mg_client"
    if built.exists() and built.stat().st_mtime >= C_SRC.stat().st_mtime:
        return str(built)
    out = BUILD / "test-bin" / "mg_client"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.stat().st_mtime < C_SRC.stat().st_mtime:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libmongoc-1.0"],
                               capture_output=True, text=True, check=True).stdout.split()
        r = subprocess.run(["cc", "-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror", "-o",
                            str(out), str(C_SRC)] + flags, capture_output=True, text=True)
        if r.returncode != 0:
            pytest.fail(f"compiling {C_SRC} failed:\n{r.stderr}", pytrace=False)
    return str(out)
