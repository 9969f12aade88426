"""The deployment files stay in step with the code: commands that exist, settings that exist,
probes on paths the services serve. (No Docker or Kubernetes here to run them.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer.main
import yaml
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from sqlalchemy.engine import make_url

from services.cli import app
from services.health import Health, operations_routes
from shared.bus import connect
from shared.settings import Settings

from .conftest import missing_program

DEPLOY = Path(__file__).parent.parent / "deploy"
COMMANDS = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
SETTINGS = {f"CARAVEL_{name.upper()}" for name in Settings.model_fields}


KUBERNETES = DEPLOY / "kubernetes"
OVERLAYS = ("single", "cluster", "cluster-3x2")
KUSTOMIZE_KEYS = {"apiVersion", "kind", "resources", "patches"}


def _yaml_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    """A strategic merge of maps (what our patches use: a ConfigMap's data)."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _kustomize(directory: Path) -> list[dict[str, Any]]:
    """What ``kubectl kustomize directory`` renders, for the features our kustomizations use
    (resources, map patches); one using more is refused here rather than rendered wrong."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert set(kustomization) <= KUSTOMIZE_KEYS, f"{directory}: {set(kustomization)}"
    docs: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = directory / entry
        docs += _kustomize(path) if path.is_dir() else _yaml_documents(path)
    for patch in kustomization.get("patches", []):
        for change in _yaml_documents(directory / patch["path"]):
            name = (change["kind"], change["metadata"]["name"])
            [target] = [d for d in docs if (d["kind"], d["metadata"]["name"]) == name]
            _merge(target, change)
    return docs


def _overlay(name: str) -> list[dict[str, Any]]:
    return _kustomize(KUBERNETES / "overlays" / name)


def _by_name(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _documents() -> list[dict[str, Any]]:
    compose = [DEPLOY / "compose.yaml", DEPLOY / "compose.cluster.yaml"]
    return [d for p in compose for d in _yaml_documents(p)] + [
        d for overlay in OVERLAYS for d in _overlay(overlay)
    ]


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
    assert conf["cluster-require-full-coverage"] == "no"  # a shard away stops only its own
    assert conf["repl-diskless-sync-delay"] == "0"  # a node back syncs at once (issue 25)


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
    assert "--cluster-replicas 1" in create and all(f"{n}:6379" in create for n in nodes)
    assert "getent" not in create  # made by the nodes' names, not their IPs (issue 25)
    for name in nodes:  # each announces its name, and clients are sent names
        command = services[name]["command"]
        assert command[command.index("--cluster-announce-hostname") + 1] == name
    conf = _conf((DEPLOY / "redis-cluster.conf").read_text())
    assert conf["cluster-preferred-endpoint-type"] == "hostname"
    for name, service in services.items():
        if service.get("image") == "caravel":
            env = service["environment"]
            assert _cluster_nodes(env["CARAVEL_REDIS_URL"]) == [f"{n}:6379" for n in nodes]
            assert int(env["CARAVEL_DURABILITY_REPLICAS"]) >= 1
            assert "redis-cluster-create" in service["depends_on"], name
    assert services["engine"]["deploy"]["replicas"] > 1


def test_the_kubernetes_cluster_is_a_statefulset_of_six_made_one_by_a_job() -> None:
    """Issue 25: the nodes were made one cluster by their pod IPs, which a full restart
    changes; they are made one, announced and reached by their stable names."""
    docs = _by_name(_overlay("cluster"))
    nodes = docs["StatefulSet", "redis-cluster"]
    service = docs["Service", nodes["spec"]["serviceName"]]
    assert nodes["spec"]["replicas"] == 6 and service["spec"]["clusterIP"] == "None"
    config = docs["ConfigMap", "redis-cluster"]["data"]
    conf = _conf(config["redis.conf"])
    _is_cluster_node_conf(conf)
    assert conf["cluster-preferred-endpoint-type"] == "hostname"
    start = " ".join(nodes["spec"]["template"]["spec"]["containers"][0]["args"])
    assert '--cluster-announce-hostname "$(hostname).redis-cluster"' in start
    assert start.index("fix-nodes.sh /data/nodes.conf") < start.index("exec redis-server")
    assert conf["cluster-config-file"] == "/data/nodes.conf" and "fix-nodes.sh" in config
    create = " ".join(
        docs["Job", "redis-cluster-create"]["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    hosts = [f"redis-cluster-{i}.redis-cluster:6379" for i in range(6)]
    assert "--cluster-replicas 1" in create and all(h in create for h in hosts)
    assert "getent" not in create  # no IPs: the names
    assert _cluster_nodes(f"redis+cluster://{','.join(hosts)}") == hosts


def test_the_kubernetes_cluster_with_two_replicas_a_master_is_nine_nodes_made_3x2() -> None:
    """Issue 25: with ``min-replicas-to-write 1`` a promoted replica with no replica of its
    own refuses writes until the killed node is back and fully synced; with two replicas a
    master it keeps one. The cluster overlay's nodes and settings, nine of them, 3 x 2."""
    three, nine = _by_name(_overlay("cluster")), _by_name(_overlay("cluster-3x2"))
    assert nine["StatefulSet", "redis-cluster"]["spec"]["replicas"] == 9
    create = nine["Job", "redis-cluster-create"]["spec"]["template"]["spec"]["containers"][0]
    args = " ".join(create["args"])
    hosts = [f"redis-cluster-{i}.redis-cluster:6379" for i in range(9)]
    assert "--cluster-replicas 2" in args and all(h in args for h in hosts)
    assert "for i in 0 1 2 3 4 5 6 7 8;" in args  # every node answers before it is made
    assert set(nine) == set(three)
    for key in set(three) - {("StatefulSet", "redis-cluster"), ("Job", "redis-cluster-create")}:
        assert nine[key] == three[key], key  # the same settings, services and budgets


def test_the_overlays_point_the_services_at_their_redis() -> None:
    """Issue 25: config.yaml named one Redis and no durability even with the cluster."""
    single = _by_name(_overlay("single"))
    settings = single["ConfigMap", "caravel"]["data"]
    url = make_url(settings["CARAVEL_REDIS_URL"])
    assert url.drivername == "redis" and ("Service", url.host) in single
    assert ("StatefulSet", url.host) in single and ("StatefulSet", "redis-cluster") not in single
    assert "CARAVEL_DURABILITY_REPLICAS" not in settings
    conf = _conf(single["ConfigMap", "redis"]["data"]["redis.conf"])
    assert conf["appendonly"] == "yes" and conf["maxmemory-policy"] == "noeviction"

    cluster = _by_name(_overlay("cluster"))
    settings = cluster["ConfigMap", "caravel"]["data"]
    hosts = [f"redis-cluster-{i}.redis-cluster:6379" for i in range(6)]
    assert _cluster_nodes(settings["CARAVEL_REDIS_URL"]) == hosts
    assert int(settings["CARAVEL_DURABILITY_REPLICAS"]) >= 1
    assert (
        settings["CARAVEL_DATABASE_URL"]
        == single["ConfigMap", "caravel"]["data"]["CARAVEL_DATABASE_URL"]
    )  # the patch changed the Redis only
    conf = _conf(cluster["ConfigMap", "redis-cluster"]["data"]["redis.conf"])
    assert int(conf["min-replicas-to-write"]) >= int(settings["CARAVEL_DURABILITY_REPLICAS"])
    assert ("StatefulSet", "redis") not in cluster


def test_the_overlays_render_as_kubectl_kustomize_does() -> None:
    """The test's renderer stands in for ``kubectl kustomize`` where there is no kubectl;
    where there is one, both give the same manifests."""
    kubectl = shutil.which("kubectl") or missing_program("kubernetes-client", "kubectl")
    for overlay in OVERLAYS:
        out = subprocess.run(
            [kubectl, "kustomize", str(KUBERNETES / "overlays" / overlay)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rendered = _by_name([d for d in yaml.safe_load_all(out) if d])
        assert rendered == _by_name(_overlay(overlay)), overlay


def test_postgres_takes_its_password_from_a_secret_and_no_config_holds_one() -> None:
    for overlay in OVERLAYS:
        docs = _by_name(_overlay(overlay))
        assert not [name for kind, name in docs if kind == "Secret"]  # made by kubectl, not kept
        for (kind, name), doc in docs.items():
            for value in (doc.get("data") or {}).values() if kind == "ConfigMap" else []:
                if "://" in value:  # a URL: no password in it
                    assert urlsplit(value).password is None, (name, value)
        url = make_url(docs["ConfigMap", "caravel"]["data"]["CARAVEL_DATABASE_URL"])
        server = docs["StatefulSet", "postgres"]["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in server["env"]}
        secret = {"secretKeyRef": {"name": "postgres", "key": "password"}}
        assert env["POSTGRES_PASSWORD"]["valueFrom"] == secret
        assert (url.username, url.database) == (
            env["POSTGRES_USER"]["value"],
            env["POSTGRES_DB"]["value"],
        )
        assert ("Service", url.host) in docs and url.port == 5432
        for _, container in _containers_of(docs.values()):
            given = {e["name"]: e for e in container["env"]}
            assert given["PGPASSWORD"]["valueFrom"] == secret, container["name"]


def _containers_of(docs: Any) -> list[tuple[list[str], dict[str, Any]]]:
    return [
        (c["args"], c)
        for d in docs
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    ]


def _kubernetes_documents() -> list[dict[str, Any]]:
    return [d for overlay in OVERLAYS for d in _overlay(overlay)]


def test_every_kubernetes_manifest_is_valid_for_the_api() -> None:
    """Strict: a misspelt or misplaced field is refused, as ``kubectl apply`` would."""
    import kubernetes_validate

    for doc in _kubernetes_documents():
        kubernetes_validate.validate(doc, "1.30.0", strict=True)  # raises on any fault


def _check_compose(*paths: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema with the Compose specification's schema it ships (no network)."""
    command = [sys.executable, "-m", "check_jsonschema"]
    command += ["--builtin-schema", "vendor.compose-spec", *map(str, paths)]
    return subprocess.run(command, capture_output=True, text=True)


def test_the_compose_files_are_valid_compose(tmp_path: Path) -> None:
    checked = _check_compose(DEPLOY / "compose.yaml", DEPLOY / "compose.cluster.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    misspelt = tmp_path / "compose.yaml"
    misspelt.write_text((DEPLOY / "compose.yaml").read_text().replace("command:", "comand:", 1))
    refused = _check_compose(misspelt)
    assert refused.returncode == 1 and "'comand' was unexpected" in refused.stdout


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


REDIS_7 = Path("/usr/bin/redis-server")  # Debian's (the venv's embedded one is 6.2)
REDIS_CLI_7 = str(REDIS_7.with_name("redis-cli"))  # 7 resolves names for CLUSTER MEET


def _in_hosts(hosts: Path, command: list[str]) -> list[str]:
    """``command`` run where the names resolve by ``hosts``: a mount namespace of its own
    with the file over /etc/hosts, as a pod's DNS names resolve to its IP of the moment."""
    script = f'mount --bind {hosts} /etc/hosts && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, "sh", *command]


def _start_nodes(folder: Path, addresses: list[str]) -> list[subprocess.Popen[bytes]]:
    """Six cluster nodes with the manifest's redis.conf, node i on ``addresses[i]``,
    announcing the name ``node-i``, keeping its nodes.conf in ``folder/node-i``."""
    nodes = []
    for i, address in enumerate(addresses):
        data = folder / f"node-{i}"
        data.mkdir(exist_ok=True)
        command = [str(REDIS_7), str(folder / "redis.conf"), "--dir", str(data)]
        command += ["--bind", address, "--bind-source-addr", address, "--port", "7379"]
        command += ["--cluster-announce-hostname", f"node-{i}", "--appendonly", "no"]
        nodes.append(subprocess.Popen([*command, "--save", ""], stdout=subprocess.DEVNULL))
    for address in addresses:
        _until(lambda a=address: _redis_cli(a, "ping") == "PONG", 10)
    return nodes


def _redis_cli(address: str, *words: str) -> str:
    run = subprocess.run([REDIS_CLI_7, "-h", address, "-p", "7379", *words], capture_output=True)
    return run.stdout.decode().strip()


def _until(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _one_cluster_on(addresses: list[str]) -> bool:
    """Every node sees all six connected at ``addresses`` and the cluster ok."""
    for address in addresses:
        if "cluster_state:ok" not in _redis_cli(address, "cluster", "info"):
            return False
        lines = _redis_cli(address, "cluster", "nodes").splitlines()
        seen = sorted(line.split()[1].split(":")[0] for line in lines)
        if seen != sorted(addresses) or any(" connected" not in line for line in lines):
            return False
    return True


def _stop(nodes: list[subprocess.Popen[bytes]]) -> None:
    for node in nodes:
        node.terminate()
    for node in nodes:
        node.wait(10)


def test_the_redis_cluster_forms_again_after_a_full_restart_on_new_ips(tmp_path: Path) -> None:
    """Issue 25: the nodes recorded each other by IP, so six pods restarted together on new
    IPs found no one. With the manifest's redis.conf, its hostname-based bootstrap and its
    fix-nodes.sh run before each node starts, they form the same cluster again. (Without
    fix-nodes.sh, every node stays alone, every peer `disconnected` at its old IP.)"""
    if not REDIS_7.exists() or not Path(REDIS_CLI_7).exists():
        missing_program("redis-server", "Debian's redis-server 7 and redis-cli")
    if not shutil.which("unshare"):
        missing_program("util-linux", "unshare")
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("no mount namespaces here (not root?)")
    config = _by_name(_overlay("cluster"))["ConfigMap", "redis-cluster"]["data"]
    conf = config["redis.conf"].replace("/data/nodes.conf", "nodes.conf")
    (tmp_path / "redis.conf").write_text(conf)
    (tmp_path / "fix-nodes.sh").write_text(config["fix-nodes.sh"])
    hosts = tmp_path / "hosts"
    octet = 20 + os.getpid() % 200  # apart from another run of this test
    before = [f"127.{octet}.1.{i + 1}" for i in range(6)]
    after = [f"127.{octet}.2.{i + 1}" for i in range(6)]

    hosts.write_text("".join(f"{a} node-{i}\n" for i, a in enumerate(before)))
    nodes = _start_nodes(tmp_path, before)
    try:
        create = [REDIS_CLI_7, "--cluster", "create", *[f"node-{i}:7379" for i in range(6)]]
        made = subprocess.run(
            _in_hosts(hosts, [*create, "--cluster-replicas", "1", "--cluster-yes"]),
            capture_output=True,
            timeout=60,
        )
        assert made.returncode == 0, made.stdout.decode()[-2000:]
        assert _until(lambda: _one_cluster_on(before), 30)
    finally:
        _stop(nodes)

    hosts.write_text("".join(f"{a} node-{i}\n" for i, a in enumerate(after)))
    for i in range(6):
        nodes_conf = tmp_path / f"node-{i}" / "nodes.conf"
        assert f"{before[i]}:7379@17379,node-{i} " in nodes_conf.read_text()
        fix = _in_hosts(hosts, ["sh", str(tmp_path / "fix-nodes.sh"), str(nodes_conf)])
        subprocess.run(fix, check=True, capture_output=True, timeout=60)
        assert f"{after[i]}:7379@17379,node-{i} " in nodes_conf.read_text()
    nodes = _start_nodes(tmp_path, after)
    try:
        assert _until(lambda: _one_cluster_on(after), 30)
        replicas = [_redis_cli(a, "role").split()[0] for a in after]
        assert sorted(replicas) == ["master"] * 3 + ["slave"] * 3
    finally:
        _stop(nodes)
