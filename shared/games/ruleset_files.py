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

from .protocol import RulesetError

M = TypeVar("M", bound=BaseModel)

CARRIED = "ruleset_file"
"""The key under which a game's ``game_created`` data, its snapshots and its views carry a
ruleset given as a file: the file's text, since no loader knows that ruleset's name (a
replay, a restore or a bot elsewhere has no file at hand). The text, not parsed data: a
table's order (a dict of goods, say) means something, and text keeps it through any JSON
store. A shipped ruleset is not carried: its name finds it."""


def file_text(name_or_path: str | Path) -> str | None:
    """The text of the ruleset file ``name_or_path`` names; None for a shipped ruleset."""
    path = Path(name_or_path)
    return path.read_text(encoding="utf-8") if path.suffix == ".toml" else None


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
        text = file_text(name_or_path)
        if text is None:
            resource = resources.files(self.package).joinpath("rulesets", f"{name_or_path}.toml")
            if not resource.is_file():
                shipped = ", ".join(self.available())
                raise RulesetError(f"unknown ruleset {str(name_or_path)!r}; shipped: {shipped}")
            text = resource.read_text(encoding="utf-8")
        return self.loads(text)

    def loads(self, text: str) -> M:
        """A ruleset from a file's text."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise RulesetError(f"invalid ruleset: {e}") from None
        return self.parse(data)
