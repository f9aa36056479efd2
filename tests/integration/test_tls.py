"""TLS on both sides. Certificates are made at test time (topology_helpers.
Certs): a CA, a server certificate for 127.0.0.1/localhost, a client
certificate, and the bad ones (another CA, an expired certificate, a
certificate for another host name).

Client side: net.tls.* (mongod's names). Upstream side: the URI's tls
options, against FerretDB's --listen-tls."""

from __future__ import annotations

import subprocess

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError, ServerSelectionTimeoutError

from conftest import NODE_DIR, line_text
from topology_helpers import certs, ferret, node_topology  # noqa: F401 -- fixtures


def tls_config(pem, mode="requireTLS", ca=None, allow_without=None, extra="") -> str:
    cfg = f'net:\n  tls:\n    mode: {mode}\n    certificateKeyFile: "{pem}"\n'
    if ca:
        cfg += f'    CAFile: "{ca}"\n'
    if allow_without is not None:
        cfg += f"    allowConnectionsWithoutCertificates: {str(allow_without).lower()}\n"
    return cfg + extra


def tls_client(port: int, ca, **kw) -> MongoClient:
    kw.setdefault("serverSelectionTimeoutMS", 3000)
    return MongoClient(f"mongodb://127.0.0.1:{port}/", tls=True, tlsCAFile=str(ca),
                       directConnection=True, **kw)


def plain_client(port: int, **kw) -> MongoClient:
    kw.setdefault("serverSelectionTimeoutMS", 3000)
    return MongoClient(f"mongodb://127.0.0.1:{port}/", directConnection=True, **kw)


def works(c: MongoClient, db: str = "mg_tls") -> bool:
    c[db].c.insert_one({"v": 1})
    return c[db].c.count_documents({}) >= 1


def fails_with(c: MongoClient, *words: str) -> str:
    with pytest.raises(PyMongoError) as ei:
        c.admin.command("ping")
    text = str(ei.value)
    assert any(w.lower() in text.lower() for w in words), text
    return text


# --- client side -------------------------------------------------------------------

def test_require_tls(certs, upstream, start_proxy):
    p = start_proxy(upstream.uri, config=tls_config(certs.server_pem))
    with tls_client(p.port, certs.ca) as c:
        assert works(c)
        list(c.mg_tls.c.find({"s": {"$regex": "a", "$options": "i"}}))
    p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "case-insensitive-regex", 10,
                   what="a finding over TLS")
    with plain_client(p.port) as c:
        fails_with(c, "closed", "reset", "timed out")
    p.log.wait_for(lambda ln: "requireTLS" in line_text(ln) and ln.get("s") == "W", 5,
                   what="the plain client refused")


@pytest.mark.parametrize("mode", ["allowTLS", "preferTLS"])
def test_plain_and_tls_on_one_port(certs, upstream, start_proxy, mode):
    p = start_proxy(upstream.uri, config=tls_config(certs.server_pem, mode))
    with tls_client(p.port, certs.ca) as c:
        assert works(c)
    with plain_client(p.port) as c:
        assert works(c)


def test_client_certificates(certs, upstream, start_proxy):
    p = start_proxy(upstream.uri, config=tls_config(certs.server_pem, ca=certs.ca))
    with tls_client(p.port, certs.ca, tlsCertificateKeyFile=str(certs.client_pem)) as c:
        assert works(c)
    mark = p.log.mark()
    with tls_client(p.port, certs.ca) as c:  # no certificate
        fails_with(c, "certificate", "closed", "reset", "alert", "EOF")
    p.log.wait_for(lambda ln: "TLS with client failed" in line_text(ln) and
                   "certificate" in line_text(ln), 5, since=mark,
                   what="the missing client certificate in the log")
    # a certificate from a CA mongoguard does not trust
    with tls_client(p.port, certs.ca, tlsCertificateKeyFile=str(certs.other_client_pem)) as c:
        fails_with(c, "certificate", "closed", "reset", "alert", "unknown ca", "EOF")
    p.log.wait_for(lambda ln: "TLS with client failed" in line_text(ln) and
                   "certificate verify failed" in line_text(ln), 5, since=mark,
                   what="the untrusted client certificate in the log")


def test_connections_without_certificates_allowed(certs, upstream, start_proxy):
    p = start_proxy(upstream.uri, config=tls_config(certs.server_pem, ca=certs.ca,
                                                     allow_without=True))
    with tls_client(p.port, certs.ca) as c:
        assert works(c)
    with tls_client(p.port, certs.ca, tlsCertificateKeyFile=str(certs.client_pem)) as c:
        assert works(c)


def test_client_sees_bad_server_certificates(certs, upstream, start_proxy):
    """The client's view of a wrong CA, an expired certificate and a wrong
    host name; mongoguard's log says the client gave up on the handshake."""
    cases = [(certs.server_pem, certs.other_ca, "certificate verify failed"),
             (certs.expired_pem, certs.ca, "expired"),
             (certs.wrong_pem, certs.ca, "match")]
    for pem, ca, words in cases:
        p = start_proxy(upstream.uri, config=tls_config(pem))
        with tls_client(p.port, ca) as c:
            fails_with(c, words)
        p.log.wait_for(lambda ln: "TLS with client failed" in line_text(ln), 5,
                       what="the failed handshake in the log")


