"""A game's ruleset files: TOML validated by the game's pydantic model, shipped in the
game's package (``<package>/rulesets/<name>.toml``) or given by path. One loader for every
game, so a wrong file is refused the same way everywhere: ``RulesetError`` naming the
field."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from .api import RulesetError

M = TypeVar("M", bound=BaseModel)


def format_errors(error: ValidationError) -> str:
    """pydantic's errors as ``field.path: message``, joined."""
    parts = []
    for e in error.errors():
        loc = ".".join(str(p) for p in e["loc"])
        parts.append(f"{loc}: {e['msg']}" if loc else e["msg"])
    return "; ".join(parts)


class RulesetFiles(Generic[M]):
    """The rulesets of the game package ``package``, validated by ``model``."""

    def __init__(self, package: str, model: type[M]) -> None:
        self.package = package
        self.model = model

    def parse(self, data: dict[str, Any]) -> M:
        """Validate a ruleset given as plain data; raise :class:`RulesetError` naming the
        field."""
        try:
            return self.model.model_validate(data)
        except ValidationError as e:
            raise RulesetError(f"invalid ruleset: {format_errors(e)}") from None

    def available(self) -> list[str]:
        """Names of the rulesets shipped with the package."""
        folder = resources.files(self.package).joinpath("rulesets")
        return sorted(
            p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")
        )

    def load(self, name_or_path: str | Path = "standard") -> M:
        """Load a shipped ruleset by name, or a ruleset file by path."""
        path = Path(name_or_path)
        if path.suffix == ".toml":
            text = path.read_text(encoding="utf-8")
        else:
            resource = resources.files(self.package).joinpath("rulesets", f"{name_or_path}.toml")
            if not resource.is_file():
                shipped = ", ".join(self.available())
                raise RulesetError(f"unknown ruleset {str(name_or_path)!r}; shipped: {shipped}")
            text = resource.read_text(encoding="utf-8")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise RulesetError(f"invalid ruleset: {e}") from None
        return self.parse(data)
