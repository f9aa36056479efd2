// The Node.js driver side of mongoguard's integration tests.
//
//   node client.mjs URI DBNAME SCENARIO [OPTIONS_JSON]
//
// Runs one scenario and prints its observable results as one line of
// canonical Extended JSON, so pytest can compare a direct run with a run
// through mongoguard. OPTIONS_JSON is passed to MongoClient (e.g.
// {"compressors":["zlib"],"appName":"x"}). Exit status 0 unless the
// scenario itself failed unexpectedly.
import mongodb from 'mongodb';

const { MongoClient } = mongodb;
const { EJSON } = mongodb.BSON;

const [uri, dbName, scenario, optsJson] = process.argv.slice(2);
const options = { serverSelectionTimeoutMS: 10000, ...(optsJson ? JSON.parse(optsJson) : {}) };

function errInfo(e) {
  return { name: e.name, code: e.code ?? null, codeName: e.codeName ?? null };
}

const scenarios = {
  async crud(client, db) {
    const c = db.collection('people');
    const out = {};
    out.insertOne = (await c.insertOne({ _id: 1, name: 'ada', age: 36 })).insertedId;
    const many = [];
    for (let i = 2; i < 102; i++) many.push({ _id: i, name: `n${i}`, age: i % 50, grp: i % 7 });
    out.insertMany = (await c.insertMany(many)).insertedCount;
    out.find = await c.find({ age: { $gte: 40 } }, { projection: { age: 1 } })
      .sort({ age: -1, _id: 1 }).toArray();
    out.skipLimit = await c.find({}).sort({ _id: 1 }).skip(10).limit(5).toArray();
    out.count = await c.countDocuments({ grp: 3 });
    out.distinct = (await c.distinct('grp')).sort();
    const u1 = await c.updateOne({ _id: 1 }, { $set: { age: 37 } });
    out.updateOne = [u1.matchedCount, u1.modifiedCount];
    const um = await c.updateMany({ grp: 2 }, { $inc: { age: 100 } });
    out.updateMany = [um.matchedCount, um.modifiedCount];
    const up = await c.updateOne({ _id: 500 }, { $set: { name: 'up' } }, { upsert: true });
    out.upsert = [up.matchedCount, up.upsertedId];
    out.findOneAndUpdate = await c.findOneAndUpdate({ _id: 3 }, { $set: { name: 'fau' } },
      { returnDocument: 'after' });
    out.deleteOne = (await c.deleteOne({ _id: 4 })).deletedCount;
    out.deleteMany = (await c.deleteMany({ grp: 5 })).deletedCount;
    const bw = await c.bulkWrite([{ insertOne: { document: { _id: 1000 } } },
      { updateOne: { filter: { _id: 1000 }, update: { $set: { b: 2 } } } },
      { deleteOne: { filter: { _id: 6 } } }]);
    out.bulk = [bw.insertedCount, bw.matchedCount, bw.modifiedCount, bw.deletedCount];
    try { await c.insertOne({ _id: 1 }); out.dup = 'no error'; } catch (e) { out.dup = errInfo(e); }
    out.final = await c.find({}).sort({ _id: 1 }).toArray();
    return out;
  },

  async indexes(client, db) {
    const c = db.collection('ix');
    await c.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, a: i, b: -i, s: `s${i}` })));
    const out = {};
    out.created = [await c.createIndex({ a: 1, b: -1 }, { name: 'a_1_b_-1' }),
      await c.createIndex({ s: 1 }, { unique: true, name: 's_unique' })];
    const listing = async () => (await c.listIndexes().toArray())
      .map((ix) => [ix.name, ix.key, !!ix.unique]).sort((x, y) => (x[0] < y[0] ? -1 : 1));
    out.afterCreate = await listing();
    await c.dropIndex('a_1_b_-1');
    out.afterDrop = await listing();
    return out;
  },

  async cursor(client, db) {
    const c = db.collection('big');
    const docs = Array.from({ length: 5000 }, (_, i) => ({ _id: i, pad: 'x'.repeat(i % 40) }));
    await c.insertMany(docs);
    let getMores = 0;
    client.on('commandStarted', (ev) => { if (ev.commandName === 'getMore') getMores++; });
    const got = await c.find({}, { batchSize: 7 }).sort({ _id: 1 }).toArray();
    const ok = got.length === docs.length && got.every((d, i) => d._id === i && d.pad === docs[i].pad);
    return { n: got.length, ok, getMores };
  },

  async aggregate(client, db) {
    const c = db.collection('sales');
    await c.insertMany(Array.from({ length: 300 }, (_, i) => ({ _id: i, item: `i${i % 5}`, qty: i % 9 })));
    return {
      group: await c.aggregate([{ $match: { qty: { $gt: 2 } } },
        { $group: { _id: '$item', total: { $sum: '$qty' }, n: { $sum: 1 } } },
        { $sort: { _id: 1 } }]).toArray(),
      batches: await c.aggregate([{ $sort: { _id: 1 } }, { $limit: 40 }], { batchSize: 3 }).toArray(),
    };
  },

  async bigdoc(client, db) {
    const c = db.collection('b');
    const buf = Buffer.alloc(15 * 1024 * 1024);
    for (let i = 0; i < buf.length; i += 4) buf.writeUInt32LE((i * 2654435761) >>> 0, i);
    await c.insertOne({ _id: 'big', blob: buf });
    const back = await c.findOne({ _id: 'big' });
    return { equal: Buffer.compare(Buffer.from(back.blob.buffer), buf) === 0, len: back.blob.length() };
  },

  async w0(client, db) {
    const c = db.collection('w0', { writeConcern: { w: 0 } });
    for (let i = 0; i < 100; i++) await c.insertOne({ _id: i });
    await c.updateMany({}, { $set: { v: 1 } });
    const acked = db.collection('w0');
    const deadline = Date.now() + 10000;
    let n = 0;
    while (Date.now() < deadline) {
      n = await acked.countDocuments({ v: 1 });
      if (n === 100) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    return { n };
  },

  async concurrent(client, db) {
    const c = db.collection('conc');
    const ops = Array.from({ length: 300 }, async (_, i) => {
      await c.insertOne({ _id: i });
      return (await c.findOne({ _id: i }))._id === i;
    });
    const res = await Promise.all(ops);
    return { allOk: res.every(Boolean), count: await c.countDocuments({}) };
  },

  // Analyzer traffic: a case-insensitive regex find and an unbounded $push.
  // Errors (a mongoguard block) are reported, not thrown.
  async antipatterns(client, db) {
    const c = db.collection('users');
    await c.insertMany([{ _id: 1, email: 'BOB@x', items: [] }, { _id: 2, email: 'al@x', items: [] }]);
    const out = {};
    try {
      out.find = await c.find({ email: { $regex: '^bob', $options: 'i' } }).toArray();
    } catch (e) { out.find = { ...errInfo(e), rule: e.errorResponse?.mongoguardRule ?? null, blocked: /mongoguard blocked/.test(e.message) }; }
    try {
      const r = await c.updateOne({ _id: 1 }, { $push: { items: 'x' } });
      out.push = r.modifiedCount;
    } catch (e) { out.push = { ...errInfo(e), rule: e.errorResponse?.mongoguardRule ?? null, blocked: /mongoguard blocked/.test(e.message) }; }
    out.after = await c.find({}).sort({ _id: 1 }).toArray();
    return out;
  },

  // The second round of rules: a guarded $push (bucket pattern), an
  // unguarded one, an insert with a 1,500-element array, and a find no
  // index bounds on the collection "scan" (seeded and warmed by the test).
  // Errors (a mongoguard block) are reported, not thrown.
  async round2(client, db) {
    const blocked = (e) => ({ ...errInfo(e), rule: e.errorResponse?.mongoguardRule ?? null, blocked: /mongoguard blocked/.test(e.message) });
    const out = {};
    const b = db.collection('buckets');
    try {
      const r = await b.updateOne({ sensor: 's', count: { $lt: 3 } },
        { $push: { readings: 1 }, $inc: { count: 1 } }, { upsert: true });
      out.bucket = r.upsertedCount + r.modifiedCount;
    } catch (e) { out.bucket = blocked(e); }
    try {
      const r = await b.updateOne({ sensor: 's' }, { $push: { log: 1 } });
      out.push = r.modifiedCount;
    } catch (e) { out.push = blocked(e); }
    try {
      const r = await db.collection('docs').insertOne({ _id: 1, a: Array.from({ length: 1500 }, (_, i) => i) });
      out.large = r.acknowledged;
    } catch (e) { out.large = blocked(e); }
    try {
      out.scan = (await db.collection('scan').find({ qty: 5 }).toArray()).length;
    } catch (e) { out.scan = blocked(e); }
    out.buckets = await b.find({}, { projection: { _id: 0 } }).toArray();
    out.docs = await db.collection('docs').countDocuments({});
    return out;
  },

  async errors(client, db) {
    const c = db.collection('e');
    const out = [];
    for (const f of [() => c.find({ $bogusOp: 1 }).toArray(),
      () => c.aggregate([{ $bogusStage: {} }]).toArray(),
      () => db.command({ thisCommandDoesNotExist: 1 })]) {
      try { await f(); out.push('no error'); } catch (e) { out.push(errInfo(e)); }
    }
    return out;
  },
};

const client = new MongoClient(uri, { ...options, monitorCommands: true });
let status = 0;
try {
  await client.connect();
  const result = await scenarios[scenario](client, client.db(dbName));
  process.stdout.write(EJSON.stringify(result, { relaxed: false }) + '\n');
} catch (e) {
  process.stderr.write(`scenario ${scenario} failed: ${e.stack}\n`);
  status = 1;
} finally {
  await client.close();
}
process.exit(status);
