"""Batches of many per-stream subscribers handled as one round (``shared.bus.Coalesced``):
the engine appends every partition's batch in one round trip, not one per partition."""

from __future__ import annotations

import asyncio

import pytest

from shared.bus import Coalesced, Delivery


def _batch(stream: str, *ids: str) -> list[Delivery]:
    return [Delivery(stream, i, {}) for i in ids]


async def test_batches_that_arrive_together_are_handled_in_one_round_in_order() -> None:
    rounds: list[list[str]] = []
    release = asyncio.Event()

    async def handler(deliveries: list[Delivery]) -> None:
        rounds.append([f"{d.stream}/{d.id}" for d in deliveries])
        if len(rounds) == 1:
            await release.wait()  # the first round is slow: the others queue up meanwhile

    handle = Coalesced(handler)
    first = asyncio.create_task(handle(_batch("a", "1", "2")))
    await asyncio.sleep(0.01)  # the first round is running
    later = [asyncio.create_task(handle(_batch(s, "3"))) for s in ("b", "c", "d")]
    await asyncio.sleep(0.01)
    assert not any(t.done() for t in later)  # nobody returns before its batch is handled
    release.set()
    await asyncio.gather(first, *later)
    assert rounds == [["a/1", "a/2"], ["b/3", "c/3", "d/3"]]


async def test_an_error_reaches_every_batch_of_its_round_and_the_next_round_still_runs() -> None:
    seen: list[int] = []

    async def handler(deliveries: list[Delivery]) -> None:
        seen.append(len(deliveries))
        if any(d.id == "bad" for d in deliveries):
            raise ValueError("cannot handle")

    handle = Coalesced(handler)
    outcomes = await asyncio.gather(
        handle(_batch("a", "bad")), handle(_batch("b", "ok")), return_exceptions=True
    )
    assert [type(o) for o in outcomes] == [ValueError, ValueError]
    await handle(_batch("c", "ok"))  # a later batch is handled as usual
    assert seen == [2, 1]


async def test_a_round_cancelled_leaves_nobody_waiting() -> None:
    started = asyncio.Event()

    async def handler(deliveries: list[Delivery]) -> None:
        started.set()
        await asyncio.sleep(3600)

    handle = Coalesced(handler)
    leader = asyncio.create_task(handle(_batch("a", "1")))
    await started.wait()
    follower = asyncio.create_task(handle(_batch("b", "1")))
    await asyncio.sleep(0.01)
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    with pytest.raises(RuntimeError, match="stopped"):
        await asyncio.wait_for(follower, 1)
