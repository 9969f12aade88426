// The Age of Discovery drawn from a view (shared/games/age_of_discovery/view_model.py): the
// map of the New World, the boxes with their spaces and units, the market (goods and
// buildings on offer) and every player's panel. Board parts carry data-target keys; the
// shell highlights those the seat's legal commands name, and a click on one plays it.

import { h, s, clear, title, words } from "../dom.js";
import * as generic from "./generic.js";

const COLORS = { red: "#c0392b", blue: "#2e6fd1", yellow: "#e2b400", green: "#2d8a4e",
  orange: "#e67e22", purple: "#7d3c98", black: "#333", white: "#eee" };
const UNIT = { colonist: "C", captain: "Ca", merchant: "M", missionary: "Mi", soldier: "S" };
const AGES = ["", "I", "II", "III"];

// Where each region of the standard map lies (x, y, width, height); others go on a grid.
const MAP = {
  canada: [30, 68, 220, 62], new_england: [260, 90, 160, 70], florida: [230, 170, 140, 60],
  new_spain: [20, 150, 190, 90], caribbean: [250, 245, 170, 60], new_granada: [150, 320, 190, 70],
  peru: [40, 410, 170, 90], brazil: [230, 405, 190, 100], rio_de_la_plata: [110, 520, 200, 80],
};
const BOXES = ["initiative", "dock", "goods", "shipping", "buildings", "discovery", "specialists", "warfare"];

const color = (view, seat) => COLORS[view.players?.[seat]?.color] ?? "#888";
const nation = (view, seat) => view.players?.[seat]?.nation ?? `Seat ${seat + 1}`;

export function draw(board, view, { seat, yours } = {}) {
  // Two drawings, side by side on a wide screen and one above the other on a phone: each
  // stays large enough to read at 390 px.
  const map = s("svg", { viewBox: "0 0 440 620", role: "img", "aria-label": "The map of the New World" });
  const boxes = s("svg", { viewBox: "440 40 550 630", role: "img", "aria-label": "The boxes and the market" });
  drawMap(map, view);
  drawBoxes(boxes, view);
  drawMarket(boxes, view);
  clear(board,
    h("h2", { class: "board-title" }, `Turn ${view.turn} of age ${AGES[view.age] ?? view.age} · ${title(view.phase)}`),
    h("div", { class: "board-parts" }, map, boxes),
    h("p", { class: "waiting" }, waiting(view, seat, yours)));
}

// Who the game waits for; the person's own decision is "your turn" (as the sidebar says).
function waiting(view, seat, yours) {
  if (view.phase === "over") return "The game is over.";
  const mine = view.pending.filter((p) => p.seat === seat);
  const others = view.pending.filter((p) => p.seat !== seat).map((p) => `${nation(view, p.seat)} (${words(p.kind)})`);
  const parts = [];
  if (mine.length && yours) parts.push(`Your turn (${mine.map((p) => words(p.kind)).join(", ")})`);
  if (others.length) parts.push(`${parts.length ? "also waiting" : "Waiting"} for ${others.join(", ")}`);
  return parts.join("; ");
}

