"""The findings collection sink (sinks.mongodb): records land, with the
instance name, in a collection with a TTL index on a second server; while
that server is away traffic flows, the sink says so once, drops what does
not fit its queue (counted), and catches up when the server is back."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request

import pytest
from bson.regex import Regex

from conftest import BUILD, LOG_DIR, ferretdb_binary, free_port, wait_port

SECRET = "fl33t-marker-0417"


class SinkServer:
    """A FerretDB of the test's own, on a port chosen beforehand."""

    def __init__(self, port: int, name: str):
        self.port = port
        self.data = BUILD / "test-data" / f"sink-{name}-{port}"
        self.data.mkdir(parents=True, exist_ok=True)
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log = open(LOG_DIR / f"sink-ferretdb-{port}.log", "wb")
        self.proc = subprocess.Popen(
            [ferretdb_binary(), "--handler=sqlite", f"--sqlite-url=file:{self.data}/",
             f"--state-dir={self.data}", f"--listen-addr=127.0.0.1:{port}",
             "--telemetry=disable", "--debug-addr=-", "--log-level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_port(port, 30, self.proc, "sink FerretDB")

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture
def sink_servers(request):
    started = []

    def start(port: int) -> SinkServer:
        s = SinkServer(port, request.node.name[:20])
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def sink_config(uri: str, admin_port: int, **sink) -> str:
    return json.dumps({
        "instanceName": "mg-test-1",
        "admin": {"listen": f"127.0.0.1:{admin_port}"},
        "sinks": {"mongodb": {"uri": uri, "database": "mgfleet", "flushMS": 100, **sink}},
        "rules": {"case-insensitive-regex": "log"},
    }) + "\n"


def wait_records(client, n: int, timeout: float = 20.0, **match) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        got = list(client.mgfleet.findings.find(match))
        if len(got) >= n:
            return got
        assert time.monotonic() < deadline, f"only {len(got)} of {n} sink records"
        time.sleep(0.1)


def sink_metric(port: int, result: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        key = f'mongoguard_sink_records_total{{sink="mongodb",result="{result}"}} '
        for line in r.read().decode().splitlines():
            if line.startswith(key):
                return float(line.split()[-1])
    raise AssertionError(f"no sink metric for {result}")


def test_findings_land_with_instance_and_ttl(start_proxy, upstream, sink_servers, clients,
                                             dbname):
    sink = sink_servers(free_port())
    admin = free_port()
    p = start_proxy(upstream.uri, config=sink_config(sink.uri, admin))
    coll = clients.via(p)[dbname].people
    assert coll.find_one({"name": Regex(SECRET, "i")}) is None
    with sink_client(sink) as sc:
        rec = wait_records(sc, 1, rule="case-insensitive-regex", ns=f"{dbname}.people")[0]
        assert rec["instance"] == "mg-test-1"
        assert rec["kind"] == "first" and rec["action"] == "log"
        assert rec["command"] == "find" and isinstance(rec["shape"], dict)
        assert SECRET not in json.dumps(rec, default=str)  # redacted as the log
        ttl = [ix for ix in sc.mgfleet.findings.list_indexes() if ix["name"] == "t_ttl"]
        # The sink server is a FerretDB 1.24, which has no TTL indexes
        # (createIndexes answers NotImplemented): the sink says so once and
        # writes anyway. Against mongod the same request creates t_ttl.
        assert not ttl
        p.log.wait_for(lambda ln: "cannot create a TTL index" in ln.get("msg", ""),
                       what="the no-TTL warning")
    assert sink_metric(admin, "written") >= 1


def sink_client(sink: SinkServer):
    from pymongo import MongoClient
    return MongoClient(sink.uri, serverSelectionTimeoutMS=10000)


def test_outage_drops_counted_and_recovers(start_proxy, upstream, sink_servers, clients,
                                           dbname):
    port, admin = free_port(), free_port()  # nothing listens on `port` yet
    p = start_proxy(upstream.uri, config=sink_config(f"mongodb://127.0.0.1:{port}/", admin,
                                                     queueSize=5, batchSize=2))
    coll = clients.via(p)[dbname].people
    # 20 shapes, so 20 first occurrences; traffic keeps flowing while the sink is away
    t0 = time.monotonic()
    for i in range(20):
        assert coll.find_one({f"f{i}": Regex("x", "i")}) is None
    assert time.monotonic() - t0 < 10, "the sink's outage must not hold requests"
    p.log.wait_for(lambda ln: "cannot write; retrying" in ln.get("msg", ""),
                   what="the sink's outage line")
    p.log.wait_for(lambda ln: "queue full" in ln.get("msg", ""), what="the queue-full line")
    dropped = sink_metric(admin, "dropped")
    assert dropped >= 20 - 5 - 2  # what neither the queue nor the batch in hand held

    sink = sink_servers(port)  # the server comes back
    with sink_client(sink) as sc:
        recs = wait_records(sc, 1, instance="mg-test-1")
        assert 1 <= len(recs) <= 20 - dropped
    line = p.log.wait_for(lambda ln: ln.get("msg") == "Findings collection sink writing again",
                          timeout=40, what="the recovery line")[0]
    assert line["attr"]["droppedMeanwhile"] >= 1
    # and it keeps writing
    assert coll.find_one({"later": Regex("y", "i")}) is None
    with sink_client(sink) as sc:
        wait_records(sc, 1, ns=f"{dbname}.people", detail={"$regex": "later"})
