"""evolve: apply one event to a state. Pure bookkeeping: no choices, no chance, no clock.

Every chance outcome arrives inside the event (its ``secret`` part for hidden ones), so a
log replays to the same state without a generator. ``apply`` mutates a private state; the
public :func:`evolve` copies first.
"""

from __future__ import annotations

from typing import Any

from ..base import EventHandlers
from ..protocol import Event
from .commands import SPECIALIST_SPACES
from .ruleset import CAPTAIN, SOLDIER, UNITS
from .state import GameState, income_from_sets

UNIT = {name: i for i, name in enumerate(UNITS)}
SPACE = {name: i for i, name in enumerate(SPECIALIST_SPACES)}


class _Handlers(EventHandlers[GameState]):
    def apply(self, s: GameState, event: Event) -> None:
        """Apply ``event`` to ``s`` in place, counting it in the state's version."""
        self.table[event.type](s, event.data, event.secret)
        s.version += 1


handles = _Handlers()
HANDLERS = handles.table
apply = handles.apply
evolve = handles.evolve


# --- setup -----------------------------------------------------------------------------------


@handles("game_created")
def _game_created(s: GameState, d: dict[str, Any], secret: Any) -> None:
    s.names = tuple(d["players"])


@handles("setup")
def _setup(s: GameState, d: dict[str, Any], secret: Any) -> None:
    goods = s.rules.good_index
    s.goods_revealed = [goods[g] for g in d["goods_revealed"]]
    idx = s.rules.building_index
    s.revealed_buildings = [idx[b] for b in d["buildings_revealed"]]
    s.ship_in_box = 1
    s.ship_supply -= 1
    assert secret is not None
    s.token_on = list(secret["token_on"])
    s.unused_tokens = list(secret["unused_tokens"])
    s.goods_pile = list(secret["goods_pile"])
    s.piles = [list(p) for p in secret["piles"]]
    s.deck = list(secret["deck"])
    s.rng = secret["rng"]


@handles("turn_order")
def _turn_order(s: GameState, d: dict[str, Any], secret: Any) -> None:
    s.order = list(d["order"])
    if not s.start_order:
        s.start_order = list(d["order"])
    for seat in s.initiative:
        s.returned[seat] += 1
    s.initiative = []
    if secret is not None:
        s.rng = secret["rng"]


