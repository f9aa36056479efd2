"""A small application that commits each anti-pattern mongoguard knows, so
`docker compose up` shows findings within a minute (and the tests can prove
every rule fires on it). Not an example to follow.

  MONGO_URI=mongodb://127.0.0.1:27018/ python scripts/sample_app.py [--rounds N]
"""
from __future__ import annotations

import argparse
import os
import time

from bson.regex import Regex
from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError


SEED_ORDERS = 500  # staging-sized: configs/staging.yaml judges scans from 100 documents


def seed(db) -> None:
    """Orders enough for a scan to be one at staging sizes (once per database)."""
    have = db.orders.estimated_document_count()
    if have < SEED_ORDERS:
        db.orders.insert_many([{"status": ("open", "closed")[i % 2], "user": i % 7, "created": i}
                               for i in range(have, SEED_ORDERS)])


def once(db, seq: int) -> None:
    users, orders = db.users, db.orders
    # case-insensitive-regex: no index can bound /.../i
    users.find_one({"email": Regex("^ada@", "i")})
    # unbounded-push: the array grows forever
    users.update_one({"_id": 1}, {"$push": {"logins": seq}}, upsert=True)
    # index-mismatched-sort: no index on "created"
    list(orders.find({"status": "open"}).sort("created", -1).limit(5))
    # collection-scan: $ne bounds nothing
    list(orders.find({"status": {"$ne": "closed"}}).limit(5))
    # large-document: an array of 1,500 elements
    orders.insert_one({"seq": seq, "lines": list(range(1500))})
    # hot-path-lookup: the same join, many times a minute
    for _ in range(10):
        try:
            list(orders.aggregate([{"$match": {"status": "open"}},
                                   {"$lookup": {"from": "users", "localField": "user",
                                                "foreignField": "_id", "as": "u"}}]))
        except OperationFailure:
            pass  # a server without $lookup (FerretDB) says so; mongoguard saw it anyway


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=0, help="rounds to run, 0 = forever")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between rounds")
    args = ap.parse_args()
    uri = os.environ.get("MONGO_URI", "mongodb://127.0.0.1:27018/")
    client = MongoClient(uri, serverSelectionTimeoutMS=30000, appname="sample-app")
    db = client[os.environ.get("SAMPLE_DB", "sample")]
    seed(db)
    seq = 0
    while args.rounds == 0 or seq < args.rounds:
        try:
            once(db, seq)
        except PyMongoError as e:  # a block answers an error: keep going, say so
            print(f"round {seq}: {e}", flush=True)
        seq += 1
        time.sleep(args.pause)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
