"""The AsyncAPI Initiative's own parser (``@asyncapi/parser``, pinned in
``tools/asyncapi/package-lock.json``), installed once per lock file into a cache folder
(``CARAVEL_TOOLS_CACHE``, else ``~/.cache/caravel``) with ``npm ci`` and run through
``tools/asyncapi/validate.mjs``. Without ``node`` and ``npm`` the calling test skips, naming
them (or fails under ``CARAVEL_REQUIRE_SYSTEM_TOOLS=1``, as CI runs)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from .conftest import missing_program

TOOL = Path(__file__).parent.parent / "tools" / "asyncapi"
FILES = ("package.json", "package-lock.json", "validate.mjs")


def _cache_root() -> Path:
    configured = os.environ.get("CARAVEL_TOOLS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "caravel"


def installed() -> tuple[str, Path]:
    """``node``'s path and the folder holding the parser and the script, installing them the
    first time this lock file is seen (into a fresh folder, moved into place once complete,
    so an interrupted install is never taken for a finished one)."""
    node = shutil.which("node") or missing_program("nodejs", "node")
    npm = shutil.which("npm") or missing_program("npm", "npm")
    digest = hashlib.sha256(b"".join((TOOL / name).read_bytes() for name in FILES))
    folder = _cache_root() / f"asyncapi-parser-{digest.hexdigest()[:16]}"
    if not (folder / "node_modules" / "@asyncapi" / "parser").is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".asyncapi-", dir=folder.parent))
        for name in FILES:
            shutil.copy(TOOL / name, staging / name)
        subprocess.run(
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=staging,
            check=True,
            capture_output=True,
            timeout=600,
        )
        try:
            staging.rename(folder)
        except OSError:  # another run finished first: use its copy
            shutil.rmtree(staging, ignore_errors=True)
    return node, folder


def parse(document: Path) -> dict[str, Any]:
    """The parser's report on ``document``: ``valid``, its ``diagnostics`` and, when it
    parsed, the ``document``'s channels, operations and component schema names."""
    node, folder = installed()
    done = subprocess.run(
        [node, str(folder / "validate.mjs"), str(document)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if not done.stdout:
        raise RuntimeError(f"the AsyncAPI parser did not answer: {done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report
