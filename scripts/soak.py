#!/usr/bin/env python3
"""Soak: one randomised, seeded workload through mongoguard (every rule on,
case-insensitive-regex at block) and the same workload straight to a
second server, compared result by result and, at the end, collection by
collection; mongoguard's resident memory sampled and required flat after
warm-up; p50/p99 latency printed.

  build/venv/bin/python scripts/soak.py --minutes 60            # the long run
  build/venv/bin/python scripts/soak.py --ops 3000 --seed 7     # a short one

It starts two FerretDBs (build/tools/ferretdb, or --ferretdb) on free
loopback ports with fresh data directories under build/soak/, and
mongoguard (build/mongoguard, or --mongoguard) in front of the first;
--proxied-upstream/--direct-uri use servers of your own instead (each gets
a fresh database). Exit status 0 when every result matched, the blocked
requests were blocked, and memory stayed flat; 1 otherwise, with the first
differences printed. tests/integration/test_soak.py runs a short version
through the same code (run_workload).
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import bson
from pymongo import ASCENDING, MongoClient
from pymongo.errors import OperationFailure

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from procs import NotListening, free_port, stop, wait_port  # noqa: E402

RULES_YAML = """\
rules:
  case-insensitive-regex: block
  unbounded-push: log
  hot-path-lookup:
    action: log
    threshold: 20
    windowSeconds: 60
  index-mismatched-sort: log
  collection-scan:
    action: log
    minDocuments: 10
  large-document:
    action: log
    maxBytes: 4096
    maxArrayLength: 50
