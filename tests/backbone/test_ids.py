"""Event ids: the engine names every event with ``new_event_id`` (a per-process random part
and a counter), and consumers tell a rolled-back log by its events' ids, so no two events
may ever share one: not in a process, not across processes, not in a forked child."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from shared.contracts import Made, new_event_id
from shared.contracts.envelopes import HEX_DIGITS
from shared.games.api import Event


def test_ids_in_one_process_are_distinct_and_shaped_like_uuids() -> None:
    ids = [new_event_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_a_forked_child_and_another_process_draw_ids_of_their_own() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: writes its next id and leaves at once
        os.write(write, new_event_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    other = subprocess.run(
        [sys.executable, "-c", "from shared.contracts import new_event_id; print(new_event_id())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    mine = new_event_id()
    assert len({child[:16], other[:16], mine[:16]}) == 3  # three processes, three random parts


def test_a_commands_events_take_a_block_of_ids_no_other_id_shares() -> None:
    """The events of a command are named from one block of 16 ids (31 digits formatted
    once, the last one each event's own; more than 16 events take more blocks), a lone id
    takes a block of its own: every id drawn either way stays distinct and UUID-shaped."""
    made = Made("g-1", "c-1", "c-1", "bot", "2026-11-29T12:00:00+00:00")
    lone = [new_event_id() for _ in range(3)]
    assert [i[-1] for i in lone] == ["0", "0", "0"]  # each a block of its own
    ids = list(lone)
    for n in (1, 3, 16, 17, 40, 0, 2):
        events = made.encode([Event("moved", {"n": k}) for k in range(n)], 5)
        named = [json.loads(e.public)["event_id"] for e in events]
        if 0 < n <= 16:  # one block: the same 31 digits, then 0, 1, 2, ...
            assert {i[:31] for i in named} == {named[0][:31]}
            assert [i[31] for i in named] == list(HEX_DIGITS[:n])
        ids += named
        ids.append(new_event_id())
    ids += [json.loads(i) for i in new_event_id.quoted(20)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
