"""What the ``caravel`` command line's command groups share: the consoles, option parsing,
game look-up and the progress bar."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from shared.games import api

console = Console()
err_console = Console(stderr=True)


def parse_options(pairs: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` pairs into a dict; the game's rules check keys and values."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--option")
        options[key.strip()] = value.strip()
    return options


def progress_bar(console_: Console) -> Progress:
    """A transient bar of done out of all, with the time left."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console_,
        transient=True,
    )


def game_named(name: str) -> api.AnyGame:
    """The registered game called ``name``, or a usage error listing the known ones."""
    try:
        return api.get(name)
    except api.UnknownGame as e:
        raise typer.BadParameter(str(e), param_hint="--game") from None


def check_players(game: api.AnyGame, players: int) -> None:
    """A usage error unless ``game`` takes ``players`` seats."""
    if not game.min_players <= players <= game.max_players:
        raise typer.BadParameter(
            f"{game.title} takes {game.min_players} to {game.max_players} players",
            param_hint="--players",
        )


GAME_HELP = "A registered game (see `caravel games`)."
DATE_FORMATS = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"]
