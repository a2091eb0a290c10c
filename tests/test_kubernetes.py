"""The Kubernetes manifests in deploy/kubernetes/ (P3, P4, P5), checked offline.

No cluster runs here, so these tests read the manifests: every object is well formed
and listed in a kustomization; each service has a Deployment, a Service, an autoscaler
and a disruption budget; selectors, ports and probes agree; every ConfigMap and Secret
key a container references exists; each container's environment is one its process
reads and parses (by building the real config objects from it); images and commands are
the console scripts our packages declare; every gRPC hop runs mutual TLS with a
certificate cert-manager issues per process (T5). With `kubernetes-validate` (in
requirements-dev.lock), every Kubernetes object is also checked against the Kubernetes
JSON schema; with `kubectl` on PATH, each kustomization is rendered.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import tempfile
import tomllib
from typing import Any

import pytest
import yaml

from agentworks.core.keys import KeyDirectory

ROOT = pathlib.Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "kubernetes"
KUSTOMIZATIONS = (K8S, K8S / "bootstrap", K8S / "demo")
SECRET_TEMPLATE = K8S / "secret.example.yaml"
NAMESPACE = "agentworks"
CONFIGMAP = "agentworks-config"
SECRET = "agentworks-secrets"
# The admin URL of the database-roles Job only (T9), in a Secret of its own.
ADMIN_SECRET = "agentworks-database-admin"
# Workloads that neither sign identities nor call gRPC (no signing key, no certificate):
# the Job that sets up the services' database roles (T9).
NO_GRPC = {"agentworks-database-roles"}
TRUSTED_KEYS = "agentworks-trusted-keys"
# The signer whose key each workload's signing-key Secret must hold (T1).
SIGNERS = {
    "messaging": "service:messaging",
    "functions": "service:functions",
    "scheduler": "service:scheduler",
    "gateway": "gateway",
    "agentworks-bootstrap": "gateway",
}
# The demo runtimes hold no key: a runtime credential from this Secret (T2).
RUNTIMES = ("demo-runtime", "demo-functions")
CREDENTIAL_SECRET = "agentworks-runtime-credential"
CREDENTIAL = "awr_" + "c" * 43
CREDENTIAL_FILE = pathlib.Path(tempfile.mkdtemp(prefix="agentworks-k8s-credential-")) / "credential"
CREDENTIAL_FILE.write_text(CREDENTIAL)
IMAGE = "agentworks"
GRPC_SERVICES = {"messaging": 50051, "functions": 50052, "scheduler": 50053}
SERVICES = {**GRPC_SERVICES, "gateway": 8080}
METRICS_PORT = 9100
# The plain-text port that serves health checking only, for the kubelet's probes (T5).
HEALTH_PORT = 9101
# cert-manager's API group: its objects have no schema in kubernetes-validate.
CERT_MANAGER = "cert-manager.io/v1"
CA_ISSUER = "agentworks-ca"
# Oldest Kubernetes with native gRPC probes on by default (GA), and the newest schema.
SCHEMA_VERSIONS = ("1.27.0", "latest")
PACKAGES = [
    "libs/agentworks-proto",
    "libs/agentworks-client",
    "libs/agentworks-server",
    "libs/agentworks-runtime",
    "libs/agentworks-agents",
    "libs/agentworks-runner",
    "services/messaging",
    "services/functions",
    "services/scheduler",
    "services/gateway",
    "tools/agentworks-cli",
    "tools/agentworks-dev",
]
# Values standing in for the Secret's keys when the containers' env is resolved.
FAKE_SECRETS = {
    "SCHEDULER_WEBHOOK_KEY": "w" * 43,
    **{
        f"{name.upper()}_DATABASE_URL": f"postgresql://{name}:pw-{name}@db.example.internal:5432/agentworks"
        for name in ("messaging", "functions", "scheduler", "gateway")
    },
    "AGENTWORKS_ADMIN_DATABASE_URL": "postgresql://admin:pw@db.example.internal:5432/agentworks",
    "AGENTWORKS_DEV_TOKEN": "aw_" + "x" * 43,
}


# ----------------------------------------------------------------------------- loading


def _load_all(path: pathlib.Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.fixture(scope="module")
def kustomizations() -> dict[pathlib.Path, dict[str, Any]]:
    return {d: yaml.safe_load((d / "kustomization.yaml").read_text()) for d in KUSTOMIZATIONS}


@pytest.fixture(scope="module")
def files(kustomizations) -> dict[pathlib.Path, list[dict[str, Any]]]:
    """Every resource file the kustomizations list, parsed."""
    listed: dict[pathlib.Path, list[dict[str, Any]]] = {}
    for directory, kustomization in kustomizations.items():
        for entry in kustomization["resources"]:
            path = (directory / entry).resolve()
            assert path.is_file(), f"{directory / 'kustomization.yaml'} lists missing {entry}"
            listed[path] = _load_all(path)
    return listed


@pytest.fixture(scope="module")
def objects(files) -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> object, for every object the kustomizations deploy."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path, docs in files.items():
        for doc in docs:
            key = (doc["kind"], doc["metadata"]["name"])
            assert key not in found, f"{key} is defined twice (again in {path.name})"
            found[key] = doc
    return found


@pytest.fixture(scope="module")
def configmap(objects) -> dict[str, str]:
    return objects[("ConfigMap", CONFIGMAP)]["data"]


@pytest.fixture(scope="module")
def secret_template() -> dict[str, Any]:
    (secret,) = _load_all(SECRET_TEMPLATE)
    return secret


@pytest.fixture(scope="module")
def bundle(pki) -> str:
    """A directory of tls.crt, tls.key and ca.crt (the keys of a cert-manager Secret),
    standing in for the Secret mounted at a container's TLS path (tests.fixtures.tls)."""
    return str(pathlib.Path(pki.files("client")[0]).parent)


