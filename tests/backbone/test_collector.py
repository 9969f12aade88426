"""The services child's collector: the survivors of a young collection that freed nothing
frozen, and thawed now and then for one full collection (``services.runtime``)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from services.runtime import freeze_survivors, thaw_now_and_then


class Node:
    """A tracked object that can be in a cycle and be watched by a weak reference."""

    def __init__(self) -> None:
        self.other: object = None


@pytest.fixture
def collector() -> Iterator[None]:
    """This process' collector as it was: its callbacks, nothing frozen, its thresholds."""
    callbacks, threshold = list(gc.callbacks), gc.get_threshold()
    gc.collect()
    try:
        yield
    finally:
        gc.callbacks[:] = callbacks
        gc.unfreeze()
        gc.set_threshold(*threshold)


def in_a_generation(obj: object) -> bool:
    """The object is in one of the collector's generations (not frozen): ``gc.get_objects``
    lists those, never the permanent one."""
    return any(o is obj for o in gc.get_objects())


@pytest.mark.usefixtures("collector")
def test_what_survives_a_young_collection_that_freed_nothing_is_frozen() -> None:
    freeze_survivors()
    kept = [[i] for i in range(100)]
    assert in_a_generation(kept)
    assert gc.collect(0) == 0
    assert gc.is_tracked(kept) and not in_a_generation(kept)
    assert not any(in_a_generation(x) for x in kept[:5])


@pytest.mark.usefixtures("collector")
def test_a_young_collection_that_freed_a_cycle_freezes_nothing() -> None:
    freeze_survivors()
    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    kept = [[i] for i in range(100)]
    assert gc.collect(0) > 0
    assert in_a_generation(kept)  # still walked by the older generations' collections


@pytest.mark.usefixtures("collector")
async def test_a_cycle_that_became_garbage_once_frozen_is_freed_at_the_thaw() -> None:
    a, b = Node(), Node()
    a.other, b.other = b, a
    watched = weakref.ref(a)
    survivor = [[1]]
    gc.freeze()
    del a, b
    gc.collect()
    assert watched() is not None  # frozen: no collection sees it
    stop = asyncio.Event()
    thawing = asyncio.create_task(thaw_now_and_then(stop, 0.01))
    await asyncio.sleep(0.1)
    stop.set()
    await thawing
    assert watched() is None
    assert not in_a_generation(survivor)  # what lives is frozen again
