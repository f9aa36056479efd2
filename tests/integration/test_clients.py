"""The Node.js driver, mongosh and a libmongoc program, each run directly and
through mongoguard with the results compared. (pymongo has its own module.)

Node compression tests use zlib only: the npm native compressors (snappy,
@mongodb-js/zstd) need downloads this environment does not allow.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from bson import json_util

from conftest import NODE_DIR
from fakeserver import FakeServer


def run(cmd, *, env=None, timeout=180, cwd=None) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                       env={**os.environ, **(env or {})})
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}:\n" \
                              f"{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert lines, f"no output from {cmd}: {r.stderr[-2000:]}"
    return lines[-1]


def with_params(uri: str, params: str) -> str:
    if not params:
        return uri
    return uri + ("&" if "?" in uri else ("?" if uri.endswith("/") else "/?")) + params


# --- Node.js driver -----------------------------------------------------------

def node(node_modules, uri, db, scenario, options=None) -> dict:
    cmd = ["node", str(NODE_DIR / "client.mjs"), uri, db, scenario]
    if options:
        cmd.append(json.dumps(options))
    return json_util.loads(run(cmd, cwd=NODE_DIR))


NODE_SCENARIOS = ["crud", "indexes", "cursor", "aggregate", "bigdoc", "concurrent", "errors"]


@pytest.mark.parametrize("scenario", NODE_SCENARIOS)
def test_node(node_modules, upstream, proxy, dbname, scenario):
    direct = node(node_modules, upstream.uri, dbname + "_d", scenario)
    via = node(node_modules, proxy.uri, dbname + "_p", scenario)
    assert via == direct
    if scenario == "cursor":
        assert via["n"] == 5000 and via["ok"] and via["getMores"] >= 5000 // 7
    if scenario == "bigdoc":
        assert via["equal"] and via["len"] == 15 * 1024 * 1024
    if scenario == "concurrent":
        assert via == {"allOk": True, "count": 300}


def test_node_zlib(node_modules, upstream, proxy, dbname):
    opts = {"compressors": ["zlib"], "appName": "node-zlib"}
    direct = node(node_modules, upstream.uri, dbname + "_d", "crud", opts)
    via = node(node_modules, proxy.uri, dbname + "_p", "crud", opts)
    assert via == direct


def test_node_w0(node_modules, upstream, proxy, dbname):
    # Directly only against a server that honours moreToCome (FerretDB v1.24.2
    # answers it, which desynchronises the driver; see test_pymongo).
    if not upstream.is_ferretdb:
        assert node(node_modules, upstream.uri, dbname + "_d", "w0") == {"n": 100}
    assert node(node_modules, proxy.uri, dbname + "_p", "w0", {"maxPoolSize": 1}) == {"n": 100}


# --- mongosh --------------------------------------------------------------------

def mongosh(node_modules, uri, db, scenario) -> dict:
    sh = node_modules / ".bin" / "mongosh"
    out = run([str(sh), "--quiet", "--norc", uri, str(NODE_DIR / "mongosh_scenario.js")],
              env={"MG_DB": db, "MG_SCENARIO": scenario}, cwd=NODE_DIR)
    return json_util.loads(out)


@pytest.mark.parametrize("scenario", ["crud", "hello"])
def test_mongosh_script(node_modules, upstream, proxy, dbname, scenario):
    direct = mongosh(node_modules, upstream.uri, dbname + "_d", scenario)
    via = mongosh(node_modules, proxy.uri, dbname + "_p", scenario)
    assert via == direct


def test_mongosh_eval(node_modules, upstream, proxy, dbname):
    sh = str(node_modules / ".bin" / "mongosh")
    script = (f"const d = db.getSiblingDB('{dbname}');"
              "d.e.insertMany([{_id: 1, v: 'a'}, {_id: 2, v: 'b'}]);"
              "print(EJSON.stringify(d.e.find().sort({_id: -1}).toArray()))")
    via = run([sh, "--quiet", "--norc", proxy.uri, "--eval", script])
    assert json_util.loads(via) == [{"_id": 2, "v": "b"}, {"_id": 1, "v": "a"}]
    check = run([sh, "--quiet", "--norc", upstream.uri, "--eval",
                 f"print(db.getSiblingDB('{dbname}').e.countDocuments({{}}))"])
    assert check == "2"


# --- libmongoc --------------------------------------------------------------------

def cclient(binary, uri, db, scenario) -> dict:
    return json_util.loads(run([binary, uri, db, scenario]))


@pytest.mark.parametrize("scenario", ["crud", "cursor", "aggregate", "hello"])
@pytest.mark.parametrize("compressor", ["", "snappy", "zlib", "zstd"])
def test_libmongoc(c_client, upstream, proxy, dbname, scenario, compressor):
    params = f"compressors={compressor}" if compressor else ""
    direct = cclient(c_client, with_params(upstream.uri, params), dbname + "_d", scenario)
    via = cclient(c_client, with_params(proxy.uri, params), dbname + "_p", scenario)
    assert via == direct
    if scenario == "cursor":
        assert via == {"n": 5000, "sum": 3 * 5000 * 4999 // 2}
    if scenario == "hello":
        assert via == {"ok": True, "hasCompression": False}


def test_libmongoc_w0(c_client, upstream, proxy, dbname):
    if not upstream.is_ferretdb:
        assert cclient(c_client, upstream.uri, dbname + "_d", "w0") == {"n": 100}
    assert cclient(c_client, proxy.uri, dbname + "_p", "w0") == {"n": 100}


# --- every client's compressed handshake, as the server receives it ------------------

def test_compression_stripped_for_node_and_libmongoc(node_modules, c_client, start_proxy):
    srv = FakeServer()
    srv.start()
    try:
        p = start_proxy(srv.uri)
        node(node_modules, p.uri, "test", "errors",
             {"compressors": ["zlib"], "appName": "node-comp"})
        for comp in ("snappy", "zlib", "zstd"):
            cclient(c_client, with_params(p.uri, f"compressors={comp}&appname=c-{comp}"), "test",
                    "hello")
        for app in ["node-comp", "c-snappy", "c-zlib", "c-zstd"]:
            hellos = [m for m in srv.messages(app=app)
                      if m.command in ("hello", "isMaster", "ismaster")]
            assert hellos, f"no handshake from {app} reached the server"
            assert all("compression" not in h.body for h in hellos), app
            assert all(m.compressed_from is None for m in srv.messages(app=app)), app
    finally:
        srv.stop()
