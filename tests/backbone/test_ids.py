"""Event ids: the engine names every event with ``new_event_id`` (a per-process random part
and a counter), and consumers tell a rolled-back log by its events' ids, so no two events
may ever share one: not in a process, not across processes, not in a forked child."""

from __future__ import annotations

import os
import subprocess
import sys

from shared.contracts import new_event_id


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
