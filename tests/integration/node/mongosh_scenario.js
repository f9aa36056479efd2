// mongosh side of mongoguard's integration tests, run as a script file:
//   MG_DB=name MG_SCENARIO=crud mongosh --quiet URI mongosh_scenario.js
// Prints one line of canonical Extended JSON with what the shell observed.
const dbName = process.env.MG_DB;
const scenario = process.env.MG_SCENARIO;
const d = db.getSiblingDB(dbName);

function err(f) {
  try {
    f();
    return 'no error';
  } catch (e) {
    return { code: e.code === undefined ? null : e.code, codeName: e.codeName || null };
  }
}

const scenarios = {
  crud() {
    const c = d.people;
    const out = {};
    out.insertOne = c.insertOne({ _id: 1, name: 'ada', age: 36 }).insertedId;
    const many = [];
    for (let i = 2; i < 60; i++) many.push({ _id: i, age: i % 20, grp: i % 7 });
    out.insertMany = Object.keys(c.insertMany(many).insertedIds).length;
    out.find = c.find({ age: { $gte: 15 } }, { age: 1 }).sort({ age: -1, _id: 1 }).toArray();
    out.count = c.countDocuments({ grp: 3 });
    const u = c.updateMany({ grp: 2 }, { $inc: { age: 100 } });
    out.updateMany = [u.matchedCount, u.modifiedCount];
    out.deleteMany = c.deleteMany({ grp: 5 }).deletedCount;
    out.dup = err(() => c.insertOne({ _id: 1 }));
    out.createIndex = c.createIndex({ age: 1, grp: -1 });
    out.indexes = c.getIndexes().map((ix) => [ix.name, ix.key]);
    out.agg = c.aggregate([{ $group: { _id: '$grp', n: { $sum: 1 } } }, { $sort: { _id: 1 } }]).toArray();
    out.cursor = c.find({}).batchSize(3).sort({ _id: 1 }).toArray().length;
    out.final = c.find({}).sort({ _id: 1 }).toArray();
    return out;
  },
  antipatterns() {
    const c = d.users;
    c.insertMany([{ _id: 1, email: 'BOB@x', items: [] }, { _id: 2, email: 'al@x', items: [] }]);
    const out = {};
    try {
      out.find = c.find({ email: { $regex: '^bob', $options: 'i' } }).toArray();
    } catch (e) {
      out.find = { code: e.code, codeName: e.codeName || null, blocked: /mongoguard blocked/.test(e.message),
        rule: /case-insensitive-regex/.test(e.message) ? 'case-insensitive-regex' : null };
    }
    try {
      out.push = c.updateOne({ _id: 1 }, { $push: { items: 'x' } }).modifiedCount;
    } catch (e) {
      out.push = { code: e.code, codeName: e.codeName || null, blocked: /mongoguard blocked/.test(e.message),
        rule: /unbounded-push/.test(e.message) ? 'unbounded-push' : null };
    }
    out.after = c.find({}).sort({ _id: 1 }).toArray();
    return out;
  },
  hello() {
    const h = d.hello();
    return { ok: h.ok, isWritablePrimary: h.isWritablePrimary, maxBsonObjectSize: h.maxBsonObjectSize };
  },
};

print(EJSON.stringify(scenarios[scenario](), { relaxed: false }));
