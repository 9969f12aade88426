"""``python -m tests.games.playthroughs --regenerate``: rewrite the golden playthroughs after
a rules change that is meant (see the package's docstring)."""

from __future__ import annotations

import argparse

from . import regenerate


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.games.playthroughs")
    parser.add_argument(
        "--regenerate", action="store_true", help="play every playthrough again and write it"
    )
    if not parser.parse_args().regenerate:
        parser.error("nothing to do without --regenerate (the test compares; this rewrites)")
    for p in regenerate():
        print(f"{p.path.name}: {p.events} events, {p.decisions} decisions, {p.final_hash[:12]}")


if __name__ == "__main__":
    main()
