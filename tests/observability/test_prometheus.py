"""The Grafana dashboard against a real Prometheus (Debian's binary, which ``.ci/run``
installs) scraping ``caravel up`` under a short game load: every expression of
``deploy/grafana-dashboard.json``, with Grafana's variables substituted, evaluates without
an error and with at least one series."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from shared.bus import Keys

from ..conftest import system_program
from ..lobby.helpers import bearer, free_port, running_lobby

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana-dashboard.json"
SCRAPE_S = 1
# What Grafana puts for its variables: $__rate_interval is at least four scrape intervals.
GRAFANA = {"$__rate_interval": "10s", "$__interval": "2s", "$__range": "1m"}


def dashboard_expressions() -> list[tuple[str, str]]:
    """(panel title, expression) of every query of the dashboard, variables substituted."""
    found = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            expression = target["expr"]
            for variable, value in GRAFANA.items():
                expression = expression.replace(variable, value)
            assert "$" not in expression, f"a Grafana variable left in {expression}"
            found.append((panel["title"], expression))
    return found


def start_prometheus(target_port: int, where: Path) -> tuple[subprocess.Popen[bytes], int]:
    binary = system_program("prometheus")
    config = where / "prometheus.yml"
    config.write_text(
        "global:\n"
        f"  scrape_interval: {SCRAPE_S}s\n"
        f"  evaluation_interval: {SCRAPE_S}s\n"
        "scrape_configs:\n"
        "  - job_name: caravel\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target_port}']\n"
    )
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={where / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(where / "prometheus.log").open("wb"),
    )
    return process, port


class NotReady(Exception):
    """Prometheus is still starting: no socket yet, or 503 until its storage is open."""


async def query(prometheus: httpx.AsyncClient, expression: str) -> dict[str, Any]:
    try:
        answer = await prometheus.get("/api/v1/query", params={"query": expression})
    except httpx.TransportError as e:
        raise NotReady from e
    if answer.status_code == 503:
        raise NotReady
    return answer.json()  # type: ignore[no-any-return]


async def test_every_dashboard_expression_has_data_on_a_real_prometheus(
    keys: Keys, tmp_path: Path
) -> None:
    """`caravel up` as it starts by default (its embedded Redis, 6.2: no lag in XINFO) under
    load: tables of bots play, a human's table gets moves, a refused move and a retried
    one; Prometheus scrapes it every second. Each dashboard query answers ``success`` with
    a non-empty result (the lag panels too: lag is counted where Redis gives none)."""
    expressions = dashboard_expressions()
    assert len(expressions) >= 15
    database_url = f"sqlite:///{tmp_path / 'lobby.db'}"
    async with running_lobby("", keys, database_url, tmp_path / "data") as client:
        port = int(str(client.base_url).rsplit(":", 1)[1].strip("/"))
        process, prometheus_port = start_prometheus(port, tmp_path)
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{prometheus_port}", timeout=10
            ) as prometheus:
                load = asyncio.create_task(_game_load(client))
                try:
                    missing = await _until_all_answer(prometheus, expressions, timeout_s=45)
                finally:
                    load.cancel()
                    await asyncio.gather(load, return_exceptions=True)
        finally:
            process.terminate()
            process.wait(timeout=20)
    assert missing == {}, missing


async def _until_all_answer(
    prometheus: httpx.AsyncClient, expressions: list[tuple[str, str]], timeout_s: float
) -> dict[str, Any]:
    """Evaluate every expression until each has a series (an error fails at once); what is
    still empty at ``timeout_s``, by panel and expression."""
    pending = dict.fromkeys(expressions, "not evaluated")
    give_up = time.monotonic() + timeout_s
    while pending and time.monotonic() < give_up:
        for title, expression in list(pending):
            try:
                answer = await query(prometheus, expression)
            except NotReady:
                break
            assert answer["status"] == "success", (title, expression, answer)
            if answer["data"]["result"]:
                del pending[title, expression]
            else:
                pending[title, expression] = "empty"
        await asyncio.sleep(1)
    return {f"{title}: {expression}": why for (title, expression), why in pending.items()}


async def _game_load(client: httpx.AsyncClient) -> None:
    """Games going on: tables of random bots (a new one every few seconds), and a human's
    moves with a refused one and a retried one (rejections, duplicates)."""
    body = {"seats": 2, "bots": {"1": "random"}, "deadline_s": 3600}
    table = (await client.post("/tables", json=body)).json()
    token = (await client.post(f"/tables/{table['id']}/join", json={"name": "h"})).json()
    await client.post(f"/tables/{table['id']}/start", headers=bearer(token["token"]))
    moves = f"/games/{table['id']}/commands"
    version = 1
    while True:
        bots = {"seats": 3, "bots": {"0": "random", "1": "random", "2": "greedy"}}
        await client.post("/tables", json=bots)
        for _ in range(10):
            legal = await client.get(
                f"/games/{table['id']}/legal",
                params={"after_version": version},
                headers=bearer(token["token"]),
            )
            if legal.status_code != 200 or legal.json()["finished"]:
                break
            version = legal.json()["version"]
            await client.post(moves, json={"type": "fly"}, headers=bearer(token["token"]))
            if legal.json()["legal_commands"]:
                move = {**legal.json()["legal_commands"][0], "command_id": f"m{version}"}
                for _ in range(2):  # the second time: a duplicate
                    await client.post(moves, json=move, headers=bearer(token["token"]))
            await asyncio.sleep(0.2)


def test_the_dashboard_names_only_series_the_services_export() -> None:
    """Every metric name in the dashboard is one ``shared.observability.metrics`` defines
    (the live test above would only say 'empty')."""
    from prometheus_client import REGISTRY

    import shared.observability.metrics  # noqa: F401  # registers them

    exported = {m.name for m in REGISTRY.collect()}
    named = set(re.findall(r"caravel_[a-z_]+", DASHBOARD.read_text()))
    suffix = re.compile(r"_(bucket|count|sum|total)$")
    assert {suffix.sub("", name) for name in named} <= exported