@pytest.fixture(scope="module")
def scripts() -> dict[str, str]:
    """Console script -> `module:function`, from every package's [project.scripts]."""
    found: dict[str, str] = {}
    for package in PACKAGES:
        project = tomllib.loads((ROOT / package / "pyproject.toml").read_text())["project"]
        found.update(project.get("scripts", {}))
    return found


def _grpc_workloads(objects) -> dict[str, dict[str, Any]]:
    """The workloads that sign identities and call (or serve) gRPC."""
    return {n: w for n, w in _workloads(objects).items() if n not in NO_GRPC}


def _workloads(objects) -> dict[str, dict[str, Any]]:
    return {name: o for (kind, name), o in objects.items() if kind in ("Deployment", "Job")}


def _pod(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


def _container(workload: dict[str, Any]) -> dict[str, Any]:
    (container,) = _pod(workload)["containers"]
    return container


# Keys standing in for each signer's Secret and the trusted-keys ConfigMap.
KEYS = KeyDirectory(tempfile.mkdtemp(prefix="agentworks-k8s-keys-"))
SIGNING_SECRET_PREFIX = "agentworks-signing-"


def _signing_volume(workload: dict[str, Any]) -> tuple[str, str, str]:
    """(Secret name, where it is mounted, the trusted keys' mount) of a workload."""
    pod = _pod(workload)
    mounts = {m["name"]: m for m in _container(workload)["volumeMounts"]}
    secrets = [
        v
        for v in pod["volumes"]
        if v.get("secret", {}).get("secretName", "").startswith(SIGNING_SECRET_PREFIX)
    ]
    assert len(secrets) == 1, f"{workload['metadata']['name']}: one signing Secret, its own key"
    (trusted,) = [v for v in pod["volumes"] if v.get("configMap", {}).get("name") == TRUSTED_KEYS]
    for volume in (secrets[0], trusted):
        assert mounts[volume["name"]].get("readOnly") is True, workload["metadata"]["name"]
    return (
        secrets[0]["secret"]["secretName"],
        mounts[secrets[0]["name"]]["mountPath"],
        mounts[trusted["name"]]["mountPath"],
    )


def _env(workload: dict[str, Any], configmap: dict[str, str], bundle: str) -> dict[str, str]:
    """The container's environment as the process sees it (absent optional keys unset):
    a path under a read-only mount (the TLS Secret) pointing into `bundle` instead, its
    signing key and trusted keys files standing in for the mounted Secret and ConfigMap
    (the key of the signer that Secret is named for)."""
    container = _container(workload)
    runtime = workload["metadata"]["name"] in RUNTIMES
    secret, signing_at, trusted_at = ("", "", "") if runtime else _signing_volume(workload)
    env: dict[str, str] = {}
    read_only = [
        m["mountPath"]
        for m in container.get("volumeMounts", [])
        if m.get("readOnly") and m["mountPath"] not in (signing_at, trusted_at)
    ]
    for var in container.get("env", []):
        if "value" in var:
            value = str(var["value"])
            for mount in read_only:
                if value.startswith(f"{mount}/"):
                    value = bundle + value.removeprefix(mount)
            env[var["name"]] = value
            continue
        source = var["valueFrom"]
        if "configMapKeyRef" in source:
            env[var["name"]] = configmap[source["configMapKeyRef"]["key"]]
        elif source["secretKeyRef"]["key"] in FAKE_SECRETS:
            env[var["name"]] = FAKE_SECRETS[source["secretKeyRef"]["key"]]
    if runtime:  # the credential Secret's file, where this machine has it
        env["AGENTWORKS_RUNTIME_CREDENTIAL_FILE"] = str(CREDENTIAL_FILE)
        return env
    signer = secret.removeprefix("agentworks-signing-")
    signer = signer if signer == "gateway" else f"service:{signer}"
    if env.get("AGENTWORKS_SIGNING_KEY") == f"{signing_at}/signing-key.pem":
        env["AGENTWORKS_SIGNING_KEY"] = KEYS.env(signer)["AGENTWORKS_SIGNING_KEY"]
    if env.get("AGENTWORKS_TRUSTED_KEYS") == f"{trusted_at}/trusted-keys.json":
        env["AGENTWORKS_TRUSTED_KEYS"] = str(KEYS.trusted_path)
    return env


def _quantity(value: str | int, *, cpu: bool) -> float:
    """A Kubernetes quantity as a number (cores or bytes)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|k|M|G)?", str(value))
    assert match, f"{value!r} is not a Kubernetes quantity"
    number, unit = float(match[1]), match[2] or ""
    if cpu:
        assert unit in ("", "m"), f"{value!r} is not a CPU quantity"
        return number / 1000 if unit == "m" else number
    factor = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
    assert unit != "m", f"{value!r} is not a memory quantity"
    return number * factor[unit]


# ------------------------------------------------------------------------------- tests


def test_every_manifest_is_a_named_object_in_a_kustomization_p5(kustomizations, files):
    """P5: each YAML file is listed (the Secret template deliberately not), and each object
    has apiVersion, kind, a name and the agentworks namespace."""
    on_disk = {
        p.resolve()
        for p in K8S.rglob("*.yaml")
        if p.name != "kustomization.yaml" and p != SECRET_TEMPLATE
    }
    assert on_disk == set(files), "a manifest is not listed in any kustomization.yaml"
    assert SECRET_TEMPLATE.resolve() not in files, "apply -k would overwrite the real Secret"
    for directory, kustomization in kustomizations.items():
        assert kustomization["kind"] == "Kustomization", directory
        assert kustomization["namespace"] == NAMESPACE, directory
    for path, docs in files.items():
        assert docs, f"{path} is empty"
        for doc in docs:
            assert doc.get("apiVersion") and doc.get("kind"), path
            metadata = doc["metadata"]
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", metadata["name"]), path
            if doc["kind"] != "Namespace":
                assert metadata["namespace"] == NAMESPACE, (path, metadata["name"])
            assert metadata["labels"]["app.kubernetes.io/part-of"] == NAMESPACE, path


def test_each_service_has_deployment_service_autoscaler_and_budget_p3_p5(objects):
    """P3/P5: every service scales on its own: an autoscaling/v2 CPU HPA (2-10) owns the
    Deployment's replica count, and a PodDisruptionBudget keeps all but one replica up."""
    for name in SERVICES:
        deployment = objects[("Deployment", name)]
        assert ("Service", name) in objects, name
        assert "replicas" not in deployment["spec"], f"{name}: the HPA owns replicas"
        hpa = objects[("HorizontalPodAutoscaler", name)]
        assert hpa["apiVersion"] == "autoscaling/v2", name
        spec = hpa["spec"]
        assert spec["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": name,
        }
        assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 10), name
        (metric,) = spec["metrics"]
        assert metric["type"] == "Resource" and metric["resource"]["name"] == "cpu", name
        assert 0 < metric["resource"]["target"]["averageUtilization"] <= 100, name
        pdb = objects[("PodDisruptionBudget", name)]
        assert pdb["apiVersion"] == "policy/v1", name
        assert pdb["spec"]["selector"] == deployment["spec"]["selector"], name
        assert pdb["spec"].get("maxUnavailable") == 1, name
        strategy = deployment["spec"]["strategy"]
        assert strategy["rollingUpdate"]["maxUnavailable"] == 0, f"{name}: rolling, no gap"


