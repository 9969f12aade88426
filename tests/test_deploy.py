"""The deployment files stay in step with the code: commands that exist, settings that exist,
probes on paths the services serve. (No Docker or Kubernetes here to run them.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer.main
import yaml
from redis.asyncio import Redis

from services.cli import app
from services.health import Health, operations_routes
from shared.settings import Settings

DEPLOY = Path(__file__).parent.parent / "deploy"
COMMANDS = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
SETTINGS = {f"CARAVEL_{name.upper()}" for name in Settings.model_fields}


def _documents() -> list[dict[str, Any]]:
    paths = [DEPLOY / "compose.yaml", *sorted((DEPLOY / "kubernetes").glob("*.yaml"))]
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
        if doc.get("kind") in ("ConfigMap", "Secret"):
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
