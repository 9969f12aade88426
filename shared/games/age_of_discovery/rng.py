"""A tiny seeded generator whose whole state is one integer kept in the game state.

SplitMix64: enough quality for shuffles, and its state serialises as a number, so every
chance outcome can be recorded in an event together with the generator's next state.
"""

from __future__ import annotations

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def next_u64(state: int) -> tuple[int, int]:
    """Return ``(new_state, value)``."""
    state = (state + _GOLDEN) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


def shuffled(state: int, items: list[int]) -> tuple[int, list[int]]:
    """Fisher-Yates: return ``(new_state, shuffled copy of items)``."""
    out = list(items)
    mask, golden = _MASK, _GOLDEN
    for i in range(len(out) - 1, 0, -1):
        # next_u64 inlined: the search shuffles every hidden pile at every iteration.
        state = (state + golden) & mask
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        j = (z ^ (z >> 31)) % (i + 1)
        out[i], out[j] = out[j], out[i]
    return state, out


def seed_state(seed: int) -> int:
    """Spread a small user seed over the 64-bit state space."""
    return next_u64(seed & _MASK)[1]
