"""The OpenAPI document, shaped for the clients generated from it: readable operation ids
(the routes' names: ``get_view``), every game's commands and views as typed components
(``catalog.game_components``), an optional body as the model it is (not ``anyOf`` with
``null``, which generators turn into a value they cannot send), and the seat token as a
bearer ``securityScheme`` (``lobby.SEAT_TOKEN``)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from .catalog import game_components

NULL = {"type": "null"}


def operation_id(route: APIRoute) -> str:
    """An operation's id: its route's name, unique in the app (``get_view``)."""
    return route.name


def install(app: FastAPI) -> None:
    """Serve the shaped document as the app's ``/openapi.json`` (built once)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = shaped(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def shaped(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the games' components, and each request body's schema as a client
    sends it: the route's own (``openapi_extra={"x-body": schema}``, for a body the route
    reads as plain JSON), or an optional model as that model."""
    document["components"]["schemas"].update(game_components())
    for operations in document["paths"].values():
        for operation in operations.values():
            given = operation.pop("x-body", None)
            body = operation.get("requestBody")
            if body is None:
                continue
            media = body["content"]["application/json"]
            options = media["schema"].get("anyOf", [])
            if given is not None:
                media["schema"] = given
            elif len(options) == 2 and NULL in options:
                media["schema"] = next(option for option in options if option != NULL)
                body["required"] = False
    return document