"""

CODE_BLOCKED = 96
# documents kept in the main collection: deletes win above it (FerretDB
# filters in its own process, so a bigger collection is a slower soak)
MAX_LIVE = 1500
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]


# --- the workload ----------------------------------------------------------------

class Workload:
    """Operations from a seeded generator. It keeps its own idea of which
    _ids exist, so it can aim updates and deletes at real documents; both
    sides receive exactly the same operations in the same order."""

    def __init__(self, seed: int, max_live: int = MAX_LIVE):
        self.rnd = random.Random(seed)
        self.max_live = max_live
        self.next_id = 0
        self.live: list[int] = []

    def _doc(self) -> dict:
        r = self.rnd
        i = self.next_id
        self.next_id += 1
        self.live.append(i)
        doc = {"_id": i, "k": r.randrange(50), "name": f"{r.choice(WORDS)}-{r.randrange(1000)}",
               "n": r.random() * 1000, "tags": [r.choice(WORDS) for _ in range(r.randrange(4))],
               "sub": {"a": r.randrange(10), "b": [r.randrange(100) for _ in range(3)]}}
        if r.random() < 0.05:  # now and then one the large-document rule reports
            doc["blob"] = "x" * r.randrange(5000, 20000)
        return doc

    def _pick(self) -> int:
        return self.rnd.choice(self.live) if self.live else 0

    def next(self) -> tuple:
        r = self.rnd
        x = r.random()
        if len(self.live) > self.max_live and x < 0.5:
            x = 0.90  # delete
        if x < 0.20:
            return ("insert_one", self._doc())
        if x < 0.27:
            return ("insert_many", [self._doc() for _ in range(r.randrange(2, 20))])
        if x < 0.45:
            return ("update_one", {"_id": self._pick()},
                    {"$set": {"k": r.randrange(50), "sub.a": r.randrange(10)},
                     "$push": {"tags": {"$each": [r.choice(WORDS), r.choice(WORDS)],
                                        "$slice": -6}}})
        if x < 0.50:
            k = r.randrange(50)
            return ("update_many", {"k": k}, {"$set": {"flag": r.random() < 0.5},
                                               "$inc": {"n": 1}})
        if x < 0.66:
            lo = r.randrange(50)
            return ("find", {"k": {"$gte": lo, "$lt": lo + r.randrange(1, 8)}},
                    [("n", r.choice([1, -1])), ("_id", 1)], r.randrange(1, 60))
        if x < 0.70:
            return ("find_by_id", self._pick())
        if x < 0.78:
            k = r.randrange(50)
            return ("aggregate", [
                {"$match": {"k": {"$gte": k, "$lt": k + 3}}},
                {"$lookup": {"from": "other", "localField": "k", "foreignField": "k",
                             "as": "j"}},
                {"$project": {"k": 1, "name": 1, "j": {"$size": "$j"}}},
                {"$sort": {"_id": 1}}, {"$limit": 25}])
        if x < 0.82:
            return ("insert_other", {"_id": f"o{self.next_id}-{r.randrange(10**6)}",
                                     "k": r.randrange(50), "v": r.choice(WORDS)})
        if x < 0.85:
            return ("count", {"k": {"$lt": r.randrange(50)}})
        if x < 0.88:
            # refused by the block rule through mongoguard; never run direct
            return ("blocked", {"name": {"$regex": f"^{r.choice(WORDS)}", "$options": "i"}})
        if x < 0.97:
            if not self.live:
                return ("count", {})
            i = self.live.pop(r.randrange(len(self.live)))
            return ("delete_one", {"_id": i})
        lo = r.randrange(max(1, self.next_id))
        self.live = [i for i in self.live if not (lo <= i < lo + 20)]
        return ("delete_many", {"_id": {"$gte": lo, "$lt": lo + 20}})


def run_op(db, op: tuple):
    """Run one operation; returns what the comparison looks at. A server
    error is a result too (FerretDB, for one, answers $lookup with
    NotImplemented): both sides must see the same code and message."""
    try:
        return _run_op(db, op)
    except OperationFailure as e:
        return {"$error": e.code, "errmsg": (e.details or {}).get("errmsg", str(e))}


def _run_op(db, op: tuple):
    kind = op[0]
    c = db.main
    if kind == "insert_one":
        return {"inserted": c.insert_one(op[1]).inserted_id}
    if kind == "insert_many":
        return {"inserted": c.insert_many(op[1]).inserted_ids}
    if kind == "insert_other":
        return {"inserted": db.other.insert_one(op[1]).inserted_id}
    if kind == "update_one":
        r = c.update_one(op[1], op[2])
        return {"matched": r.matched_count, "modified": r.modified_count}
    if kind == "update_many":
        r = c.update_many(op[1], op[2])
        return {"matched": r.matched_count, "modified": r.modified_count}
    if kind == "find":
        return list(c.find(op[1]).sort(op[2]).limit(op[3]))
    if kind == "find_by_id":
        return [c.find_one({"_id": op[1]})]
    if kind == "aggregate":
        return list(c.aggregate(op[1]))
    if kind == "count":
        return {"count": c.count_documents(op[1])}
    if kind == "delete_one":
        return {"deleted": c.delete_one(op[1]).deleted_count}
    if kind == "delete_many":
        return {"deleted": c.delete_many(op[1]).deleted_count}
    raise ValueError(kind)


def as_bytes(result) -> list[bytes]:
    """A result as BSON, document by document: field order and types count."""
    docs = result if isinstance(result, list) else [result]
    return [bson.encode(d if d is not None else {"$none": True}) for d in docs]


def percentile(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@dataclass
class Report:
    ops: int = 0
    by_kind: dict = field(default_factory=dict)
    server_errors: int = 0  # operations both sides answered with the same error
    compared_docs: int = 0
    compared_bytes: int = 0
    blocked: int = 0
    mismatches: list = field(default_factory=list)
    lat_proxy: list = field(default_factory=list)
    lat_direct: list = field(default_factory=list)
    time_by_kind: dict = field(default_factory=dict)  # seconds, both sides
    rss: list = field(default_factory=list)  # (ops done, KiB)
    final_docs: int = 0
    seconds: float = 0.0

    def mem_growth_kib(self, warmup: float = 0.2) -> tuple[int, int, int]:
        """(RSS at the end of warm-up, the highest after it, growth) in KiB."""
        if len(self.rss) < 2:
            return 0, 0, 0
        cut = max(1, int(len(self.rss) * warmup))
        at = self.rss[cut - 1][1]
        hi = max(k for _, k in self.rss[cut:])
        return at, hi, hi - at

    def summary(self) -> str:
        at, hi, growth = self.mem_growth_kib()
        lp, ld = self.lat_proxy, self.lat_direct
        return (f"soak: {self.ops} operations in {self.seconds:.1f}s "
                f"({', '.join(f'{k} {v}' for k, v in sorted(self.by_kind.items()))}); "
                f"{self.compared_docs} documents / {self.compared_bytes} BSON bytes compared, "
                f"{self.final_docs} documents in the final collections; {self.blocked} blocked; "
                f"{self.server_errors} answered with the same server error on both sides; "
                f"{len(self.mismatches)} mismatches\n"
                f"latency through mongoguard p50 {percentile(lp, .5) * 1e3:.2f} ms, "
                f"p99 {percentile(lp, .99) * 1e3:.2f} ms; direct p50 "
                f"{percentile(ld, .5) * 1e3:.2f} ms, p99 {percentile(ld, .99) * 1e3:.2f} ms\n"
                f"mongoguard VmRSS: {self.rss[0][1] / 1024 if self.rss else 0:.1f} MiB at start, "
                f"{at / 1024:.1f} MiB after warm-up, at most {hi / 1024:.1f} MiB after it "
                f"(growth {growth / 1024:.1f} MiB over {len(self.rss)} samples)")


def compare(report: Report, what: str, got: list[bytes], want: list[bytes]) -> None:
    report.compared_docs += len(want)
    report.compared_bytes += sum(len(b) for b in want)
    if got != want and len(report.mismatches) < 20:
        report.mismatches.append(
            f"{what}: through mongoguard {[bson.decode(b) for b in got][:3]} "
            f"direct {[bson.decode(b) for b in want][:3]}")


def run_workload(proxied_db, direct_db, *, seed: int, ops: int | None = None,
                 seconds: float | None = None, rss_pid: int | None = None,
                 sample_every: int = 100, progress=None, max_live: int = MAX_LIVE) -> Report:
    """Run the workload on both sides until `ops` operations or `seconds`
    have gone by; compare every result and the final collections."""
    wl = Workload(seed, max_live)
    rep = Report()
    t_start = time.monotonic()
    for c in (proxied_db, direct_db):
        c.main.create_index([("k", ASCENDING)])
        c.other.create_index([("k", ASCENDING)])
    if rss_pid:
        rep.rss.append((0, rss_kib(rss_pid)))
    i = 0
    while True:
        if ops is not None and i >= ops:
            break
        if seconds is not None and time.monotonic() - t_start >= seconds:
            break
        op = wl.next()
        kind = op[0]
        rep.by_kind[kind] = rep.by_kind.get(kind, 0) + 1
        if kind == "blocked":
            t0 = time.monotonic()
            try:
                list(proxied_db.main.find(op[1]).limit(5))
                rep.mismatches.append(f"op {i}: a case-insensitive regex was not blocked")
            except OperationFailure as e:
                if e.code != CODE_BLOCKED:
                    rep.mismatches.append(f"op {i}: blocked with code {e.code}: {e}")
                rep.blocked += 1
            rep.lat_proxy.append(time.monotonic() - t0)
        else:
            t0 = time.monotonic()
            got = run_op(proxied_db, op)
            t1 = time.monotonic()
            want = run_op(direct_db, op)
            rep.lat_proxy.append(t1 - t0)
            rep.lat_direct.append(time.monotonic() - t1)
            rep.time_by_kind[kind] = rep.time_by_kind.get(kind, 0.0) + time.monotonic() - t0
            if isinstance(want, dict) and "$error" in want:
                rep.server_errors += 1
            compare(rep, f"op {i} {kind}", as_bytes(got), as_bytes(want))
        i += 1
        if rss_pid and i % sample_every == 0:
            rep.rss.append((i, rss_kib(rss_pid)))
        if progress and i % 1000 == 0:
            progress(i, rep)
    rep.ops = i
    for coll in ("main", "other"):
        got = as_bytes(list(proxied_db[coll].find().sort("_id", 1)))
        want = as_bytes(list(direct_db[coll].find().sort("_id", 1)))
        rep.final_docs += len(want)
        compare(rep, f"final {coll}", got, want)
    if rss_pid:
        rep.rss.append((i, rss_kib(rss_pid)))
    rep.seconds = time.monotonic() - t_start
    return rep


# --- standalone: servers of its own ----------------------------------------------

def start_ferretdb(binary: str, work: Path, name: str) -> tuple[subprocess.Popen, str]:
    data = work / name
    data.mkdir(parents=True)
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--handler=sqlite", f"--sqlite-url=file:{data}/", f"--state-dir={data}",
         f"--listen-addr=127.0.0.1:{port}", "--telemetry=disable", "--debug-addr=-",
         "--log-level=warn"], stdout=open(work / f"{name}.log", "wb"),
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    wait_port(port, 30, proc, f"FerretDB ({name})")
    return proc, f"mongodb://127.0.0.1:{port}/"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, help="run for this long (default: --ops)")
    ap.add_argument("--ops", type=int, default=3000, help="operations, without --minutes")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--mongoguard", default=str(ROOT / "build" / "mongoguard"))
    ap.add_argument("--ferretdb", default=str(ROOT / "build" / "tools" / "ferretdb"))
    ap.add_argument("--proxied-upstream", help="the server mongoguard fronts (default: "
                    "a FerretDB of its own)")
    ap.add_argument("--direct-uri", help="the server the workload runs on directly")
    ap.add_argument("--max-live", type=int, default=MAX_LIVE,
                    help="documents the main collection holds at most (bigger: slower "
                    "operations on FerretDB, which filters in its own process)")
    ap.add_argument("--max-growth-mib", type=float, default=8.0,
                    help="allowed VmRSS growth after warm-up (the first fifth)")
    args = ap.parse_args()

    work = ROOT / "build" / "soak" / time.strftime("%Y%m%d-%H%M%S")
    work.mkdir(parents=True)
    procs = []
    try:
        up = args.proxied_upstream
        if not up:
            p, up = start_ferretdb(args.ferretdb, work, "proxied")
            procs.append(p)
        direct = args.direct_uri
        if not direct:
            p, direct = start_ferretdb(args.ferretdb, work, "direct")
            procs.append(p)
        cfg = work / "mongoguard.yaml"
        cfg.write_text(RULES_YAML)
        port = free_port()
        mg = subprocess.Popen([args.mongoguard, "--config", str(cfg), "--listen",
                               f"127.0.0.1:{port}", "--upstream", up, "--log",
                               str(work / "mongoguard.log")],
                              stdout=open(work / "mongoguard.out", "wb"),
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_port(port, 10, mg, "mongoguard")
        db = f"soak_{uuid.uuid4().hex[:8]}"
        with MongoClient(f"mongodb://127.0.0.1:{port}/") as pc, MongoClient(direct) as dc:
            def progress(i, rep):
                print(f"  {i} operations, {rep.compared_bytes} bytes compared, "
                      f"VmRSS {rep.rss[-1][1] / 1024:.1f} MiB, "
                      f"{len(rep.mismatches)} mismatches", flush=True)

            rep = run_workload(pc[db], dc[db], seed=args.seed,
                               ops=None if args.minutes else args.ops,
                               seconds=args.minutes * 60 if args.minutes else None,
                               rss_pid=mg.pid, sample_every=200, progress=progress,
                               max_live=args.max_live)
            pc.drop_database(db)
            dc.drop_database(db)
        rc = stop(mg)
        print(rep.summary())
        for m in rep.mismatches:
            print("MISMATCH", m)
        _, _, growth = rep.mem_growth_kib()
        ok = True
        if rep.mismatches:
            ok = False
        if rep.blocked == 0:
            print("FAIL: no request was blocked")
            ok = False
        if growth > args.max_growth_mib * 1024:
            print(f"FAIL: VmRSS grew {growth / 1024:.1f} MiB after warm-up "
                  f"(allowed {args.max_growth_mib} MiB)")
            ok = False
        if rc != 0:
            print(f"FAIL: mongoguard exited with status {rc}")
            ok = False
        print(f"logs in {work}")
        return 0 if ok else 1
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(work / "proxied", ignore_errors=True)
        shutil.rmtree(work / "direct", ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except NotListening as e:
        sys.exit(f"soak: {e}")
