"""The Kubernetes manifests keep the database to the services (T9), checked offline.

Each service's pod gets its own database URL (its own role) from the Secret and no
other; the database-roles Job sets the roles up as an admin whose URL is in a Secret of
its own; the runtimes get no URL and a NetworkPolicy lets them reach only the services'
gRPC ports and DNS. tests/test_kubernetes.py checks the rest of these files.
"""

from __future__ import annotations

import pathlib
import tomllib
from typing import Any

import psycopg
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "kubernetes"
SECRET = "agentworks-secrets"
ADMIN_SECRET = "agentworks-database-admin"
SERVICES = ("messaging", "functions", "scheduler", "gateway")
GRPC_PORTS = {"messaging": 50051, "functions": 50052, "scheduler": 50053}
# Where a runtime exchanges its runtime credential for an identity (T2).
GATEWAY_PORT = {"gateway": 8080}
RUNTIME_LABEL = ("agentworks.io/network", "runtime")
ROLES_JOB = "agentworks-database-roles"


@pytest.fixture(scope="module")
def objects() -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> object, for every object the three kustomizations deploy."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for directory in (K8S, K8S / "bootstrap", K8S / "demo"):
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
        for entry in kustomization["resources"]:
            for doc in yaml.safe_load_all((directory / entry).read_text()):
                if doc:
                    found[(doc["kind"], doc["metadata"]["name"])] = doc
    return found


def _container(workload: dict[str, Any]) -> dict[str, Any]:
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    return container


