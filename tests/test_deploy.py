"""The deployment files stay in step with the code: commands that exist, settings that exist,
probes on paths the services serve. (No Docker or Kubernetes here to run them.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer.main
import yaml
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from services.cli import app
from services.health import Health, operations_routes
from shared.bus import connect
from shared.settings import Settings

DEPLOY = Path(__file__).parent.parent / "deploy"
COMMANDS = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
SETTINGS = {f"CARAVEL_{name.upper()}" for name in Settings.model_fields}


def _documents() -> list[dict[str, Any]]:
    paths = [
        DEPLOY / "compose.yaml",
        DEPLOY / "compose.cluster.yaml",
        *sorted((DEPLOY / "kubernetes").glob("*.yaml")),
    ]
    return [doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc]


def _containers() -> list[tuple[list[str], dict[str, Any]]]:
    """(arguments of `caravel`, container spec) for every Caravel container."""
    found = []
    for doc in _documents():
        for name, service in (doc.get("services") or {}).items():
            if service.get("image") == "caravel":
                found.append((service["command"], {"name": name, **service}))
        if doc.get("kind") == "Deployment":
            for container in doc["spec"]["template"]["spec"]["containers"]:
                found.append((container["args"], container))
    return found


def test_every_container_runs_a_caravel_command() -> None:
    containers = _containers()
    assert {"engine", "lobby", "ai", "scoring"} <= {args[0] for args, _ in containers}
    for args, _ in containers:
        assert args[0] in COMMANDS, f"`caravel {args[0]}` is not a command"


def test_every_variable_set_is_a_setting() -> None:
    variables: set[str] = set()
    for doc in _documents():
        for service in (doc.get("services") or {}).values():
            if service.get("image") == "caravel":
                variables |= set(service.get("environment") or {})
        if doc.get("kind") in ("ConfigMap", "Secret") and doc["metadata"]["name"] == "caravel":
            variables |= set(doc.get("data") or {}) | set(doc.get("stringData") or {})
    assert variables, "no settings found"
    assert variables <= SETTINGS, f"not settings: {sorted(variables - SETTINGS)}"
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert (
        {"CARAVEL_DATA_DIR", "CARAVEL_HTTP_HOST"}
        <= {word.split("=")[0] for word in dockerfile.split() if word.startswith("CARAVEL_")}
        <= SETTINGS
    )


def test_probes_and_ports_match_the_services() -> None:
    defaults = Settings()
    served = {route.path for route in operations_routes(Health(Redis())).routes}  # type: ignore[attr-defined]
    for args, container in _containers():
        if "livenessProbe" not in container:
            continue
        port = {p["name"]: p["containerPort"] for p in container["ports"]}
        expected = defaults.http_port if args[0] == "lobby" else defaults.metrics_port
        assert list(port.values()) == [expected]
        assert container["livenessProbe"]["httpGet"]["path"] == "/livez" in served
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz" in served


def _conf(text: str) -> dict[str, str]:
    """A redis.conf's settings (the last value of each)."""
    lines = [line.split(None, 1) for line in text.splitlines() if line.strip()]
    return {words[0]: words[1].strip() for words in lines if not words[0].startswith("#")}


def _is_cluster_node_conf(conf: dict[str, str]) -> None:
    assert conf["cluster-enabled"] == "yes" and conf["appendonly"] == "yes"
    assert int(conf["min-replicas-to-write"]) >= 1  # pairs with CARAVEL_DURABILITY_REPLICAS


def _cluster_nodes(url: str) -> list[str]:
    """The nodes a ``redis+cluster://`` URL names, as the services' client reads it."""
    client = connect(url)
    assert isinstance(client, RedisCluster)
    return [f"{node.host}:{node.port}" for node in client.startup_nodes]


def test_the_compose_cluster_is_three_masters_with_a_replica_each() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.cluster.yaml").read_text())
    services = compose["services"]
    nodes = sorted(n for n, s in services.items() if "redis-server" in str(s.get("command")))
    assert len(nodes) == 6
    for name in nodes:
        mounted = services[name]["volumes"][0].split(":")
        assert mounted[1] == services[name]["command"][1]  # the config file it is started with
        _is_cluster_node_conf(_conf((DEPLOY / mounted[0]).read_text()))
    create = " ".join(services["redis-cluster-create"]["command"])
    assert "--cluster-replicas 1" in create and all(n in create for n in nodes)
    for name, service in services.items():
        if service.get("image") == "caravel":
            env = service["environment"]
            assert _cluster_nodes(env["CARAVEL_REDIS_URL"]) == [f"{n}:6379" for n in nodes]
            assert int(env["CARAVEL_DURABILITY_REPLICAS"]) >= 1
            assert "redis-cluster-create" in service["depends_on"], name
    assert services["engine"]["deploy"]["replicas"] > 1


def test_the_kubernetes_cluster_is_a_statefulset_of_six_made_one_by_a_job() -> None:
    docs = {
        (d["kind"], d["metadata"]["name"]): d
        for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "redis-cluster.yaml").read_text())
    }
    nodes = docs["StatefulSet", "redis-cluster"]
    service = docs["Service", nodes["spec"]["serviceName"]]
    assert nodes["spec"]["replicas"] == 6 and service["spec"]["clusterIP"] == "None"
    _is_cluster_node_conf(_conf(docs["ConfigMap", "redis-cluster"]["data"]["redis.conf"]))
    create = " ".join(
        docs["Job", "redis-cluster-create"]["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    assert "--cluster-replicas 1" in create and "for i in 0 1 2 3 4 5;" in create
    hosts = ",".join(f"redis-cluster-{i}.redis-cluster:6379" for i in range(6))
    assert _cluster_nodes(f"redis+cluster://{hosts}") == hosts.split(",")


KUBERNETES = sorted((DEPLOY / "kubernetes").glob("*.yaml"))


def _kubernetes_documents() -> list[dict[str, Any]]:
    return [doc for p in KUBERNETES for doc in yaml.safe_load_all(p.read_text()) if doc]


def test_every_kubernetes_manifest_is_valid_for_the_api() -> None:
    """Strict: a misspelt or misplaced field is refused, as ``kubectl apply`` would."""
    import kubernetes_validate

    for doc in _kubernetes_documents():
        kubernetes_validate.validate(doc, "1.30.0", strict=True)  # raises on any fault


def test_images_are_pinned_and_disruptions_keep_a_shard_and_a_server_up() -> None:
    """Issue 25: ``caravel:latest`` (pulled from a registry, whatever it was then), Redis
    nodes only preferably on separate hosts and no PodDisruptionBudget: a node drained
    could take a master and its replica, or every engine, at once."""
    docs = _kubernetes_documents()
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    budgets = {
        tuple(sorted(d["spec"]["selector"]["matchLabels"].items()))
        for d in docs
        if d["kind"] == "PodDisruptionBudget"
    }
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        for container in pod["containers"]:
            assert not container["image"].endswith(":latest"), container["image"]
            assert ":" in container["image"], container["image"]
        if workload["spec"].get("replicas", 1) > 1:
            labels = tuple(sorted(workload["spec"]["selector"]["matchLabels"].items()))
            assert labels in budgets, f"{workload['metadata']['name']} has no disruption budget"
    redis = next(w for w in workloads if w["metadata"]["name"] == "redis-cluster")
    spread = redis["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert spread.get("requiredDuringSchedulingIgnoredDuringExecution")