function drawMap(svg, view) {
  svg.append(s("text", { x: 20, y: 40, "font-size": 14, fill: "#555" }, "The New World"));
  view.regions.forEach((region, index) => {
    const [x, y, w, hgt] = MAP[region.id] ?? [20 + (index % 2) * 210, 60 + Math.floor(index / 2) * 95, 200, 85];
    const g = s("g", { "data-target": `region:${region.id}`, "aria-label": title(region.id) });
    g.append(s("rect", { x, y, width: w, height: hgt, rx: 10,
      fill: region.discovered ? "#d7e8c2" : "#cdc6b2", stroke: "#6b705c", "stroke-width": 1.5 }));
    g.append(s("text", { x: x + 8, y: y + 18, "font-size": 14, "font-weight": 600 }, title(region.id)));
    const good = region.good_present ? title(region.good) : `${title(region.good)} (taken)`;
    g.append(s("text", { x: x + 8, y: y + 34, "font-size": 12, fill: "#444" }, good));
    if (region.token === "face_down") {
      g.append(s("circle", { cx: x + w - 20, cy: y + 20, r: 12, fill: "#8d6e63" }));
      g.append(s("text", { x: x + w - 20, y: y + 25, "font-size": 14, fill: "#fff", "text-anchor": "middle" }, "?"));
    }
    if (region.known_token) {
      const t = region.known_token;
      g.append(fitted(s("text", { x: x + 8, y: y + hgt - 8, "font-size": 11, fill: "#5d4037" },
        `$${t.money} · plunder ${t.plunder} · natives ${t.natives} · ${t.vp} VP`), w - 14));
    }
    let dx = x + 8;
    region.units.forEach((count, seat) => {
      if (!count) return;
      const soldiers = region.soldiers[seat];
      g.append(s("circle", { cx: dx + 10, cy: y + 52, r: 10, fill: color(view, seat), stroke: "#222" }));
      g.append(s("text", { x: dx + 10, y: y + 56, "font-size": 11, "text-anchor": "middle",
        fill: "#fff", "font-weight": 700 }, count));
      if (soldiers) g.append(s("text", { x: dx + 22, y: y + 48, "font-size": 11 }, `⚔${soldiers}`));
      dx += 36;
    });
    svg.append(g);
  });
}

// A text no wider than ``width`` (its box's): squeezed a little when it would run out of it
// (6.2 px a character at 11 px is a generous estimate of the system font's widths).
function fitted(text, width) {
  const size = Number(text.getAttribute("font-size"));
  if (text.textContent.length * size * 0.56 > width) {
    text.setAttribute("textLength", width);
    text.setAttribute("lengthAdjust", "spacingAndGlyphs");
  }
  return text;
}

function disc(g, x, y, view, seat, text) {
  g.append(s("circle", { cx: x, cy: y, r: 11, fill: color(view, seat), stroke: "#222" }));
  if (text) g.append(s("text", { x, y: y + 4, "font-size": 11, "text-anchor": "middle", fill: "#fff",
    "font-weight": 700 }, text));
}

function drawBoxes(svg, view) {
  const x = 450, width = 530, rowH = 48;
  svg.append(s("text", { x, y: 60, "font-size": 13, fill: "#555" }, "The boxes (resolved top to bottom)"));
  BOXES.forEach((box, index) => {
    const y = 68 + index * rowH;
    const g = s("g", { "data-target": `box:${box}`, "aria-label": `${title(box)} box` });
    g.append(s("rect", { x, y, width, height: rowH - 6, rx: 6, fill: "#fffdf7", stroke: "#a89f91" }));
    g.append(s("text", { x: x + 8, y: y + 26, "font-size": 13, "font-weight": 600 }, title(box)));
    const b = view.boxes;
    let cx = x + 130;
    const put = (seat, text) => { disc(g, cx, y + 21, view, seat, text); cx += 27; };
    if (box === "dock" || box === "shipping") b[box].forEach((u) => put(u.seat, UNIT[u.unit]));
    else if (box === "specialists") {
      for (const [space, seat] of Object.entries(b.specialists)) {
        g.append(fitted(s("text", { x: cx - 12, y: y + 39, "font-size": 11, fill: "#555" }, words(space)), 66));
        if (seat === null) g.append(s("circle", { cx, cy: y + 18, r: 10, fill: "none", stroke: "#999", "stroke-dasharray": "3 2" }));
        else disc(g, cx, y + 18, view, seat, "");
        cx += 70;
      }
    } else if (box === "discovery") {
      view.players.forEach((p, seat) => {
        const n = p.discovery_box.colonists + p.discovery_box.captains + p.discovery_box.soldiers;
        if (n) put(seat, n);
      });
    } else b[box].forEach((seat) => put(seat, ""));
    if (box === "dock" && b.dock_x !== null) {
      const spaces = [b.dock_x, b.dock_y].filter((n) => n !== null).join(" and ");
      g.append(s("text", { x: x + width - 110, y: y + 26, "font-size": 11 }, `spaces ${spaces}`));
    }
    if (box === "shipping") {
      g.append(s("text", { x: x + width - 150, y: y + 26, "font-size": 11 },
        `ship ${view.ship_in_box ? "in box" : "taken"} · ${view.ships_in_supply} left`));
    }
    svg.append(g);
  });
  if (view.resolving) {
    svg.append(s("text", { x, y: 68 + BOXES.length * rowH + 8, "font-size": 12, fill: "#444" },
      `Resolving: step ${view.resolving.cursor + 1} of ${view.resolving.queue.length}` +
      (view.resolving.battle ? ` · battle in ${title(view.resolving.battle.region)}` : "")));
  }
}