def test_selectors_match_labels_and_services_select_one_deployment_p3(objects):
    """P3: each workload's selector matches its pod labels; each Service selects exactly
    one Deployment; gRPC Services are headless (client-side round_robin over every pod),
    the gateway's is a ClusterIP."""
    workloads = _workloads(objects)
    for name, workload in workloads.items():
        labels = workload["spec"]["template"]["metadata"]["labels"]
        selector = workload["spec"].get("selector", {}).get("matchLabels", {})
        assert selector.items() <= labels.items(), f"{name}: selector does not match labels"
    for (kind, name), service in objects.items():
        if kind != "Service":
            continue
        selector = service["spec"]["selector"]
        chosen = [
            n
            for n, w in workloads.items()
            if w["kind"] == "Deployment"
            and selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert chosen == [name], f"Service {name} selects {chosen}"
        container = _container(workloads[name])
        declared = {p["name"]: p["containerPort"] for p in container["ports"]}
        for port in service["spec"]["ports"]:
            target = port["targetPort"]
            assert target in declared or target in declared.values(), (name, target)
            assert declared.get(target, target) == SERVICES[name] == port["port"], name
    for name in GRPC_SERVICES:
        assert objects[("Service", name)]["spec"]["clusterIP"] == "None", name
    assert objects[("Service", "gateway")]["spec"]["type"] == "ClusterIP"


def test_probes_and_metrics_use_the_declared_ports_p4_T5(objects, configmap, bundle):
    """P4/T5: gRPC services are probed with the native gRPC health check (served without
    identity) on their plain-text health port (the kubelet cannot speak TLS; the port
    serves health checking only), the gateway over HTTP on /healthz; the metrics port
    is declared, annotated for Prometheus and the one METRICS_LISTEN names."""
    metrics_host, _, metrics_port = configmap["METRICS_LISTEN"].rpartition(":")
    assert (metrics_host, int(metrics_port)) == ("0.0.0.0", METRICS_PORT)
    assert configmap["HEALTH_LISTEN"] == f"0.0.0.0:{HEALTH_PORT}"
    for name, port in SERVICES.items():
        deployment = objects[("Deployment", name)]
        container = _container(deployment)
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        if name in GRPC_SERVICES:
            assert ports == {"grpc": port, "health": HEALTH_PORT, "metrics": METRICS_PORT}
            config = _service_config(name, _env(deployment, configmap, bundle)).service
            assert config.health_listen == configmap["HEALTH_LISTEN"], name
        else:
            assert ports == {"http": port, "metrics": METRICS_PORT}
        listen = next(e["value"] for e in container["env"] if e["name"] == f"{name.upper()}_LISTEN")
        assert listen == f"0.0.0.0:{port}", name
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = container[kind]
            if name in GRPC_SERVICES:
                assert probe["grpc"]["port"] == HEALTH_PORT, (name, kind)
                assert not probe["grpc"].get("service"), "the overall health ('') is served"
            else:
                assert probe["httpGet"]["path"] == "/healthz", (name, kind)
                assert probe["httpGet"]["port"] in (port, "http"), (name, kind)
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", name
        assert annotations["prometheus.io/port"] == str(METRICS_PORT), name
        assert annotations["prometheus.io/path"] == "/metrics", name


def test_drain_fits_in_the_termination_grace_period_p4(objects, configmap, bundle):
    """P4: SIGTERM drains; preStop + <NAME>_DRAIN_SECONDS end before the kubelet's SIGKILL,
    and the liveness probe cannot kill a pod in the middle of its drain."""
    from agentworks_gateway.config import Config as GatewayConfig

    for name in SERVICES:
        deployment = objects[("Deployment", name)]
        container = _container(deployment)
        env = _env(deployment, configmap, bundle)
        if name == "gateway":
            drain = GatewayConfig.from_env(env).service.drain_seconds
        else:
            drain = _service_config(name, env).service.drain_seconds
        pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
        assert pre_stop[0] == "sleep", name
        grace = _pod(deployment)["terminationGracePeriodSeconds"]
        assert grace >= int(pre_stop[1]) + drain + 5, f"{name}: grace {grace}s is too short"
        liveness = container["livenessProbe"]
        assert liveness["periodSeconds"] * (liveness["failureThreshold"] - 1) > drain, name
    # A gateway relays long-poll reads of up to 25 s (C7): its drain must outlast them.
    gateway_env = _env(objects[("Deployment", "gateway")], configmap, bundle)
    assert GatewayConfig.from_env(gateway_env).service.drain_seconds >= 25


def test_referenced_configmap_and_secret_keys_exist_p5(objects, configmap, secret_template):
    """P5: every configMapKeyRef names a key of agentworks-config; every required
    secretKeyRef a key of the Secret template (optional ones are documented there)."""
    template_keys = set(secret_template["stringData"])
    template_text = SECRET_TEMPLATE.read_text()
    assert secret_template["metadata"]["name"] == SECRET
    assert secret_template["metadata"]["namespace"] == NAMESPACE
    database_urls = {f"{name.upper()}_DATABASE_URL" for name in SERVICES}
    assert {"SCHEDULER_WEBHOOK_KEY", *database_urls} <= template_keys
    for name, workload in _workloads(objects).items():
        container = _container(workload)
        names = [e["name"] for e in container["env"]]
        assert len(names) == len(set(names)), f"{name}: duplicate env entries"
        assert "envFrom" not in container, f"{name}: reference keys one by one"
        for var in container["env"]:
            source = var.get("valueFrom")
            if source is None:
                continue
            if "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                assert ref["name"] == CONFIGMAP and ref["key"] in configmap, (name, ref)
                continue
            ref = source["secretKeyRef"]
            if ref["name"] == ADMIN_SECRET:
                assert name in NO_GRPC, (name, ref)
                assert f"--from-literal={ref['key']}=" in template_text, ref
                continue
            assert ref["name"] == SECRET, (name, ref)
            if ref.get("optional"):
                assert f"# {ref['key']}:" in template_text, f"{ref['key']} is not documented"
            else:
                # Required, or (the bootstrap job's token) documented and left commented
                # out, so that no placeholder can ever become a valid operator token.
                documented = f"# {ref['key']}:" in template_text
                assert ref["key"] in template_keys or documented, (name, ref)


def _service_config(name: str, env: dict[str, str]) -> Any:
    if name == "messaging":
        from agentworks_messaging.config import Config as MessagingConfig

        return MessagingConfig.from_env(env)
    if name == "functions":
        from agentworks_functions.config import Config as FunctionsConfig

        return FunctionsConfig.from_env(env)
    from agentworks_scheduler.config import Config as SchedulerConfig

    return SchedulerConfig.from_env(env)


def _address(value: str) -> tuple[str, str, int]:
    """`dns:///<service>.<namespace>.svc:<port>` as (service, namespace, port)."""
    match = re.fullmatch(r"(?:dns:///)?([a-z0-9-]+)\.([a-z0-9-]+)\.svc:(\d+)", value)
    assert match, f"{value!r} is not a Service address"
    return match[1], match[2], int(match[3])


def test_each_process_reads_and_accepts_its_environment_p3_p5(objects, configmap, bundle):
    """P3/P5: the env of each container builds its real config: listen and metrics
    addresses, database URL, internal key, pool size, peers (gRPC Service DNS names);
    and it sets no variable of the process's own prefix that no setting reads."""
    from agentworks.runtime.config import RuntimeConfig
    from agentworks_dev.up import parse_args
    from agentworks_gateway.config import Config as GatewayConfig

    for key in ("MESSAGING_ADDRESS", "FUNCTIONS_ADDRESS", "SCHEDULER_ADDRESS"):
        service, namespace, port = _address(configmap[key])
        assert namespace == NAMESPACE and SERVICES[service] == port, key
        assert ("Service", service) in objects, key
    messaging = configmap["MESSAGING_ADDRESS"]
    for name, port in GRPC_SERVICES.items():
        env = _env(objects[("Deployment", name)], configmap, bundle)
        config = _service_config(name, env)
        service = config.service
        assert service.listen == f"0.0.0.0:{port}", name
        assert service.metrics_listen == configmap["METRICS_LISTEN"], name
        assert service.database_url == FAKE_SECRETS[f"{name.upper()}_DATABASE_URL"], name
        assert service.signing_key is not None and service.signing_key.signer == service.signer
        assert service.trusted_keys is not None, name
        assert service.log_json is True, name
        assert 1 <= service.pool_size <= 10, name
        assert service.env is not None and service.env.unknown() == [], name
        if name != "messaging":
            assert config.messaging_address == messaging, name
    env = _env(objects[("Deployment", "gateway")], configmap, bundle)
    gateway = GatewayConfig.from_env(env)
    assert gateway.signing_key is not None and gateway.signing_key.signer == "gateway"
    assert gateway.host_port == ("0.0.0.0", 8080)
    assert gateway.metrics_listen == configmap["METRICS_LISTEN"]
    assert (gateway.messaging_address, gateway.functions_address, gateway.scheduler_address) == (
        configmap["MESSAGING_ADDRESS"],
        configmap["FUNCTIONS_ADDRESS"],
        configmap["SCHEDULER_ADDRESS"],
    )
    assert gateway.service.env is not None and gateway.service.env.unknown() == []
    assert "gateway.agentworks.svc:*" in gateway.allowed_hosts
    assert "*" not in gateway.allowed_hosts, "DNS-rebinding protection stays on"
    runtime_env = _env(objects[("Deployment", "demo-runtime")], configmap, bundle)
    runtime = RuntimeConfig.from_env(runtime_env)
    assert runtime.signing_key is None and runtime.credential == CREDENTIAL
    assert runtime.messaging_address == messaging
    assert runtime.unknown_settings == ()
    assert runtime.health_file.startswith("/tmp/"), "the root filesystem is read-only"
    job = _container(objects[("Job", "agentworks-bootstrap")])
    job_env = _env(objects[("Job", "agentworks-bootstrap")], configmap, bundle)
    options = parse_args(job["command"][2:], job_env)
    assert options.bootstrap_only
    assert job_env["GATEWAY_DATABASE_URL"] == FAKE_SECRETS["GATEWAY_DATABASE_URL"]
    assert job_env["AGENTWORKS_MESSAGING_ADDRESS"] == messaging
    assert job_env["AGENTWORKS_DEV_TOKEN"].startswith("aw_")


def test_each_pod_mounts_its_own_signers_key_and_no_other_t1(objects):
    """T1 T2: every workload but the runtimes mounts one Secret, `agentworks-signing-<its
    signer>` (a service its own, the gateway and the bootstrap job the gateway's),
    read-only and readable by its group only, where AGENTWORKS_SIGNING_KEY points, and
    the trusted-keys ConfigMap where AGENTWORKS_TRUSTED_KEYS points; no process gets a
    shared signing secret from agentworks-secrets. The demo runtimes mount no key: their
    runtime credential's Secret (0440) where AGENTWORKS_RUNTIME_CREDENTIAL_FILE points,
    with the gateway's URL to exchange it at."""
    workloads = _grpc_workloads(objects)
    assert set(workloads) == {*SIGNERS, *RUNTIMES}
    for name in RUNTIMES:
        workload = workloads.pop(name)
        volumes = _pod(workload)["volumes"]
        assert not [v for v in volumes if "agentworks-signing-" in str(v)], name
        assert not [v for v in volumes if v.get("configMap", {}).get("name") == TRUSTED_KEYS]
        (volume,) = [
            v for v in volumes if v.get("secret", {}).get("secretName") == CREDENTIAL_SECRET
        ]
        assert volume["secret"]["defaultMode"] == 0o440, name
        (mount,) = [m for m in _container(workload)["volumeMounts"] if m["name"] == volume["name"]]
        env = {e["name"]: e.get("value") for e in _container(workload)["env"]}
        assert mount["readOnly"] is True
        assert env["AGENTWORKS_RUNTIME_CREDENTIAL_FILE"].startswith(mount["mountPath"] + "/")
        assert env["AGENTWORKS_GATEWAY_URL"] == "http://gateway.agentworks.svc:8080"
        assert not any("SIGNING_KEY" in n or "TRUSTED_KEYS" in n for n in env), name
    for name, workload in workloads.items():
        secret, signing_at, trusted_at = _signing_volume(workload)
        expected = SIGNERS[name].removeprefix("service:")
        assert secret == f"agentworks-signing-{expected}", name
        (volume,) = [
            v for v in _pod(workload)["volumes"] if v.get("secret", {}).get("secretName") == secret
        ]
        assert volume["secret"]["defaultMode"] == 0o440, name
        env = {e["name"]: e for e in _container(workload)["env"]}
        assert env["AGENTWORKS_SIGNING_KEY"]["value"] == f"{signing_at}/signing-key.pem", name
        assert env["AGENTWORKS_TRUSTED_KEYS"]["value"] == f"{trusted_at}/trusted-keys.json"
        assert not any("INTERNAL_KEY" in n for n in env), name


def test_env_names_are_ones_the_code_reads_p5(objects):
    """P5: no misspelt variable: each env name a container sets appears in the code that
    reads it (`<PREFIX>_<NAME>` through `Env(prefix)`, or the whole name)."""
    core = "".join(
        (ROOT / f).read_text()
        for f in (
            "libs/agentworks-core/src/agentworks/core/settings.py",
            "libs/agentworks-core/src/agentworks/core/keys.py",
            "libs/agentworks-core/src/agentworks/core/tls.py",
            "libs/agentworks-core/src/agentworks/core/metrics.py",
            "libs/agentworks-server/src/agentworks/server/config.py",
        )
    )
    gateway_src = ROOT / "services/gateway/src/agentworks_gateway"
    readers = {name: (name.upper(), [core, _config_source(name)]) for name in GRPC_SERVICES}
    readers["gateway"] = ("GATEWAY", [core, (gateway_src / "config.py").read_text()])
    runtime = (ROOT / "libs/agentworks-runtime/src/agentworks/runtime/config.py").read_text()
    readers["demo-runtime"] = ("AGENTWORKS", [core, runtime])
    readers["demo-functions"] = ("AGENTWORKS", [core, runtime])
    dev = "".join(
        p.read_text() for p in (ROOT / "tools/agentworks-dev/src/agentworks_dev").glob("*.py")
    )
    readers["agentworks-bootstrap"] = ("AGENTWORKS", [core, dev])
    readers["agentworks-database-roles"] = ("AGENTWORKS", [dev])
    for name, workload in _workloads(objects).items():
        prefix, sources = readers[name]
        for var in _container(workload)["env"]:
            env_name = var["name"]
            suffix = env_name.removeprefix(prefix + "_")
            read = any(f'"{env_name}"' in s or f'"{suffix}"' in s for s in sources)
            assert read, f"{name}: nothing reads {env_name}"


def _config_source(name: str) -> str:
    return (ROOT / f"services/{name}/src/agentworks_{name}/config.py").read_text()


def test_images_and_commands_are_the_declared_entry_points_p5(objects, kustomizations, scripts):
    """P5: one image for every process (as in compose.yaml), tagged alike in every
    kustomization; each command is a console script from [project.scripts], and each
    service runs its own `agentworks-<name>` = `agentworks_<name>.app:main`."""
    blocks = [k["images"] for k in kustomizations.values()]
    assert all(b == blocks[0] for b in blocks), "the images blocks differ"
    (image,) = kustomizations[K8S]["images"]
    assert image["name"] == IMAGE
    for name, workload in _workloads(objects).items():
        container = _container(workload)
        assert container["image"] == f"{IMAGE}:{image['newTag']}", name
        assert container["command"][0] in scripts, f"{name}: {container['command'][0]}"
    for name in SERVICES:
        command = _container(objects[("Deployment", name)])["command"]
        assert command == [f"agentworks-{name}"], name
        assert scripts[command[0]] == f"agentworks_{name}.app:main", name
    runtime = _container(objects[("Deployment", "demo-runtime")])["command"]
    assert runtime == ["agentworks-runtime", "demo"]
    bootstrap = _container(objects[("Job", "agentworks-bootstrap")])["command"]
    assert bootstrap[:3] == ["agentworks", "up", "--bootstrap-only"]
    assert scripts["agentworks"] == "agentworks_cli.main:main"
    demo = objects[("Deployment", "demo-runtime")]
    assert demo["metadata"]["labels"]["app.kubernetes.io/component"] == "demo"


def test_pods_run_restricted_with_bounded_resources_p5(objects):
    """P5: non-root (the image's uid), read-only root filesystem with a writable /tmp, no
    privilege escalation or capabilities, no API token, no service-link env; requests
    and limits set, requests within limits."""
    found = re.search(r"--uid (\d+)", (ROOT / "Dockerfile").read_text())
    assert found is not None
    uid = int(found[1])
    namespace = objects[("Namespace", NAMESPACE)]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for name, workload in _workloads(objects).items():
        pod = _pod(workload)
        assert pod["automountServiceAccountToken"] is False, name
        assert pod["enableServiceLinks"] is False, name
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True and security["runAsUser"] == uid, name
        assert security["seccompProfile"]["type"] == "RuntimeDefault", name
        container = _container(workload)
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True, name
        assert context["allowPrivilegeEscalation"] is False, name
        assert context["capabilities"]["drop"] == ["ALL"], name
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]], name
        resources = container["resources"]
        for resource in ("cpu", "memory"):
            cpu = resource == "cpu"
            request = _quantity(resources["requests"][resource], cpu=cpu)
            limit = _quantity(resources["limits"][resource], cpu=cpu)
            assert 0 < request <= limit, (name, resource)


