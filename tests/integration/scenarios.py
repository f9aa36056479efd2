"""pymongo scenarios run twice, once directly against the upstream and once
through mongoguard, each returning plain data to compare.

A scenario gets a client and a database name of its own and returns what the
application would have observed: documents, counts, error codes. Ids are
chosen by the scenario so the two runs can be compared exactly.
"""

from __future__ import annotations

from bson.son import SON
from pymongo import ASCENDING, DESCENDING, DeleteOne, InsertOne, ReturnDocument, UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure


def _codes(exc: Exception) -> dict:
    if isinstance(exc, BulkWriteError):
        d = exc.details
        return {"nInserted": d.get("nInserted"),
                "writeErrors": [(e["index"], e["code"]) for e in d.get("writeErrors", [])]}
    if isinstance(exc, OperationFailure):
        return {"code": exc.code}
    return {"type": type(exc).__name__}


def crud(client, dbname: str) -> dict:
    db = client[dbname]
    c = db["people"]
    out: dict = {}
    out["insert_one"] = c.insert_one({"_id": 1, "name": "ada", "age": 36, "tags": ["x"]}).inserted_id
    out["insert_many"] = c.insert_many(
        [{"_id": i, "name": f"n{i}", "age": i % 50, "grp": i % 7} for i in range(2, 102)]
    ).inserted_ids
    out["find_filter_sort_proj"] = list(
        c.find({"age": {"$gte": 40}}, {"_id": 1, "age": 1}).sort([("age", DESCENDING), ("_id", ASCENDING)]))
    out["find_limit_skip"] = list(c.find({}, {"name": 1}).sort("_id", 1).skip(10).limit(5))
    out["count"] = c.count_documents({"grp": 3})
    out["estimated"] = c.estimated_document_count()
    out["distinct"] = sorted(c.distinct("grp"))
    r = c.update_one({"_id": 1}, {"$set": {"age": 37}, "$push": {"tags": "y"}})
    out["update_one"] = (r.matched_count, r.modified_count)
    r = c.update_many({"grp": 2}, {"$inc": {"age": 100}})
    out["update_many"] = (r.matched_count, r.modified_count)
    r = c.update_one({"_id": 500}, {"$set": {"name": "upserted"}}, upsert=True)
    out["upsert"] = (r.matched_count, r.upserted_id)
    r = c.replace_one({"_id": 2}, {"name": "replaced", "age": 1})
    out["replace"] = (r.matched_count, r.modified_count)
    out["find_one_and_update"] = c.find_one_and_update(
        {"_id": 3}, {"$set": {"name": "fau"}}, return_document=ReturnDocument.AFTER)
    out["delete_one"] = c.delete_one({"_id": 4}).deleted_count
    out["delete_many"] = c.delete_many({"grp": 5}).deleted_count
    r = c.bulk_write([InsertOne({"_id": 1000, "b": 1}), UpdateOne({"_id": 1000}, {"$set": {"b": 2}}),
                      DeleteOne({"_id": 6})])
    out["bulk"] = (r.inserted_count, r.matched_count, r.modified_count, r.deleted_count)
    try:
        c.insert_one({"_id": 1})
        out["dup"] = "no error"
    except DuplicateKeyError as e:
        out["dup"] = e.code
    try:
        c.insert_many([{"_id": 2000}, {"_id": 1}, {"_id": 2001}], ordered=False)
        out["bulk_dup"] = "no error"
    except BulkWriteError as e:
        out["bulk_dup"] = _codes(e)
    try:
        db.command({"thisCommandDoesNotExist": 1})
        out["unknown_cmd"] = "no error"
    except OperationFailure as e:
        out["unknown_cmd"] = e.code
    out["final"] = list(c.find({}).sort("_id", 1))
    return out


def indexes(client, dbname: str) -> dict:
    c = client[dbname]["ix"]
    c.insert_many([{"_id": i, "a": i, "b": -i, "s": f"s{i}"} for i in range(20)])
    out: dict = {}
    out["created"] = [c.create_index([("a", ASCENDING), ("b", DESCENDING)], name="a_1_b_-1"),
                      c.create_index("s", unique=True, name="s_unique")]

    def listing():
        return sorted((ix["name"], list(SON(ix["key"]).items()), bool(ix.get("unique", False)))
                      for ix in c.list_indexes())

    out["after_create"] = listing()
    try:
        c.insert_one({"_id": 99, "s": "s3"})
        out["unique_violation"] = "no error"
    except DuplicateKeyError as e:
        out["unique_violation"] = e.code
    c.drop_index("a_1_b_-1")
    out["after_drop_one"] = listing()
    c.drop_indexes()
    out["after_drop_all"] = listing()
    return out


def aggregate(client, dbname: str) -> dict:
    c = client[dbname]["sales"]
    c.insert_many([{"_id": i, "item": f"i{i % 5}", "qty": i % 9, "price": (i * 7) % 13}
                   for i in range(300)])
    out: dict = {}
    out["group"] = list(c.aggregate([
        {"$match": {"qty": {"$gt": 2}}},
        {"$group": {"_id": "$item", "total": {"$sum": "$qty"},
                    "n": {"$sum": 1}}},
        {"$sort": {"_id": 1}},
    ]))
    out["project_small_batches"] = list(c.aggregate([
        {"$sort": {"_id": 1}}, {"$project": {"item": 1, "qty": 1}},
        {"$limit": 50}], batchSize=4))
    out["count_stage"] = list(c.aggregate([{"$match": {"item": "i3"}}, {"$count": "n"}]))
    out["unwind"] = list(c.aggregate([{"$match": {"_id": {"$lt": 3}}},
                                      {"$project": {"arr": ["$qty", "$price"]}},
                                      {"$unwind": "$arr"}, {"$sort": {"_id": 1, "arr": 1}}]))
    return out
