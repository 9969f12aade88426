"""Liveness, readiness and the ``/metrics`` route of every process.

With the HTTP API they are on the HTTP port; a service run alone serves them on
``CARAVEL_METRICS_PORT``. They stay out of the public API's schema.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from redis.asyncio import Redis
from sqlalchemy import Engine, text

from services.children import Children
from shared.httpapi import error_response

CHECK_TIMEOUT_S = 2.0


class Health:
    """Readiness of a process: Redis answers, SQL answers (if the process uses it), every
    service loop it runs is running (a loop that died makes the process unready) and, in a
    `caravel up` of several processes, ``children`` (what keeps them from serving) is
    empty."""

    def __init__(
        self,
        redis: Redis,
        db: Engine | None = None,
        tasks: Sequence[asyncio.Task[Any]] = (),
        children: Children | None = None,
    ) -> None:
        self.redis = redis
        self.db = db
        self.tasks = tasks
        self.children = children

    async def problems(self) -> list[str]:
        """What keeps the process from being ready; empty when it is."""
        problems = []
        try:
            await asyncio.wait_for(self.redis.ping(), CHECK_TIMEOUT_S)
        except Exception as e:
            problems.append(f"redis: {e!r}")
        if self.db is not None:
            try:
                await asyncio.wait_for(run_in_threadpool(_select_one, self.db), CHECK_TIMEOUT_S)
            except Exception as e:
                problems.append(f"sql: {e!r}")
        stopped = sum(task.done() for task in self.tasks)
        if stopped:
            problems.append(f"{stopped} of {len(self.tasks)} service loops stopped")
        if self.children is not None:
            problems += self.children.problems()
        return problems

    def dead(self) -> list[str]:
        """Service loops that ended with an exception (:func:`dead_loops`)."""
        return dead_loops(self.tasks)


def dead_loops(tasks: Sequence[asyncio.Task[Any]]) -> list[str]:
    """The loops among ``tasks`` that ended with an exception, each as its name and error.
    Every loop retries its failed rounds (``shared.loops.keep_running``), so one that ended
    this way will not come back by itself: only a restart of the process helps."""
    ended = [task for task in tasks if task.done() and not task.cancelled()]
    # the error's class and message: redis-py's repr of a script's error drops the latter
    return [
        f"{task.get_name()}: {type(error).__name__}: {error}"
        for task in ended
        if (error := task.exception()) is not None
    ]


def operations_routes(health: Health) -> APIRouter:
    """``/livez``, ``/readyz`` and ``/metrics``: for probes and Prometheus, so they stay out
    of the public API's schema."""
    router = APIRouter(include_in_schema=False)

    @router.get("/livez")
    async def livez() -> JSONResponse:
        """The process answers (its event loop runs) and none of its service loops died: a
        503 asks the orchestrator to restart it."""
        dead = health.dead()
        if dead:
            return error_response(503, "loop_died", "; ".join(dead))
        return JSONResponse({"status": "ok"})

    @router.get("/readyz")
    async def readyz() -> JSONResponse:
        """Ready to serve: 200, or 503 with what is failing, in the API's error shape."""
        problems = await health.problems()
        if problems:
            return error_response(503, "not_ready", "; ".join(problems))
        return JSONResponse({"status": "ok"})

    @router.get("/metrics")
    async def metrics() -> Response:
        """Every metric of this process, in the Prometheus text format; in a `caravel up` of
        several processes, its children's too (each of their series labelled with the
        child's name), so one scrape sees every service."""
        own = generate_latest()
        if health.children is None:
            return Response(own, media_type=CONTENT_TYPE_LATEST)
        theirs = await health.children.metrics()
        return Response(merged(own.decode(), theirs), media_type=CONTENT_TYPE_LATEST)

    return router


def merged(own: str, children: dict[str, str]) -> bytes:
    """One Prometheus text of this process's metrics and its children's (by name), each
    child's series labelled ``process``: one family per name (the text format allows no
    second), no series twice (every process has its own ``process_*`` figures)."""
    by_name: dict[str, Metric] = {}
    for name, exposition in [("", own), *children.items()]:
        for family in text_string_to_metric_families(exposition):
            into = by_name.setdefault(
                family.name, Metric(family.name, family.documentation, family.type, family.unit)
            )
            for sample in family.samples:
                labels = {**sample.labels, "process": name} if name else sample.labels
                into.samples.append(sample._replace(labels=labels))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(list(by_name.values())))
    return generate_latest(registry)


class _Fixed(Collector):
    """Metric families already gathered, for a registry to render."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def _select_one(db: Engine) -> None:
    with db.connect() as connection:
        connection.execute(text("SELECT 1"))