def test_tls_floor_and_ciphers(certs, upstream, start_proxy):
    import ssl
    import socket
    p = start_proxy(upstream.uri, config=tls_config(
        certs.server_pem, extra="") .replace("    certificateKeyFile",
                                            '    ciphers: "ECDHE-RSA-AES128-GCM-SHA256"\n'
                                            "    certificateKeyFile"))
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    with socket.create_connection(("127.0.0.1", p.port)) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with ctx.wrap_socket(raw, server_hostname="localhost"):
                pass
    ctx12 = ssl.create_default_context(cafile=str(certs.ca))
    ctx12.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", p.port)) as raw:
        with ctx12.wrap_socket(raw, server_hostname="localhost") as t:
            assert t.version() == "TLSv1.2"
            assert t.cipher()[0] == "ECDHE-RSA-AES128-GCM-SHA256"


def test_bad_tls_config_refused(certs, mongoguard_bin, tmp_path):
    cases = [('net:\n  tls:\n    mode: requireTLS\n', "certificateKeyFile"),
             ('net:\n  tls:\n    mode: sometimes\n', "net.tls.mode must be"),
             (tls_config(tmp_path / "missing.pem"), "missing.pem"),
             (tls_config(certs.server_cert), "certificateKeyFile")]  # no key in it
    for text, want in cases:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(text)
        r = subprocess.run([mongoguard_bin, "--config", str(cfg), "--check-config"],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and want in r.stderr, (text, r.stderr)


# --- upstream side ------------------------------------------------------------------

@pytest.fixture
def tls_ferret(ferret, certs):
    return ferret(tls=(certs.server_cert, certs.server_key), name="tls")


def tls_uri(port: int, **opts) -> str:
    q = "&".join(f"{k}={v}" for k, v in {"tls": "true", **opts}.items())
    return f"mongodb://127.0.0.1:{port}/?{q}"


def test_upstream_tls(certs, tls_ferret, start_proxy):
    f = tls_ferret
    p = start_proxy(tls_uri(f.tls_port, tlsCAFile=certs.ca),
                    config="rules:\n  index-mismatched-sort: log\n")
    with plain_client(p.port) as c:
        c.mg_up.o.insert_many([{"_id": i, "a": i, "b": i} for i in range(5)])
        list(c.mg_up.o.find({"a": {"$gt": 1}}).sort("b", 1))
    # the sort verdict needs listIndexes over the side connection, which
    # uses the same TLS settings
    p.log.wait_for(lambda ln: ln.get("attr", {}).get("rule") == "index-mismatched-sort", 15,
                   what="a sort finding (the side connection over TLS)")


@pytest.mark.parametrize("case", ["wrong-ca", "expired", "wrong-host"])
def test_upstream_bad_certificates(certs, ferret, start_proxy, case):
    cert, key, ca, words = {
        "wrong-ca": (certs.server_cert, certs.server_key, certs.other_ca,
                     "unable to get local issuer certificate"),
        "expired": (certs.expired_cert, certs.expired_key, certs.ca, "certificate has expired"),
        "wrong-host": (certs.wrong_cert, certs.wrong_key, certs.ca, "mismatch"),
    }[case]
    f = ferret(tls=(cert, key), name="tls-" + case)
    p = start_proxy(tls_uri(f.tls_port, tlsCAFile=ca), config="analysis:\n  enabled: false\n")
    with plain_client(p.port) as c:
        text = fails_with(c, words)
        assert "TLS handshake failed" in text
    p.log.wait_for(lambda ln: words in line_text(ln) and ln.get("s") == "W", 5,
                   what=f"the {case} failure in the log")
    if case == "wrong-host":
        p2 = start_proxy(tls_uri(f.tls_port, tlsCAFile=ca, tlsAllowInvalidHostnames="true"),
                         config="analysis:\n  enabled: false\n")
        with plain_client(p2.port) as c:
            assert works(c)
    if case == "wrong-ca":
        p3 = start_proxy(tls_uri(f.tls_port, tlsInsecure="true"),
                         config="analysis:\n  enabled: false\n")
        with plain_client(p3.port) as c:
            assert works(c)


def test_drivers_over_tls_both_ways(certs, tls_ferret, start_proxy, node_modules, dbname):
    f = tls_ferret
    p = start_proxy(tls_uri(f.tls_port, tlsCAFile=certs.ca),
                    config=tls_config(certs.server_pem))
    with tls_client(p.port, certs.ca) as c:
        assert works(c, dbname)
    via = node_topology(tls_uri(p.port, tlsCAFile=certs.ca, directConnection="true"),
                        dbname + "_n", "ping")
    assert "error" not in via, via
    sh = node_modules / ".bin" / "mongosh"
    r = subprocess.run([str(sh), "--quiet", "--norc", "--tls", "--tlsCAFile", str(certs.ca),
                        f"mongodb://127.0.0.1:{p.port}/{dbname}_sh?directConnection=true",
                        "--eval", "db.t.insertOne({a: 1}); print(db.t.countDocuments({}))"],
                       capture_output=True, text=True, timeout=120, cwd=NODE_DIR)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "1", r.stderr[-2000:]