def test_manifests_match_the_kubernetes_schema_p5(files, secret_template):
    """P5: every Kubernetes object validates (strictly: no unknown fields) against the
    Kubernetes JSON schema of the oldest supported (1.27) and the newest known version
    (cert-manager's objects have none there: the TLS test checks them)."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    docs = [doc for docs in files.values() for doc in docs if doc["apiVersion"] != CERT_MANAGER]
    docs.append(secret_template)
    for version in SCHEMA_VERSIONS:
        if version == "latest":
            version = kubernetes_validate.latest_version()
        for doc in docs:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = ".".join(str(p) for p in exc.path)
                pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} ({version}) {where}: {exc}")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomizations_render_p5(files):
    """P5: `kubectl kustomize` renders each kustomization to exactly the listed objects."""
    for directory in KUSTOMIZATIONS:
        rendered = subprocess.run(
            ["kubectl", "kustomize", str(directory)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert rendered.returncode == 0, rendered.stderr
        names = {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(rendered.stdout)}
        listed = {
            (doc["kind"], doc["metadata"]["name"])
            for path, docs in files.items()
            if path.parent == directory.resolve()
            for doc in docs
        }
        assert names == listed, directory


def _tls_secret(workload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The TLS Secret mounted read-only in the workload's container, and its volume (the
    other read-only mounts are the signer's key Secret and the trusted-keys ConfigMap, or
    a runtime's credential Secret)."""
    container = _container(workload)
    volumes = {v["name"]: v for v in _pod(workload)["volumes"]}
    (volume,) = [
        volumes[m["name"]]
        for m in container["volumeMounts"]
        if m.get("readOnly")
        and "secret" in volumes[m["name"]]
        and not volumes[m["name"]]["secret"]["secretName"].startswith(SIGNING_SECRET_PREFIX)
        and volumes[m["name"]]["secret"]["secretName"] != CREDENTIAL_SECRET
    ]
    return volume["secret"]["secretName"], volume