@handles("money")
def _money(s: GameState, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    s.money[seat] += d["amount"]
    if d["reason"] == "income":  # phase C: what the sets paid is the economy VP of turn 8
        s.income_sets[seat] = income_from_sets(s.rules, s.goods[seat], s.ships[seat])


@handles("units_granted")
def _units_granted(s: GameState, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    avail = s.avail[seat]
    for name, count in d["units"].items():
        avail[UNIT[name]] += count
        s.received[seat] += count
    s.next_units[seat] = [0] * 5


@handles("turn_started")
def _turn_started(s: GameState, d: dict[str, Any], secret: Any) -> None:
    s.turn = d["turn"]
    s.income_sets = [0] * s.n  # a seat whose sets pay nothing this turn gets no income event
    s.phase = "placement"
    s.queue = s.order[:]
    s.to_place = sum(sum(a) for a in s.avail)
    s.cursor = 0
    while s.to_place and not any(s.avail[s.queue[s.cursor]]):
        s.cursor += 1


# --- placement -------------------------------------------------------------------------------


@handles("unit_placed")
def _unit_placed(s: GameState, d: dict[str, Any], secret: Any) -> None:
    seat, unit, box = d["seat"], UNIT[d["unit"]], d["box"]
    s.avail[seat][unit] -= 1
    s.to_place -= 1
    if box == "initiative":
        s.initiative.append(seat)
    elif box == "dock":
        s.dock.append((seat, unit))
    elif box == "goods":
        s.trade.append(seat)
    elif box == "shipping":
        s.shipping.append((seat, unit))
    elif box == "buildings":
        s.bbox.append(seat)
    elif box == "discovery":
        s.disc[seat][_discovery_slot(unit)] += 1
    elif box == "specialists":
        s.specialists[SPACE[d["space"]]] = seat
    else:
        s.warfare.append(seat)
    # Next player in turn order who still has units (round robin).
    if s.to_place:
        order, n, i = s.queue, len(s.queue), s.cursor
        for _ in range(n):
            i = (i + 1) % n
            if any(s.avail[order[i]]):
                break
        s.cursor = i


def _discovery_slot(unit: int) -> int:
    """Discovery keeps only what matters there: captains (2), soldiers (plunder), others (1)."""
    return 1 if unit == CAPTAIN else 2 if unit == SOLDIER else 0


@handles("university_used")
def _university_used(s: GameState, d: dict[str, Any], secret: Any) -> None:
    seat, box, space, to = d["seat"], d["box"], d["space"], d["to"]
    s.university_used[seat] = True
    if box == "turn_order":
        current = s.queue[s.cursor]
        s.order.remove(seat)
        s.order.insert(to, seat)
        s.queue = s.order[:]
        s.cursor = s.queue.index(current)
        return
    rows: dict[str, list[Any]] = {"dock": s.dock, "initiative": s.initiative, "buildings": s.bbox}
    row = rows[box]
    row.insert(to, row.pop(space))


# --- resolution ------------------------------------------------------------------------------

# Boxes whose units return to the supply as their resolution starts.
_SPENT_AT = {"goods": "trade", "shipping": "shipping", "buildings": "bbox", "warfare": "warfare"}


@handles("phase")
def _phase(s: GameState, d: dict[str, Any], secret: Any) -> None:
    phase = d["phase"]
    s.phase = phase
    s.queue = [tuple(q) if isinstance(q, list) else q for q in d["queue"]]
    s.cursor = 0
    if phase == "dock":
        s.dock = []
        s.dock_x = s.dock_y = -1
    elif phase in _SPENT_AT:
        attr = _SPENT_AT[phase]
        for entry in getattr(s, attr):
            s.returned[entry[0] if isinstance(entry, tuple) else entry] += 1
        setattr(s, attr, [])
    elif phase == "specialists":
        for seat in s.specialists:
            if seat >= 0:
                s.returned[seat] += 1
        s.specialists = [-1] * 5


def _add_units(s: GameState, seat: int, region: int, colonists: int, soldiers: int) -> None:
    s.units[region][seat] += colonists + soldiers
    s.soldiers[region][seat] += soldiers


@handles("landed")
def _landed(s: GameState, d: dict[str, Any], secret: Any) -> None:
    region = s.rules.region_index[d["region"]]
    soldier = d["unit"] == "soldier"
    _add_units(s, d["seat"], region, 0 if soldier else 1, 1 if soldier else 0)
    s.cursor += 1


@handles("units_added")
def _units_added(s: GameState, d: dict[str, Any], secret: Any) -> None:
    region = s.rules.region_index[d["region"]]
    colonists, soldiers = d.get("colonists", 0), d.get("soldiers", 0)
    _add_units(s, d["seat"], region, colonists, soldiers)
    s.received[d["seat"]] += colonists + soldiers


@handles("good_taken")
def _good_taken(s: GameState, d: dict[str, Any], secret: Any) -> None:
    good = s.rules.good_index[d["good"]]
    s.goods[d["seat"]][good] += 1
    source = d["source"]
    if source == "market":
        s.goods_revealed.remove(good)
        s.cursor += 1
    elif source == "region":
        s.region_good[s.rules.region_index[d["region"]]] = False
    else:  # a random good from the pile (West Indies Company)
        s.goods_pile.pop()


@handles("ship_taken")
def _ship_taken(s: GameState, d: dict[str, Any], secret: Any) -> None:
    s.ships[d["seat"]] += 1
    s.ship_in_box = 0


@handles("building_bought")
def _building_bought(s: GameState, d: dict[str, Any], secret: Any) -> None:
    b = s.rules.building_index[d["building"]]
    s.owned[d["seat"]].append(b)
    s.revealed_buildings.remove(b)
    s.cursor += 1


@handles("passed")
def _passed(s: GameState, d: dict[str, Any], secret: Any) -> None:
    if s.phase != "auction":
        s.cursor += 1
        return
    seat = d["seat"]
    s.auction_order[len(s.queue) - 1] = seat
    i = s.queue.index(seat)
    s.queue.pop(i)
    if s.cursor >= len(s.queue):
        s.cursor = 0


def _discover(s: GameState, seat: int, region: int) -> None:
    s.discovered[region] = True
    s.tokens_won[seat].append(s.token_on[region])
    s.token_on[region] = -1
    s.token_known[region] = False


@handles("expedition")
def _expedition(s: GameState, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    box = s.disc[seat]
    box[0] -= d["colonists"]
    box[1] -= d["captains"]
    box[2] -= d["soldiers"]
    s.returned[seat] += d["colonists"] + d["captains"] + d["soldiers"]
    s.cursor += 1
    if d["region"] is None:
        card = s.deck.pop()
        if d["success"]:
            s.cards_won[seat].append(card)
        else:
            s.deck.append(card)  # shuffled back by the deck_shuffled event that follows
        return
    region = s.rules.region_index[d["region"]]
    if d["success"]:
        _discover(s, seat, region)
    else:
        s.token_known[region] = True


@handles("free_discovery")
def _free_discovery(s: GameState, d: dict[str, Any], secret: Any) -> None:
    _discover(s, d["seat"], s.rules.region_index[d["region"]])


@handles("caribbean_token")
def _caribbean_token(s: GameState, d: dict[str, Any], secret: Any) -> None:
    s.tokens_won[d["seat"]].append(s.unused_tokens.pop())


@handles("deck_shuffled")
def _deck_shuffled(s: GameState, d: dict[str, Any], secret: Any) -> None:
    assert secret is not None
    s.deck = list(secret["deck"])
    s.rng = secret["rng"]


@handles("specialist_gained")
def _specialist_gained(s: GameState, d: dict[str, Any], secret: Any) -> None:
    seat, unit = d["seat"], UNIT[d["unit"]]
    if d["source"] == "auction":
        s.avail[seat][unit] += 1
        s.received[seat] += 1
    else:
        s.next_units[seat][unit] += 1
    if d["source"] in ("training", "auction"):
        s.cursor += 1


@handles("conflict")
def _conflict(s: GameState, d: dict[str, Any], secret: Any) -> None:
    index = s.rules.region_index
    s.battles = [index[r] for r in d["regions"]]
    s.attacker, s.defender = d["seat"], d["opponent"]
    s.choices = {}
    s.cursor += 1


@handles("casualties_chosen")
def _casualties_chosen(s: GameState, d: dict[str, Any], secret: Any) -> None:
    s.choices[d["seat"]] = d["soldiers"]


@handles("battle_resolved")
def _battle_resolved(s: GameState, d: dict[str, Any], secret: Any) -> None:
    region = s.rules.region_index[d["region"]]
    for seat, colonists, soldiers in d["losses"]:
        s.units[region][seat] -= colonists + soldiers
        s.soldiers[region][seat] -= soldiers
        s.returned[seat] += colonists + soldiers
    s.battles.pop(0)
    s.choices = {}


@handles("soldier_moved")
def _soldier_moved(s: GameState, d: dict[str, Any], secret: Any) -> None:
    index = s.rules.region_index
    seat, a, b = d["seat"], index[d["origin"]], index[d["destination"]]
    _add_units(s, seat, a, 0, -1)
    _add_units(s, seat, b, 0, 1)
    s.cursor += 1


@handles("colonists_moved")
def _colonists_moved(s: GameState, d: dict[str, Any], secret: Any) -> None:
    index = s.rules.region_index
    seat, a, b, count = d["seat"], index[d["origin"]], index[d["destination"]], d["count"]
    _add_units(s, seat, a, -count, 0)
    _add_units(s, seat, b, count, 0)
    s.cursor += 1


@handles("dock_reserved")
def _dock_reserved(s: GameState, d: dict[str, Any], secret: Any) -> None:
    if d["space"] == "X":
        s.dock_x = d["seat"]
    else:
        s.dock_y = d["seat"]
    s.received[d["seat"]] += 1


@handles("discovery_unit_added")
def _discovery_unit_added(s: GameState, d: dict[str, Any], secret: Any) -> None:
    s.disc[d["seat"]][_discovery_slot(UNIT[d["unit"]])] += 1
    s.received[d["seat"]] += 1


@handles("colonies_scored")
def _colonies_scored(s: GameState, d: dict[str, Any], secret: Any) -> None:
    age = d["age"]
    for seat, vp in enumerate(d["vp"]):
        s.colony_vp[seat][age - 1] = vp


@handles("buildings_revealed")
def _buildings_revealed(s: GameState, d: dict[str, Any], secret: Any) -> None:
    if d["removed"]:
        s.revealed_buildings = []
    pile = s.piles[d["age"] - 1]
    for _ in d["revealed"]:
        s.revealed_buildings.append(pile.pop())


@handles("goods_revealed")
def _goods_revealed(s: GameState, d: dict[str, Any], secret: Any) -> None:
    assert secret is not None
    index = s.rules.good_index
    s.goods_pile = list(secret["goods_pile"])
    s.goods_revealed = [index[g] for g in d["goods"]]
    s.rng = secret["rng"]


@handles("ship_added")
def _ship_added(s: GameState, d: dict[str, Any], secret: Any) -> None:
    s.ship_in_box = 1
    s.ship_supply -= 1


@handles("auction_bid")
def _auction_bid(s: GameState, d: dict[str, Any], secret: Any) -> None:
    seat = d["seat"]
    s.bid_high = s.last_bid[seat] = d["amount"]
    s.bid_seat = seat
    s.cursor = (s.cursor + 1) % len(s.queue)


@handles("game_ended")
def _game_ended(s: GameState, d: dict[str, Any], secret: Any) -> None:
    s.phase = "over"
    s.queue = []
