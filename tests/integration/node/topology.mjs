// The Node.js driver in mongoguard's connectivity tests (dropped
// connections, replica sets, TLS, authentication).
//
//   node topology.mjs URI DBNAME SCENARIO [OPTIONS_JSON]
//
// Prints one line of canonical Extended JSON with what the scenario saw.
// Errors the scenario expects are reported in that line, not as a failure.
import mongodb from 'mongodb';

const { MongoClient, Decimal128 } = mongodb;
const { EJSON } = mongodb.BSON;

const [uri, dbName, scenario, optsJson] = process.argv.slice(2);
const options = { serverSelectionTimeoutMS: 10000, ...(optsJson ? JSON.parse(optsJson) : {}) };

function errInfo(e) {
  return { name: e.name, code: e.code ?? null, message: String(e.message ?? '') };
}

function servers(client) {
  return [...client.topology.description.servers.keys()].sort();
}

const scenarios = {
  // The server drops the connection on a Decimal128 (FerretDB on SQLite):
  // the driver must see a network error, and the next operation succeed.
  async dropped(client, db) {
    const c = db.collection('d');
    const out = {};
    out.first = (await c.insertOne({ _id: 1 })).insertedId;
    try {
      await c.insertOne({ _id: 2, v: Decimal128.fromString('1.5') });
      out.dropped = 'no error';
    } catch (e) {
      out.dropped = { name: e.name };
    }
    out.next = (await c.insertOne({ _id: 3 })).insertedId;
    out.count = await c.countDocuments({});
    return out;
  },

  // Which servers the driver knows after real work.
  async nodes(client, db) {
    const c = db.collection('n');
    await c.insertOne({ _id: 1 });
    const found = await c.find({ name: { $regex: 'x', $options: 'i' } }).toArray();
    return { found: found.length, servers: servers(client),
      type: client.topology.description.type };
  },

  async ping(client, db) {
    const r = await db.command({ ping: 1 });
    await db.collection('p').insertOne({ at: Date.now() });
    return { ok: r.ok, count: await db.collection('p').countDocuments({}) };
  },
};

const client = new MongoClient(uri, options);
let result;
try {
  await client.connect();
  result = await scenarios[scenario](client, client.db(dbName));
} catch (e) {
  result = { error: errInfo(e) };
} finally {
  await client.close();
}
console.log(EJSON.stringify(result, { relaxed: false }));
