"""What ships for clusters and monitoring, checked without a cluster, and the
documentation checked against the program:

- configs/k8s/: every manifest validates against the Kubernetes API schemas
  (kubernetes-validate, strict, one pinned version); the mongoguard pods hold
  the promises their comments make (probes on the admin port, non-root,
  read-only root, limits, log to stdout, ConfigMap mounted where --config
  points); the embedded mongoguard.yaml passes --check-config; and the
  config-reloader loop, run as written, reloads a real mongoguard when the
  file changes.
- configs/prometheus/: promtool check rules and promtool test rules.
- configs/grafana/: the dashboard is well formed and its queries parse.
- Every metric a dashboard panel or an alert names is in a real scrape.
- Every flag, configuration key, rule, rule parameter and metric the program
  has is documented in README.md or docs/*.md."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from bson.regex import Regex
from pymongo.errors import OperationFailure

from conftest import ROOT, free_port
from dns_stub import DnsStub

K8S_VERSION = "1.33.0"
MANIFESTS = sorted((ROOT / "configs" / "k8s").glob("*.yaml"))
RULES = ROOT / "configs" / "prometheus" / "mongoguard-rules.yml"
RULES_TEST = ROOT / "configs" / "prometheus" / "mongoguard-rules.test.yml"
DASHBOARD = ROOT / "configs" / "grafana" / "mongoguard.json"
METRIC = re.compile(r"\bmongoguard_[a-z0-9_]+")


def docs_text() -> str:
    """README.md and docs/*.md: where every option must be documented."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(f.read_text() for f in files)
    # "`sinks.mongodb.batchSize` / `.flushMS`" documents sinks.mongodb.flushMS too
    return re.sub(r"`((?:[\w-]+\.)+)([\w-]+)` / `\.([\w-]+)`",
                  lambda m: f"`{m[1]}{m[2]}` `{m[1]}{m[3]}`", text)


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool (Debian's prometheus) is installed by setup.sh"
    return found


def docs_of(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kinds(path: Path, kind: str) -> list[dict]:
    return [d for d in docs_of(path) if d["kind"] == kind]


def container(pod: dict, name: str) -> dict:
    return next(c for c in pod["containers"] if c["name"] == name)


def embedded_config(path: Path) -> dict:
    (cm,) = [c for c in kinds(path, "ConfigMap") if "mongoguard.yaml" in c["data"]]
    return yaml.safe_load(cm["data"]["mongoguard.yaml"])


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


# --- Kubernetes ---------------------------------------------------------------

@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_manifest_validates_against_the_kubernetes_schemas(manifest):
    docs = docs_of(manifest)
    assert docs
    for d in docs:
        try:
            kubernetes_validate.validate(d, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{manifest.name}: {d['kind']}/{d['metadata']['name']}: "
                        f"{e.path}: {e.message}", pytrace=False)


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_mongoguard_pod_keeps_the_promises_of_its_comments(manifest):
    cfg = embedded_config(manifest)
    admin_port = int(cfg["admin"]["listen"].rsplit(":", 1)[1])
    assert cfg["log"]["path"] == "-", "the root file system is read-only: log to stdout"
    assert "capture" not in cfg, "a capture needs a writable volume"
    assert isinstance(cfg.get("workers"), int) and cfg["workers"] > 0, \
        "0 would start one worker per core of the node, whatever the CPU limit"
    configmaps = {c["metadata"]["name"] for c in kinds(manifest, "ConfigMap")}
    (dep,) = kinds(manifest, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    mg = container(pod, "mongoguard")

    assert mg["image"].split(":")[0].rsplit("/", 1)[-1] == "mongoguard"
    entrypoint = (ROOT / "scripts" / "docker" / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["/usr/local/bin/mongoguard"]' in entrypoint, "args are mongoguard's flags"
    cfg_path = mg["args"][mg["args"].index("--config") + 1]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in mg["volumeMounts"]}
    mount = mounts[str(Path(cfg_path).parent)]
    assert mount.get("readOnly") and "subPath" not in mount, "subPath mounts never see updates"
    assert volumes[mount["name"]]["configMap"]["name"] in configmaps
    env = {e["name"]: e.get("value") for e in mg.get("env", [])}
    assert env.get("MONGOC_DISABLE_SHM") == "1"

    ports = {p["name"]: p["containerPort"] for p in mg["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get_ = mg[probe]["httpGet"]
        assert get_["path"] == path
        assert ports.get(get_["port"], get_["port"]) == admin_port, probe
    for name, port in ports.items():
        if name.startswith("mongo-"):
            listens = [cfg["net"]["listen"]] + [m["listen"] for m in cfg["upstream"]["members"]]
            assert f":{port}" in " ".join(listens), f"port {name} has no listener"

    uid = pod["securityContext"].get("runAsUser")
    assert pod["securityContext"].get("runAsNonRoot") is True and uid and uid > 0
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert sc.get("readOnlyRootFilesystem") is True, c["name"]
        assert sc.get("allowPrivilegeEscalation") is False, c["name"]
        for k in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(c["resources"][k]), f"{c['name']} {k}"
    grace = cfg.get("shutdownGraceMS", 10000) / 1000
    assert pod.get("terminationGracePeriodSeconds", 30) > grace

    rl = container(pod, "config-reloader")
    rl_env = {e["name"]: e["value"] for e in rl["env"]}
    assert rl_env["CONFIG"] == cfg_path
    assert rl_env["RELOAD_URL"] == f"http://127.0.0.1:{admin_port}/reload"
    assert {m["name"] for m in rl["volumeMounts"]} == {mount["name"]}


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_embedded_config_passes_check_config(manifest, mongoguard_bin, tmp_path):
    """--check-config resolves the upstream's names: a DNS stub answers for
    the cluster names, through upstream.dnsServer, added to a copy."""
    cfg = embedded_config(manifest)
    hosts = [cfg["upstream"]["uri"].split("//", 1)[1].split("/", 1)[0]]
    hosts += [m["host"] for m in cfg["upstream"].get("members", [])]
    dns = DnsStub()
    try:
        for i, h in enumerate(hosts):
            dns.set_a(h.rsplit(":", 1)[0], [f"127.0.0.{i + 2}"])
        cfg["upstream"]["dnsServer"] = dns.server
        path = tmp_path / "mongoguard.yaml"
        path.write_text(yaml.safe_dump(cfg))
        r = subprocess.run([mongoguard_bin, "--config", str(path), "--check-config"],
                           capture_output=True, text=True, timeout=30,
                           env={**os.environ, "MONGOC_DISABLE_SHM": "1"})
    finally:
        dns.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "configuration OK" in r.stdout


def reloader_shell() -> list[str] | None:
    if shutil.which("busybox"):
        return ["busybox", "sh"]
    if shutil.which("wget"):
        return ["sh"]
    return None


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_config_reloader_reloads_mongoguard_when_the_file_changes(manifest, start_proxy,
                                                                   upstream, clients, dbname):
    shell = reloader_shell()
    if not shell:
        pytest.skip("neither busybox nor wget here: the reloader's loop needs one")
    (dep,) = kinds(manifest, "Deployment")
    rl = container(dep["spec"]["template"]["spec"], "config-reloader")
    assert rl["command"][:2] == ["/bin/sh", "-c"]
    port = free_port()
    base = {"admin": {"listen": f"127.0.0.1:{port}"}}
    p = start_proxy(upstream.uri, config=json.dumps({**base, "rules": {"unbounded-push": "log"}}))
    env = {**os.environ, **{e["name"]: e["value"] for e in rl["env"]},
           "CONFIG": str(p.config_path), "RELOAD_URL": f"http://127.0.0.1:{port}/reload",
           "INTERVAL": "0.2"}
    loop = subprocess.Popen(shell + ["-c", rl["command"][2]], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    said: list[str] = []  # the loop's lines as they come
    reader = threading.Thread(target=lambda: said.extend(iter(loop.stdout.readline, "")),
                              daemon=True)
    reader.start()

    def loop_says(text: str, timeout: float = 10) -> None:
        # mongoguard logs its answer before the loop has read it and said so
        deadline = time.monotonic() + timeout
        while not any(text in ln for ln in said) and time.monotonic() < deadline:
            time.sleep(0.05)

    try:
        time.sleep(0.5)  # the loop has read the first checksum
        mark = p.log.mark()
        p.config_path.write_text(json.dumps({**base, "rules": {"unbounded-push": "block"}}))
        (ok,) = p.log.wait_for(lambda ln: ln.get("msg") == "Configuration reloaded",
                               since=mark, what="a reload")
        assert ok["attr"]["source"] == "POST /reload"
        coll = clients.via(p)[dbname].c
        with pytest.raises(OperationFailure, match="unbounded-push"):
            coll.update_one({"_id": 1}, {"$push": {"a": 1}}, upsert=True)

        mark = p.log.mark()
        p.config_path.write_text(json.dumps({**base, "rules": {"unbounded-push": "blok"}}))
        p.log.wait_for(lambda ln: ln.get("msg", "").startswith("Reload refused"), since=mark,
                       what="a refused reload")
        with pytest.raises(OperationFailure, match="unbounded-push"):
            coll.update_one({"_id": 1}, {"$push": {"a": 1}}, upsert=True)
        loop_says("reload refused or not answered")
    finally:
        loop.terminate()
        loop.wait(10)
        reader.join(10)
    out = "".join(said)
    assert out.count("changed: POST") == 2, out
    assert "reload refused or not answered" in out, out


# --- Prometheus and Grafana -----------------------------------------------------

def test_promtool_checks_the_alert_rules():
    r = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_unit_tests_of_the_alert_rules_pass():
    r = subprocess.run([promtool(), "test", "rules", RULES_TEST.name], cwd=RULES_TEST.parent,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def rule_exprs() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [r["expr"] for g in groups for r in g["rules"]]


def dashboard_panels() -> list[dict]:
    return [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]


def dashboard_exprs() -> list[str]:
    d = json.loads(DASHBOARD.read_text())
    out = [t["expr"] for p in dashboard_panels() for t in p["targets"]]
    out += [v["definition"] for v in d["templating"]["list"] if v["type"] == "query"]
    return out


def test_dashboard_is_well_formed_and_its_queries_parse(tmp_path):
    d = json.loads(DASHBOARD.read_text())
    assert d["uid"] and d["title"] and d["schemaVersion"] >= 36
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    var_names = {v["name"] for v in d["templating"]["list"]}
    assert {"datasource", "instance"} <= var_names
    cells = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"{p['title']} overlaps another panel"
        cells |= mine
    for p in dashboard_panels():
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]
        for t in p["targets"]:
            assert '$instance' in t["expr"], f"{p['title']}: not filtered by $instance"
    # Grafana's variables replaced as Grafana would, every query becomes a
    # recording rule, and promtool parses them all.
    def concrete(e: str) -> str:
        return (e.replace("$__rate_interval", "5m").replace("$__range", "6h")
                .replace("$instance", ".*"))
    exprs = [t["expr"] for p in dashboard_panels() for t in p["targets"]]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": concrete(e)} for i, e in enumerate(exprs)]}]}
    f = tmp_path / "dashboard-queries.yml"
    f.write_text(yaml.safe_dump(rules))
    r = subprocess.run([promtool(), "check", "rules", str(f)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dashboard_and_alerts_cover_what_the_issue_asked_for():
    panels = " ".join(dashboard_exprs())
    alerts = " ".join(rule_exprs())
    for name in ("mongoguard_commands_total", "mongoguard_request_latency_seconds_bucket",
                 "mongoguard_findings_total", "mongoguard_blocked_total",
                 "mongoguard_upstream_connect_failures_total", "mongoguard_bad_requests_total",
                 "mongoguard_connections"):
        assert re.search(rf"\b{name}\b", panels), f"no dashboard panel shows {name}"
    for name in ("mongoguard_request_latency_seconds_bucket", "mongoguard_blocked_total",
                 "mongoguard_upstream_connect_failures_total", "mongoguard_bad_requests_total",
                 "mongoguard_connections_refused_total"):
        assert re.search(rf"\b{name}\b", alerts), f"no alert watches {name}"


# --- a real scrape ----------------------------------------------------------------

def scrape_families(text: str) -> dict[str, str]:
    """Metric family -> type, from the exposition's # TYPE lines."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split()
            out[name] = typ
    return out


def series_names(families: dict[str, str]) -> set[str]:
    names = set(families)
    for name, typ in families.items():
        if typ == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


@pytest.fixture
def scraped(start_proxy, upstream, clients, dbname):
    """A mongoguard with the admin endpoint after a tiny workload: a write, a
    read, a finding, a block. Returns (families, /config as JSON)."""
    port = free_port()
    p = start_proxy(upstream.uri, config=json.dumps({
        "admin": {"listen": f"127.0.0.1:{port}"},
        "rules": {"unbounded-push": "block", "case-insensitive-regex": "log"}}))
    coll = clients.via(p)[dbname].items
    coll.insert_one({"_id": 1, "email": "ada@example.com"})
    assert coll.find_one({"email": Regex("^ada@", "i")})
    with pytest.raises(OperationFailure, match="unbounded-push"):
        coll.update_one({"_id": 1}, {"$push": {"logins": 1}})
    return scrape_families(get(port, "/metrics")), json.loads(get(port, "/config"))


def test_every_metric_a_panel_or_alert_names_is_in_a_real_scrape(scraped):
    families, _ = scraped
    have = series_names(families)
    for where, exprs in (("dashboard", dashboard_exprs()), ("alert rules", rule_exprs())):
        named = {m for e in exprs for m in METRIC.findall(e)}
        assert named, where
        missing = sorted(named - have)
        assert not missing, f"{where} name metrics mongoguard does not export: {missing}"


# --- the documentation covers the program ----------------------------------------

def test_every_metric_is_documented(scraped):
    families, _ = scraped
    text = docs_text()
    missing = [n for n in families if n not in text]
    assert not missing, f"metrics in no README.md or docs/*.md: {missing}"


def flatten(d: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out += flatten(v, key + ".")
        else:
            out.append(key)
    return out


def test_every_configuration_key_is_documented(scraped):
    """Two sources: every key /config shows (full dotted names), and every key
    name the YAML loader accepts (proxy/runtime/config.c), for sections /config
    leaves out (net.tls, capture, upstream.members)."""
    _, config = scraped
    text = docs_text()
    keys = flatten({k: v for k, v in config.items() if k != "rules"})
    missing = [k for k in keys if f"`{k}`" not in text and f"{k}`" not in text]
    assert not missing, f"configuration keys in no README.md or docs/*.md: {missing}"
    loader = (ROOT / "proxy" / "runtime" / "config.c").read_text()
    names = set(re.findall(r'strcmp\(key, "([A-Za-z]+)"\)', loader))
    assert {"listen", "tls", "capture", "members"} <= names, "the loader's key names"
    missing = sorted(n for n in names
                     if not re.search(rf"[`.]{re.escape(n)}[`:.]|\b{re.escape(n)}:", text))
    assert not missing, f"configuration key names in no README.md or docs/*.md: {missing}"


def help_text(binary: str, *args: str) -> str:
    r = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=10)
    return r.stdout + r.stderr


def test_every_flag_is_documented(mongoguard_bin):
    text = docs_text()
    for args in ((), ("report",)):
        flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", help_text(mongoguard_bin, *args)))
        flags -= {"--help"}
        assert flags, args
        missing = sorted(f for f in flags if f not in text)
        assert not missing, f"flags of mongoguard {' '.join(args)} in no README.md or docs/*.md: {missing}"


def test_every_rule_and_rule_parameter_is_documented(mongoguard_bin, scraped):
    _, config = scraped
    text = docs_text()
    rules = (ROOT / "docs" / "rules.md").read_text()
    for rule, spec in config["rules"].items():
        assert f"### `{rule}`" in rules, f"docs/rules.md has no section for {rule}"
        for param in spec:
            if param not in ("action", "scopes"):
                assert f"`{param}`" in text, f"{rule}.{param} is documented nowhere"
    assert set(config["rules"]) <= set(re.findall(r"^  ([a-z]+(?:-[a-z]+)+) ",
                                                  help_text(mongoguard_bin), re.M))