def test_every_grpc_hop_runs_mutual_tls_with_a_certificate_per_process_T5(
    objects, configmap, bundle
):
    """T5: cert-manager signs the suite's CA (self-signed Issuer -> CA Certificate -> CA
    Issuer), which issues one certificate per process into a Secret that process alone
    mounts read-only (not world-readable); services' certificates serve and name their
    Service's DNS name, every certificate is a client one; and each environment builds a
    config that serves and calls with mutual TLS from those files."""
    from agentworks.core.settings import Env
    from agentworks.core.tls import Tls
    from agentworks.runtime.config import RuntimeConfig
    from agentworks_gateway.config import Config as GatewayConfig

    assert objects[("Issuer", "agentworks-selfsigned")]["spec"] == {"selfSigned": {}}
    ca = objects[("Certificate", CA_ISSUER)]["spec"]
    assert ca["isCA"] is True and ca["issuerRef"]["name"] == "agentworks-selfsigned"
    assert objects[("Issuer", CA_ISSUER)]["spec"] == {"ca": {"secretName": ca["secretName"]}}
    certificates = {
        o["spec"]["secretName"]: o["spec"]
        for (kind, name), o in objects.items()
        if kind == "Certificate" and name != CA_ISSUER
    }
    for spec in certificates.values():
        assert spec["issuerRef"] == {
            "name": CA_ISSUER,
            "kind": "Issuer",
            "group": "cert-manager.io",
        }
        assert "client auth" in spec["usages"] and spec["privateKey"]["rotationPolicy"] == "Always"
    mounted: dict[str, str] = {}
    for name, workload in _grpc_workloads(objects).items():
        secret, volume = _tls_secret(workload)
        assert secret in certificates and secret != ca["secretName"], name
        assert secret not in mounted, f"{name} shares {secret} with {mounted.get(secret)}"
        mounted[secret] = name
        assert volume["secret"]["defaultMode"] & 0o007 == 0, f"{name}: world-readable key"
    assert set(mounted) == set(certificates), "a certificate no process uses"
    for name in GRPC_SERVICES:
        workload = objects[("Deployment", name)]
        spec = certificates[_tls_secret(workload)[0]]
        host, _, _ = configmap[f"{name.upper()}_ADDRESS"].removeprefix("dns:///").rpartition(":")
        assert host in spec["dnsNames"] and "server auth" in spec["usages"], name
        tls = _service_config(name, _env(workload, configmap, bundle)).service.tls
        assert tls.describe(server=True) == tls.describe(server=False) == "mutual TLS", name
    gateway_env = _env(objects[("Deployment", "gateway")], configmap, bundle)
    assert GatewayConfig.from_env(gateway_env).service.tls.describe(server=False) == "mutual TLS"
    for name in ("demo-runtime", "demo-functions"):
        env = _env(objects[("Deployment", name)], configmap, bundle)
        assert RuntimeConfig.from_env(env).tls.describe(server=False) == "mutual TLS"
    job_env = Env("AGENTWORKS", _env(objects[("Job", "agentworks-bootstrap")], configmap, bundle))
    assert Tls.from_env(job_env, server=False).describe(server=False) == "mutual TLS"