function drawMarket(svg, view) {
  const x = 450, y = 480;
  svg.append(s("text", { x, y, "font-size": 13, fill: "#555" },
    `Goods on offer (pile ${view.goods_pile_size})`));
  view.goods_revealed.forEach((good, i) => {
    const g = s("g", { "data-target": `good:${good}`, "aria-label": title(good) });
    g.append(s("rect", { x: x + i * 110, y: y + 8, width: 100, height: 34, rx: 6, fill: "#fff3d6", stroke: "#b08d57" }));
    g.append(s("text", { x: x + i * 110 + 50, y: y + 30, "font-size": 13, "text-anchor": "middle" }, title(good)));
    svg.append(g);
  });
  const by = y + 70;
  svg.append(s("text", { x, y: by, "font-size": 13, fill: "#555" },
    `Buildings on offer (piles ${view.building_piles.join(" / ")}; discovery deck ${view.discovery_deck})`));
  view.buildings_revealed.forEach((building, i) => {
    const bx = x + (i % 3) * 178, row = Math.floor(i / 3);
    const g = s("g", { "data-target": `building:${building}`, "aria-label": title(building) });
    g.append(s("rect", { x: bx, y: by + 8 + row * 46, width: 170, height: 40, rx: 6, fill: "#eef3fb", stroke: "#6c7a89" }));
    const name = title(building);
    g.append(s("text", { x: bx + 6, y: by + 32 + row * 46, "font-size": name.length > 22 ? 10 : 12 }, name));
    svg.append(g);
  });
}

export function players(container, view, { seat } = {}) {
  clear(container, view.players.map((p) => {
    const score = view.scores.find((sc) => sc.seat === p.seat);
    const units = (counts) => Object.entries(counts).map(([u, n]) => `${n} ${words(u)}`).join(", ") || "none";
    const goods = Object.entries(p.goods).map(([g, n]) => `${n} ${title(g)}`).join(", ") || "none";
    const tokenVp = p.tokens.reduce((sum, t) => sum + t.vp, 0);
    const box = p.discovery_box;
    const rows = [
      ["Money", `$${p.money}`],
      ["Score", score ? `${score.total} (place ${score.place})` : "—"],
      ["Units", units(p.available)],
      ["Next turn", units(p.next_turn)],
      ["Goods", goods],
      ["Ships", p.ships],
      ["Buildings", p.buildings.map(title).join(", ") || "none"],
      ["Discoveries", `${p.tokens.length} (${tokenVp} VP)`],
      ["Cards", p.cards.map(title).join(", ") || "none"],
      ["Colony VP", p.colony_vp.join(" / ")],
      ["Discovery box", `${box.colonists} col., ${box.captains} capt., ${box.soldiers} sold.`],
    ];
    return h("article", { class: `card player${p.seat === seat ? " me" : ""}`, "data-seat": p.seat },
      h("h3", {}, h("span", { class: "swatch", style: `background:${COLORS[p.color] ?? "#888"}` }),
        `${p.nation} — ${p.name}`, p.seat === seat ? " (you)" : ""),
      h("dl", {}, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])));
  }));
}

