"""The soak, short (scripts/soak.py --minutes 60 is the long one): a seeded
random workload through mongoguard with every rule on (one at block) and
the same workload straight to a second FerretDB, compared document by
document, with mongoguard's memory flat after warm-up. And acknowledged
writes are never lost across a SIGTERM under load."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import threading
import time

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from conftest import ROOT, unique_name
from topology_helpers import ferret  # noqa: F401 -- fixture


def load_soak():
    spec = importlib.util.spec_from_file_location("soak", ROOT / "scripts" / "soak.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = mod  # its dataclasses look themselves up there
    spec.loader.exec_module(mod)
    return mod


soak = load_soak()

SOAK_OPS = int(os.environ.get("MONGOGUARD_SOAK_OPS", "2000"))
SOAK_SEED = int(os.environ.get("MONGOGUARD_SOAK_SEED", "20261201"))
QUARANTINE_MB = 16


def asan_binary(path: str) -> bool:
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


def test_soak_short(upstream, start_proxy, ferret, mongoguard_bin, monkeypatch):  # noqa: F811
    asan = asan_binary(mongoguard_bin)
    if asan:
        # ASan's quarantine keeps freed memory resident up to its size (256
        # MB by default): bounded small, memory can be judged flat
        monkeypatch.setenv("ASAN_OPTIONS", (os.environ.get("ASAN_OPTIONS", "") +
                                            f":quarantine_size_mb={QUARANTINE_MB}").lstrip(":"))
    direct = ferret(name="soak-direct")
    p = start_proxy(upstream.uri, config=soak.RULES_YAML)
    db = unique_name("soak")
    try:
        with p.client() as pc, MongoClient(direct.uri, serverSelectionTimeoutMS=10000) as dc:
            rep = soak.run_workload(pc[db], dc[db], seed=SOAK_SEED, ops=SOAK_OPS,
                                    rss_pid=p.proc.pid, sample_every=100, max_live=150)
    finally:
        with upstream.client() as c:
            c.drop_database(db)
    print("\n" + rep.summary())
    assert not rep.mismatches, "\n".join(rep.mismatches)
    assert rep.ops == SOAK_OPS
    assert rep.blocked == rep.by_kind["blocked"] > 0
    assert rep.compared_docs > SOAK_OPS and rep.compared_bytes > 200 * SOAK_OPS
    at, hi, growth = rep.mem_growth_kib()
    allowed = 8 * 1024 + (QUARANTINE_MB * 1024 if asan else 0)
    assert growth <= allowed, f"VmRSS grew {growth} KiB after warm-up (allowed {allowed} KiB)"
    # every rule really ran: the ones the workload commits reported it ...
    rules = {ln["attr"]["rule"] for ln in p.log.findings()}
    for rule in ("case-insensitive-regex", "index-mismatched-sort", "hot-path-lookup",
                 "large-document"):
        assert rule in rules, f"no {rule} finding in {p.log.path}: {sorted(rules)}"
    # ... and $push with $each and $slice is bounded: never reported
    assert "unbounded-push" not in rules


def test_sigterm_under_load_loses_no_acknowledged_write(upstream, start_proxy, dbname):
    grace_ms = 5000
    p = start_proxy(upstream.uri, config=f"shutdownGraceMS: {grace_ms}\n")
    nthreads = 4
    acked: list[list[str]] = [[] for _ in range(nthreads)]
    failed: list[list[tuple[str, str]]] = [[] for _ in range(nthreads)]
    termed = threading.Event()
    stop = threading.Event()
    started = threading.Barrier(nthreads + 1)

    def writer(t: int) -> None:
        with MongoClient(p.uri, w=1, retryWrites=False, serverSelectionTimeoutMS=1000,
                         socketTimeoutMS=20000, maxPoolSize=2) as c:
            coll = c[dbname].c
            coll.insert_one({"_id": f"{t}-warm"})
            acked[t].append(f"{t}-warm")
            started.wait()
            i = 0
            while not stop.is_set():
                _id = f"{t}-{i}"
                i += 1
                try:
                    coll.insert_one({"_id": _id, "pad": "q" * 500})
                    acked[t].append(_id)
                except PyMongoError as e:
                    failed[t].append((_id, type(e).__name__))
                    if termed.is_set():
                        return

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(nthreads)]
    for th in threads:
        th.start()
    started.wait(30)
    time.sleep(1.0)
    before = sum(len(a) for a in acked)
    termed.set()
    t0 = time.monotonic()
    p.proc.send_signal(signal.SIGTERM)
    try:
        rc = p.proc.wait(grace_ms / 1000 + 10)
    finally:
        exited = time.monotonic() - t0
        stop.set()
        for th in threads:
            th.join(30)
    nacked = sum(len(a) for a in acked)
    nfailed = sum(len(f) for f in failed)
    print(f"\n  {nthreads} writers: {before} inserts acknowledged before SIGTERM, {nacked} in "
          f"all, {nfailed} raised; mongoguard exited {rc} after {exited:.2f}s")
    assert rc == 0
    assert exited < grace_ms / 1000 + 3, "shutdown overran its grace period"
    assert before > 20, "the load never got going"
    with upstream.client() as c:
        stored = {d["_id"] for d in c[dbname].c.find({}, {"_id": 1})}
    all_acked = {i for a in acked for i in a}
    lost = all_acked - stored
    assert not lost, f"{len(lost)} acknowledged inserts are not in the database: {sorted(lost)[:10]}"
    # nothing appeared that no client tried; the ones that raised may or
    # may not have been applied (the driver said so: an error, not an ack)
    tried = all_acked | {i for f in failed for i, _ in f}
    assert stored <= tried
    for t in range(nthreads):
        assert failed[t], f"writer {t} never saw the proxy go: it hung or was not loaded"
    p.log.wait_for(lambda ln: ln.get("msg") == "Shutdown complete", 5, what="Shutdown complete")