def _secret_refs(workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """env name -> its secretKeyRef, for the container's Secret-backed variables."""
    return {
        var["name"]: var["valueFrom"]["secretKeyRef"]
        for var in _container(workload).get("env", [])
        if "secretKeyRef" in var.get("valueFrom", {})
    }


def _workloads(objects) -> dict[str, dict[str, Any]]:
    return {n: o for (k, n), o in objects.items() if k in ("Deployment", "Job")}


def _template_urls() -> dict[str, str]:
    template = yaml.safe_load((K8S / "secret.example.yaml").read_text())
    return {k: v for k, v in template["stringData"].items() if k.endswith("DATABASE_URL")}


def test_each_service_pod_gets_only_its_own_database_url_T9(objects):
    """T9: a service's pod reads exactly one database variable, its own
    `<NAME>_DATABASE_URL`, required, from that key of the Secret; the Secret template
    gives each service its own role (named after it, never a superuser) and password;
    the bootstrap Job writes as the gateway; no other pod reads a database URL."""
    workloads = _workloads(objects)
    for name in SERVICES:
        refs = {k: v for k, v in _secret_refs(workloads[name]).items() if "DATABASE" in k}
        variable = f"{name.upper()}_DATABASE_URL"
        assert refs == {variable: {"name": SECRET, "key": variable}}, name
    bootstrap = _secret_refs(workloads["agentworks-bootstrap"])
    assert {k: v for k, v in bootstrap.items() if "DATABASE" in k} == {
        "GATEWAY_DATABASE_URL": {"name": SECRET, "key": "GATEWAY_DATABASE_URL"}
    }
    for name, workload in workloads.items():
        if name in (*SERVICES, "agentworks-bootstrap", ROLES_JOB):
            continue
        env = [v["name"] for v in _container(workload).get("env", [])]
        assert not [v for v in env if "DATABASE" in v], name
    urls = _template_urls()
    assert set(urls) == {f"{name.upper()}_DATABASE_URL" for name in SERVICES}
    params = {k: psycopg.conninfo.conninfo_to_dict(v) for k, v in urls.items()}
    for name in SERVICES:
        assert params[f"{name.upper()}_DATABASE_URL"]["user"] == name
    assert len({p["password"] for p in params.values()}) == len(SERVICES), "shared password"


def test_the_roles_job_sets_up_every_role_from_the_services_urls_T9(objects):
    """T9: the database-roles Job runs the console script `agentworks-db-roles` with the
    admin URL from its own Secret and the same four URL keys the services read; its code
    parses them into four distinct roles; it runs before the bootstrap Job, and no
    other pod references the admin Secret."""
    from agentworks_dev.dbroles import roles_from_env

    project = tomllib.loads((ROOT / "tools/agentworks-dev/pyproject.toml").read_text())
    assert project["project"]["scripts"]["agentworks-db-roles"] == "agentworks_dev.dbroles:main"
    job = objects[("Job", ROLES_JOB)]
    assert _container(job)["command"] == ["agentworks-db-roles"]
    refs = _secret_refs(job)
    admin = refs.pop("AGENTWORKS_ADMIN_DATABASE_URL")
    assert admin == {"name": ADMIN_SECRET, "key": "AGENTWORKS_ADMIN_DATABASE_URL"}
    assert refs == {
        f"{n.upper()}_DATABASE_URL": {"name": SECRET, "key": f"{n.upper()}_DATABASE_URL"}
        for n in SERVICES
    }
    environ = {"AGENTWORKS_ADMIN_DATABASE_URL": "postgresql://admin:pw@db.example.internal/aw"}
    environ |= _template_urls()
    _, roles = roles_from_env(environ)
    assert [(r.schema, r.role) for r in roles] == [(n, n) for n in SERVICES]
    for name, workload in _workloads(objects).items():
        if name != ROLES_JOB:
            assert ADMIN_SECRET not in {r["name"] for r in _secret_refs(workload).values()}
    # It signs nothing and calls no service: no signing key, no certificate, no Secret
    # mounted at all (only its /tmp).
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert [v["name"] for v in volumes] == ["tmp"] and "emptyDir" in volumes[0]
    order = yaml.safe_load((K8S / "bootstrap" / "kustomization.yaml").read_text())["resources"]
    assert order.index("database-roles.yaml") < order.index("job.yaml")


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return selector.get("matchLabels", {}).items() <= labels.items()


def test_runtimes_reach_only_the_services_grpc_ports_and_dns_T9(objects):
    """T9: the NetworkPolicy `runtimes` selects every runtime pod (the demo runtimes) and
    no service or job; it admits no ingress, and its egress goes only to the messaging,
    functions and scheduler pods on their gRPC ports (the ports of their Services and
    containers, the ones the runtimes' addresses name), to the gateway's pods on its
    HTTP port (the credential exchange, T2) and to the cluster DNS: no ipBlock, no rule
    without a destination or a port (which would allow anything)."""
    policy = objects[("NetworkPolicy", "runtimes")]
    spec = policy["spec"]
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
    assert spec["ingress"] == []
    key, value = RUNTIME_LABEL
    assert spec["podSelector"] == {"matchLabels": {key: value}}
    selected = {
        name
        for name, w in _workloads(objects).items()
        if _selects(spec["podSelector"], w["spec"]["template"]["metadata"]["labels"])
    }
    demo = {
        name
        for name, w in _workloads(objects).items()
        if w["metadata"]["labels"].get("app.kubernetes.io/component") == "demo"
    }
    assert demo and selected == demo, selected
    allowed: set[tuple[str, int, str]] = set()
    dns = False
    for rule in spec["egress"]:
        assert rule.get("to") and rule.get("ports"), f"a rule allows anything: {rule}"
        for peer in rule["to"]:
            assert "ipBlock" not in peer, rule
            if "namespaceSelector" in peer:
                assert peer["namespaceSelector"]["matchLabels"] == {
                    "kubernetes.io/metadata.name": "kube-system"
                }
                assert peer["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
                assert {(p["protocol"], p["port"]) for p in rule["ports"]} == {
                    ("UDP", 53),
                    ("TCP", 53),
                }
                dns = True
                continue
            for name, workload in _workloads(objects).items():
                if _selects(
                    peer["podSelector"], workload["spec"]["template"]["metadata"]["labels"]
                ):
                    allowed |= {(name, p["port"], p["protocol"]) for p in rule["ports"]}
    assert dns
    reachable = {**GRPC_PORTS, **GATEWAY_PORT}
    assert allowed == {(name, port, "TCP") for name, port in reachable.items()}
    for name, port in reachable.items():
        service_ports = [p["port"] for p in objects[("Service", name)]["spec"]["ports"]]
        container_ports = [
            p["containerPort"] for p in _container(objects[("Deployment", name)])["ports"]
        ]
        assert port in service_ports and port in container_ports, name
    configmap = objects[("ConfigMap", "agentworks-config")]["data"]
    for runtime in demo:
        for var in _container(objects[("Deployment", runtime)])["env"]:
            ref = var.get("valueFrom", {}).get("configMapKeyRef", {})
            if ref.get("key", "").endswith("_ADDRESS"):
                port = int(configmap[ref["key"]].rsplit(":", 1)[1])
                assert port in GRPC_PORTS.values(), (runtime, var["name"])