export function label(c, view) {
  switch (c.type) {
    case "place": return `Place a ${c.unit} in ${title(c.box)}${c.space ? ` (${c.space})` : ""}`;
    case "university": return `University: ${words(c.box)}${c.space !== null ? ` space ${c.space}` : ""}`;
    case "pass": return "Pass";
    case "land": return `Land in ${title(c.region)}`;
    case "take_good": return `Take ${title(c.good)}`;
    case "buy": return `Buy ${title(c.building)}${c.regions.length ? ` (${c.regions.map(title).join(", ")})` : ""}`;
    case "expedition": {
      const force = [[c.colonists, "colonist"], [c.captains, "captain"], [c.soldiers, "soldier"]]
        .filter(([n]) => n).map(([n, u]) => `${n} ${u}${n > 1 ? "s" : ""}`).join(", ");
      return `Expedition of ${force || "nobody"} to ${c.region ? title(c.region) : "the discovery deck"}`;
    }
    case "specialist": return `Take a ${c.unit}`;
    case "battle": return `Battle ${nation(view, c.opponent)} in ${title(c.region)}`;
    case "war": return `War on ${nation(view, c.opponent)}`;
    case "casualties": return `Take ${c.soldiers} soldier${c.soldiers === 1 ? "" : "s"} as casualties`;
    case "move_soldier": return `Move a soldier ${title(c.origin)} → ${title(c.destination)}`;
    case "migrate": return `Migrate ${c.count} from ${title(c.origin)} → ${title(c.destination)}`;
    case "bid": return `Bid $${c.amount}`;
    default: return generic.label(c);
  }
}

export function targets(c) {
  switch (c.type) {
    case "place": case "university": return c.box === "turn_order" ? [] : [`box:${c.box}`];
    case "land": case "battle": return [`region:${c.region}`];
    case "take_good": return [`good:${c.good}`];
    case "buy": return [`building:${c.building}`];
    case "expedition": return c.region ? [`region:${c.region}`] : [];
    case "move_soldier": case "migrate": return [`region:${c.destination}`];
    default: return [];
  }
}

export function describe(event, view) {
  const d = event.data ?? {};
  const who = typeof d.seat === "number" ? nation(view, d.seat) : "";
  switch (event.type) {
    case "game_created": return `A game of ${d.players.length} begins: ${d.players.join(", ")}`;
    case "setup": return "The board is set up";
    case "money": return `${who} ${d.amount >= 0 ? "gets" : "pays"} $${Math.abs(d.amount)} (${words(d.reason)})`;
    case "turn_order": return `Turn order: ${d.order.map((s2) => nation(view, s2)).join(", ")}`;
    case "units_granted": return `${who} receives ${Object.entries(d.units).map(([u, n]) => `${n} ${u}${n > 1 ? "s" : ""}`).join(", ")}`;
    case "turn_started": return `Turn ${d.turn} begins (age ${AGES[d.age] ?? d.age})`;
    case "unit_placed": return `${who} places a ${d.unit} in ${title(d.box)}${d.space ? ` (${d.space})` : ""}`;
    case "phase": return `${title(d.phase)} phase`;
    case "landed": return `${who} lands a ${d.unit} in ${title(d.region)}`;
    case "good_taken": return `${who} takes ${title(d.good)}`;
    case "ship_taken": return `${who} takes a ship`;
    case "building_bought": return `${who} buys ${title(d.building)} for $${d.price}`;
    case "passed": return `${who} passes (${words(d.decision)})`;
    case "specialist_gained": return `${who} gains a ${d.unit}`;
    case "buildings_revealed": return `New buildings: ${d.revealed.map(title).join(", ")}`;
    case "goods_revealed": return `New goods: ${d.goods.map(title).join(", ")}`;
    case "ship_added": return "A ship is added to the Shipping box";
    case "free_discovery": return `${who} discovers ${title(d.region)} (${d.token.vp} VP)`;
    case "units_added": return `${who} adds ${d.colonists} colonists${d.soldiers ? ` and ${d.soldiers} soldiers` : ""} to ${title(d.region)}`;
    case "conflict": return `${who} declares ${d.kind} on ${nation(view, d.opponent)}`;
    case "battle_resolved": return `Battle in ${title(d.region)}: ${nation(view, d.attacker)} against ${nation(view, d.defender)}`;
    case "expedition": return `${who}'s expedition to ${d.region ? title(d.region) : "the deck"} ${d.success ? "succeeds" : "fails"}`;
    case "colonies_scored": return `Colonies scored for age ${AGES[d.age] ?? d.age}`;
    case "game_ended": {
      const best = [...d.scores].sort((a, b) => a.place - b.place)[0];
      return `The game ends: ${nation(view, best.seat)} wins with ${best.total} VP`;
    }
    default: return generic.describe(event, view);
  }
}

export function summary(view) {
  return `Turn ${view.turn} · age ${AGES[view.age] ?? view.age} · ${words(view.phase)}`;
}
