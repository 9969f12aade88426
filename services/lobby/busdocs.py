"""The bus's AsyncAPI document, served beside the HTTP API's: ``/asyncapi.json``,
``/asyncapi.yaml`` and a page that shows it (``/asyncapi``). The page is local like
``/docs``: FastStream's own AsyncAPI page loads its renderer from a CDN, this one draws the
channels and messages from the JSON with a small script of ``static/``.

The document is made by the composition root (``services/asyncapi.py`` sees every service;
the lobby sees none) and handed to :func:`install`. None of these routes is in the OpenAPI
document: they describe the bus, not the HTTP API.
"""

from __future__ import annotations

from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs installed
from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, JSONResponse, Response

from .web import STATIC

YAML = "application/yaml"


def install(app: FastAPI, document: dict[str, Any]) -> None:
    """Serve ``document`` (an AsyncAPI document as JSON-able data) and its page on ``app``."""
    as_yaml: str = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    router = APIRouter(include_in_schema=False)

    @router.get("/asyncapi.json")
    def asyncapi_json() -> JSONResponse:
        return JSONResponse(document)

    @router.get("/asyncapi.yaml")
    def asyncapi_yaml() -> Response:
        return Response(as_yaml, media_type=YAML)

    @router.get("/asyncapi")
    def asyncapi_page() -> FileResponse:
        return FileResponse(STATIC / "asyncapi.html", headers={"Cache-Control": "no-cache"})

    app.include_router(router)
