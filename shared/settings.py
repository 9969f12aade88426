"""Settings for every service, from ``CARAVEL_*`` environment variables.

With nothing set, ``caravel up`` starts an embedded Redis and keeps its data under
``CARAVEL_DATA_DIR``; every default is chosen to just work on one machine.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

AUTO_PROCESSES_MAX = 8  # `caravel up`'s processes when unset: one per core, up to this


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CARAVEL_", extra="ignore")

    redis_url: str | None = Field(
        default=None, description="Redis for the log and the bus; unset: an embedded Redis."
    )
    database_url: str | None = Field(
        default=None, description="SQL database; unset: a SQLite file in the data folder."
    )
    data_dir: Path = Field(default=Path(".caravel"), description="Where local data lives.")
    embedded_fsync: Literal["always", "everysec"] = Field(
        default="always",
        description="The embedded Redis's `appendfsync` (its AOF is always on): `always` syncs "
        "every write before its reply, so a crash loses no acknowledged move; `everysec` "
        "syncs once a second, for less CPU a move, and a crash of its redis-server or of the "
        "machine may lose the last second or two of acknowledged moves.",
    )
    key_prefix: str = Field(default="cv", description="Prefix of every Redis key.")
    partitions: int = Field(default=64, ge=1, le=16384, description="Game partitions.")
    http_host: str = Field(
        default="127.0.0.1", description="Address the HTTP API listens on (0.0.0.0 in containers)."
    )
    http_port: int = Field(default=8000, ge=1, le=65535)
    http_share_port: bool = Field(
        default=False,
        description="Bind the HTTP port with SO_REUSEPORT, so several lobby processes on one "
        "host serve it together (the kernel spreads the connections); off, a second process "
        "finds the port taken.",
    )
    processes: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="`caravel up` only: the processes it spreads its services over, on one "
        "Redis (the embedded one too), data folder and HTTP port. 1: every service in one "
        "process; from 2: the engine, bot player, scoring and views projection in a child "
        "process of their own and the HTTP API in the others (the first in `caravel up` "
        "itself, the rest `caravel lobby` children sharing its port with SO_REUSEPORT); "
        "children that die are started again. Unset: one per core, at most "
        f"{AUTO_PROCESSES_MAX}.",
    )
    child_ready_fd: int | None = Field(
        default=None,
        description="Set by `caravel up` for its children, not by hand: the pipe a child "
        "writes to once it serves (and that closes when it dies).",
    )
    process_name: str | None = Field(
        default=None,
        description="Set by `caravel up` for its children: their name on each log line.",
    )

    metrics_port: int = Field(
        default=9464,
        ge=0,
        le=65535,
        description="Metrics and health of a process without the HTTP API (0: none); with it, "
        "they are on the HTTP port.",
    )
    snapshot_every: int = Field(default=100, ge=1, description="Snapshot every N events.")
    lease_ttl_ms: int = Field(default=5000, ge=100, description="Partition lease lifetime.")
    claim_idle_ms: int = Field(
        default=10000, ge=10, description="Pending entries idle this long are reclaimed."
    )
    max_deliveries: int = Field(
        default=5, ge=1, description="Deliveries before an entry goes to the dead letters."
    )
    dead_letter_after_ms: int = Field(
        default=300_000,
        ge=0,
        description="An entry delivered max_deliveries times goes to the dead letters only "
        "once this old: Redis or consumer restarts count deliveries too, and a few in a row "
        "must not drop a command that never failed.",
    )
    batch_size: int = Field(default=200, ge=1, description="Stream entries read per batch.")
    engine_linger_ms: int = Field(
        default=2,
        ge=0,
        description="The engine waits this long before reading its commands again after a "
        "read of 4 or more (not a full batch): larger batches under load, less CPU a command; "
        "a read of one to three is followed at once (and sets the wait back).",
    )
    engine_linger_max_ms: int = Field(
        default=16,
        ge=0,
        description="A busy read that brought 4 or more a 2 ms of the engine's wait "
        "before it (2,000 commands/s) waits twice that wait, up to this. A batch costs the "
        "engine about 0.57 ms of CPU whatever its size (the read, the dispatch, the append's "
        "round trip; quiet) and a command about 69 µs, so 75 µs a command takes about 95 "
        "commands a read: at 4,000 commands/s a read every 20-25 ms, which 2 ms (13-30 a "
        "read, 87-99 µs) never gives and 16 ms does, at about 12 ms more p50 latency at that "
        "rate. A burst (a bot player's few moves) or a slower bus waits the 2 ms; a quiet "
        "one (reads of 1-3) never waits. 0: a constant wait.",
    )

    fanout_linger_ms: int = Field(
        default=5,
        ge=0,
        description="A lobby's reader of the event and decision streams waits this long "
        "after a read that brought entries before reading again: a read (naming every "
        "followed partition's streams) per few entries rather than per entry; an entry "
        "written meanwhile reaches its sockets that much later at most.",
    )
    bot_linger_ms: int = Field(
        default=10,
        ge=0,
        description="The bot player waits this long after a read of bot seats' decision "
        "requests that brought any before reading again: the requests of a few moves are "
        "read, decided, sent and acknowledged in one round trip each, not one per move; a "
        "bot's move comes that much later at most.",
    )
    scoring_commit_ms: int = Field(
        default=250,
        ge=0,
        description="Scoring commits at most once per this interval while its reads bring "
        "less than a full batch: the events of many games in one transaction.",
    )
    stream_retention_s: float = Field(
        default=600.0,
        ge=0,
        description="Stream entries younger than this are kept even once every consumer "
        "group has handled them (streams without a group: trimmed by this alone).",
    )
    archive_after_s: float = Field(
        default=3600.0,
        ge=0,
        description="A finished game's log moves to the SQL archive this long after its end "
        "(once every consumer group has passed its last event).",
    )
    decision_timeout_s: float = Field(default=60.0, gt=0, description="Default move deadline.")
    bot_think_ms: int = Field(default=1000, ge=0, description="Default bot time budget.")
    log_level: str = Field(default="INFO")
    secret: str | None = Field(
        default=None, description="Key that signs seat tokens; unset: one kept in the data folder."
    )
    seat_token_ttl_s: int = Field(default=7 * 24 * 3600, ge=60, description="Seat token life.")
    match_wait_s: float = Field(
        default=10.0, ge=0, description="Matchmaking: wait this long, then fill with bots."
    )
    durability_replicas: int = Field(
        default=0,
        ge=0,
        description="Replicas that must hold an append before the engine answers its sender.",
    )
    durability_timeout_ms: int = Field(
        default=1000, ge=1, description="How long the engine waits for those replicas."
    )
    command_timeout_s: float = Field(
        default=10.0, gt=0, description="How long the lobby waits for the engine's answer."
    )
    start_retry_s: float = Field(
        default=15.0,
        gt=0,
        description="A table started this long ago whose game does not exist yet gets its "
        "start sent again (or is reopened with the reason, if the engine refused it).",
    )
    lost_game_check_s: float = Field(
        default=30.0,
        gt=0,
        description="How often a lobby (one among them all) looks, at most, through the "
        "running tables for those whose game is gone from Redis (writes it lost: a crash, a "
        "failover) and starts their game again.",
    )
    redis_max_connections: int = Field(
        default=100, ge=1, description="Connections of each service's own Redis pool."
    )
    max_body_bytes: int = Field(
        default=64 * 1024, ge=1024, description="Largest request body and WebSocket frame."
    )
    ws_max_per_client: int = Field(
        default=32, ge=1, description="Open WebSockets one client (IP) may hold per lobby."
    )
    ws_max_total: int = Field(default=2000, ge=1, description="Open WebSockets per lobby.")
    join_rate: float = Field(
        default=5.0, gt=0, description="Joins (tables, seats, queue) per second per client."
    )
    join_burst: int = Field(default=50, ge=1, description="Joins a client may make at once.")
    command_rate: float = Field(default=20.0, gt=0, description="Commands per second per client.")
    command_burst: int = Field(default=100, ge=1, description="Commands a client may send at once.")
    socket_rate: float = Field(
        default=5.0, gt=0, description="WebSocket connections per second per client."
    )
    socket_burst: int = Field(default=50, ge=1, description="WebSockets a client may open at once.")

    def process_count(self) -> int:
        """How many processes `caravel up` runs: as set, else one per core this process may
        use, at most ``AUTO_PROCESSES_MAX``."""
        if self.processes is not None:
            return self.processes
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        return max(1, min(cores or 1, AUTO_PROCESSES_MAX))

    def signing_key(self) -> bytes:
        """The configured secret, or one made once and kept in the data folder."""
        if self.secret:
            return self.secret.encode()
        return kept_secret(self.data_dir / "secret")

    def sql_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'caravel.db'}"


def kept_secret(path: Path) -> bytes:
    """The key in ``path``, made first if there is none.

    The key is written to a file of its own created with mode 0600 (never readable by
    others, not even for a moment), then linked into place, which fails if ``path`` exists:
    of processes starting together on a fresh data folder, one wins and the others read its
    key, whole, so seat tokens signed by one lobby verify in the others."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
            with contextlib.suppress(FileExistsError):  # another process won the race
                os.link(draft, path)
        finally:
            draft.unlink()
    return path.read_text().strip().encode()
